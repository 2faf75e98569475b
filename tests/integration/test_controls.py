"""Cancel, approval, budgets and per-user limits (arch §4–§5) on moto with an injected clock: the
races, leases and slots, on the repository's harness (what the synthetic kind does as its user
sees it is in test_synthetic_kind.py, on `leasehold.testing`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.domain.errors import (
    ClaimRejectedError,
    ConflictError,
    SlotsFullError,
    ValidationError,
)
from leasehold.domain.states import JobState
from tests.support.harness import ALICE, BOB, LEASE_MS, Harness, steps
from tests.support.index_lag import lagging_index
from tests.support.kinds import ScriptedKind


@pytest.fixture(autouse=True)
def lagging(harness: Harness) -> Iterator[None]:
    """Cancel, approval and the sweeper meet an index 500 ms behind the table."""
    with lagging_index(harness.clock):
        yield


def _job(harness: Harness, job_id: str) -> Any:
    job = harness.store.get(job_id)
    assert job is not None
    return job


# ------------------------------------------------------------------ cancellation


def test_cancel_of_a_terminal_job_is_409_and_of_a_foreign_job_404(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    harness.worker().handle(harness.wakeup(job_id))
    with pytest.raises(ConflictError):
        harness.jobs().cancel(ALICE, job_id)
    with pytest.raises(Exception, match="no job"):
        harness.jobs().cancel(BOB, job_id)


def test_cancel_while_running_stops_before_the_next_step(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}, {"cost": 1}, {"cost": 1}))

    def cancel_during_first_step(index: int, attempt: int, tick: Any) -> None:
        if index == 0:
            view = harness.jobs().cancel(ALICE, job_id)
            assert view["state"] == "running" and view["cancel_requested"] is True

    result = harness.worker(kinds={"synthetic": ScriptedKind(cancel_during_first_step)}).handle(
        harness.wakeup(job_id)
    )
    job = _job(harness, job_id)
    assert result.outcome == "cancelled" and job.state is JobState.CANCELLED
    assert job.stop_reason == "cancelled_by_user"
    assert job.checkpoint.steps_used == 1  # the running step finished; no further step ran
    assert harness.store.running_slots(ALICE) == set()


def test_cancel_arriving_mid_step_interrupts_it_at_the_next_heartbeat(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"duration_ms": 600, "cost": 5}, {"cost": 1}))

    def cancel_then_time_passes(index: int, attempt: int, tick: Any) -> None:
        harness.jobs().cancel(ALICE, job_id)
        harness.clock.advance(1_000)  # the next tick heartbeats and reads cancel_requested

    worker = harness.worker(
        kinds={"synthetic": ScriptedKind(cancel_then_time_passes)}, heartbeat_every_ms=500
    )
    assert worker.handle(harness.wakeup(job_id)).outcome == "cancelled"
    job = _job(harness, job_id)
    assert job.checkpoint.steps_used == 0 and job.checkpoint.cost_used == 0


# ------------------------------------------------------------------ approval


def _pause(harness: Harness) -> str:
    job_id = harness.submit(payload=steps({"cost": 1}, {"cost": 2, "approval": True}, {"cost": 3}))
    assert harness.worker().handle(harness.wakeup(job_id)).outcome == "waiting_approval"
    return job_id


def test_approval_pauses_with_checkpoint_and_no_lease_or_slot(harness: Harness) -> None:
    job_id = _pause(harness)
    job = _job(harness, job_id)
    assert job.state is JobState.WAITING_APPROVAL and job.approval["step"] == 1
    assert (
        job.lease_owner is None and job.checkpoint.next_step == 1 and job.checkpoint.cost_used == 1
    )
    assert job.attempts == 0  # a pause gives its attempt back
    assert harness.store.running_slots(ALICE) == set()
    view = harness.jobs().view(ALICE, job_id)
    assert view["approval"]["step"] == 1 and view["approval"]["requested_at"].endswith("Z")


def test_reject_cancels_and_stale_or_wrong_state_is_409(harness: Harness) -> None:
    job_id = _pause(harness)
    version = _job(harness, job_id).version
    with pytest.raises(ConflictError, match="stale"):
        harness.jobs().decide_approval(
            ALICE, job_id, {"decision": "approve", "version": version - 1}
        )
    with pytest.raises(ValidationError):
        harness.jobs().decide_approval(ALICE, job_id, {"decision": "maybe", "version": version})
    view = harness.jobs().decide_approval(ALICE, job_id, {"decision": "reject", "version": version})
    assert view["state"] == "cancelled" and view["stop_reason"] == "approval_rejected"
    with pytest.raises(ConflictError, match="not waiting"):
        harness.jobs().decide_approval(
            ALICE, job_id, {"decision": "approve", "version": view["version"]}
        )


def test_approval_racing_a_cancel_has_one_consistent_winner(harness: Harness) -> None:
    job_id = _pause(harness)
    version = _job(harness, job_id).version
    outcomes: dict[str, Any] = {}

    def approve() -> None:
        try:
            outcomes["approve"] = harness.jobs().decide_approval(
                ALICE, job_id, {"decision": "approve", "version": version}
            )["state"]
        except ConflictError as exc:
            outcomes["approve"] = exc.code

    def cancel() -> None:
        outcomes["cancel"] = harness.jobs().cancel(ALICE, job_id)["state"]

    threads = [threading.Thread(target=approve), threading.Thread(target=cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Either the approval came first (queued, then cancelled; its answer may already show the
    # cancel) or the cancel did (the approval is a 409): never both, never neither
    assert outcomes["cancel"] == "cancelled"
    assert outcomes["approve"] in {"queued", "cancelled", "not_waiting"}
    assert _job(harness, job_id).state is JobState.CANCELLED
    assert harness.worker().handle(harness.wakeup(job_id)).outcome == "terminal"


# ------------------------------------------------------------------ budgets


# ------------------------------------------------------------------ per-user concurrency


def test_jobs_over_the_user_limit_wait_queued_without_burning_attempts(harness: Harness) -> None:
    ids = [harness.submit(payload=steps({})) for _ in range(3)]
    for job_id in ids[:2]:
        harness.claim(job_id, "x")
    harness.receive_all()
    result = harness.worker().handle(harness.wakeup(ids[2]))
    assert result.outcome == "slots_full"
    job = _job(harness, ids[2])
    assert job.state is JobState.QUEUED and job.attempts == 0
    # its wake-up was re-sent with a delay (no busy loop on the queue)
    attrs = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["work"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    # another user is not held back
    bobs = harness.submit(owner=BOB, payload=steps({}))
    assert harness.worker().handle(harness.wakeup(bobs)).outcome == "succeeded"


def test_two_workers_race_for_the_last_free_slot_one_wins(harness: Harness) -> None:
    first, second, third = (harness.submit(payload=steps({})) for _ in range(3))
    harness.claim(first, "x")
    results: list[str] = []

    def claim(job_id: str) -> None:
        try:
            harness.claimer.claim(
                job_id, ALICE, worker_id=job_id, now=harness.clock.now_ms(), lease_ms=LEASE_MS
            )
            results.append("won")
        except SlotsFullError:
            results.append("slots_full")

    threads = [threading.Thread(target=claim, args=(j,)) for j in (second, third)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == ["slots_full", "won"]
    assert len(harness.store.running_slots(ALICE)) == 2


def test_a_dead_workers_slot_is_reclaimed_only_after_its_lease_expires(harness: Harness) -> None:
    a, b, c = (harness.submit(payload=steps({})) for _ in range(3))
    for job_id in (a, b):
        harness.claim(job_id, "dies")
    # before the leases expire: the sweeper frees nothing and c cannot claim
    harness.clock.advance(LEASE_MS - 1)
    assert "rescued" not in harness.sweep()
    with pytest.raises(SlotsFullError):
        harness.claim(c, "w")
    # after: the sweeper rescues a and b and releases their slots in the same transactions
    harness.clock.advance(2)
    assert harness.sweep() == {"rescued": 2}
    assert harness.store.running_slots(ALICE) == set()
    assert harness.worker().handle(harness.wakeup(c)).outcome == "succeeded"


def test_every_outcome_releases_the_slot(harness: Harness) -> None:
    outcomes = {
        "succeeded": steps({}),
        "failed": steps({"fatal": True}),
        "retry_scheduled": steps({"fail_times": 1}),
        "waiting_approval": steps({"approval": True}),
    }
    for expected, payload in outcomes.items():
        job_id = harness.submit(payload=payload)
        assert harness.worker().handle(harness.wakeup(job_id)).outcome == expected
        assert harness.store.running_slots(ALICE) == set(), expected


def test_claim_rejects_a_message_naming_the_wrong_owner(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    with pytest.raises(ClaimRejectedError):
        harness.claimer.claim(
            job_id, BOB, worker_id="w", now=harness.clock.now_ms(), lease_ms=LEASE_MS
        )
