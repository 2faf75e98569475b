"""How an attempt ends, and how a job nobody will finish is settled: every ending is one fenced
write (store/leases.py or store/upkeep.py) with one history entry and one metric."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    FatalStepError,
    ItemTooLargeError,
    RelatedItemChangedError,
    StepError,
)
from leasehold.domain.job import Job
from leasehold.domain.policies import RetryPolicy
from leasehold.domain.records import HistoryEntry
from leasehold.domain.sizes import ITEM_TOO_LARGE
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.storable import UNSTORABLE_OUTPUT, storable_error
from leasehold.domain.types import RawItem
from leasehold.domain.waits import approval_wait
from leasehold.service.fanin import child_ended
from leasehold.service.kinds import Attempt, Disposition, JobKind, StepPlan, WakeupResult
from leasehold.service.steps import (
    AwaitingApproval,
    BudgetExhausted,
    Failed,
    HandedBack,
    LeaseLost,
    Settled,
    Stopped,
    Uncertain,
)
from leasehold.service.telemetry import Telemetry
from leasehold.store import Stores
from leasehold.store.history import entry
from leasehold.store.leases import ClaimRejection, reconcilable
from leasehold.store.waits import WaitStore

logger = Logger(service="leasehold", child=True)

_METRIC = {
    JobState.FAILED: "JobsFailed",
    JobState.DEAD: "JobsDead",
    JobState.CANCELLED: "JobsCancelled",
    JobState.UNKNOWN: "JobsUnknown",
}


def attempt_entry(
    job: Job,
    event: str,
    state: JobState,
    at: int,
    reason: str | None,
    *,
    by: str | None = None,
    note: str | None = None,
) -> HistoryEntry:
    """The history entry of a change that ends the job's current attempt: who held it (attempt,
    epoch, worker, when it was claimed), the state it went to, why, and the open operation if
    any."""
    return entry(
        event,
        at=at,
        state=state.value,
        attempt=job.attempts,
        epoch=job.epoch,
        worker=job.lease_owner,
        started=job.claimed_at,
        reason=reason,
        by=by,
        note=note,
        operation_id=(job.effect_intent or {}).get("operation_id"),
    )


def effect_uncertain_error(job: Job, why: str = "the lease expired") -> dict[str, str]:
    """Why a job is `unknown`: names the operation an operator must reconcile."""
    operation = (job.effect_intent or {}).get("operation_id", "?")
    return {
        "code": "effect_uncertain",
        "message": f"{why} while external effect {operation} was in progress; whether it "
        "happened is unknown — check the provider, then resolve or replay",
    }


class Outcomes:
    def __init__(
        self,
        stores: Stores,
        clock: Clock,
        telemetry: Telemetry,
        retry: RetryPolicy,
        rng: random.Random,
        kinds: dict[str, JobKind] | None = None,
    ) -> None:
        self._kinds = kinds or {}
        self._leases = stores.leases
        self._upkeep = stores.upkeep
        self._waits = WaitStore(stores.table)
        self._clock = clock
        self._telemetry = telemetry
        self._retry = retry
        self._rng = rng

    # ------------------------------------------------------------------ a worker's own attempt

    def settle(self, attempt: Attempt, outcome: Settled) -> WakeupResult:
        """The one fenced write (or none) that a step's outcome comes to."""
        match outcome:
            case Failed(error):
                return self._failed(attempt, error)
            case Stopped(state, reason, error, note):
                if reason == StopReason.BUDGET_EXHAUSTED:
                    self._telemetry.count("BudgetExhausted")
                return self.stop(attempt, state, reason, error, note=note)
            case BudgetExhausted(message):
                return self.budget_stop(attempt, message)
            case Uncertain(why):
                return self.uncertain(attempt, why)
            case HandedBack(why):
                return self.hand_back(attempt, why)
            case AwaitingApproval(step, index):
                return self.pause(attempt, step, index)
            case LeaseLost():
                logger.warning("lease lost during the step", extra=attempt.log_keys)
                return WakeupResult(Disposition.ACK, "lease_lost")

    def _failed(self, attempt: Attempt, failed: StepError) -> WakeupResult:
        """A step raised. With an effect open (and not declared settled by the kind), its
        outcome is uncertain: a provider that can be asked (idempotent key, status lookup)
        lets the next attempt reconcile it — the retry keeps the operation open, and with no
        attempt left the job is `unknown`; any other makes the job `unknown`."""
        # A kind's error text is data the engine does not control: made storable once, here.
        error = storable_error({"code": failed.error_code, "message": str(failed)})
        said = error["message"]
        if attempt.job.effect_intent and not failed.effect_settled:
            if not reconcilable(attempt.job):
                return self.uncertain(attempt, f"the effect step failed: {said}")
            if failed.error_code in UNSTORABLE_OUTPUT:
                # The effect ran and returned what cannot be stored: running it again returns
                # the same, so no retry can settle it — an operator does, now.
                return self.uncertain(attempt, f"the effect step's output cannot be stored: {said}")
            if attempt.job.attempts >= attempt.job.max_attempts:
                # No attempt is left to ask the provider again: the open operation goes to an
                # operator with the job (`unknown` is kept for ever), never to `dead`'s expiry.
                return self.uncertain(
                    attempt, f"the effect step failed on the last attempt: {said}"
                )
            return self.retry_or_dead(attempt, error)
        if isinstance(failed, FatalStepError):
            return self.stop(attempt, JobState.FAILED, StopReason.HANDLER_ERROR, error)
        return self.retry_or_dead(attempt, error)

    def _ended(
        self,
        attempt: Attempt,
        event: str,
        state: JobState,
        reason: str | None,
        note: str | None = None,
    ) -> HistoryEntry:
        return attempt_entry(attempt.job, event, state, self._clock.now_ms(), reason, note=note)

    def _result(self, disposition_ack: str) -> WakeupResult:
        return WakeupResult(Disposition.ACK, disposition_ack)

    def succeed(self, attempt: Attempt, result: Any) -> WakeupResult:
        now = self._clock.now_ms()
        try:
            self._leases.finish(
                attempt.job,
                JobState.SUCCEEDED,
                now=now,
                checkpoint=attempt.checkpoint,
                result=result,
                settle_effect=True,
                history=self._ended(attempt, "succeeded", JobState.SUCCEEDED, None),
                also=attempt.kind.outcome_writes(
                    attempt.job, JobState.SUCCEEDED, result, None, now
                ),
            )
        except RelatedItemChangedError as changed:
            return self._related_changed(attempt, changed)
        self._telemetry.count("JobsSucceeded")
        logger.info("succeeded", extra=attempt.log_keys)
        child_ended(self._waits, attempt.job, JobState.SUCCEEDED, now, self._telemetry)
        return self._result(JobState.SUCCEEDED.value)

    def _related_changed(self, attempt: Attempt, changed: RelatedItemChangedError) -> WakeupResult:
        """An item that had to change with the outcome moved on (a bookmark deleted or given a
        new URL): nothing was written; the job ends `cancelled` with the kind's reason."""
        reason, error = attempt.kind.when_related_changed(attempt.job, changed)
        logger.info(
            "outcome refused by a related item", extra=attempt.log_keys | {"why": str(reason)}
        )
        return self.stop(attempt, JobState.CANCELLED, reason, error, related=False)

    def stop(
        self,
        attempt: Attempt,
        target: JobState,
        reason: str,
        error: dict[str, str] | None,
        *,
        related: bool = True,
        note: str | None = None,
        settle_effect: bool = False,
        shed: bool = False,
    ) -> WakeupResult:
        """End the attempt in `target` (failed, dead, cancelled, unknown) with `reason`.
        `settle_effect`: the step that opened an effect ran to its end, so its intent goes.
        `shed`: the kind's saved progress goes too (an item too large to end otherwise)."""
        now = self._clock.now_ms()
        also = attempt.kind.outcome_writes(attempt.job, target, None, error, now) if related else []
        try:
            self._leases.finish(
                attempt.job,
                target,
                now=now,
                checkpoint=attempt.checkpoint,
                error=error,
                stop_reason=reason,
                history=self._ended(attempt, "stopped", target, str(reason), note),
                also=also,
                settle_effect=settle_effect,
                shed=shed,
            )
        except RelatedItemChangedError as changed:
            return self._related_changed(attempt, changed)
        self._telemetry.count(_METRIC.get(target, "JobsStopped"))
        child_ended(self._waits, attempt.job, target, now, self._telemetry)
        logger.info(
            "stopped", extra=attempt.log_keys | {"state": target.value, "stop_reason": str(reason)}
        )
        return self._result(target.value)

    def handler_error(
        self,
        attempt: Attempt,
        error: dict[str, str],
        *,
        related: bool = True,
        settle_effect: bool = False,
    ) -> WakeupResult:
        """The kind's own code failed outside a step (its plan, its result hook, a result that
        cannot be stored) or the kind is not registered: `failed` / `handler_error`, once — a
        retry would fail the same way; an operator replays the job once it is fixed."""
        return self.stop(
            attempt,
            JobState.FAILED,
            StopReason.HANDLER_ERROR,
            error,
            related=related,
            settle_effect=settle_effect,
        )

    def too_large(
        self, attempt: Attempt, message: str, *, settle_effect: bool = False
    ) -> WakeupResult:
        """The job item would pass its size budget, or DynamoDB refused a write of it for size:
        `failed` / `item_too_large` with `message` (the part, the step and the sizes), written
        from the checkpoint the item holds. Should even that write be refused (an item that was
        already at the limit), it is tried once more without the outputs and the kind state;
        refused again, the message is let go all the same (its lease runs out for the sweeper)
        — a redelivery could only be refused again."""
        logger.error("job item too large", extra=attempt.log_keys | {"detail": message})
        error = {"code": ITEM_TOO_LARGE, "message": message[:500]}
        attempt.checkpoint = replace(attempt.job.checkpoint)  # what the item holds
        for shed in (False, True):
            try:
                return self.stop(
                    attempt,
                    JobState.FAILED,
                    StopReason.HANDLER_ERROR,
                    error,
                    settle_effect=settle_effect,
                    shed=shed,
                )
            except ItemTooLargeError:
                attempt.checkpoint = replace(attempt.checkpoint, outputs=[])
        logger.error("the failure itself was refused for size", extra=attempt.log_keys)
        return self._result(ITEM_TOO_LARGE)

    def budget_stop(self, attempt: Attempt, message: str) -> WakeupResult:
        self._telemetry.count("BudgetExhausted")
        return self.stop(
            attempt,
            JobState.FAILED,
            StopReason.BUDGET_EXHAUSTED,
            {"code": "budget_exhausted", "message": message},
        )

    def uncertain(self, attempt: Attempt, why: str) -> WakeupResult:
        """The step that opened an external effect ended some other way than by finishing: the
        effect may or may not have happened. The intent stays on record; nothing retries it."""
        self._telemetry.count("EffectsUnknown")
        return self.stop(
            attempt,
            JobState.UNKNOWN,
            StopReason.EFFECT_UNCERTAIN,
            effect_uncertain_error(attempt.job, why),
        )

    def pause(self, attempt: Attempt, step: StepPlan, index: int) -> WakeupResult:
        """Before a step that needs approval: the job waits for its approval's reserved signal,
        parked by the one parking path (`WaitStore.park`), `waiting_approval` (decision WF50)."""
        now = self._clock.now_ms()
        job = attempt.job
        attempt.job = self._waits.park(
            job,
            attempt.checkpoint,
            approval_wait(index, step.name, now, job.epoch),
            due_at=None,
            now=now,
            history=self._ended(
                attempt, "paused", JobState.WAITING_APPROVAL, f"approval of step {index}"
            ),
        )
        self._leases.release_slot(job)  # a waiting job holds no slot (C5)
        self._telemetry.count("JobsPaused")
        logger.info("waiting for approval", extra=attempt.log_keys | {"step": index})
        return self._result(JobState.WAITING_APPROVAL.value)

    def retry_or_dead(self, attempt: Attempt, error: dict[str, str]) -> WakeupResult:
        job = attempt.job
        if job.attempts >= job.max_attempts:
            return self.stop(attempt, JobState.DEAD, StopReason.ATTEMPTS_EXHAUSTED, error)
        now = self._clock.now_ms()
        retry_at = now + self._retry.delay_ms(job.attempts, self._rng)
        checkpoint = replace(attempt.checkpoint, step_failures=attempt.checkpoint.step_failures + 1)
        self._leases.finish(
            job,
            JobState.QUEUED,
            now=now,
            checkpoint=checkpoint,
            error=error,
            retry_at=retry_at,
            history=self._ended(attempt, "retry", JobState.QUEUED, error["code"]),
        )
        self._telemetry.count("JobsRetried")
        logger.info(
            "retry scheduled",
            extra=attempt.log_keys
            | {"step": attempt.checkpoint.next_step, "error": error["code"]}
            | {"retry_in_ms": retry_at - now},
        )
        return self._result("retry_scheduled")

    def hand_back(self, attempt: Attempt, why: str) -> WakeupResult:
        """Not enough of the invocation left for the next step: give the job back at once,
        checkpoint kept, attempt not burned; another invocation picks it up."""
        now = self._clock.now_ms()
        self._leases.hand_back(
            attempt.job,
            now=now,
            checkpoint=attempt.checkpoint,
            retry_at=now,
            history=self._ended(attempt, "handed_back", JobState.QUEUED, why),
        )
        self._telemetry.count("JobsHandedBack")
        logger.info("handed back", extra=attempt.log_keys | {"why": why})
        return self._result("handed_back")

    # ------------------------------------------------------------------ jobs nobody will finish

    def settle_abandoned(self, job: Job, reason: str, now: int, *, by: str) -> None:
        """A job a worker found it cannot claim and nobody else will finish: a lease expired
        over an open effect (→ `unknown`), a deadline passed (→ `dead`), or the last attempt's
        lease expired (→ `dead`). Shared by the worker (rejected claims) and the sweeper.
        Raises StaleEpochError when the job moved on meanwhile."""

        def ended(event: str, state: JobState, why: str) -> HistoryEntry:
            return attempt_entry(job, event, state, now, why, by=by)

        def expire(
            state: JobState, stop: str, error: dict[str, str], also: list[RawItem] | None = None
        ) -> None:
            """The expired lease settled to `state` for `stop`, in one fenced write."""
            self._upkeep.settle_expired_lease(
                job,
                state,
                now=now,
                stop_reason=stop,
                error=error,
                also=also,
                history=ended("lease_expired", state, str(stop)),
            )
            child_ended(self._waits, job, state, now, self._telemetry)

        open_effect = bool(job.effect_intent) and job.state is JobState.RUNNING
        if reason == ClaimRejection.EFFECT_OPEN or (
            open_effect and reason in {ClaimRejection.DEADLINE, ClaimRejection.EXHAUSTED}
        ):
            # An operation still open when no attempt (or no time) is left — whatever the
            # provider's capability — goes to an operator as `unknown`, kept for ever: never
            # to `dead`, whose expiry would take the only record of the effect with it.
            why = "the lease expired"
            if reason != ClaimRejection.EFFECT_OPEN:
                why = "the last attempt's lease expired (no attempt left to ask the provider)"
            expire(JobState.UNKNOWN, StopReason.EFFECT_UNCERTAIN, effect_uncertain_error(job, why))
            self._telemetry.count("JobsUnknown")
        elif reason == ClaimRejection.DEADLINE and job.state is JobState.QUEUED:
            self._upkeep.expire_queued(
                job,
                now=now,
                history=ended("deadline", JobState.DEAD, StopReason.DEADLINE_EXCEEDED.value),
            )
            child_ended(self._waits, job, JobState.DEAD, now, self._telemetry)
            self._telemetry.count("JobsDead")
        elif reason in {ClaimRejection.DEADLINE, ClaimRejection.EXHAUSTED}:
            deadline = reason == ClaimRejection.DEADLINE
            stop = StopReason.DEADLINE_EXCEEDED if deadline else StopReason.ATTEMPTS_EXHAUSTED
            message = (
                "the deadline passed while the last attempt's lease was held"
                if deadline
                else "the last attempt's lease expired without an outcome"
            )
            error = {"code": stop.value, "message": message}
            kind = self._kinds.get(job.kind)
            also = kind.outcome_writes(job, JobState.DEAD, None, error, now) if kind else []
            try:
                expire(JobState.DEAD, stop, error, also)
            except RelatedItemChangedError as changed:
                assert kind is not None
                why, why_error = kind.when_related_changed(job, changed)
                expire(JobState.CANCELLED, why, why_error)
            self._telemetry.count("JobsDead")
        elif reason == "rescue":
            self._upkeep.settle_expired_lease(
                job,
                JobState.QUEUED,
                now=now,
                history=ended("rescued", JobState.QUEUED, "lease expired"),
            )
