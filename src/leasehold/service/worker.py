"""The worker's use case: claim a job from a wake-up, run its steps from the checkpoint under the
lease, save the outcome under the fence — and only then let the message go (docs/architecture.md
rules 2–6).

It has three rooms, as River's producer, executor and completer: claiming
(service/claiming.py), running a step (here: each step comes to one `StepOutcome`,
service/steps.py), and settling outcomes (service/outcomes.py, the one place that turns an
outcome into its fenced write).

What the store and the invocation may do to it (docs/architecture.md rule 9) is part of the
contract:
- a store that stays unavailable (after the store's bounded retries) never turns into a step
  failure: the message is kept (or re-sent) and the lease, if any, runs out for the sweeper;
- a record is claimed only when a lease's worth of work fits in the invocation's remaining time,
  and a step that would not fit is handed back (checkpoint kept, attempt not burned) — as is a
  plain step whose invocation ends under it (it stops at its next heartbeat);
- an open external effect is never erased by anything but the completion of its own step: an
  error, a cancel or a lost lease in an effect step leaves the job `unknown`."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import replace

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    HandBackError,
    ItemTooLargeError,
    StaleEpochError,
    StepError,
    StepInterruptedError,
    StopJobError,
    StoreUnavailableError,
    TransientStepError,
)
from leasehold.domain.job import Checkpoint, Job
from leasehold.domain.policies import MAX_RESULT_BYTES
from leasehold.domain.records import EffectIntent
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.storable import storable_error
from leasehold.domain.types import JsonObject
from leasehold.service.claiming import Claiming, WorkerParts, WorkerSettings
from leasehold.service.kinds import (
    Attempt,
    Disposition,
    JobKind,
    LeaseKeeper,
    RemainingMs,
    StepPlan,
    WakeupResult,
)
from leasehold.service.outcomes import Outcomes, effect_uncertain_error
from leasehold.service.steps import (
    AwaitingApproval,
    BudgetExhausted,
    Completed,
    Failed,
    HandedBack,
    LeaseLost,
    Settled,
    StepOutcome,
    Stopped,
    Uncertain,
    cancelled,
)
from leasehold.service.telemetry import Telemetry
from leasehold.service.tracing import SpanKind, job_attributes, span_under, trace_id_of
from leasehold.service.unregistered import Unregistered
from leasehold.service.versions import Changed, on_resume
from leasehold.service.workflows import Workflows
from leasehold.store import Stores
from leasehold.store.queue import Wakeup, WakeupQueue

logger = Logger(service="leasehold", child=True)


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
        self._leases = stores.leases
        self._blobs = stores.table.blobs
        self._keeper = LeaseKeeper(
            stores.leases,
            stores.ledger,
            clock,
            telemetry,
            settings.lease,
            settings.heartbeat_every_ms,
        )
        self._kinds = kinds
        self._clock = clock
        self._settings = settings
        self._telemetry = telemetry
        rng = rng or random.Random()
        self._outcomes = Outcomes(stores, clock, telemetry, settings.retry, rng, kinds)
        self._flows = Workflows(stores, clock, kinds, telemetry)
        self._queue = queue
        parts = WorkerParts(stores, queue, kinds, clock, settings, telemetry, rng, sleep)
        self._claiming = Claiming(parts, self._outcomes)

    # ------------------------------------------------------------------ claim

    def handle(
        self,
        wakeup: Wakeup,
        receipt_handle: str | None = None,
        remaining_ms: RemainingMs | None = None,
    ) -> WakeupResult:
        """Handle one wake-up. Safe for any message: duplicate, late, early or for a job that is
        long finished. `remaining_ms` is the invocation's time left (Lambda's context).

        A span of the job's trace (the message's `traceparent`, decision TR3): `leasehold.attempt`
        with the attempt and epoch once claimed, `leasehold.wakeup` when nothing was claimed."""
        if wakeup.cascade is not None:  # a parent's end: cancel its unfinished children (WF6)
            try:
                return self._flows.cascade(wakeup, self._queue.send)
            except StoreUnavailableError:
                return WakeupResult(Disposition.KEEP, "store_unavailable")
        with span_under(
            "leasehold.attempt",
            wakeup.traceparent,
            kind=SpanKind.CONSUMER,
            attributes={"leasehold.function": "worker", **job_attributes(wakeup.job_id)},
        ) as span:
            claimed = self._claiming.claim(wakeup, receipt_handle, remaining_ms)
            if isinstance(claimed, WakeupResult):
                span.update_name("leasehold.wakeup")
                span.set_attribute("leasehold.outcome", claimed.outcome)
                return claimed
            job = claimed.job
            span.set_attributes(job_attributes(job.job_id, job.attempts, job.epoch))
            result = self._run(job, remaining_ms)
            span.set_attribute("leasehold.outcome", result.outcome)
            return result

    def _margin(self) -> int:
        return self._settings.lease.safety_margin_ms

    # ------------------------------------------------------------------ run

    def _run(self, job: Job, remaining_ms: RemainingMs | None) -> WakeupResult:
        kind = self._kinds.get(job.kind)
        if self._blobs is not None:  # payload and outputs whole for the steps (LD3)
            try:
                job = self._blobs.resolved(job)
            except StoreUnavailableError as unavailable:
                logger.warning("data bucket unavailable", extra={"detail": str(unavailable)})
                return WakeupResult(Disposition.KEEP, "store_unavailable")
        attempt = Attempt(
            job=job,
            kind=kind or _NO_KIND,
            keeper=self._keeper,
            checkpoint=replace(job.checkpoint, outputs=list(job.checkpoint.outputs)),
            last_beat=self._clock.now_ms(),
            remaining_ms=remaining_ms,
            log_keys={
                "job_id": job.job_id,
                "epoch": job.epoch,
                "attempt": job.attempts,
                "trace_id": trace_id_of(job.traceparent),
            },
            flows=self._flows,
        )
        logger.info("claimed", extra=attempt.log_keys | {"step": attempt.checkpoint.next_step})
        try:
            if job.wait is not None and job.cancel_requested:  # cancelled as it parked (WF52)
                return self._outcomes.settle(attempt, cancelled())
            if job.wait is not None:  # woken from a wait: over, or parked again (WF2)
                waited = self._flows.evaluate(attempt, self._children_failed)
                if waited is not None:
                    return waited
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
            return self._outcomes.handler_error(
                attempt,
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
            return self._outcomes.handler_error(
                attempt,
                {"code": "plan_failed", "message": f"planning raised {type(failed).__name__}"},
            )
        return self._resume(attempt, kind)

    def _resume(self, attempt: Attempt, kind: JobKind) -> WakeupResult | None:
        """Kind versions (decisions KV1–KV4): a checkpoint is never run on under a
        step list whose finished part differs from the one it was made under. A change inside
        that part stops the job `failed` / `kind_changed` at once (`unknown` with an effect
        open) unless the kind declares a migration; a change after it runs on, the new list
        recorded in one fenced write before any step of it runs."""
        verdict = on_resume(attempt.job, kind.name, attempt.plan, kind.migrate)
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
        first = attempt.checkpoint.next_step
        while attempt.checkpoint.next_step < total:
            index = attempt.checkpoint.next_step
            step = attempt.plan[index]
            outcome = (
                self._paused_since(attempt, index, first)
                or self._check_before_step(attempt, step, index)
                or self._run_one(kind, attempt, step, index)
            )
            if not isinstance(outcome, Completed):
                return self._outcomes.settle(attempt, outcome)
            checkpoint = attempt.checkpoint
            outputs = [*checkpoint.outputs, outcome.output]
            outputs_bytes = sizes.json_bytes(outputs)
            if self._blobs is None and outputs_bytes > sizes.OUTPUTS_BUDGET:
                # Refused before the write that would carry it: the item keeps the last
                # checkpoint, and the step ran to its end (an effect it opened is settled).
                return self._outcomes.too_large(
                    attempt,
                    f"step {index} ('{step.name}') returned {sizes.json_bytes(outcome.output)} "
                    f"bytes; the job's step outputs would be {outputs_bytes} bytes, over their "
                    f"share of the job item ({sizes.OUTPUTS_BUDGET} bytes)",
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
            if attempt.requests.children or attempt.requests.wait:
                # the step asked for children, a signal or a time: the job waits for it (WF1)
                return self._flows.park(attempt, attempt.checkpoint, index, step.name)
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

    def _paused_since(self, attempt: Attempt, index: int, first: int) -> HandedBack | None:
        """A kind paused while its job ran (PA3): the step under way ended, the next one is
        handed back (checkpoint kept, attempt not spent) and its claim parks the job."""
        if index == first:
            return None
        try:
            paused = self._claiming.parking.cache.paused(attempt.job.kind)
        except StoreUnavailableError:
            return None  # unread: the step runs, as it would have a moment before the pause
        return HandedBack(f"its kind was paused before step {index}") if paused else None

    def _children_failed(self, attempt: Attempt, error: dict[str, str]) -> WakeupResult:
        """More children ended other than `succeeded` than the step tolerated (DESIGN §19)."""
        return self._outcomes.stop(attempt, JobState.FAILED, "children_failed", error)

    def _check_before_step(self, attempt: Attempt, step: StepPlan, index: int) -> Settled | None:
        """Cancellation, deadline, the invocation's time, the lease, budget, then approval
        (docs/sdk.md "How a job of your kind runs"): what stops the step from starting, if
        anything."""
        job, checkpoint, now = attempt.job, attempt.checkpoint, self._clock.now_ms()
        if job.cancel_requested:
            return cancelled()
        if now >= job.deadline_at:
            return Stopped(
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
            return HandedBack(f"step {index} would not fit in the invocation")
        if not self._settings.lease.may_start_step(
            now, job.lease_expires_at or 0, step.duration_ms
        ):
            attempt.heartbeat(now)
            if attempt.job.cancel_requested:
                return cancelled()
        budget = job.budget
        if budget.max_steps is not None and checkpoint.steps_used + 1 > budget.max_steps:
            return BudgetExhausted(f"step {index} would pass max_steps {budget.max_steps}")
        if budget.max_cost is not None and checkpoint.cost_used + step.cost > budget.max_cost:
            return BudgetExhausted(
                f"step {index} costs {step.cost}; {checkpoint.cost_used} of {budget.max_cost} used"
            )
        if step.needs_approval and checkpoint.approved_step != index:
            return AwaitingApproval(step, index)
        return None

    def _run_one(self, kind: JobKind, attempt: Attempt, step: StepPlan, index: int) -> StepOutcome:
        """Run step `index` once: what it came to, as one value (service/steps.py)."""
        if step.has_effect:
            now = self._clock.now_ms()
            # Stable across attempts, workers and replays of the same work (docs/architecture.md
            # "External effects").
            operation_id = f"{attempt.job.job_id}:{index}"
            intent: EffectIntent = {
                "operation_id": operation_id,
                "idempotency_key": operation_id,
                "step": index,
                "started_at": now,
            }
            attempt.job = self._leases.record_effect_intent(attempt.job, intent, now=now)
            self._telemetry.count("EffectsSubmitted")
            logger.info(
                "effect intent recorded", extra=attempt.log_keys | {"operation_id": operation_id}
            )
        try_number = attempt.checkpoint.step_failures + 1
        attempt.begin_step(index, try_number)
        job = attempt.job
        with span_under(
            f"leasehold.step {step.name}",
            None,
            attributes=job_attributes(job.job_id, job.attempts, job.epoch)
            | {"leasehold.step": index, "leasehold.step_try": try_number},
        ) as span:
            outcome = self._run_step(kind, attempt, index, try_number)
            span.set_attribute("leasehold.step_outcome", type(outcome).__name__)
            return outcome

    def _run_step(
        self, kind: JobKind, attempt: Attempt, index: int, try_number: int
    ) -> StepOutcome:
        """The step's own code, once, as one `StepOutcome`."""
        try:
            return Completed(kind.run_step(attempt.job.payload, index, try_number, attempt))
        except (StoreUnavailableError, StaleEpochError, ItemTooLargeError):
            raise  # the store's answer to the step's own write (progress, the ledger)
        except StepInterruptedError:
            if attempt.lease_lost:
                return LeaseLost()
            if attempt.out_of_time and not attempt.job.cancel_requested:
                return HandedBack(f"the invocation ended during step {index}")
            if attempt.job.effect_intent:
                return Uncertain("a cancel interrupted the effect step")
            return cancelled()
        except StepError as failed:
            return Failed(failed)
        except StopJobError as stop:
            return Stopped(
                JobState(stop.state),
                str(stop.reason),
                storable_error(
                    {"code": stop.error_code, "message": str(stop), **_flat(stop.record)}
                ),
                note=_history_note(stop.record),
            )
        except HandBackError as short:
            return HandedBack(str(short))
        except Exception as unexpected:  # a bug in a kind is retried, never lost
            logger.exception("step raised", extra=attempt.log_keys)
            return Failed(
                TransientStepError(
                    f"the step raised {type(unexpected).__name__}", error_code="unexpected_error"
                )
            )

    def _succeed(self, attempt: Attempt) -> WakeupResult:
        try:
            result = attempt.kind.result(attempt.job, attempt.checkpoint)
        except Exception as failed:  # every step ran; the kind's result hook did not
            logger.exception("result raised", extra=attempt.log_keys)
            # every step ran to its end, an effect step's included: its effect is settled
            return self._outcomes.handler_error(
                attempt,
                {"code": "result_failed", "message": f"the result raised {type(failed).__name__}"},
                settle_effect=True,
            )
        try:
            size = len(json.dumps(result, separators=(",", ":"), allow_nan=False).encode())
        except (TypeError, ValueError) as exc:
            return self._outcomes.handler_error(
                attempt,
                {"code": "result_not_json", "message": f"the result is not JSON: {exc}"[:500]},
            )
        limit = MAX_RESULT_BYTES if self._blobs is None else sizes.BLOB_LIMIT
        if size > limit:
            return self._outcomes.handler_error(
                attempt,
                {"code": "result_too_large", "message": f"result over {limit} bytes"},
            )
        return self._outcomes.succeed(attempt, result)


_NO_KIND = Unregistered()


def _history_note(record: JsonObject) -> str | None:
    """What the history says of a kind's stop (`tool=send_email reason=tool_not_allowed`): the
    record's short fields, not its message (the job's error has that)."""
    parts = [f"{k}={v}" for k, v in _flat(record).items() if k not in {"event", "message"}]
    return " ".join(parts) or None


def _flat(record: JsonObject) -> dict[str, str]:
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
