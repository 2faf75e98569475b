"""A job waiting between two steps is not running: it gives its per-user concurrency slot back
when it parks (found while building the reading list's import: a waiting parent held one of its
user's five places for two leases, until the repair freed it)."""

from __future__ import annotations

from typing import Any

from leasehold import Kind, StepContext
from leasehold.apps import Engine
from leasehold.store.slots import running_slots
from leasehold.testing import LeaseholdTestbed

review = Kind("slot_review")


@review.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.wait_for_signal("reviewed", timeout_seconds=3600)
    return {}


@review.step()
def done(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"review": ctx.signal("reviewed")}


def test_a_waiting_job_holds_no_concurrency_slot() -> None:
    with LeaseholdTestbed([review]) as tb:
        job_id = tb.submit("slot_review", {})
        tb.run_until_idle()
        assert tb.view(job_id)["waiting_for"]["signal"] == "reviewed"
        assert running_slots(Engine.current().table, tb.owner) == set()
        tb.signal(job_id, "reviewed", {"ok": True})
        tb.run_until_idle()
        assert tb.view(job_id)["result"] == {"review": {"ok": True}}
