"""The worker's use case: claim a job from a wake-up, run its steps from the checkpoint under the
lease, save the outcome under the fence — and only then let the message go (arch §3.2–3.6).

What the store and the invocation may do to it (arch §3.9) is part of the contract:
- a store that stays unavailable (after the store's bounded retries) never turns into a step
  failure: the message is kept (or re-sent) and the lease, if any, runs out for the sweeper;
- a record is claimed only when a lease's worth of work fits in the invocation's remaining time,
  and a step that would not fit is handed back (checkpoint kept, attempt not burned) — as is a
  plain step whose invocation ends under it (it stops at its next heartbeat);
- an open external effect is never erased by anything but the completion of its own step: an
  error, a cancel or a lost lease in an effect step leaves the job `unknown`."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    ClaimRejectedError,
    FatalStepError,
    HandBackError,
    ItemTooLargeError,
    RateLimitedError,
    SlotsFullError,
    StaleEpochError,
    StepError,
    StepInterruptedError,
    StopJobError,
    StoreUnavailableError,
    TransientStepError,
)
from leasehold.domain.job import Checkpoint, Job, Owner
from leasehold.domain.limits import PAYLOAD_PREFIX, Limit, Rate, rate_keys, slot_keys
from leasehold.domain.policies import MAX_RESULT_BYTES, LeasePolicy, RetryPolicy
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.storable import UNSTORABLE_OUTPUT, storable_error
from leasehold.service.kinds import (
    Attempt,
    Disposition,
    JobKind,
    OperationLedger,
    RemainingMs,
    StepPlan,
    StepRuntime,
    WakeupResult,
    concurrency_of,
    rates_of,
)
from leasehold.service.outcomes import Outcomes, effect_uncertain_error
from leasehold.service.telemetry import Telemetry
from leasehold.service.versions import Changed, migration_of, on_resume
from leasehold.store import Stores
from leasehold.store.leases import ClaimRejection, reconcilable
from leasehold.store.queue import Wakeup, WakeupQueue

logger = Logger(service="leasehold", child=True)


@dataclass(frozen=True)
class WorkerSettings:
    worker_id: str
    lease: LeasePolicy
    retry: RetryPolicy
    slot_wait_ms: int
    heartbeat_every_ms: int
    resend_delay_s: tuple[int, int] = (2, 5)
    """A wake-up the store could not serve goes back to SQS this many seconds out (jittered)."""
    rate_hold_ms: int = 0
    """A wake-up over its kind's rate whose next start is due within this many milliseconds
    (in all, over its tries) is held: the invocation sleeps until the start is due and claims
    again, instead of a new message at least 1 s out (SQS's least delay), which kept a rate of
    2 a second near 1 (decision F3). 0 holds nothing. The worker function holds up to 1 s."""


class WorkerService:
    def __init__(
        self,
        stores: Stores,
        queue: WakeupQueue,
        kinds: dict[str, JobKind],
        clock: Clock,
        settings: WorkerSettings,
        telemetry: Telemetry,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._sleep = sleep
        self._leases = stores.leases
        self._jobs = stores.jobs
        self._ledger = stores.ledger
        self._limited = any(
            concurrency_of(kind) is not None or rates_of(kind) for kind in kinds.values()
        )
        """Whether some kind declares its own concurrency limits: then a wake-up's job is read
        before its claim, to know which slots it takes (decision F2)."""
        self._queue = queue
        self._kinds = kinds
        self._clock = clock
        self._settings = settings
        self._telemetry = telemetry
        self._rng = rng or random.Random()
        self._outcomes = Outcomes(stores, clock, telemetry, settings.retry, self._rng, kinds)

    # ------------------------------------------------------------------ claim

    def handle(
        self,
        wakeup: Wakeup,
        receipt_handle: str | None = None,
        remaining_ms: RemainingMs | None = None,
    ) -> WakeupResult:
        """Handle one wake-up. Safe for any message: duplicate, late, early or for a job that is
        long finished. `remaining_ms` is the invocation's time left (Lambda's context)."""
        lease_ms = self._settings.lease.lease_ms
        if remaining_ms is not None and remaining_ms() < lease_ms + self._margin():
            return self._hand_off(wakeup, "no_time", delay_s=0)
        now = self._clock.now_ms()
        held_ms = 0  # how long this wake-up has been held for its rate (F3)
        flow: dict[str, Any] | None = None
        try:
            while True:
                flow = self._flow(wakeup) if flow is None else flow
                try:
                    job = self._leases.claim(
                        wakeup.job_id,
                        wakeup.owner,
                        worker_id=self._settings.worker_id,
                        now=now,
                        lease_ms=lease_ms,
                        **flow,
                    )
                    break
                except RateLimitedError as limited:
                    wait_ms = max(1, limited.due_at - now)
                    fits = remaining_ms is None or (
                        remaining_ms() >= wait_ms + lease_ms + self._margin()
                    )
                    if held_ms + wait_ms > self._settings.rate_hold_ms or not fits:
                        raise
                    # Due sooner than SQS could bring it back: wait here and claim again,
                    # the job saying what it waits for meanwhile (once per wake-up).
                    self._telemetry.count("SlotWaits")  # a wait at claim, here in the worker
                    if not held_ms:
                        with contextlib.suppress(StoreUnavailableError):
                            self._leases.note_dispatch(
                                wakeup.job_id, now=now, waiting_for={"rate": limited.label}
                            )
                    self._sleep(wait_ms / 1000)
                    held_ms += wait_ms
                    now = self._clock.now_ms()
        except SlotsFullError as full:
            # Wait for a free slot without burning an attempt or spinning on this message; say
            # so on the job, or the sweeper would take the wait for a lost wake-up (D5).
            self._telemetry.count("SlotWaits")
            # (if even that fails, the re-sent wake-up still goes out; at worst the sweeper adds
            # a copy)
            waiting = {"concurrency": full.label} if full.label else None
            with contextlib.suppress(StoreUnavailableError):
                self._leases.note_dispatch(wakeup.job_id, now=now, waiting_for=waiting)
            delay_s = max(1, self._settings.slot_wait_ms // 1000)
            return self._hand_off(wakeup, "slots_full", delay_s=delay_s)
        except RateLimitedError as limited:
            # Over its kind's rate: back when the next start is due (F3), saying so on the job.
            self._telemetry.count("SlotWaits")  # a wait at claim; waiting_for says for what
            with contextlib.suppress(StoreUnavailableError):
                self._leases.note_dispatch(
                    wakeup.job_id, now=now, waiting_for={"rate": limited.label}
                )
            due_in_s = min(900, max(1, (limited.due_at - now + 999) // 1000))
            return self._hand_off(wakeup, "rate_limited", delay_s=due_in_s)
        except ClaimRejectedError as rejected:
            return self._on_rejected_claim(wakeup, rejected, receipt_handle, now)
        except StoreUnavailableError as unavailable:
            logger.warning(
                "claim: store unavailable",
                extra={"job_id": wakeup.job_id, "detail": str(unavailable)},
            )
            low, high = self._settings.resend_delay_s
            return self._hand_off(wakeup, "store_unavailable", delay_s=self._rng.randint(low, high))
        self._telemetry.count("JobsClaimed")
        return self._run(job, remaining_ms)

    def _flow(self, wakeup: Wakeup) -> dict[str, Any]:
        """The slots and rates the job's claim takes (F2, F3): `keys` None for the per-user
        default (a kind that declares no concurrency, or a job that is gone), else its kind's
        declared limits; `rates` its kind's rates. A job of a kind that declares any (or whose
        wake-up does not name its kind) is read first — one strongly consistent GetItem —
        unless its keys need no payload field; with no such kind registered nothing is read."""
        if not self._limited:
            return {}
        if wakeup.kind is not None:
            kind = self._kinds.get(wakeup.kind)
            limits, rates = concurrency_of(kind), rates_of(kind)
            if limits is None and not rates:
                return {}  # the message names a kind that declares nothing
            keyed = [limit.key for limit in limits or ()] + [rate.key for rate in rates]
            if not any(key.startswith(PAYLOAD_PREFIX) for key in keyed):
                # user, tenant and kind keys need only what the message says: nothing to read
                return _flow_of(limits, rates, wakeup.kind, wakeup.owner, {}, wakeup.job_id)
        job = self._jobs.get(wakeup.job_id)
        if job is None:
            return {}
        kind = self._kinds.get(job.kind)
        return _flow_of(
            concurrency_of(kind), rates_of(kind), job.kind, job.owner, job.payload, job.job_id
        )

    def _margin(self) -> int:
        return self._settings.lease.safety_margin_ms

    def _hand_off(self, wakeup: Wakeup, outcome: str, *, delay_s: int) -> WakeupResult:
        """Put the wake-up back on the queue as a new message `delay_s` out and let this one go
        (its receive count does not grow); if even SQS refuses, keep this one."""
        try:
            self._queue.send(replace(wakeup, delay_seconds=delay_s))
        except StoreUnavailableError:
            return WakeupResult(Disposition.KEEP, outcome)
        logger.info("wake-up handed off", extra={"job_id": wakeup.job_id, "why": outcome})
        return WakeupResult(Disposition.ACK, outcome)

    def _on_rejected_claim(
        self, wakeup: Wakeup, rejected: ClaimRejectedError, receipt_handle: str | None, now: int
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
                try:
                    self._queue.delay(receipt_handle, due_in_s, wakeup.priority)
                    return WakeupResult(Disposition.KEEP, reason)
                except StoreUnavailableError:
                    # Not hidden: SQS down, or the message is not on its priority's queue (a
                    # redrive by hand to the work queue; its receipt handle is refused there):
                    # a new one on the job's own queue, as without a receipt handle.
                    pass
            return self._hand_off(wakeup, reason, delay_s=min(900, due_in_s))
        try:
            self._outcomes.settle_abandoned(job, reason, now, by=self._settings.worker_id)
        except StaleEpochError:
            self._telemetry.count("StaleWritesRejected")
        except StoreUnavailableError:
            return WakeupResult(Disposition.KEEP, "store_unavailable")
        return WakeupResult(Disposition.ACK, reason)

    # ------------------------------------------------------------------ run

    def _run(self, job: Job, remaining_ms: RemainingMs | None) -> WakeupResult:
        kind = self._kinds.get(job.kind)
        attempt = Attempt(
            job=job,
            kind=kind or _NO_KIND,
            plan=[],
            checkpoint=replace(job.checkpoint, outputs=list(job.checkpoint.outputs)),
            last_beat=self._clock.now_ms(),
            remaining_ms=remaining_ms,
            log_keys={"job_id": job.job_id, "epoch": job.epoch, "attempt": job.attempts},
        )
        logger.info("claimed", extra=attempt.log_keys | {"step": attempt.checkpoint.next_step})
        try:
            unplanned = self._plan(attempt, kind)
            if unplanned is not None:
                return unplanned
            return self._run_steps(attempt.kind, attempt)
        except StaleEpochError as stale:
            self._telemetry.count("StaleWritesRejected")
            logger.warning("stale write rejected", extra=attempt.log_keys | {"detail": str(stale)})
            return WakeupResult(Disposition.ACK, "stale")
        except ItemTooLargeError as refused:
            # Belt and braces (the budget should have stopped it, leasehold.domain.sizes): a
            # retry would be refused again, so the job ends here and the message goes — never
            # re-delivered until it lands in the DLQ.
            index = attempt.job.checkpoint.next_step  # the step whose write was refused
            name = attempt.plan[index].name if index < len(attempt.plan) else "?"
            return self._outcomes.too_large(attempt, f"step {index} ('{name}'): {refused}")
        except StoreUnavailableError as unavailable:
            # Nothing could be saved: keep the message. The lease runs out and the sweeper (or a
            # redelivery) takes the job on from its last checkpoint — or to `unknown` if an
            # effect was open.
            logger.warning(
                "store unavailable; message kept",
                extra=attempt.log_keys | {"detail": str(unavailable)},
            )
            return WakeupResult(Disposition.KEEP, "store_unavailable")

    def _plan(self, attempt: Attempt, kind: JobKind | None) -> WakeupResult | None:
        """The job's steps, or its end when there are none to run: a kind this function does not
        register (a deployment whose LEASEHOLD_KINDS lost a module) or a plan that raises ends
        the job `failed` with the reason named — an operator replays it once it is fixed —
        rather than waiting out a lease on every attempt with the cause only in the logs."""
        if kind is None:
            logger.error("kind not registered", extra=attempt.log_keys | {"kind": attempt.job.kind})
            return self._outcomes.stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {
                    "code": "unknown_kind",
                    "message": f"kind {attempt.job.kind!r} is not registered by LEASEHOLD_KINDS",
                },
                related=False,
            )
        try:
            attempt.plan = kind.plan(attempt.job.payload)
        except Exception as failed:  # a planner's bug: said once, not retried for ever
            logger.exception("plan raised", extra=attempt.log_keys)
            return self._outcomes.stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "plan_failed", "message": f"planning raised {type(failed).__name__}"},
            )
        return self._resume(attempt, kind)

    def _resume(self, attempt: Attempt, kind: JobKind) -> WakeupResult | None:
        """Kind versions (arch §23, decisions KV1–KV4): a checkpoint is never run on under a
        step list whose finished part differs from the one it was made under. A change inside
        that part stops the job `failed` / `kind_changed` at once (`unknown` with an effect
        open) unless the kind declares a migration; a change after it runs on, the new list
        recorded in one fenced write before any step of it runs."""
        verdict = on_resume(attempt.job, kind.name, attempt.plan, migration_of(kind))
        if isinstance(verdict, Changed):
            logger.warning(
                "kind changed under the job",
                extra=attempt.log_keys
                | {"code": verdict.error["code"], "detail": verdict.error["message"]},
            )
            if verdict.effect_open:
                return self._outcomes.uncertain(attempt, verdict.why)
            return self._outcomes.stop(
                attempt, JobState.FAILED, StopReason.KIND_CHANGED, verdict.error
            )
        if verdict.write:
            attempt.job = self._leases.rebase(
                attempt.job,
                verdict.checkpoint,
                verdict.step_list,
                steps_total=len(attempt.plan),
                now=self._clock.now_ms(),
                lease_ms=self._settings.lease.lease_ms,
            )
            attempt.checkpoint = replace(
                verdict.checkpoint, outputs=list(verdict.checkpoint.outputs)
            )
            logger.info(
                "step list recorded",
                extra=attempt.log_keys
                | {"step": verdict.checkpoint.next_step, "migrated_from": verdict.migrated_from},
            )
        return None

    def _run_steps(self, kind: JobKind, attempt: Attempt) -> WakeupResult:
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
            outputs = [*checkpoint.outputs, output]
            outputs_bytes = sizes.json_bytes(outputs)
            if outputs_bytes > sizes.OUTPUTS_BUDGET:
                # Refused before the write that would carry it: the item keeps the last
                # checkpoint, and the step ran to its end (an effect it opened is settled).
                return self._outcomes.too_large(
                    attempt,
                    f"step {index} ('{step.name}') returned {sizes.json_bytes(output)} bytes; "
                    f"the job's step outputs would be {outputs_bytes} bytes, over their share "
                    f"of the job item ({sizes.OUTPUTS_BUDGET} bytes)",
                    settle_effect=True,
                )
            attempt.checkpoint = Checkpoint(
                next_step=index + 1,
                cost_used=checkpoint.cost_used + step.cost,
                steps_used=checkpoint.steps_used + 1,
                outputs=outputs,
                approved_step=checkpoint.approved_step,
                step_failures=0,
            )
            if index + 1 < total:
                attempt.job = self._leases.save_checkpoint(
                    attempt.job,
                    attempt.checkpoint,
                    now=self._clock.now_ms(),
                    lease_ms=self._settings.lease.lease_ms,
                )
                attempt.last_beat = self._clock.now_ms()
                logger.debug("checkpoint", extra=attempt.log_keys | {"step": index + 1})
        return self._succeed(attempt)

    def _check_before_step(
        self, attempt: Attempt, step: StepPlan, index: int
    ) -> WakeupResult | None:
        """Cancellation, deadline, the invocation's time, the lease, budget, then approval
        (arch §4 (the synthetic kind), §10)."""
        job, checkpoint, now = attempt.job, attempt.checkpoint, self._clock.now_ms()
        if job.cancel_requested:
            return self._outcomes.stop(
                attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None
            )
        if now >= job.deadline_at:
            return self._outcomes.stop(
                attempt,
                JobState.DEAD,
                StopReason.DEADLINE_EXCEEDED,
                {
                    "code": "deadline_exceeded",
                    "message": f"the deadline passed before step {index}",
                },
            )
        if attempt.remaining_ms is not None and (
            attempt.remaining_ms() < step.duration_ms + self._margin()
        ):
            return self._outcomes.hand_back(
                attempt, f"step {index} would not fit in the invocation"
            )
        if not self._settings.lease.may_start_step(
            now, job.lease_expires_at or 0, step.duration_ms
        ):
            attempt.job = self._leases.heartbeat(
                job, now=now, lease_ms=self._settings.lease.lease_ms
            )
            attempt.last_beat = now
            if attempt.job.cancel_requested:
                return self._outcomes.stop(
                    attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None
                )
        budget = job.budget
        if budget.max_steps is not None and checkpoint.steps_used + 1 > budget.max_steps:
            return self._outcomes.budget_stop(
                attempt, f"step {index} would pass max_steps {budget.max_steps}"
            )
        if budget.max_cost is not None and checkpoint.cost_used + step.cost > budget.max_cost:
            return self._outcomes.budget_stop(
                attempt,
                f"step {index} costs {step.cost}; {checkpoint.cost_used} of {budget.max_cost} used",
            )
        if step.needs_approval and checkpoint.approved_step != index:
            return self._outcomes.pause(attempt, step, index)
        return None

    def _run_one(self, kind: JobKind, attempt: Attempt, step: StepPlan, index: int) -> Any:
        if step.has_effect:
            now = self._clock.now_ms()
            # Stable across attempts, workers and replays of the same work (arch §6).
            operation_id = f"{attempt.job.job_id}:{index}"
            attempt.job = self._leases.record_effect_intent(
                attempt.job,
                {
                    "operation_id": operation_id,
                    "idempotency_key": operation_id,
                    "step": index,
                    "started_at": now,
                },
                now=now,
            )
            self._telemetry.count("EffectsSubmitted")
            logger.info(
                "effect intent recorded", extra=attempt.log_keys | {"operation_id": operation_id}
            )
        try_number = attempt.checkpoint.step_failures + 1
        context = StepRuntime(
            attempt,
            lambda: self._tick(attempt),
            OperationLedger(attempt, self._ledger, self._clock, self._telemetry),
            self._clock,
            self._telemetry,
            save=lambda job, state: self._leases.save_progress(
                job, state, now=self._clock.now_ms(), lease_ms=self._settings.lease.lease_ms
            ),
            step_index=index,
            step_try=try_number,
            safety_margin_ms=self._margin(),
        )
        try:
            return kind.run_step(attempt.job.payload, index, try_number, context)
        except (StoreUnavailableError, StaleEpochError, ItemTooLargeError):
            raise  # the store's answer to the step's own write (progress, the ledger)
        except StepInterruptedError:
            if attempt.lease_lost:
                logger.warning("lease lost during the step", extra=attempt.log_keys)
                return WakeupResult(Disposition.ACK, "lease_lost")
            if attempt.out_of_time and not attempt.job.cancel_requested:
                return self._outcomes.hand_back(
                    attempt, f"the invocation ended during step {index}"
                )
            if attempt.job.effect_intent:
                return self._outcomes.uncertain(attempt, "a cancel interrupted the effect step")
            return self._outcomes.stop(
                attempt, JobState.CANCELLED, StopReason.CANCELLED_BY_USER, None
            )
        except StepError as failed:
            return self._step_failed(attempt, failed)
        except StopJobError as stop:
            if stop.reason == StopReason.BUDGET_EXHAUSTED:
                self._telemetry.count("BudgetExhausted")
            return self._outcomes.stop(
                attempt,
                JobState(stop.state),
                str(stop.reason),
                storable_error(
                    {"code": stop.error_code, "message": str(stop), **_flat(stop.record)}
                ),
                note=_history_note(stop.record),
            )
        except HandBackError as short:
            return self._outcomes.hand_back(attempt, str(short))
        except Exception as unexpected:  # a bug in a kind is retried, never lost
            logger.exception("step raised", extra=attempt.log_keys)
            return self._step_failed(
                attempt,
                TransientStepError(
                    f"the step raised {type(unexpected).__name__}", error_code="unexpected_error"
                ),
            )

    def _step_failed(self, attempt: Attempt, failed: StepError) -> WakeupResult:
        """A step raised. With an effect open (and not declared settled by the kind), its
        outcome is uncertain: a provider that can be asked (idempotent key, status lookup)
        lets the next attempt reconcile it — the retry keeps the operation open, and with no
        attempt left the job is `unknown`; any other makes the job `unknown`."""
        # A kind's error text is data the engine does not control: made storable once, here.
        error = storable_error({"code": failed.error_code, "message": str(failed)})
        said = error["message"]
        if attempt.job.effect_intent and not failed.effect_settled:
            if not reconcilable(attempt.job):
                return self._outcomes.uncertain(attempt, f"the effect step failed: {said}")
            if failed.error_code in UNSTORABLE_OUTPUT:
                # The effect ran and returned what cannot be stored: running it again returns
                # the same, so no retry can settle it — an operator does, now.
                return self._outcomes.uncertain(
                    attempt, f"the effect step's output cannot be stored: {said}"
                )
            if attempt.job.attempts >= attempt.job.max_attempts:
                # No attempt is left to ask the provider again: the open operation goes to an
                # operator with the job (`unknown` is kept for ever), never to `dead`'s expiry.
                return self._outcomes.uncertain(
                    attempt, f"the effect step failed on the last attempt: {said}"
                )
            return self._outcomes.retry_or_dead(attempt, error)
        if isinstance(failed, FatalStepError):
            return self._outcomes.stop(attempt, JobState.FAILED, StopReason.HANDLER_ERROR, error)
        return self._outcomes.retry_or_dead(attempt, error)

    def _tick(self, attempt: Attempt) -> bool:
        """Heartbeat while a step runs; False tells the step to stop (lease lost or cancel). A
        heartbeat the store could not take is tried again at the next tick while the lease
        still holds — the step goes on; it is never counted as the step failing."""
        now = self._clock.now_ms()
        if now - attempt.last_beat >= self._settings.heartbeat_every_ms:
            try:
                attempt.job = self._leases.heartbeat(
                    attempt.job, now=now, lease_ms=self._settings.lease.lease_ms
                )
                attempt.last_beat = now
            except StaleEpochError as stale:
                # A late worker's heartbeat refused by the fence: a stale write like any other
                # (arch §3.3), counted and logged as one; the step stops.
                self._telemetry.count("StaleWritesRejected")
                logger.warning(
                    "stale write rejected",
                    extra=attempt.log_keys | {"write": "heartbeat", "detail": str(stale)},
                )
                attempt.lease_lost = True
                return False
            except StoreUnavailableError:
                self._telemetry.count("HeartbeatsFailed")
                logger.warning(
                    "heartbeat failed; retrying while the lease holds", extra=attempt.log_keys
                )
        if (attempt.job.lease_expires_at or 0) <= now + self._margin() // 2:
            attempt.lease_lost = True
            return False
        if (
            attempt.remaining_ms is not None
            and not attempt.job.effect_intent  # an effect in flight runs to its end
            and attempt.remaining_ms() <= self._margin() // 2
        ):
            # The invocation is ending under the step (Lambda's timeout is near; the local
            # stack's worker was asked to stop): stop now and hand the job back, attempt not
            # burned, rather than be killed holding the lease and spend it.
            attempt.out_of_time = True
            return False
        return not attempt.job.cancel_requested

    def _succeed(self, attempt: Attempt) -> WakeupResult:
        try:
            result = attempt.kind.result(attempt.job, attempt.checkpoint)
        except Exception as failed:  # every step ran; the kind's result hook did not
            logger.exception("result raised", extra=attempt.log_keys)
            return self._outcomes.stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "result_failed", "message": f"the result raised {type(failed).__name__}"},
                settle_effect=True,  # every step ran to its end, an effect step's included
            )
        try:
            size = len(json.dumps(result, separators=(",", ":"), allow_nan=False).encode())
        except (TypeError, ValueError) as exc:
            return self._outcomes.stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "result_not_json", "message": f"the result is not JSON: {exc}"[:500]},
            )
        if size > MAX_RESULT_BYTES:
            return self._outcomes.stop(
                attempt,
                JobState.FAILED,
                StopReason.HANDLER_ERROR,
                {"code": "result_too_large", "message": f"result over {MAX_RESULT_BYTES} bytes"},
            )
        return self._outcomes.succeed(attempt, result)


def _flow_of(
    limits: tuple[Limit, ...] | None,
    rates: tuple[Rate, ...],
    kind: str,
    owner: Owner,
    payload: dict[str, Any],
    job_id: str,
) -> dict[str, Any]:
    flow: dict[str, Any] = {}
    if limits is not None:
        flow["keys"] = slot_keys(limits, kind, owner, payload, job_id, strict=False)
    if rates:
        flow["rates"] = rate_keys(rates, kind, owner, payload, strict=False)
    return flow


class _Unregistered:
    """Stands in for a kind this function does not register, only to end its job: it plans
    nothing and writes nothing beside the outcome."""

    name = ""
    max_payload_bytes = 0
    submittable = False
    default_max_attempts: int | None = None
    operators_see_payload = False

    def validate_for(self, payload: dict[str, Any], owner: Any) -> None:
        raise AssertionError("an unregistered kind accepts nothing")

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        return []

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, ctx: Any) -> Any:
        raise AssertionError("an unregistered kind runs nothing")

    def result(self, job: Job, checkpoint: Any) -> Any:
        return None

    def outcome_writes(self, *args: Any) -> list[dict[str, Any]]:
        return []

    def when_related_changed(self, job: Job, changed: Any) -> tuple[str, dict[str, str]]:
        raise changed

    def view_fields(self, job: Job) -> dict[str, Any]:
        return {}

    def related(self, job: Job) -> dict[str, Any]:
        return {}


_NO_KIND = _Unregistered()


def _history_note(record: dict[str, Any]) -> str | None:
    """What the history says of a kind's stop (`tool=send_email reason=tool_not_allowed`): the
    record's short fields, not its message (the job's error has that)."""
    parts = [f"{k}={v}" for k, v in _flat(record).items() if k not in {"event", "message"}]
    return " ".join(parts) or None


def _flat(record: dict[str, Any]) -> dict[str, str]:
    """A kind's record for the job's error: strings only, bounded (the view shows it)."""
    return {
        str(k)[:40]: str(v)[:200]
        for k, v in list(record.items())[:8]
        if k not in {"code", "message"}
    }


__all__ = [
    "Attempt",
    "Disposition",
    "WakeupResult",
    "WorkerService",
    "WorkerSettings",
    "effect_uncertain_error",
]
