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


leaf = Kind("slot_leaf", concurrency=[])  # no limit of its own: only the parent's cap


@leaf.step()
def hold(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


spread = Kind("slot_spread", concurrency=[])


@spread.step()
def fan(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.map("slot_leaf", [{}] * 6, max_concurrency=2)
    return {}


@spread.step()
def after(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def test_max_concurrency_holds_for_children_of_a_kind_without_limits() -> None:
    """Every child's worker dies inside its step, keeping its lease: only 2 start."""
    with LeaseholdTestbed([leaf, spread], settings={"worker_batch_size": 1}) as tb:
        crashes = tb.crash(in_step="hold", times=6)
        job_id = tb.submit("slot_spread", {})
        tb.run_until_idle()
        states = [child["state"] for child in tb.children(job_id)]
        assert states.count("running") == 2, states
        assert len(crashes.fired) == 2
