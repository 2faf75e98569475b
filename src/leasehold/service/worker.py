"""The worker's use case: claim a job from a wake-up, run its steps from the checkpoint under the
lease, save the outcome under the fence — and only then let the message go (DESIGN §3.2–3.6)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    ClaimRejectedError,
    FatalStepError,
    SlotsFullError,
    StaleEpochError,
    StepInterruptedError,
    TransientStepError,
)
from leasehold.domain.job import Checkpoint, Job
from leasehold.domain.policies import MAX_RESULT_BYTES, LeasePolicy, RetryPolicy
from leasehold.domain.states import JobState, StopReason
from leasehold.kinds import JobKind, StepPlan
from leasehold.service.telemetry import Telemetry
from leasehold.store.jobs import ClaimRejection, JobStore
from leasehold.store.queue import Wakeup, WakeupQueue

logger = Logger(service="leasehold", child=True)


class Disposition(StrEnum):
    ACK = "ack"
    """The job item says all there is to say: the message may be deleted."""
    KEEP = "keep"
    """Report the message as failed so SQS keeps it (it was re-delayed, or the store failed)."""


@dataclass(frozen=True)
class WakeupResult:
    disposition: Disposition
    outcome: str


@dataclass(frozen=True)
class WorkerSettings:
    worker_id: str
    lease: LeasePolicy
    retry: RetryPolicy
    slot_wait_ms: int
    heartbeat_every_ms: int


@dataclass
class _Attempt:
    """The state of one claimed attempt as this worker last saw it."""

    job: Job
    plan: list[StepPlan]
    checkpoint: Checkpoint
    last_beat: int
    lease_lost: bool = False
    log_keys: dict[str, Any] = field(default_factory=dict)


class WorkerService:
    def __init__(
        self,
        store: JobStore,
        queue: WakeupQueue,
        kinds: dict[str, JobKind],
        clock: Clock,
        settings: WorkerSettings,
        telemetry: Telemetry,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._kinds = kinds
        self._clock = clock
        self._settings = settings
        self._telemetry = telemetry
        self._rng = rng or random.Random()

    # ------------------------------------------------------------------ claim

    def handle(self, wakeup: Wakeup, receipt_handle: str | None = None) -> WakeupResult:
        """Handle one wake-up. Safe for any message: duplicate, late, early or for a job that is
        long finished. StoreUnavailableError propagates: the caller keeps the message."""
        now = self._clock.now_ms()
        try:
            job = self._store.claim(
                wakeup.job_id,
                wakeup.owner,
                worker_id=self._settings.worker_id,
                now=now,
                lease_ms=self._settings.lease.lease_ms,
            )
        except SlotsFullError:
            # Wait for a free slot without burning an attempt or spinning on this message.
            delay_s = max(1, self._settings.slot_wait_ms // 1000)
            self._queue.send(replace(wakeup, delay_seconds=delay_s))
            self._telemetry.count("SlotWaits")
            logger.info("per-user limit reached; wake-up re-sent", extra={"job_id": wakeup.job_id})
            return WakeupResult(Disposition.ACK, "slots_full")
        except ClaimRejectedError as rejected:
            return self._on_rejected_claim(wakeup, rejected, receipt_handle, now)
        self._telemetry.count("JobsClaimed")
        return self._run(job)

    def _on_rejected_claim(
        self,
        wakeup: Wakeup,
        rejected: ClaimRejectedError,
        receipt_handle: str | None,
        now: int,
    ) -> WakeupResult:
        job = rejected.job if isinstance(rejected.job, Job) else None
        reason = rejected.reason
        extra: dict[str, Any] = {"job_id": wakeup.job_id, "reason": reason}
        if job is not None:
            extra |= {"epoch": job.epoch, "attempt": job.attempts, "state": job.state.value}
        self._telemetry.count("ClaimConflicts")
        logger.info("claim rejected", extra=extra)
        if job is None or reason in {
            ClaimRejection.TERMINAL,
            ClaimRejection.PAUSED,
            ClaimRejection.UNCERTAIN,
            ClaimRejection.LEASED,
        }:
            return WakeupResult(Disposition.ACK, reason)
        if reason == ClaimRejection.NOT_DUE:
            due_in_s = ((job.next_attempt_at or now) - now + 999) // 1000
            if receipt_handle is not None:
                self._queue.delay(receipt_handle, due_in_s)
                return WakeupResult(Disposition.KEEP, reason)
            self._queue.send(replace(wakeup, delay_seconds=min(900, due_in_s)))
            return WakeupResult(Disposition.ACK, reason)
        try:
            if reason == ClaimRejection.EFFECT_OPEN:
                self._store.settle_expired_lease(
                    job,
                    JobState.UNKNOWN,
                    now=now,
                    stop_reason=StopReason.EFFECT_UNCERTAIN,
                    error=effect_uncertain_error(job),
                )
                self._telemetry.count("JobsUnknown")
            elif reason == ClaimRejection.DEADLINE and job.state is JobState.QUEUED:
                self._store.expire_queued(job, now=now)
                self._telemetry.count("JobsDead")
            elif reason in {ClaimRejection.DEADLINE, ClaimRejection.EXHAUSTED}:
                deadline = reason == ClaimRejection.DEADLINE
                self._store.settle_expired_lease(
                    job,
                    JobState.DEAD,
                    now=now,
                    stop_reason=StopReason.DEADLINE_EXCEEDED
                    if deadline
                    else StopReason.ATTEMPTS_EXHAUSTED,
                    error={
                        "code": "deadline_exceeded" if deadline else "attempts_exhausted",
                        "message": "the last attempt's lease expired without an outcome",
                    },
                )
                self._telemetry.count("JobsDead")
        except StaleEpochError:
            self._telemetry.count("StaleWritesRejected")
        return WakeupResult(Disposition.ACK, reason)

    # ------------------------------------------------------------------ run

    def _run(self, job: Job) -> WakeupResult:
        kind = self._kinds[job.kind]
        attempt = _Attempt(
            job=job,
            plan=kind.plan(job.payload),
            checkpoint=replace(job.checkpoint, outputs=list(job.checkpoint.outputs)),
            last_beat=self._clock.now_ms(),
            log_keys={"job_id": job.job_id, "epoch": job.epoch, "attempt": job.attempts},
        )
        logger.info("claimed", extra=attempt.log_keys | {"step": attempt.checkpoint.next_step})
        try:
            return self._run_steps(kind, attempt)
        except StaleEpochError as stale:
            self._telemetry.count("StaleWritesRejected")
            logger.warning("stale write rejected", extra=attempt.log_keys | {"detail": str(stale)})
            return WakeupResult(Disposition.ACK, "stale")

    def _run_steps(self, kind: JobKind, attempt: _Attempt) -> WakeupResult:
        total = len(attempt.plan)
        while attempt.checkpoint.next_step < total:
            index = attempt.checkpoint.next_step
            step = attempt.plan[index]
            stop = self._check_before_step(attempt, step, index)
            if stop is not None:
                return stop
            output = self._run_one(kind, attempt, step, index)
            if isinstance(output, WakeupResult):
                return output
            checkpoint = attempt.checkpoint
            attempt.checkpoint = Checkpoint(
                next_step=index + 1,
                cost_used=checkpoint.cost_used + step.cost,
                steps_used=checkpoint.steps_used + 1,
                outputs=[*checkpoint.outputs, output],
                approved_step=checkpoint.approved_step,
                step_failures=0,
            )
            if index + 1 < total:
                attempt.job = self._store.save_checkpoint(
                    attempt.job,
                    attempt.checkpoint,
                    now=self._clock.now_ms(),
                    lease_ms=self._settings.lease.lease_ms,
                )
                attempt.last_beat = self._clock.now_ms()
                logger.info("checkpoint", extra=attempt.log_keys | {"step": index + 1})
        return self._succeed(attempt)

    def _check_before_step(
        self, attempt: _Attempt, step: StepPlan, index: int
    ) -> WakeupResult | None:
        """Cancellation, deadline, remaining lease and budget, then approval (DESIGN §5)."""
        job, checkpoint, now = attempt.job, attempt.checkpoint, self._clock.now_ms()
        if job.cancel_requested:
            return self._stop(attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None)
        if now >= job.deadline_at:
            return self._stop(
                attempt,
                JobState.DEAD,
                StopReason.DEADLINE_EXCEEDED,
                {"code": "deadline_exceeded", "message": f"deadline passed before step {index}"},
            )
        if not self._settings.lease.may_start_step(
            now, job.lease_expires_at or 0, step.duration_ms
        ):
            attempt.job = self._store.heartbeat(
                job, now=now, lease_ms=self._settings.lease.lease_ms
            )
            attempt.last_beat = now
            if attempt.job.cancel_requested:
                return self._stop(attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None)
        budget = job.budget
        if budget.max_steps is not None and checkpoint.steps_used + 1 > budget.max_steps:
            return self._budget_stop(
                attempt, f"step {index} would pass max_steps {budget.max_steps}"
            )
        if budget.max_cost is not None and checkpoint.cost_used + step.cost > budget.max_cost:
            return self._budget_stop(
                attempt,
                f"step {index} costs {step.cost}; {checkpoint.cost_used} of {budget.max_cost} used",
            )
        if step.needs_approval and checkpoint.approved_step != index:
            self._store.finish(
                job,
                JobState.WAITING_APPROVAL,
                now=now,
                checkpoint=checkpoint,
                approval={"step": index, "step_name": step.name, "requested_at": now},
            )
            self._telemetry.count("JobsPaused")
            logger.info("waiting for approval", extra=attempt.log_keys | {"step": index})
            return WakeupResult(Disposition.ACK, JobState.WAITING_APPROVAL.value)
        return None

    def _run_one(
        self, kind: JobKind, attempt: _Attempt, step: StepPlan, index: int
    ) -> Any | WakeupResult:
        if step.has_effect:
            operation_id = f"{attempt.job.job_id}:{attempt.job.epoch}:{index}"
            attempt.job = self._store.record_effect_intent(
                attempt.job,
                {
                    "operation_id": operation_id,
                    "idempotency_key": f"{attempt.job.job_id}:step:{index}",
                    "step": index,
                    "started_at": self._clock.now_ms(),
                },
                now=self._clock.now_ms(),
            )
            logger.info(
                "effect intent recorded", extra=attempt.log_keys | {"operation_id": operation_id}
            )
        try_number = attempt.checkpoint.step_failures + 1
        try:
            return kind.run_step(
                attempt.job.payload, index, try_number, lambda: self._tick(attempt)
            )
        except StepInterruptedError:
            if attempt.lease_lost:
                raise StaleEpochError("the lease was lost during the step") from None
            return self._stop(attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None)
        except FatalStepError as fatal:
            return self._stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "handler_error", "message": str(fatal)[:500]},
            )
        except TransientStepError as transient:
            return self._retry_or_dead(
                attempt, {"code": "transient_error", "message": str(transient)[:500]}
            )
        except Exception as unexpected:  # a bug in a kind is retried, never lost
            logger.exception("step raised", extra=attempt.log_keys)
            return self._retry_or_dead(
                attempt, {"code": "unexpected_error", "message": f"{type(unexpected).__name__}"}
            )

    def _tick(self, attempt: _Attempt) -> bool:
        """Heartbeat while a step runs; False tells the step to stop (lease lost or cancel)."""
        now = self._clock.now_ms()
        if now - attempt.last_beat >= self._settings.heartbeat_every_ms:
            try:
                attempt.job = self._store.heartbeat(
                    attempt.job, now=now, lease_ms=self._settings.lease.lease_ms
                )
            except StaleEpochError:
                attempt.lease_lost = True
                return False
            attempt.last_beat = now
        if (attempt.job.lease_expires_at or 0) <= now:
            attempt.lease_lost = True
            return False
        return not attempt.job.cancel_requested

    # ------------------------------------------------------------------ outcomes

    def _succeed(self, attempt: _Attempt) -> WakeupResult:
        checkpoint = attempt.checkpoint
        result = {
            "steps_completed": checkpoint.steps_used,
            "cost_used": checkpoint.cost_used,
            "outputs": checkpoint.outputs,
        }
        if len(json.dumps(result, separators=(",", ":")).encode()) > MAX_RESULT_BYTES:
            return self._stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "result_too_large", "message": f"result over {MAX_RESULT_BYTES} bytes"},
            )
        self._store.finish(
            attempt.job,
            JobState.SUCCEEDED,
            now=self._clock.now_ms(),
            checkpoint=checkpoint,
            result=result,
        )
        self._telemetry.count("JobsSucceeded")
        logger.info("succeeded", extra=attempt.log_keys)
        return WakeupResult(Disposition.ACK, JobState.SUCCEEDED.value)

    def _budget_stop(self, attempt: _Attempt, message: str) -> WakeupResult:
        self._telemetry.count("BudgetExhausted")
        return self._stop(
            attempt,
            JobState.FAILED,
            StopReason.BUDGET_EXHAUSTED,
            {"code": "budget_exhausted", "message": message},
        )

    def _stop(
        self,
        attempt: _Attempt,
        target: JobState,
        reason: StopReason,
        error: dict[str, str] | None,
    ) -> WakeupResult:
        now = self._clock.now_ms()
        self._store.finish(
            attempt.job,
            target,
            now=now,
            checkpoint=attempt.checkpoint,
            error=error,
            stop_reason=reason,
            history_entry=_history(attempt.job, target, reason.value, now),
        )
        self._telemetry.count(
            {
                JobState.FAILED: "JobsFailed",
                JobState.DEAD: "JobsDead",
                JobState.CANCELLED: "JobsCancelled",
            }.get(target, "JobsStopped")
        )
        logger.info(
            "stopped", extra=attempt.log_keys | {"state": target.value, "stop_reason": reason.value}
        )
        return WakeupResult(Disposition.ACK, target.value)

    def _retry_or_dead(self, attempt: _Attempt, error: dict[str, str]) -> WakeupResult:
        job = attempt.job
        if job.attempts >= job.max_attempts:
            return self._stop(attempt, JobState.DEAD, StopReason.ATTEMPTS_EXHAUSTED, error)
        now = self._clock.now_ms()
        retry_at = now + self._settings.retry.delay_ms(job.attempts, self._rng)
        checkpoint = replace(attempt.checkpoint, step_failures=attempt.checkpoint.step_failures + 1)
        self._store.finish(
            job,
            JobState.QUEUED,
            now=now,
            checkpoint=checkpoint,
            error=error,
            retry_at=retry_at,
            history_entry=_history(job, JobState.QUEUED, error["code"], now),
        )
        self._telemetry.count("JobsRetried")
        logger.info("retry scheduled", extra=attempt.log_keys | {"retry_in_ms": retry_at - now})
        return WakeupResult(Disposition.ACK, "retry_scheduled")


def effect_uncertain_error(job: Job) -> dict[str, str]:
    """Why a job is `unknown`: names the operation an operator must reconcile."""
    operation = (job.effect_intent or {}).get("operation_id", "?")
    return {
        "code": "effect_uncertain",
        "message": f"the lease expired while external effect {operation} was in progress; "
        "whether it happened is unknown — reconcile, then resolve or replay",
    }


def _history(job: Job, target: JobState, why: str, now: int) -> dict[str, Any]:
    return {
        "attempt": job.attempts,
        "epoch": job.epoch,
        "outcome": target.value,
        "why": why,
        "at": now,
    }
