"""A parent cancelled at the edges of its fan-out (DESIGN §19 "a parent's cancel cancels its
children", decisions WF6, WF52), on the moto testbed: cancelled while the step that spawns its
children still runs, and a child already running when the cascade reaches it."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import JobOptions, Kind, StepContext
from leasehold.service.workflows import Workflows
from leasehold.store.queue import Wakeup
from leasehold.testing import LeaseholdTestbed
from tests.support.race_kinds import child as leaf
from tests.support.race_kinds import hooks, runs

root = Kind("cx_root")


@root.step()
def spawn(ctx: StepContext, payload: dict[str, Any]) -> int:
    delay = payload.get("delay")
    ids = ctx.map(
        "race_child",
        [{"i": i} for i in range(payload["n"])],
        options=JobOptions(delay_seconds=delay) if delay else None,
    )
    hook = hooks.pop("spawn", None)
    if hook is not None:
        hook(ctx)
    return len(ids)


@root.step()
def gather(ctx: StepContext, payload: dict[str, Any]) -> int:
    runs["gather"] += 1
    return sum(1 for c in ctx.children() if c.state == "succeeded")


KINDS = pytest.mark.leasehold_kinds(leaf, root)


@pytest.fixture(autouse=True)
def _reset() -> None:
    runs.clear()
    hooks.clear()


@KINDS
def test_a_parent_cancelled_while_its_spawning_step_runs_cancels_its_children(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    """The owner cancels the parent while the step that calls `ctx.map` runs: the step ends,
    its children are written with its checkpoint, and the parent must not wait for them to run
    — it ends `cancelled` and cancels them (children not due for a minute, so a child that ran
    could only have been let run)."""
    tb = leasehold_testbed
    n = 6
    job_id = tb.submit("cx_root", {"n": n, "delay": 60})
    hooks["spawn"] = lambda ctx: tb.cancel(job_id)  # `running`: cancel_requested
    tb.run_until_idle()
    tb.drain(max_seconds=3600)

    assert tb.view(job_id)["state"] == "cancelled"
    kids = tb.children(job_id)
    assert len(kids) == n
    assert [k["state"] for k in kids] == ["cancelled"] * n
    assert sum(runs[f"work:{k['job_id']}"] for k in kids) == 0
    assert runs["gather"] == 0


@KINDS
def test_a_child_running_when_the_cascade_reaches_it_stops_at_its_next_step(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    """Child 0 is claimed and inside its first step when its parent is cancelled and the
    cascade passes: it is asked to stop (`cancel_requested`), as a user's cancel asks a running
    job, and ends `cancelled` before its second step; the others, queued, end at once."""
    tb = leasehold_testbed
    n = 3
    job_id = tb.submit("cx_root", {"n": n})
    seen: dict[str, Any] = {}

    def cancel_the_parent_and_cascade(ctx: StepContext) -> None:
        tb.cancel(job_id)  # the parent is parked: cancelled at once, its cascade sent
        flows = Workflows(tb._stores, tb.clock, tb.kinds, tb.telemetry)  # noqa: SLF001
        cascade = Wakeup(job_id=job_id, owner=tb.owner, dispatch_id="test", cascade="0:0")
        flows.cascade(cascade, lambda _: None)
        seen["running"] = tb.view(ctx.job_id)

    hooks["work:0"] = cancel_the_parent_and_cascade
    tb.run_until_idle()
    tb.drain(max_seconds=3600)

    assert seen["running"]["state"] == "running" and seen["running"]["cancel_requested"] is True
    kids = tb.children(job_id)
    assert [k["state"] for k in kids] == ["cancelled"] * n
    first = kids[0]["job_id"]
    assert runs[f"work:{first}"] == 1 and runs[f"finish:{first}"] == 0
    assert sum(runs[f"work:{k['job_id']}"] for k in kids[1:]) == 0  # queued: cancelled at once
    assert tb.view(job_id)["state"] == "cancelled" and runs["gather"] == 0
