"""UpkeepStore: the writes that settle what no worker will settle — an expired lease, a queued
job past its deadline, a lost wake-up. Each is conditional on what was seen (the epoch, or the
version), so a live worker is never overtaken and two sweepers never both act."""

from __future__ import annotations

import contextlib

from leasehold.domain.errors import RelatedItemChangedError, StaleEpochError
from leasehold.domain.job import Job
from leasehold.domain.records import HistoryEntry
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.storable import storable_error
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.guards import (
    keep_for_operators,
    on_lease,
    set_history,
    state_change,
    write_job,
)
from leasehold.store.items import ACTIVE_PARTITION, DUE_PARTITION
from leasehold.store.leases import LeaseStore, wakeup_item
from leasehold.store.shards import item_key
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits_ends import end_items


class UpkeepStore:
    def __init__(self, table: Table, leases: LeaseStore | None = None) -> None:
        self._table = table
        self._leases = leases

    def settle_expired_lease(
        self,
        job: Job,
        target: JobState,
        *,
        now: int,
        history: HistoryEntry,
        stop_reason: str | None = None,
        error: dict[str, str] | None = None,
        also: list[RawItem] | None = None,
    ) -> None:
        """A `running` job whose lease (as last seen, `job.epoch`) expired: back to `queued` with a
        fresh wake-up (rescue), or to `unknown` (an effect was open) or `dead`. Conditional on
        the same epoch and the lease still expired, so a live worker is never overtaken."""
        expr = on_lease(job, now, live=False)
        state_change(expr, target, job.job_id, self._table, from_active=True)
        expr.remove("lease_owner", "lease_expires_at")
        keep_for_operators(expr, target, now)
        set_history(expr, job, history)
        if stop_reason is not None:
            expr.set("stop_reason", str(stop_reason))
        if error is not None:
            expr.set("error", storable_error(error))
        extra: list[RawItem] = []
        if target is JobState.QUEUED:
            expr.set("next_attempt_at", now).set("last_dispatch_at", now)
            extra.append(wakeup_item(job, now, now))
        expr.remove("slot_token", "slots")
        related = list(also or [])
        extra.extend(related)
        extra.extend(end_items(job, target, now))  # after the related items: indexes stand
        self._apply(
            expr,
            job,
            extra,
            stale_message="lease no longer expired",
            related=(len(extra) - len(related), len(related)),
        )
        if self._leases is not None:
            self._leases.release_slot(job)

    def expire_queued(self, job: Job, *, now: int, history: HistoryEntry) -> None:
        """A `queued` job whose deadline passed becomes `dead` / `deadline_exceeded`."""
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
            f" AND {expr.name('deadline_at')} <= {expr.value(now)}"
        )
        expr.increment("version").set("updated_at", now)
        state_change(expr, JobState.DEAD, job.job_id, self._table, from_active=True)
        expr.set("stop_reason", StopReason.DEADLINE_EXCEEDED.value)
        expr.set(
            "error", {"code": "deadline_exceeded", "message": "the deadline passed while queued"}
        )
        keep_for_operators(expr, JobState.DEAD, now)
        set_history(expr, job, history)
        ends = end_items(job, JobState.DEAD, now)
        self._apply(expr, job, ends, stale_message="no longer queued")

    def redispatch(self, job: Job, *, now: int) -> None:
        """A new wake-up for a due `queued` job whose last one was lost; conditional on the
        version seen, so two sweepers never both dispatch."""
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
        )
        expr.increment("version").set("updated_at", now).set("last_dispatch_at", now)
        wakeup = wakeup_item(job, now, now)
        self._apply(expr, job, [wakeup], stale_message="job changed meanwhile")

    def bring_due(self, job: Job, *, now: int) -> None:
        """A delayed job from the due index comes within SQS's reach (decision F1): a wake-up
        delivered when it is due, then the move to the active jobs. Two writes, not one
        transaction (4 write units instead of 6), safe in this order:

        - the wake-up's key is the job's version after the move, so a second try of a move
          seen at the same version (a crash in between, another sweeper) finds it there and
          adds none — that is the one failed condition taken as success;
        - the move is conditional on the version seen and on the job's being in the due index:
          a job cancelled (or run by that wake-up) meanwhile is left as it is, and its stray
          wake-up is refused at claim; a claim moves a job out of the index itself."""
        due = max(now, job.next_attempt_at or now)
        wakeup = wakeup_item(job, due, now)
        # A failed condition: this move's wake-up is already there (an earlier try, another
        # sweeper).
        with contextlib.suppress(ConditionFailed):
            self._table.put(wakeup["Put"])
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
            f" AND begins_with({expr.name('gsi1pk')}, {expr.value(DUE_PARTITION)})"
        )
        expr.increment("version").set("updated_at", now).set("last_dispatch_at", now)
        expr.set("gsi1pk", item_key(ACTIVE_PARTITION, job.job_id, self._table.index_shards))
        self._apply(expr, job, [], stale_message="job changed meanwhile")

    def _apply(
        self,
        expr: Expression,
        job: Job,
        extra: list[RawItem],
        *,
        stale_message: str,
        related: tuple[int, int] = (0, 0),
    ) -> None:
        """`related` = (index of the first related item among `extra`, how many)."""
        try:
            write_job(self._table, expr, job.job_id, extra)
        except ConditionFailed as failed:
            first, count = related
            for index in range(count):
                if failed.failed_at(1 + first + index):
                    raise RelatedItemChangedError(
                        index, failed.old_item(1 + first + index)
                    ) from failed
            raise StaleEpochError(stale_message) from failed
