"""The demo's concurrency checks (D2, T7) count how many jobs ran at once from the jobs' own
histories — each attempt's `started` and `at` — not from a sampler that a busy machine can
make miss a short overlap."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold_dev.demo.synthetic import most_at_once

pytestmark = pytest.mark.unit


def view(*attempts: tuple[str, str]) -> dict[str, Any]:
    history: list[dict[str, Any]] = [{"event": "created", "at": "2026-12-03T10:00:00.000+00:00"}]
    at = "2026-12-03T10:00:{}+00:00".format
    history += [{"event": "succeeded", "started": at(a), "at": at(b)} for a, b in attempts]
    return {"history": history}


def test_overlapping_attempts_are_counted_at_their_most() -> None:
    views = [
        view(("01.000", "03.500")),
        view(("01.300", "03.800")),
        view(("03.500", "06.000")),  # starts the instant the first ends: never three at once
        view(("03.900", "06.400")),
    ]
    assert most_at_once(views) == 2


def test_attempts_one_after_another_are_one_at_a_time() -> None:
    views = [view(("01.000", "02.000")), view(("02.000", "03.000")), view(("03.500", "04.000"))]
    assert most_at_once(views) == 1


def test_a_retried_job_counts_each_attempt_and_entries_without_a_start_not_at_all() -> None:
    views = [view(("01.000", "02.000"), ("05.000", "06.000")), view(("05.500", "05.900"))]
    assert most_at_once(views) == 2
    assert (
        most_at_once([{"history": [{"event": "created", "at": "2026-12-03T10:00:00+00:00"}]}]) == 0
    )
