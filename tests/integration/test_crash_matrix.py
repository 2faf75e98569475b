"""The crash matrix's bounded slice (the whole of it: `make crash-matrix`, docs/crash-matrix.md):
for each kind, its job's worker calls recorded once, then a quarter of the crash points (every
fourth, always the first and the last) — the worker killed there,
the system recovering, and every guarantee of tests/support/crash_matrix.py checked."""

from __future__ import annotations

import logging

import pytest

from tests.support.crash_kinds import scenarios
from tests.support.crash_matrix import Point, record, run

SCENARIOS = {scenario.name: scenario for scenario in scenarios()}


def sample(points: list[Point]) -> list[Point]:
    chosen = points[::4]
    for end in (points[0], points[-1]):
        if end not in chosen:
            chosen.append(end)
    return chosen


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_crash_at_any_store_call_is_recovered(name: str) -> None:
    logging.disable(logging.WARNING)
    try:
        scenario = SCENARIOS[name]
        points, clean = record(scenario)
        assert clean.ok and clean.state == "succeeded", clean.problems
        assert points, "the job made no store call"
        failed = [
            f"{outcome.point}: {'; '.join(outcome.problems)}"
            for outcome in (run(scenario, point)[0] for point in sample(points))
            if not outcome.ok
        ]
        assert not failed, "\n".join(failed)
    finally:
        logging.disable(logging.NOTSET)
