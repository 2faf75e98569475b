"""What DynamoDB and Lambda really do and moto never does (arch §3.9): transactions cancelled for
conflicts and throttles, throttled single writes, lost answers, invocations with a time limit.
Faults are injected at the client boundary (leasehold.store.faults). Each test here reproduces a
case that lost outcomes, erased an uncertain effect or answered 500 before it was fixed."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.domain.states import JobState
from leasehold.service.worker import Disposition
from tests.support.harness import ALICE, BOB, LEASE_MS, Harness, steps
from tests.support.kinds import ScriptedKind

# ------------------------------------------------------------------ transaction cancellations


def test_a_conflict_on_the_outcome_is_retried_and_the_outcome_saved(harness: Harness) -> None:
    # Given a job whose first try fails transiently: its outcome (a retry) is a transaction —
    # the job and its delayed wake-up, committed together
    job_id = harness.submit(payload=steps({"fail_times": 1}))
    # When that transaction is cancelled once for a TransactionConflict

    def conflict_on_the_outcome_only(index: int, attempt: int, tick: Any) -> None:
        harness.faults("dynamodb.TransactWriteItems:TransactionConflict=1@1")

    worker = harness.worker(kinds={"synthetic": ScriptedKind(conflict_on_the_outcome_only)})
    result = worker.handle(harness.wakeup(job_id))
    # Then the store retried it: the retry is saved, with its wake-up, once
    assert result.outcome == "retry_scheduled" and result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 1
    assert len(harness.outbox(job_id)) == 2
    assert harness.injected("TransactWriteItems:TransactionConflict") == 1
    # And the next attempt succeeds normally
    harness.clock.advance(10_000)
    assert harness.worker("w2").handle(harness.wakeup(job_id)).outcome == "succeeded"


def test_contention_that_outlasts_the_retries_keeps_the_message_and_loses_nothing(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}))

    def store_down_from_now_on(index: int, attempt: int, tick: Any) -> None:
        harness.faults(
            "dynamodb.UpdateItem:ThrottlingException=1,"
            "dynamodb.TransactWriteItems:TransactionConflict=1"
        )

    worker = harness.worker(kinds={"synthetic": ScriptedKind(store_down_from_now_on)})
    # When every write is throttled past the SDK's retries, or cancelled past the store's,
    # the outcome cannot be saved: the message is kept
    result = worker.handle(harness.wakeup(job_id))
    assert result.disposition is Disposition.KEEP and result.outcome == "store_unavailable"
    # And when the store recovers and the lease expired, the job runs again and succeeds
    harness.faults("")
    harness.clock.advance(LEASE_MS + 1)
    assert harness.worker("w2").handle(harness.wakeup(job_id)).outcome == "succeeded"
    assert harness.state(job_id) == "succeeded"


def test_a_claim_the_store_cannot_serve_does_not_hold_the_message(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({}))
    harness.receive_all()  # nothing is on the queue yet: no relay ran
    harness.faults("dynamodb.UpdateItem:ThrottlingException=1")
    # When the slot take and the claim keep being throttled past the SDK's retries
    result = harness.worker().handle(harness.wakeup(job_id), receipt_handle=None)
    # Then the wake-up goes straight back to the queue, a few seconds out, instead of waiting
    # out the visibility timeout; the job is untouched
    assert result.outcome == "store_unavailable" and result.disposition is Disposition.ACK
    harness.faults("")
    harness.clock.advance(10_000)
    assert [body["job_id"] for body in harness.bodies(wait_for_delay=True)] == [job_id]
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 0


def test_a_busy_users_jobs_all_finish_under_injected_conflicts(harness: Harness) -> None:
    # Given eight jobs of one user (each fails once: its retry is a transaction) and faults:
    # contention on every transaction one time in three, throttles and conflicts on single
    # writes — the user's slot item among them, taken and released by every claim and
    # outcome — and the sweeper's index reads throttled one time in two
    jobs = [harness.submit(owner=BOB, payload=steps({"fail_times": 1})) for _ in range(8)]
    harness.faults(
        "dynamodb.TransactWriteItems:TransactionConflict=0.33,"
        "dynamodb.UpdateItem:ThrottlingException=0.25,"
        "dynamodb.UpdateItem:TransactionConflictException=0.2,"
        "dynamodb.Query[by_state]:ThrottlingException=0.5"
    )
    # When workers deliver, the sweeper rescues and time passes, a bounded number of rounds
    for _ in range(60):
        if all(harness.state(job_id) == "succeeded" for job_id in jobs):
            break
        for job_id in jobs:
            harness.deliver_quietly(job_id)
        harness.clock.advance(LEASE_MS + 1)
        harness.sweep_quietly()
    # Then every one of them succeeded, each result saved once
    assert [harness.state(job_id) for job_id in jobs] == ["succeeded"] * 8
    assert harness.injected("TransactWriteItems:TransactionConflict") > 0
    assert harness.injected("UpdateItem:ThrottlingException") > 0
    assert harness.injected("UpdateItem:TransactionConflictException") > 0
    assert harness.injected("Query:ThrottlingException") > 0
    # A release lost to a throttle leaves an entry nobody holds; it never costs the user a
    # slot: once it is older than the grace, the next claim that finds the slots full frees it
    harness.faults("")
    stale = harness.store.running_slots(BOB)
    assert all(harness.state(job_id) == "succeeded" for job_id in stale)
    harness.clock.advance(2 * LEASE_MS + 1)
    fresh = [harness.submit(owner=BOB, payload=steps({})) for _ in range(2)]
    for job_id in fresh:
        harness.claim(job_id, f"holder-{job_id}", owner=BOB)
    assert harness.store.running_slots(BOB) == set(fresh)


# ------------------------------------------------------------------ store failures mid-step


def test_a_throttled_heartbeat_is_not_a_step_failure(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}))
    ticks: list[bool] = []

    def throttle_the_heartbeat(index: int, attempt: int, tick: Any) -> None:
        # The heartbeat (UpdateItem) fails past botocore's retries while the lease still holds
        harness.faults("dynamodb.UpdateItem:ThrottlingException=1")
        harness.clock.advance(LEASE_MS // 2)
        ticks.append(tick())
        harness.faults("")

    worker = harness.worker(
        kinds={"synthetic": ScriptedKind(throttle_the_heartbeat)}, heartbeat_every_ms=1_000
    )
    result = worker.handle(harness.wakeup(job_id))
    # Then the step went on (the lease was still valid) and the job succeeded on its first try
    assert ticks == [True]
    assert result.outcome == "succeeded"
    job = harness.store.get(job_id)
    assert job is not None and job.attempts == 1 and job.error is None


def test_a_heartbeat_that_fails_until_the_lease_ends_stops_the_step_without_a_retry(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({"effect": True, "cost": 1, "duration_ms": 300}))

    def throttle_until_the_lease_is_gone(index: int, attempt: int, tick: Any) -> None:
        # Every heartbeat the step makes from now on fails, and the lease runs out
        harness.faults("dynamodb.UpdateItem:ThrottlingException=1")
        harness.clock.advance(LEASE_MS + 1)

    worker = harness.worker(
        kinds={"synthetic": ScriptedKind(throttle_until_the_lease_is_gone)},
        heartbeat_every_ms=1_000,
    )
    result = worker.handle(harness.wakeup(job_id))
    harness.faults("")
    # Then the step was told to stop and nothing was written as a retry or a death
    assert result.outcome == "lease_lost" and result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.RUNNING and job.error is None
    # And the open effect is still on record, under an operation id that names the step
    assert job.effect_intent is not None and job.effect_intent["operation_id"] == f"{job_id}:0"
    harness.sweep()
    assert harness.state(job_id) == "unknown"


# ------------------------------------------------------------------ open effects are kept


def test_a_cancel_during_an_effect_step_keeps_the_effect_on_record(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"effect": True, "duration_ms": 300}, {"cost": 1}))

    def cancel_mid_effect(index: int, attempt: int, tick: Any) -> None:
        harness.jobs().cancel(ALICE, job_id)

    worker = harness.worker(
        kinds={"synthetic": ScriptedKind(cancel_mid_effect)}, heartbeat_every_ms=0
    )
    worker.handle(harness.wakeup(job_id))
    job = harness.store.get(job_id)
    # The provider call may have happened: the job says so instead of claiming "cancelled"
    assert job is not None and job.state is JobState.UNKNOWN and job.cancel_requested
    assert job.effect_intent is not None and job.effect_intent["operation_id"] == f"{job_id}:0"
    assert job.error is not None and job.error["code"] == "effect_uncertain"


@pytest.mark.parametrize("failure", [{"fatal": True}, {"fail_times": 1}])
def test_an_error_raised_in_an_effect_step_keeps_the_effect_on_record(
    harness: Harness, failure: dict[str, Any]
) -> None:
    job_id = harness.submit(payload=steps({"effect": True, **failure}))
    harness.worker().handle(harness.wakeup(job_id))
    job = harness.store.get(job_id)
    # Neither `failed` nor a retry under a new operation: the effect's outcome is uncertain
    assert job is not None and job.state is JobState.UNKNOWN
    assert job.effect_intent is not None and job.effect_intent["operation_id"] == f"{job_id}:0"
    assert harness.worker().handle(harness.wakeup(job_id)).outcome == "uncertain"
    assert harness.store.get(job_id) == job


# ------------------------------------------------------------------ the invocation's time


def test_a_record_is_not_claimed_when_a_lease_does_not_fit_in_the_invocation(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({}))
    result = harness.worker().handle(harness.wakeup(job_id), remaining_ms=lambda: LEASE_MS // 2)
    # Then the wake-up is handed to another invocation and the job is untouched
    assert result.outcome == "no_time" and result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 0
    assert [body["job_id"] for body in harness.bodies()] == [job_id]


def test_a_step_that_would_not_fit_is_handed_back_without_burning_the_attempt(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}, {"duration_ms": 5_000, "cost": 1}))
    remaining = [LEASE_MS + 2_000]

    def time_runs_out(index: int, attempt: int, tick: Any) -> None:
        remaining[0] = 3_000  # step 1 (5 s) no longer fits in what is left

    worker = harness.worker(kinds={"synthetic": ScriptedKind(time_runs_out)})
    result = worker.handle(harness.wakeup(job_id), remaining_ms=lambda: remaining[0])
    assert result.outcome == "handed_back" and result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED
    assert job.attempts == 0 and job.checkpoint.next_step == 1  # step 0 is kept
    # And the next invocation finishes it without running step 0 again
    harness.clock.advance(5_000)
    assert harness.worker("w2").handle(harness.wakeup(job_id)).outcome == "succeeded"
    done = harness.store.get(job_id)
    assert done is not None and done.attempts == 1 and done.checkpoint.steps_used == 2


# ------------------------------------------------------------------ bounded items, TTL


def test_replay_renews_the_ttl_and_operator_states_are_not_silently_expired(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({"fail_times": 9}), max_attempts=1)
    harness.worker().handle(harness.wakeup(job_id))
    dead = harness.raw(job_id)
    assert dead["state"] == "dead"
    assert dead["expires_at"] >= harness.clock.now_ms() // 1000 + 29 * 86400
    harness.clock.advance(2 * 86_400_000)
    harness.ops().replay(job_id, operator=harness.operator, body={"note": "retry"})
    replayed = harness.raw(job_id)
    assert replayed["expires_at"] >= harness.clock.now_ms() // 1000 + 29 * 86400
    # An uncertain effect waits for an operator for as long as it takes: no TTL at all
    effect_id = harness.submit(payload=steps({"effect": True, "fatal": True}))
    harness.worker().handle(harness.wakeup(effect_id))
    assert harness.raw(effect_id)["state"] == "unknown"
    assert "expires_at" not in harness.raw(effect_id)


def test_history_stays_bounded_over_many_fail_and_replay_cycles(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"fatal": True}))
    for _ in range(40):
        harness.worker().handle(harness.wakeup(job_id))
        harness.ops().replay(job_id, operator=harness.operator, body={"note": "again"})
    job = harness.store.get(job_id)
    assert job is not None and job.replays == 40
    assert len(job.history) <= 12
    assert harness.raw(job_id)["history_dropped"] >= 60


# ------------------------------------------------------------------ wake-ups


def test_a_job_waiting_for_a_slot_does_not_multiply_its_wakeups(harness: Harness) -> None:
    # Given bob holds both of his slots with two long-running jobs
    running = [harness.submit(owner=BOB, payload=steps({})) for _ in range(2)]
    for job_id in running:
        harness.claim(job_id, f"holder-{job_id}", owner=BOB, lease_ms=10**9)
    waiting = harness.submit(owner=BOB, payload=steps({}))
    # When the third job's wake-up meets the limit again and again (each re-sent copy comes
    # back after the slot wait, 1 s here) for longer than the sweeper's lost-wake-up grace
    for _ in range(6):
        assert harness.worker().handle(harness.wakeup(waiting)).outcome == "slots_full"
        harness.clock.advance(2_000)
        assert harness.sweep(grace_ms=5_000).get("redispatched", 0) == 0
    # Then only the re-sent wake-up circulates: the sweeper dispatched no copy of its own
    assert len(harness.outbox(waiting)) == 1  # the accept's
    copies = [b for b in harness.bodies(wait_for_delay=True) if b["job_id"] == waiting]
    assert len(copies) == 6
