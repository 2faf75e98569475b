"""Approval on the signal mechanism (issue 31 item 3, decision WF50): a job paused before a step
that needs approval waits for a reserved signal, parked and woken by the code that parks and
wakes `ctx.wait_for_signal`; the claim decides from the signal whether the step runs. Its API
(tests/integration/test_controls.py) is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.domain.errors import ConflictError, ValidationError
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.service.signals import WorkflowService
from leasehold.store.items import job_key
from leasehold.store.waits import WaitStore
from leasehold.testing import LeaseholdTestbed
from tests.support.harness import ALICE, Harness, steps
from tests.support.kinds import registry


def _job(harness: Harness, job_id: str) -> Job:
    job = harness.store.get(job_id)
    assert job is not None
    return job


def _pause(harness: Harness, **second: Any) -> str:
    job_id = harness.submit(payload=steps({}, {"approval": True, **second}, {}))
    assert harness.deliver(job_id).outcome == "waiting_approval"
    return job_id


def _decide(harness: Harness, job_id: str, decision: str) -> dict[str, Any]:
    version = _job(harness, job_id).version
    return harness.jobs().decide_approval(ALICE, job_id, {"decision": decision, "version": version})


def _events(harness: Harness, job_id: str) -> list[str]:
    return [str(e.get("ev")) for e in _job(harness, job_id).history]


def test_a_pause_is_a_wait_for_a_reserved_signal_and_approve_delivers_it(
    harness: Harness,
) -> None:
    job_id = _pause(harness)
    paused = _job(harness, job_id)
    wait = paused.wait or {}
    assert paused.state is JobState.WAITING_APPROVAL
    assert wait["type"] == "approval" and wait["step"] == 1
    assert wait["name"] == f"@approval.1.{paused.epoch}"  # named by the pause
    flows = WorkflowService(harness.stores, registry(), harness.clock, harness.telemetry)
    with pytest.raises(ValidationError):  # reserved: no owner's signal can stand for it
        flows.signal(ALICE, job_id, wait["name"], {"decision": "approve"})

    view = _decide(harness, job_id, "approve")

    assert view["state"] == "queued" and "approval" not in view and "waiting_for" not in view
    signal = WaitStore(harness.stores.table).signal(job_id, wait["name"])
    assert signal is not None and signal.body == {"decision": "approve", "by": ALICE.user_id}
    woken = _job(harness, job_id)
    assert woken.wait == wait and woken.checkpoint.approved_step is None  # the claim decides
    assert harness.deliver(job_id).outcome == "succeeded"
    assert _job(harness, job_id).checkpoint.steps_used == 3


def test_an_approval_before_the_pause_is_409_and_not_kept(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}, {"approval": True}, {}))
    with pytest.raises(ConflictError, match="not waiting"):
        _decide(harness, job_id, "approve")
    assert harness.deliver(job_id).outcome == "waiting_approval"  # nothing early satisfied it


def test_a_wake_without_a_decision_parks_it_again(harness: Harness) -> None:
    """The claim decides whether the wait is over (WF2): woken with no decision, the job is
    paused again, no attempt spent, no history entry."""
    job_id = _pause(harness)
    paused = _job(harness, job_id)
    WaitStore(harness.stores.table).wake_read(paused, 1, harness.clock.now_ms())
    assert _job(harness, job_id).state is JobState.QUEUED

    assert harness.deliver(job_id).outcome == "still_waiting"

    again = _job(harness, job_id)
    assert again.state is JobState.WAITING_APPROVAL and again.wait == paused.wait
    assert again.attempts == 0 and again.checkpoint.steps_used == 1
    assert _events(harness, job_id).count("paused") == 1
    _decide(harness, job_id, "approve")  # and the decision still works
    assert harness.deliver(job_id).outcome == "succeeded"


def test_an_approved_step_that_fails_is_retried_without_asking_again(harness: Harness) -> None:
    job_id = _pause(harness, fail_times=1)
    _decide(harness, job_id, "approve")

    assert harness.deliver(job_id).outcome == "retry_scheduled"

    retrying = _job(harness, job_id)
    assert retrying.wait is None and retrying.checkpoint.approved_step == 1
    assert retrying.next_attempt_at is not None
    harness.clock.advance(retrying.next_attempt_at - harness.clock.now_ms())
    assert harness.deliver(job_id).outcome == "succeeded"
    assert _events(harness, job_id).count("paused") == 1


def test_a_job_paused_before_wf50_is_decided_on_the_one_path(harness: Harness) -> None:
    """An item paused by the old code (`approval`, no `wait`) is approved and runs."""
    job_id = _pause(harness)
    paused = _job(harness, job_id)
    harness.stores.table.update(
        {
            "Key": job_key(job_id),
            "UpdateExpression": "SET #a = :a REMOVE #w",
            "ExpressionAttributeNames": {"#a": "approval", "#w": "wait"},
            "ExpressionAttributeValues": {
                ":a": {
                    "M": {
                        "step": {"N": "1"},
                        "step_name": {"S": "s1"},
                        "requested_at": {"N": str(harness.clock.now_ms())},
                    }
                }
            },
        },
        return_new=False,
    )
    legacy = _job(harness, job_id)
    assert legacy.approval is not None and legacy.approval["step"] == 1
    assert legacy.wait is not None and legacy.wait["name"] == (paused.wait or {})["name"]

    assert _decide(harness, job_id, "approve")["state"] == "queued"
    assert harness.deliver(job_id).outcome == "succeeded"


gated = Kind("ap_gated")


@gated.step(approval=True)
def publish(ctx: StepContext, payload: dict[str, Any]) -> str:
    return "published"


parent = Kind("ap_parent")


@parent.step()
def spread(ctx: StepContext, payload: dict[str, Any]) -> int:
    return len(ctx.map("ap_gated", [{}, {}], tolerate_failures=payload["tolerate"]))


@parent.step()
def count(ctx: StepContext, payload: dict[str, Any]) -> list[str]:
    return [c.state for c in ctx.children()]


@pytest.mark.leasehold_kinds(gated, parent)
@pytest.mark.parametrize(("tolerate", "ends"), [(0, "failed"), (1, "succeeded")])
def test_a_rejected_child_is_counted_on_its_parents_fan_in(
    leasehold_testbed: LeaseholdTestbed, tolerate: int, ends: str
) -> None:
    """A reject ends the child with what every end brings (WF4): its parent goes on (or
    fails, over its tolerance) instead of waiting for a count that never comes."""
    tb = leasehold_testbed
    job_id = tb.submit("ap_parent", {"tolerate": tolerate})
    tb.run_until_idle()
    first, second = (c["job_id"] for c in tb.children(job_id))
    assert tb.state(first) == tb.state(second) == "waiting_approval"
    checked_at = tb.view(job_id)["next_attempt_at"]  # the parked parent's next check
    tb.reject(first)
    if ends == "failed":  # woken by the reject, not found at its next check
        assert tb.view(job_id)["next_attempt_at"] < checked_at
    tb.approve(second)
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == ends, view
    if ends == "succeeded":
        assert view["result"] == ["cancelled", "succeeded"], view
    else:
        assert view["stop_reason"] == "children_failed", view
