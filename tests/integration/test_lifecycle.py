"""arch §3 on moto, with an injected clock: each rule has a test that fails if it is broken.
The engine's own races, fences and redeliveries are here, on the repository's harness; what the
synthetic kind does as its user sees it (dead, failed, a deadline, replay, resolve) is in
test_synthetic_kind.py, on `leasehold.testing`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.domain.errors import StaleEpochError, StepInterruptedError
from leasehold.domain.states import JobState
from leasehold.service.worker import Disposition
from tests.support.harness import ALICE, BOB, LEASE_MS, Harness, steps
from tests.support.index_lag import lagging_index
from tests.support.kinds import ScriptedKind


@pytest.fixture(autouse=True)
def lagging(harness: Harness) -> Iterator[None]:
    """The sweeper finds its jobs through the by_state index: every test here runs with the
    index 500 ms behind the table, and what it says must still hold."""
    with lagging_index(harness.clock):
        yield


def test_accept_commits_job_and_outbox_together_the_key_names_the_job(harness: Harness) -> None:
    # Given a submission with an idempotency key
    job_id = harness.submit(key="k-1", payload=steps({}))
    # Then the job and one outbox item exist; the key is the job's id (decision C4)
    items = harness.dynamodb.scan(TableName=harness.table)["Items"]
    kinds = sorted(item["pk"]["S"].split("#")[0] for item in items)
    assert kinds == ["JOB", "OUTBOX"]
    assert harness.state(job_id) == "queued"
    assert harness.submit(key="k-1", payload=steps({})) == job_id
    assert harness.submit(owner=BOB, key="k-1", payload=steps({})) != job_id  # per user


def test_relay_turns_the_outbox_insert_into_one_wakeup(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    pump = harness.relay_pump()
    # When the stream pump runs the relay over the table's stream
    assert pump.poll_once() == 1
    # Then exactly one wake-up for that job is on the queue, and the job record was filtered out
    bodies = harness.bodies()
    assert [b["job_id"] for b in bodies] == [job_id]
    assert bodies[0]["tenant"] == "study-group" and bodies[0]["user_id"] == "alice"
    assert pump.dropped_by_filter >= 1


def test_two_workers_claim_one_job_exactly_one_wins(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    wakeup = harness.wakeup(job_id)
    now = harness.clock.now_ms()
    winners, losers = [], []
    for name in ("a", "b"):
        try:
            winners.append(
                harness.claimer.claim(job_id, ALICE, worker_id=name, now=now, lease_ms=LEASE_MS)
            )
        except Exception as exc:  # noqa: BLE001 - the loser's error is the point
            losers.append(exc)
    assert len(winners) == 1 and len(losers) == 1
    assert winners[0].epoch == 1 and winners[0].lease_owner == "a"
    assert type(losers[0]).__name__ == "ClaimRejectedError"
    assert wakeup.job_id == job_id


def test_late_completion_from_an_old_epoch_is_rejected(harness: Harness) -> None:
    # Given worker A claims (epoch 1) and stalls past its lease
    job_id = harness.submit(payload=steps({}))
    job_a = harness.claim(job_id, "a")
    harness.clock.advance(LEASE_MS + 1)
    # When worker B claims (epoch 2) and completes
    job_b = harness.claim(job_id, "b")
    assert job_b.epoch == job_a.epoch + 1
    harness.complete(job_b, {"by": "b"})
    # Then A's late completion is rejected and B's result stands
    with pytest.raises(StaleEpochError):
        harness.complete(job_a, {"by": "a"})
    final = harness.store.get(job_id)
    assert final is not None and final.result == {"by": "b"} and final.epoch == 2


def test_a_stale_epoch_cannot_write_while_a_newer_claim_runs(harness: Harness) -> None:
    # Given A's lease expired and B now holds a live lease at epoch 2, mid-job
    job_id = harness.submit(payload=steps({}, {}))
    job_a = harness.claim(job_id, "a")
    harness.clock.advance(LEASE_MS + 1)
    job_b = harness.claim(job_id, "b")
    # When A comes back: every write it tries is refused by its epoch alone (the state is
    # `running` and a lease is live — B's)
    for write in (
        lambda: harness.complete(job_a, {"by": "a"}),
        lambda: harness.leases.heartbeat(job_a, now=harness.clock.now_ms(), lease_ms=LEASE_MS),
        lambda: harness.leases.save_checkpoint(
            job_a, job_a.checkpoint, now=harness.clock.now_ms(), lease_ms=LEASE_MS
        ),
    ):
        with pytest.raises(StaleEpochError):
            write()
    # Then B's lease and result stand
    harness.complete(job_b, {"by": "b"})
    final = harness.store.get(job_id)
    assert final is not None and final.result == {"by": "b"} and final.epoch == 2


def test_a_job_no_longer_running_refuses_its_holder_even_with_a_lease_left_on_it(
    harness: Harness,
) -> None:
    # Given A holds epoch 1 with a live lease, and the item is moved out of `running` by a
    # writer that leaves the lease fields behind (an operator's console edit, a restore from a
    # backup, a future code path that forgets to clear them)
    job_id = harness.submit(payload=steps({}, {}))
    job_a = harness.claim(job_id, "a")
    harness.dynamodb.update_item(
        TableName=harness.table,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET #s = :cancelled",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":cancelled": {"S": "cancelled"}},
    )
    # When A writes under its epoch, lease still in the future: every write is refused by the
    # state clause of the fence alone (arch §3.3)
    for write in (
        lambda: harness.complete(job_a, {"by": "a"}),
        lambda: harness.leases.heartbeat(job_a, now=harness.clock.now_ms(), lease_ms=LEASE_MS),
        lambda: harness.leases.save_checkpoint(
            job_a, job_a.checkpoint, now=harness.clock.now_ms(), lease_ms=LEASE_MS
        ),
    ):
        with pytest.raises(StaleEpochError):
            write()
    # Then the job stays as the other writer left it, with no result of A's
    final = harness.store.get(job_id)
    assert final is not None and final.state is JobState.CANCELLED and final.result is None


def test_expired_lease_is_rejected_even_if_nobody_reclaimed(harness: Harness) -> None:
    # Given A's lease expired and no one else claimed
    job_id = harness.submit(payload=steps({}))
    job_a = harness.claim(job_id, "a")
    harness.clock.advance(LEASE_MS + 1)
    # When A tries to complete, it is rejected
    with pytest.raises(StaleEpochError):
        harness.complete(job_a, {})
    # Then A may claim again as epoch n+1 and complete
    again = harness.claim(job_id, "a")
    assert again.epoch == job_a.epoch + 1
    harness.complete(again, {"ok": 1})
    assert harness.state(job_id) == "succeeded"


def test_worker_stalled_mid_step_loses_to_the_next_claimant(harness: Harness) -> None:
    # Given worker A stalls inside step 0 long enough for its lease to expire and B to finish
    job_id = harness.submit(payload=steps({}))
    outcome_b = {}

    def stall(index: int, attempt: int, tick: object) -> None:
        if not outcome_b:
            harness.clock.advance(LEASE_MS + 1)
            outcome_b["result"] = harness.worker("b").handle(harness.wakeup(job_id))

    result_a = harness.worker("a", kinds={"synthetic": ScriptedKind(stall)}).handle(
        harness.wakeup(job_id)
    )
    # Then B succeeded under epoch 2 and A's result was dropped and counted
    assert outcome_b["result"].outcome == "succeeded"
    assert result_a.outcome == "stale" and result_a.disposition is Disposition.ACK
    assert harness.telemetry.counts["StaleWritesRejected"] == 1
    job = harness.store.get(job_id)
    assert job is not None and job.epoch == 2 and job.state is JobState.SUCCEEDED


def test_redelivery_after_the_outcome_is_saved_gives_no_second_result(harness: Harness) -> None:
    # Given a job completed (a crash came after the save but before the ack)
    job_id = harness.submit(payload=steps({"cost": 2}))
    first = harness.worker("a").handle(harness.wakeup(job_id))
    assert first.outcome == "succeeded"
    before = harness.store.get(job_id)
    # When the same message is delivered again
    again = harness.worker("b").handle(harness.wakeup(job_id))
    # Then it is acknowledged and the job item did not change
    assert again.disposition is Disposition.ACK and again.outcome == "terminal"
    after = harness.store.get(job_id)
    assert before == after


def test_crash_before_the_save_is_retried_after_the_lease_expires(harness: Harness) -> None:
    # Given worker A claimed and died before saving anything
    job_id = harness.submit(payload=steps({}))
    harness.claim(job_id, "a")
    # When the message comes back before the lease expires, it is left to A
    assert harness.worker("b").handle(harness.wakeup(job_id)).outcome == "leased"
    # And after the lease expires the sweeper rescues it back to queued with a new wake-up
    harness.clock.advance(LEASE_MS + 1)
    assert harness.sweep() == {"rescued": 1}
    assert harness.state(job_id) == "queued"
    # Then the next worker runs it to the end under epoch 2
    assert harness.worker("b").handle(harness.wakeup(job_id)).outcome == "succeeded"
    job = harness.store.get(job_id)
    assert job is not None and job.epoch == 2 and job.attempts == 2


def test_duplicate_delivery_to_two_workers_at_once_runs_once(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"duration_ms": 300}))
    results = []
    workers = [harness.worker(name) for name in ("a", "b")]

    def deliver(index: int) -> None:
        results.append(workers[index].handle(harness.wakeup(job_id)).outcome)

    threads = [threading.Thread(target=deliver, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) in (["leased", "succeeded"], ["succeeded", "terminal"])
    job = harness.store.get(job_id)
    assert job is not None and job.epoch == 1 and job.checkpoint.steps_used == 1


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_transient_failure_retries_with_backoff_then_succeeds(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}, {"fail_times": 1, "cost": 2}))
    worker = harness.worker()
    seen = _Records()
    logging.getLogger("leasehold").addHandler(seen)
    try:
        first = worker.handle(harness.wakeup(job_id))
    finally:
        logging.getLogger("leasehold").removeHandler(seen)
    assert first.outcome == "retry_scheduled"
    # The log line an operator searches by job id says which step failed and why
    retry = [r.__dict__ for r in seen.records if r.getMessage() == "retry scheduled"]
    assert [(r["job_id"], r["attempt"], r["step"], r["error"]) for r in retry] == [
        (job_id, 1, 1, "transient_error")
    ]
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED
    assert job.next_attempt_at is not None and job.next_attempt_at >= harness.clock.now_ms()
    assert job.checkpoint.next_step == 1 and job.checkpoint.cost_used == 1  # step 0 is not redone
    # The retry's wake-up is a new, delayed outbox item in the same transaction
    outbox = [
        i
        for i in harness.dynamodb.scan(TableName=harness.table)["Items"]
        if i["pk"]["S"].startswith("OUTBOX#")
    ]
    assert len(outbox) == 2
    # A wake-up that arrives early is re-delayed, not run
    early = worker.handle(harness.wakeup(job_id))
    if job.next_attempt_at > harness.clock.now_ms():
        assert early.outcome == "not_due"
    harness.clock.advance(10_000)
    assert worker.handle(harness.wakeup(job_id)).outcome == "succeeded"
    done = harness.store.get(job_id)
    assert (
        done is not None and done.result["cost_used"] == 3 and done.result["steps_completed"] == 2
    )


def test_lease_expiring_during_an_open_effect_gives_unknown(harness: Harness) -> None:
    # Given a worker records the effect intent and dies inside the effect
    job_id = harness.submit(payload=steps({"effect": True}))

    def die(index: int, attempt: int, tick: object) -> None:
        raise SystemExit("worker process killed")

    with pytest.raises(SystemExit):
        harness.worker("a", kinds={"synthetic": ScriptedKind(die)}).handle(harness.wakeup(job_id))
    job = harness.store.get(job_id)
    assert job is not None and job.effect_intent is not None
    assert job.effect_intent["operation_id"] == f"{job_id}:0"  # stable across attempts
    # When the lease expires and the message comes back
    harness.clock.advance(LEASE_MS + 1)
    assert harness.worker("b").handle(harness.wakeup(job_id)).outcome == "effect_open"
    # Then the job is unknown, never retried automatically
    job = harness.store.get(job_id)
    assert (
        job is not None and job.state is JobState.UNKNOWN and job.stop_reason == "effect_uncertain"
    )
    assert harness.worker("c").handle(harness.wakeup(job_id)).outcome == "uncertain"
    assert harness.store.running_slots(ALICE) == set()


def _abandon_inside_an_effect(harness: Harness, job_id: str) -> None:
    """A worker claims, records its effect intent, and is never heard from again."""
    job = harness.claim(job_id, "a")
    harness.leases.record_effect_intent(
        job, {"operation_id": "op", "step": 0}, now=harness.clock.now_ms()
    )
    harness.clock.advance(LEASE_MS + 1)


def test_sweeper_turns_an_abandoned_effect_into_unknown(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"effect": True}))
    _abandon_inside_an_effect(harness, job_id)
    assert harness.sweep() == {"unknown": 1}
    assert harness.state(job_id) == "unknown"


def test_sweeper_redispatches_a_lost_wakeup_once(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    harness.relay_pump().poll_once()
    harness.receive_all()  # the wake-up is lost: received and never handled
    harness.clock.advance(6_000)
    assert harness.sweep() == {"redispatched": 1}
    assert harness.sweep() == {}  # a second sweep right after does nothing
    harness.relay_pump().poll_once()
    assert harness.worker().handle(harness.wakeup(job_id)).outcome == "succeeded"


def test_a_heartbeat_refused_by_the_fence_is_a_rejected_stale_write(harness: Harness) -> None:
    # Given worker A is frozen mid-step past its lease while B claims (epoch 2) and finishes
    job_id = harness.submit(payload=steps({}))

    def frozen_then_wakes(index: int, attempt: int, tick: Any) -> None:
        harness.clock.advance(LEASE_MS + 1)
        assert harness.worker("b").handle(harness.wakeup(job_id)).outcome == "succeeded"
        # When A wakes, its next tick heartbeats under epoch 1
        if not tick():
            raise StepInterruptedError("A stops: its heartbeat was refused")

    worker_a = harness.worker(
        "a", kinds={"synthetic": ScriptedKind(frozen_then_wakes)}, heartbeat_every_ms=500
    )
    result_a = worker_a.handle(harness.wakeup(job_id))
    # Then the refused heartbeat is a stale write, counted like a refused outcome; B's stands
    assert result_a.disposition is Disposition.ACK
    assert harness.telemetry.counts["StaleWritesRejected"] == 1
    job = harness.store.get(job_id)
    assert job is not None and job.epoch == 2 and job.state is JobState.SUCCEEDED
