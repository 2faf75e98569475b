"""The operator's overview says what queued jobs wait for (issue 34 item 5, decision OS4): a
delay, a signal, children — each under its own name while it is due within SQS's 15 minutes;
one due further ahead is in the due index and counted as delayed (the limit and rate waits:
tests/integration/test_concurrency_keys.py and test_rate_limits.py)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Kind, StepContext
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
        # Then each wait due within 15 minutes is counted under its own name...
        assert summary["queued_waiting"] == {"children": 1, "signal": 2, "time": 1}
        # ...and the two-hour wait is in the due index: counted as delayed, not as queued
        assert summary["delayed"] == 1
        assert summary["queue_depth"] == 4
