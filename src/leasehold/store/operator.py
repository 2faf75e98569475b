"""OperatorStore: an operator's acts on a job — replay, resolve and cancel. Each reads the job, then
writes conditional on the version it read; each records who, when and why in the history."""

from __future__ import annotations

from dataclasses import replace

from leasehold.domain.errors import ConflictError, JobNotFoundError, ValidationError
from leasehold.domain.job import Job
from leasehold.domain.records import LedgerEntry, Resolution
from leasehold.domain.states import REPLAYABLE_STATES, JobState, StopReason
from leasehold.domain.types import JsonObject, RawItem
from leasehold.store.expressions import Expression
from leasehold.store.guards import (
    append_history,
    keep_for_operators,
    set_history,
    state_change,
)
from leasehold.store.history import HISTORY_LIMIT, entry
from leasehold.store.items import JOB_TTL_SECONDS, job_from_item, job_key, packed_traceparent
from leasehold.store.leases import wakeup_item
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits_ends import child_reopen_item, end_items

REDRIVE_HISTORY_CAP = 2 * HISTORY_LIMIT
"""A redrive appends without reading the job, so it cannot trim the history: it writes only while
the list is shorter than this (the job's next bounded write trims it back to HISTORY_LIMIT)."""


class OperatorStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def _read(self, job_id: str) -> Job:
        item = self._table.get(job_key(job_id))
        if item is None:
            raise JobNotFoundError(f"no job {job_id}")
        return job_from_item(item)

    def replay(
        self,
        job_id: str,
        *,
        operator: str,
        note: str,
        checked_provider: bool,
        now: int,
        from_start: bool = False,
        traceparent: str | None = None,
    ) -> Job:
        """`dead` / `failed` / `unknown` → `queued` under the same job id (decision D12): attempts
        start again, the deadline and the TTL are renewed, budget use is kept, `replays` counts
        up, and the history says who replayed it and why. An `unknown` job is replayed only on
        the operator's word that they checked the provider (its effect may have happened).

        `from_start` (decision KV4): the checkpoint goes — outputs, budget use, an approval, the
        kind's progress — with the step list it referred to, so the job runs its kind's
        current steps from step 0; its ledger's operations are kept for the record under new
        ids (`<id>~<replay>`), so no step of the new run mistakes one for its own.

        `traceparent`: the replay's own trace, which the job's attempts join from now on (its
        span links to the old one, decision TR4)."""
        job = self._read(job_id)
        if job.state not in REPLAYABLE_STATES:
            raise ConflictError(
                f"job {job_id} is {job.state.value}; only dead, failed or unknown jobs replay",
                code="not_replayable",
            )
        if job.state is JobState.UNKNOWN and not checked_provider:
            raise ValidationError(
                f"job {job_id} is unknown: its effect may have happened. Check the provider "
                'first, then replay with {"checked_provider": true, "note": "..."}',
                code="checked_provider_required",
            )
        expr = Expression()
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        expr.increment("version").increment("replays").set("updated_at", now)
        state_change(expr, JobState.QUEUED, job.job_id, self._table, from_active=False)
        expr.set("attempts", 0).set("next_attempt_at", now).set("last_dispatch_at", now)
        deadline_at = now + (job.deadline_at - job.created_at)
        expr.set("deadline_at", deadline_at)
        expr.set("expires_at", deadline_at // 1000 + JOB_TTL_SECONDS)
        expr.remove("cancel_requested").set("step_failures", 0)
        set_history(
            expr,
            job,
            entry(
                "replayed",
                at=now,
                state=JobState.QUEUED.value,
                attempt=job.attempts,
                epoch=job.epoch,
                reason=f"from {job.state.value}"
                + (f" ({job.stop_reason})" if job.stop_reason else "")
                + (", from the start" if from_start else ""),
                by=operator,
                note=note,
                operation_id=(job.effect_intent or {}).get("operation_id"),
            ),
        )
        expr.remove("error", "stop_reason", "result", "effect_intent", "approval", "resolution")
        open_operation = (job.effect_intent or {}).get("operation_id")
        if from_start:
            expr.set("next_step", 0).set("cost_used", 0).set("steps_used", 0)
            expr.set("outputs", "[]").remove("approved_step", "kind_state", "step_list")
            expr.set("operations", _superseded(job, open_operation, operator, note, now))
        elif open_operation and open_operation in job.operations:
            # The operator checked the provider: the next try calls again with the same key
            # (an idempotent provider still deduplicates it).
            expr.set_entry(
                "operations",
                open_operation,
                {
                    **job.operations[open_operation],
                    "state": "released",
                    "settled_at": now,
                    "released_by": operator,
                    "note": note,
                },
            )
        if traceparent is not None:
            expr.set("tp", packed_traceparent(traceparent))
            job = replace(job, traceparent=traceparent)
        wakeup = wakeup_item(job, now, now)
        reopened = child_reopen_item(job)
        try:
            self._table.transact(
                [
                    {"Update": expr.update_params(job_key(job_id))},
                    wakeup,
                    *([reopened] if reopened else []),
                ]
            )
        except ConditionFailed as failed:
            raise ConflictError(
                f"job {job_id} changed while it was being replayed; look again", code="busy"
            ) from failed
        return self._read(job_id)

    def resolve(
        self,
        job_id: str,
        *,
        operator: str,
        succeeded: bool,
        note: str,
        receipt: str | None,
        now: int,
    ) -> Job:
        """Settle an `unknown` job on an operator's word: `succeeded` (with the provider's
        receipt when they have it) or `failed`. The job then says what was resolved and by whom
        (`resolution`), and the uncertainty error is replaced."""
        job = self._read(job_id)
        if job.state is not JobState.UNKNOWN:
            raise ConflictError(
                f"job {job_id} is {job.state.value}, not unknown", code="not_unknown"
            )
        target = JobState.SUCCEEDED if succeeded else JobState.FAILED
        operation_id = (job.effect_intent or {}).get("operation_id")
        resolution: Resolution = {
            "outcome": target.value,
            "by": operator,
            "at": now,
            "note": note,
        }
        if receipt:
            resolution["receipt"] = receipt
        if operation_id:
            resolution["operation_id"] = operation_id
        expr = Expression()
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        expr.increment("version").set("updated_at", now)
        state_change(expr, target, job.job_id, self._table, from_active=False)
        expr.set("stop_reason", StopReason.RESOLVED_BY_OPERATOR.value)
        expr.set("resolution", resolution)
        keep_for_operators(expr, target, now)
        set_history(
            expr,
            job,
            entry(
                "resolved",
                at=now,
                state=target.value,
                reason=StopReason.RESOLVED_BY_OPERATOR.value,
                by=operator,
                note=note,
                operation_id=operation_id,
            ),
        )
        if operation_id and operation_id in job.operations:
            settled = {
                **job.operations[operation_id],
                "settled_at": now,
                "resolved_by": operator,
                "state": "confirmed" if succeeded else "failed",
            }
            if receipt:
                settled["receipt"] = {"receipt": receipt}
            expr.set_entry("operations", operation_id, settled)
        if succeeded:
            expr.remove("effect_intent", "error")
        else:
            expr.remove("effect_intent")
            expr.set(
                "error",
                {"code": "resolved_failed", "message": f"resolved as failed by {operator}: {note}"},
            )
        return self._update_read(expr, job_id, "resolved", end_items(job, target, now))

    def _update_read(
        self, expr: Expression, job_id: str, what: str, extra: list[RawItem] | None = None
    ) -> Job:
        """The operator's write, conditional on the job as it was read: the job as it is now,
        or ConflictError `busy` when it changed in between."""
        try:
            if extra:  # a child's end counted, or its own children cancelled, with it
                self._table.transact([{"Update": expr.update_params(job_key(job_id))}, *extra])
                return self._read(job_id)
            item = self._table.update(expr.update_params(job_key(job_id)))
        except ConditionFailed as failed:
            raise ConflictError(
                f"job {job_id} changed while it was being {what}; look again", code="busy"
            ) from failed
        assert item is not None
        return job_from_item(item)

    def cancel(self, job_id: str, *, operator: str, note: str, now: int) -> Job:
        """An operator's cancel of any tenant's job: `queued` / `waiting_approval` → `cancelled`
        (`cancelled_by_operator`) at once; `running` → `cancel_requested` (the worker stops
        before its next step). Either way the history says who asked and why. Anything else is a
        ConflictError `not_cancellable`; a job that changed since it was read, `busy`."""
        job = self._read(job_id)
        cancellable = {JobState.QUEUED, JobState.WAITING_APPROVAL, JobState.RUNNING}
        if job.state not in cancellable:
            raise ConflictError(
                f"job {job_id} is {job.state.value}; only queued, waiting_approval or running "
                "jobs can be cancelled",
                code="not_cancellable",
            )
        expr = Expression()
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        expr.increment("version").set("updated_at", now).set("cancel_requested", True)
        if job.state is JobState.RUNNING:
            event, state, reason = "cancel_requested", JobState.RUNNING, None
        else:
            event, state = "cancelled", JobState.CANCELLED
            reason = StopReason.CANCELLED_BY_OPERATOR.value
            state_change(
                expr,
                JobState.CANCELLED,
                job.job_id,
                self._table,
                from_active=job.state is JobState.QUEUED,
            )
            expr.set("stop_reason", reason).remove("approval", "next_attempt_at")
            keep_for_operators(expr, JobState.CANCELLED, now)
        set_history(
            expr,
            job,
            entry(event, at=now, state=state.value, reason=reason, by=operator, note=note),
        )
        ends = end_items(job, state, now) if state is JobState.CANCELLED else []
        return self._update_read(expr, job_id, "cancelled", ends)

    def note_redrive(self, job_id: str, *, operator: str, note: str, now: int) -> bool:
        """Record in the job's history that an operator moved its wake-up from the DLQ back to
        the work queue (`note_act`, event `redriven`)."""
        return self.note_act(job_id, "redriven", operator=operator, note=note, now=now)

    def note_act(
        self,
        job_id: str,
        event: str,
        *,
        operator: str,
        note: str,
        now: int,
        reason: str | None = None,
    ) -> bool:
        """Record an operator's act in the job's history (a redrive, a signal): one write that
        does not read the job first (`append_history`), bumping
        `version` so that a replay or resolve that read the job before it fails its condition
        instead of writing over the entry. False when the job no longer exists or its history is
        at REDRIVE_HISTORY_CAP (the act's log line still records it)."""
        expr = Expression()
        expr.condition(f"attribute_exists({expr.name('pk')})")
        history = expr.name("history")
        expr.condition(
            f"attribute_not_exists({history}) OR size({history}) < "
            f"{expr.value(REDRIVE_HISTORY_CAP)}"
        )
        expr.increment("version")
        append_history(expr, entry(event, at=now, by=operator, note=note, reason=reason))
        try:
            self._table.update(expr.update_params(job_key(job_id)))
        except ConditionFailed:
            return False
        return True


def _superseded(
    job: Job, open_operation: str | None, operator: str, note: str, now: int
) -> dict[str, LedgerEntry | JsonObject]:
    """The ledger of a job replayed from its start: every operation kept for the record, under
    an id no step of the new run opens (`<id>~<replay>`); the open one released, as a replay
    from the checkpoint releases it."""
    ledger: dict[str, LedgerEntry | JsonObject] = {}
    for operation_id, entry_ in job.operations.items():
        if "~" in operation_id:  # superseded by an earlier replay from the start
            ledger[operation_id] = entry_
            continue
        kept = {**entry_, "superseded_at": now}
        if operation_id == open_operation:
            kept |= {"state": "released", "settled_at": now, "released_by": operator, "note": note}
        ledger[f"{operation_id}~{job.replays + 1}"] = kept
    return ledger
