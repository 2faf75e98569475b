"""A children set's `max_concurrency` (DESIGN §19, decision WF7): eight workers racing over the
set's wake-ups never run more of its children at once than the parent asked for, and the parent
resumes once the last has ended. Raced with worker threads against moto in-process, as the
concurrency keys are (tests/integration/test_concurrency_keys.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.domain.options import Submission
from leasehold.domain.waits import child_id
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind
from tests.integration import test_concurrency_keys as keys
from tests.support.harness import ALICE, Harness

pytestmark = pytest.mark.integration

gauge = keys.Gauge()

parent = Kind("fan_parent")


@parent.step()
def start(ctx: StepContext, payload: dict[str, Any]) -> int:
    return len(ctx.map("gauged", [{"n": n} for n in range(payload["n"])], max_concurrency=3))


@parent.step()
def join(ctx: StepContext, payload: dict[str, Any]) -> int:
    return sum(1 for child in ctx.children() if child.state == "succeeded")


gauged = Kind("gauged", concurrency=[])  # no limit of its own: only the set's


@gauged.step()
def hold(ctx: StepContext, payload: dict[str, Any]) -> int:
    gauge.enter("set")
    try:
        # Overlap whenever the limit lets them: wait (bounded) until the limit's 3 run at once,
        # or all that are left do, then stay a moment longer, so that a fourth, were the limit
        # broken, would be seen running beside them.
        with gauge.lock:
            gauge.runs["left"] -= 1
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with gauge.lock:
                if gauge.now["set"] >= min(3, gauge.runs["left"] + gauge.now["set"]):
                    break
            time.sleep(0.005)
        time.sleep(0.05)
        return int(payload["n"])
    finally:
        gauge.leave("set")


KINDS: dict[str, JobKind] = {k.name: EngineKind(k) for k in (parent, gauged)}


def test_eight_workers_never_run_more_children_than_max_concurrency(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keys, "KINDS", KINDS)
    monkeypatch.setattr(keys, "gauge", gauge)
    gauge.__init__()  # type: ignore[misc]
    gauge.runs["left"] = 16  # children not started yet
    service = JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)
    job_id = service.accept(ALICE, Submission("fan_parent", {"n": 16})).job_id
    first = harness.worker("w0", kinds=KINDS).handle(harness.wakeup(job_id))
    assert first.outcome == "waiting"
    children = [child_id(job_id, 0, n) for n in range(16)]
    outcomes = keys.run_race(harness, children)
    assert outcomes == dict.fromkeys(children, "succeeded")
    assert gauge.most["set"] == 3  # the limit was reached, and never passed
    assert gauge.runs["set"] == 16 and gauge.runs["left"] == 0
    assert harness.telemetry.counts["SlotWaits"] > 0  # the race did happen
    assert harness.telemetry.counts["ParentsWoken"] == 1  # the last end woke it, once
    done = harness.worker("w0", kinds=KINDS).handle(harness.wakeup(job_id))
    assert done.outcome == "succeeded"
    parent_job = harness.store.get(job_id)
    assert parent_job is not None and parent_job.result == 16
