"""The demo's delay and schedule checks (D1, D4) read what the jobs and the schedule recorded —
each attempt's claim time, the due time set at acceptance, the schedule's count of ticks fired —
not what a poll happened to see: on a busy machine a read can come late (a delayed job already
due, a second minute's tick already fired) and the rule still holds."""

from __future__ import annotations

import pytest

from leasehold_dev.demo.delivery import attempt_starts, delay_ms, ticks_from

pytestmark = pytest.mark.unit

MINUTE = 60_000


def test_a_schedule_checked_late_counts_every_tick_from_its_first() -> None:
    assert ticks_from("2026-12-03T21:12:00.000Z", "2026-12-03T21:12:00.000Z", period_ms=MINUTE) == 1
    # the check came two minutes late (seen under load): three ticks, so three jobs
    assert ticks_from("2026-12-03T21:12:00.000Z", "2026-12-03T21:14:00.000Z", period_ms=MINUTE) == 3


def test_a_schedule_that_has_not_ticked_or_ticked_off_its_grid_counts_none() -> None:
    assert ticks_from("2026-12-03T21:12:00.000Z", "", period_ms=MINUTE) == 0
    assert ticks_from("", "2026-12-03T21:12:00.000Z", period_ms=MINUTE) == 0
    assert ticks_from("2026-12-03T21:12:00.000Z", "2026-12-03T21:11:00.000Z", period_ms=MINUTE) == 0
    assert ticks_from("2026-12-03T21:12:00.000Z", "2026-12-03T21:13:00.500Z", period_ms=MINUTE) == 0


def test_each_attempts_claim_time_is_read_in_order_and_entries_without_one_are_not() -> None:
    view = {
        "history": [
            {"event": "created", "at": "2026-12-03T10:00:00.000Z"},
            {
                "event": "failed",
                "started": "2026-12-03T10:00:03.010Z",
                "at": "2026-12-03T10:00:04Z",
            },
            {
                "event": "succeeded",
                "started": "2026-12-03T10:00:06.000Z",
                "at": "2026-12-03T10:00:07Z",
            },
        ]
    }
    assert attempt_starts(view) == ["2026-12-03T10:00:03.010Z", "2026-12-03T10:00:06.000Z"]
    assert attempt_starts({}) == []


def test_a_delay_is_the_due_time_less_the_acceptance_time() -> None:
    accepted = "2026-12-03T10:00:00.250Z"
    assert (
        delay_ms({"created_at": accepted, "next_attempt_at": "2026-12-03T10:00:03.250Z"}) == 3_000
    )
    assert (
        delay_ms({"created_at": accepted, "next_attempt_at": "2026-12-03T12:00:00.250Z"})
        == 7_200_000
    )
    assert delay_ms({"created_at": accepted}) is None
