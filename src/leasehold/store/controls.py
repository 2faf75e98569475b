"""ControlStore: the caller's controls on a job — cancel and the approval decision — each one
conditional write (or one transaction with a wake-up) guarded by owner, state and version. And
`transact_closing_job`: an application's own transaction that closes a job it made (a bookmark's
title job, when the bookmark gets a new URL or is deleted) as part of the same commit."""

from __future__ import annotations

from typing import Any

from leasehold.domain.errors import ConflictError, JobNotFoundError, LeaseholdError
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.guards import append_history, keep_for_operators, owned, state_change
from leasehold.store.history import entry
from leasehold.store.items import job_from_item, job_key
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits import WaitStore, signal_put
from leasehold.store.waits_ends import end_items


class OldJob:
    """How a change closes a job it replaces, decided by the job's state: a queued job is
    cancelled outright; a running one is asked to stop (its outcome write, fenced by the
    application's own item, is refused anyway); a finished one is left alone."""

    CANCEL_IF_QUEUED = "cancel_if_queued"
    STOP_IF_RUNNING = "stop_if_running"
    LEAVE = "leave"


def close_old_job(job_id: str, how: str, reason: str, now: int) -> dict[str, Any] | None:
    """The transaction item that closes `job_id` as `how` says (None: leave it alone). Its
    condition names the state it expects and returns the job (ALL_OLD) when it fails."""
    if how == OldJob.LEAVE:
        return None
    expr = Expression()
    state = expr.name("state")
    expr.increment("version").set("updated_at", now)
    if how == OldJob.CANCEL_IF_QUEUED:
        expr.condition(f"{state} = {expr.value(JobState.QUEUED.value)}")
        expr.set("cancel_requested", True).remove("next_attempt_at")
        _cancelled(expr, "cancelled", reason, now, from_active=True)
    else:
        expr.condition(f"{state} = {expr.value(JobState.RUNNING.value)}")
        expr.set("cancel_requested", True)
    params = expr.update_params(job_key(job_id))
    params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Update": params}


def _cancelled(
    expr: Expression,
    event: str,
    reason: str,
    now: int,
    *,
    by: str | None = None,
    from_active: bool = False,
) -> None:
    """The write ends the job `cancelled` for `reason`: the state change (out of the active
    partition when `from_active`), the stop reason, how long the table keeps it, and the
    history entry `event` naming who (`by`, when a caller did it)."""
    # a cancelled job leaves the index: no shard key is written (decision SH1)
    state_change(expr, JobState.CANCELLED, "", None, from_active=from_active)
    expr.set("stop_reason", str(reason))
    keep_for_operators(expr, JobState.CANCELLED, now)
    append_history(
        expr, entry(event, at=now, state=JobState.CANCELLED.value, reason=str(reason), by=by)
    )


def _next_how(old_job_item: RawItem | None) -> str:
    state = (old_job_item or {}).get("state", {}).get("S")
    return OldJob.STOP_IF_RUNNING if state == JobState.RUNNING.value else OldJob.LEAVE


def transact_closing_job(
    table: Table,
    items: list[dict[str, Any]],
    job_id: str,
    *,
    reason: str,
    now: int,
    token: str | None = None,
) -> None:
    """Commit `items` with job `job_id` closed as its state allows — first as "cancel if
    queued"; when that item's condition fails, its ALL_OLD says the job's state, and the
    transaction is tried again with "ask to stop if running", or without the job when it is
    finished: at most three tries, then ConflictError `busy`. A failed condition of one of
    `items` is raised as it is (ConditionFailed, indexed as in `items`)."""
    how = OldJob.CANCEL_IF_QUEUED
    for _ in range(3):
        close = close_old_job(job_id, how, reason, now)
        transaction = [*items, close] if close else list(items)
        try:
            table.transact(transaction, token=token)
            return
        except ConditionFailed as failed:
            mine = any(failed.failed_at(index) for index in range(len(items)))
            if mine or close is None or not failed.failed_at(len(items)):
                raise
            how = _next_how(failed.old_item(len(items)))
    raise ConflictError(f"job {job_id} kept changing; try again", code="busy")


def _require_owned(job: Job | None, owner: Owner, job_id: str) -> Job:
    if job is None or (job.owner.tenant, job.owner.user_id) != (owner.tenant, owner.user_id):
        raise JobNotFoundError(f"no job {job_id}")
    return job


class ControlStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def _update_or_old(self, params: dict[str, Any]) -> tuple[Job | None, Job | None]:
        """(new job, None) when the update applied; (None, old job or None) when its condition
        failed — the old item comes with the failure, not from a second read."""
        try:
            item = self._table.update(params)
        except ConditionFailed as failed:
            old = failed.old_item()
            return None, job_from_item(old) if old else None
        assert item is not None
        return job_from_item(item), None

    def _cancel_write(
        self, expr: Expression, job_id: str, now: int
    ) -> tuple[Job | None, Job | None]:
        """The cancel of a queued job; a child's (its fan-in count) or a waiting parent's (the
        cascade to its children) commits with what its end brings (WF4, WF6), conditional on
        the version read — the job is read first only to know which it is."""
        seen = self._table.get(job_key(job_id))
        job = job_from_item(seen) if seen else None
        ends = end_items(job, JobState.CANCELLED, now) if job is not None else []
        if job is None or not ends:
            return self._update_or_old(expr.update_params(job_key(job_id)))
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        update = {
            **expr.update_params(job_key(job_id)),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            self._table.transact([{"Update": update}, *ends])
        except ConditionFailed as failed:
            old = failed.old_item(0)
            return None, job_from_item(old) if old else None
        item = self._table.get(job_key(job_id))
        return (job_from_item(item) if item else None), None

    def cancel(
        self,
        owner: Owner,
        job_id: str,
        *,
        now: int,
        reason: str = StopReason.CANCELLED_BY_USER,
        by: str | None = None,
    ) -> Job:
        """`queued` / `waiting_approval` → `cancelled` at once; `running` → `cancel_requested`
        (the worker stops before its next step); anything else → ConflictError."""
        for _ in range(3):  # the job may change state between the two guarded writes
            expr = owned(Expression(), owner)
            expr.condition(
                f"{expr.name('state')} IN ({expr.value(JobState.QUEUED.value)},"
                f" {expr.value(JobState.WAITING_APPROVAL.value)})"
            )
            expr.increment("version").set("updated_at", now)
            expr.set("cancel_requested", True).remove("approval", "next_attempt_at")
            _cancelled(expr, "cancelled", reason, now, by=by or owner.user_id)
            new, old = self._cancel_write(expr, job_id, now)
            if new is not None:
                return new
            old = _require_owned(old, owner, job_id)
            if old.state in (JobState.QUEUED, JobState.WAITING_APPROVAL):
                continue  # it changed between the read and the write: look again
            if old.state is not JobState.RUNNING:
                raise ConflictError(
                    f"job {job_id} is {old.state.value}; only queued, waiting_approval or "
                    "running jobs can be cancelled",
                    code="not_cancellable",
                )
            expr = owned(Expression(), owner)
            expr.condition(f"{expr.name('state')} = {expr.value(JobState.RUNNING.value)}")
            expr.increment("version").set("updated_at", now).set("cancel_requested", True)
            new, old = self._update_or_old(expr.update_params(job_key(job_id)))
            if new is not None:
                return new
        raise ConflictError(f"job {job_id} kept changing; try again", code="busy")

    def decide_approval(
        self, owner: Owner, job_id: str, *, version: int, approve: bool, now: int
    ) -> Job:
        """An approval is a wait for its reserved signal (decision WF50): the decision is that
        signal (`{"decision", "by"}`), delivered in one transaction with what it does, only in
        `waiting_approval` at the given version. Approve: the job woken as a signal wakes a
        waiting job (`WaitStore.wake_read`), `queued`; the claim then runs the step. Reject:
        `cancelled` / `approval_rejected` at once, with what any end brings (a child's count
        on its parent's fan-in, WF4)."""
        seen = self._table.get(job_key(job_id))
        job = _require_owned(job_from_item(seen) if seen else None, owner, job_id)
        wait = job.wait or {}
        if job.version != version or wait.get("type") != "approval":
            raise self._approval_conflict(job, owner, job_id, version)
        body = {"decision": "approve" if approve else "reject", "by": owner.user_id}
        signal = signal_put(job, str(wait.get("name")), body, now)
        try:
            if approve:
                WaitStore(self._table).wake_read(
                    job,
                    int(wait.get("step", 0)),
                    now,
                    owner=owner,
                    also=[signal],
                    history=entry(
                        "approved", at=now, state=JobState.QUEUED.value, by=owner.user_id
                    ),
                )
            else:
                self._table.transact(
                    [
                        self._reject(job, owner, now),
                        signal,
                        *end_items(job, JobState.CANCELLED, now),
                    ]
                )
        except ConditionFailed as failed:
            again = self._table.get(job_key(job_id))
            raise self._approval_conflict(
                job_from_item(again) if again else None, owner, job_id, version
            ) from failed
        # A transaction returns no attributes: the job is read once after the commit (D9).
        item = self._table.get(job_key(job_id))
        return _require_owned(job_from_item(item) if item else None, owner, job_id)

    @staticmethod
    def _reject(job: Job, owner: Owner, now: int) -> RawItem:
        expr = owned(Expression(), owner)
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.WAITING_APPROVAL.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
        )
        expr.increment("version").set("updated_at", now).remove("approval", "wait")
        _cancelled(expr, "rejected", StopReason.APPROVAL_REJECTED, now, by=owner.user_id)
        return {"Update": expr.update_params(job_key(job.job_id))}

    @staticmethod
    def _approval_conflict(
        old: Job | None, owner: Owner, job_id: str, version: int
    ) -> LeaseholdError:
        job = _require_owned(old, owner, job_id)
        if job.state is not JobState.WAITING_APPROVAL or (job.wait or {}).get("type") != "approval":
            return ConflictError(
                f"job {job_id} is {job.state.value}, not waiting_approval", code="not_waiting"
            )
        return ConflictError(
            f"version {version} is stale; the job is at version {job.version}", code="stale_version"
        )
