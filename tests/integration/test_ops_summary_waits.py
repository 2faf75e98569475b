"""The operator's overview says what queued jobs wait for (issue 34 item 5, decisions OS4–OS6):
a delay, a signal, children, a paused kind — each under its own name, due within SQS's 15
minutes or further ahead (then in the due index, whose sort key names the wait); only plain
delays are counted as delayed (the limit and rate waits: tests/integration/test_concurrency_keys.py
and test_rate_limits.py)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.service.pausing import PAUSE_CACHE_MS
from leasehold.testing import LeaseholdTestbed

pytestmark = pytest.mark.integration

review = Kind("summary_review")


@review.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> None:
    ctx.wait_for_signal("ok", timeout_seconds=int(payload["timeout"]))


@review.step()
def done(ctx: StepContext, payload: dict[str, Any]) -> str:
    return "reviewed"


fan = Kind("summary_fan")


@fan.step()
def spread(ctx: StepContext, payload: dict[str, Any]) -> int:
    return len(ctx.map("summary_review", [{"timeout": 600}]))


@fan.step()
def join(ctx: StepContext, payload: dict[str, Any]) -> int:
    return 1


def test_the_overview_counts_each_kind_of_wait_under_its_name() -> None:
    with LeaseholdTestbed([review, fan]) as tb:
        # Given a job delayed 5 minutes, one waiting 10 minutes for a signal, a parent waiting
        # for its child (which waits for its own signal), and one waiting 2 hours for a signal
        tb.submit("summary_review", {"timeout": 600}, delay_seconds=300)
        tb.submit("summary_review", {"timeout": 600})
        tb.submit("summary_fan", {})
        tb.submit("summary_review", {"timeout": 7200})
        # When they have run as far as they can, and the operator reads the overview
        tb.run_until_idle()
        summary = tb.runtime.ops().summary()
        # Then each wait is counted under its own name, the two-hour one (in the due index)
        # with the others: nothing is delayed
        assert summary["queued_waiting"] == {"children": 1, "signal": 3, "time": 1}
        assert summary["delayed"] == 0
        assert summary["queue_depth"] == 4
        assert summary["counts"]["queued"] == 5


idle = Kind("summary_idle")


@idle.step()
def nap(ctx: StepContext, payload: dict[str, Any]) -> int:
    return 1


wide = Kind("summary_wide")


@wide.step()
def spread_wide(ctx: StepContext, payload: dict[str, Any]) -> int:
    return len(ctx.map("summary_review", [{"timeout": 86400}]))


@wide.step()
def join_wide(ctx: StepContext, payload: dict[str, Any]) -> int:
    return 1


def test_waits_due_past_fifteen_minutes_are_counted_by_what_they_wait_for() -> None:
    with LeaseholdTestbed([review, wide, idle]) as tb:
        # Given a parent whose children wait has backed off past 15 minutes (its child waits
        # a day for a signal), a job waiting an hour for a signal, a paused kind's job, and a
        # job delayed 2 hours: each due further ahead than SQS holds, so in the due index
        tb.submit("summary_wide", {})
        tb.run_until_idle()
        for _ in range(4):  # the children's checks: 1, 2, 4, 8 minutes apart, then 16
            tb.advance(480)
            tb.run_until_idle()
        tb.submit("summary_review", {"timeout": 3600})
        tb.submit("summary_idle", {}, delay_seconds=7200)
        tb.pause_kind("summary_idle", "the provider is down")
        tb.advance(PAUSE_CACHE_MS / 1000)
        tb.submit("summary_idle", {})
        tb.run_until_idle()
        tb.advance(1, sweep=False)
        # When the operator reads the overview
        summary = tb.runtime.ops().summary()
        # Then each is counted under its own wait, from the due index's keys alone...
        assert summary["queued_waiting"] == {"children": 1, "paused": 1, "signal": 2}
        # ...only the plain delay is delayed, and none of them is ready to run
        assert summary["delayed"] == 1
        assert summary["queue_depth"] == 0
        assert summary["counts"]["queued"] == 5
