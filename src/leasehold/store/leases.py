"""LeaseStore: the worker's writes. A claim makes one worker the only valid holder (epoch + 1, a
lease); every later write is fenced by that epoch, the state and the lease (docs/architecture.md
rules 2–5)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from leasehold.domain.errors import (
    ClaimRejectedError,
    LeaseholdError,
    RelatedItemChangedError,
    StaleEpochError,
    StoreUnavailableError,
)
from leasehold.domain.job import Checkpoint, Job, Owner
from leasehold.domain.records import (
    EffectIntent,
    HistoryEntry,
    LedgerEntry,
    WaitingFor,
)
from leasehold.domain.states import JobState, is_terminal
from leasehold.domain.storable import storable_error
from leasehold.domain.types import JsonObject, RawItem
from leasehold.store.blobs import REF, BlobStore, encoded, is_ref
from leasehold.store.expressions import Expression
from leasehold.store.guards import (
    fenced,
    keep_for_operators,
    outbox_put,
    owned,
    set_history,
    state_change,
    write_job,
)
from leasehold.store.items import ACTIVE_PARTITION, cap_of, job_from_item, job_key, outbox_item
from leasehold.store.shards import item_key
from leasehold.store.slots import ClaimStores, slot_item_key
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits_ends import end_items

RECONCILABLE = ("idempotent_key", "status_lookup")
"""Capabilities whose open operation a new worker can settle by asking the provider
(docs/architecture.md "External effects"):
a job left with one is claimable again; any other open effect makes it `unknown`."""


class ClaimRejection:
    """Why a claim's condition failed, read from the item DynamoDB returned with the failure."""

    NOT_FOUND = "not_found"
    TERMINAL = "terminal"
    PAUSED = "paused"
    UNCERTAIN = "uncertain"
    LEASED = "leased"
    NOT_DUE = "not_due"
    EFFECT_OPEN = "effect_open"
    DEADLINE = "deadline"
    EXHAUSTED = "exhausted"


def classify_claim(job: Job | None, now: int) -> ClaimRejectedError:
    if job is None:
        return ClaimRejectedError(ClaimRejection.NOT_FOUND)
    if is_terminal(job.state):
        return ClaimRejectedError(ClaimRejection.TERMINAL, job)
    if job.state is JobState.WAITING_APPROVAL:
        return ClaimRejectedError(ClaimRejection.PAUSED, job)
    if job.state is JobState.UNKNOWN:
        return ClaimRejectedError(ClaimRejection.UNCERTAIN, job)
    if job.state is JobState.RUNNING and (job.lease_expires_at or 0) >= now:
        return ClaimRejectedError(ClaimRejection.LEASED, job)
    if job.state is JobState.RUNNING and job.effect_intent and not reconcilable(job):
        return ClaimRejectedError(ClaimRejection.EFFECT_OPEN, job)
    if job.deadline_at <= now:
        return ClaimRejectedError(ClaimRejection.DEADLINE, job)
    if job.attempts >= job.max_attempts:
        return ClaimRejectedError(ClaimRejection.EXHAUSTED, job)
    return ClaimRejectedError(ClaimRejection.NOT_DUE, job)


def reconcilable(job: Job) -> bool:
    """Whether the job's open effect can be settled by asking its provider (docs/architecture.md
    "External effects")."""
    return (job.effect_intent or {}).get("capability") in RECONCILABLE


def _set_checkpoint(
    expr: Expression, checkpoint: Checkpoint, *, live: bool = True, outputs: list[Any] | None = None
) -> None:
    """The checkpoint's fields; a finished job (`live` False) keeps only the counters.
    `outputs`: the outputs as the item holds them (references for large ones, `kept_outputs`)."""
    expr.set("next_step", checkpoint.next_step).set("cost_used", checkpoint.cost_used)
    expr.set("steps_used", checkpoint.steps_used)
    expr.remove("wait")  # a step ran (or the job ended) after the wait: it is over
    if live:
        if checkpoint.approved_step is not None:  # given at the claim (WF50): kept for a retry
            expr.set("approved_step", checkpoint.approved_step)
        expr.set("step_failures", checkpoint.step_failures)
        stored = checkpoint.outputs if outputs is None else outputs
        expr.set("outputs", json.dumps(stored, separators=(",", ":")))


def kept_outputs(table: Table, job: Job, checkpoint: Checkpoint) -> list[Any]:
    """The checkpoint's outputs as the item holds them: with a data bucket, each large one a
    reference to its blob, written (under the lease's epoch) before the fenced write that will
    reference it, and only once (DESIGN §20, decision LD4)."""
    if table.blobs is None:
        return list(checkpoint.outputs)
    return table.blobs.keep_outputs(job.job_id, job.epoch, list(checkpoint.outputs))


def same_payload(before: Job, after: Job) -> Job:
    """`after` (a fenced write's answer) with the payload `before` held: the worker holds the
    payload whole, the item a reference to it, and a payload never changes after accept. The
    kind state too, while the item's reference names what `before` holds whole (LD16)."""
    after.payload = before.payload
    held, stored = before.kind_state, after.kind_state
    if is_ref(stored) and held is not None and not is_ref(held):
        digest = hashlib.sha256(encoded(held)).hexdigest()
        if digest == stored[REF]["sha256"]:  # type: ignore[index]
            after.kind_state = held
    return after


def wakeup_item(job: Job, deliver_at: int, now: int) -> RawItem:
    """The outbox item whose wake-up brings `job` back at `deliver_at`, to commit with the
    job's own write (which bumps its version)."""
    return outbox_put(
        outbox_item(
            job.job_id,
            job.owner,
            version=job.version + 1,
            deliver_at=deliver_at,
            now_ms=now,
            kind=job.kind,
            priority=job.priority,
            traceparent=job.traceparent,
            cap=cap_of(job),
        )
    )


def _queued_again(expr: Expression, job: Job, retry_at: int, now: int) -> RawItem:
    """The job's due time set to `retry_at` (a retry, a hand-back), and the wake-up that brings
    it back then."""
    expr.set("next_attempt_at", retry_at).set("last_dispatch_at", now)
    return wakeup_item(job, retry_at, now)


class LeaseStore:
    """The worker's writes. With `slots` (a per-user limit), a claim (service/claiming.py)
    takes a slot first, and every write that takes the job out of `running` gives it back
    afterwards (decision C5)."""

    def __init__(self, table: Table, claims: ClaimStores | None = None) -> None:
        self._table = table
        claims = claims or ClaimStores.over(table)
        self._slots = claims.per_user
        self._declared = claims.declared
        """The slot items of kinds' declared limits (F2), whether or not the per-user one is on."""

    def claim(
        self,
        job_id: str,
        owner: Owner,
        *,
        worker_id: str,
        now: int,
        lease_ms: int,
        took_token: str | None = None,
        held_token: str | None = None,
        slots: dict[str, str] | None = None,
        adopt: dict[str, str] | None = None,
    ) -> Job:
        """The claim's one conditional write (docs/architecture.md rule 2): epoch + 1, attempts +
        1, a new lease,
        recording the slot entries service/claiming.py took (`took_token` the per-user one,
        `slots` the declared ones) and adopting those the job already held (`held_token`,
        `adopt`). Raises ClaimRejectedError with the reason read from the failed item."""
        expr = owned(Expression(), owner)
        state, attempts = expr.name("state"), expr.name("attempts")
        lease, deadline = expr.name("lease_expires_at"), expr.name("deadline_at")
        max_attempts, effect = expr.name("max_attempts"), expr.name("effect_intent")
        queued, running = expr.value(JobState.QUEUED.value), expr.value(JobState.RUNNING.value)
        now_v = expr.value(now)
        expr.condition(
            f"({state} = {queued} AND {expr.name('next_attempt_at')} <= {now_v}"
            f" AND {deadline} > {now_v} AND {attempts} < {max_attempts})"
            f" OR ({state} = {running} AND {lease} < {now_v} AND {deadline} > {now_v}"
            f" AND {attempts} < {max_attempts} AND (attribute_not_exists({effect})"
            f" OR {effect}.{expr.name('capability')} IN"
            f" ({', '.join(expr.value(c) for c in RECONCILABLE)})))"
        )
        if held_token is not None:
            # Adopting the job's slot entry: only the claim lineage that made it may
            expr.condition(f"{expr.name('slot_token')} = {expr.value(held_token)}")
        if took_token is not None:
            expr.set("slot_token", took_token)
        for name, token in (adopt or {}).items():
            # Adopting an entry: only the claim lineage that recorded it may
            expr.condition(f"{expr.name('slots')}.{expr.key(name)} = {expr.value(token)}")
        if slots:
            expr.set("slots", slots)
        expr.remove("waiting_for")
        state_change(expr, JobState.RUNNING, job_id, self._table, from_active=True)
        expr.increment("epoch").increment("attempts")
        expr.set("lease_owner", worker_id).set("lease_expires_at", now + lease_ms)
        expr.set("claimed_at", now)  # the attempt's start, for the operator's timeline
        expr.set("updated_at", now)  # queued and running share a `by_state` entry: no move
        # ...unless a stray wake-up found a delayed job due before the sweeper moved it out of
        # the due index (decision F1): the same value costs no index write, a move heals it.
        expr.set("gsi1pk", item_key(ACTIVE_PARTITION, job_id, self._table.index_shards))
        expr.increment("version").remove("next_attempt_at")
        try:
            item = self._table.update(expr.update_params(job_key(job_id)))
        except ConditionFailed as failed:
            old = failed.old_item()
            raise classify_claim(job_from_item(old) if old else None, now) from failed
        assert item is not None
        return job_from_item(item)

    def release_slot(self, job: Job) -> None:
        """After the job left `running` under this worker's epoch: give its slots back. A
        failure here only delays it (the repair frees entries nobody holds)."""
        with contextlib.suppress(StoreUnavailableError):
            for name, token in (job.slots or {}).items():
                self._declared.release_at(slot_item_key(name), job.job_id, token)
            if job.slot_token and self._slots is not None:
                self._slots.release(job.owner, job.job_id, job.slot_token)

    def _fenced_update(self, expr: Expression, job: Job, *, stale_message: str) -> Job:
        try:
            item = self._table.update(expr.update_params(job_key(job.job_id)))
        except ConditionFailed as failed:
            raise StaleEpochError(stale_message) from failed
        assert item is not None
        return same_payload(job, job_from_item(item))

    def heartbeat(self, job: Job, *, now: int, lease_ms: int) -> Job:
        """Extend my lease; returns the item so the worker sees `cancel_requested`."""
        expr = fenced(job, now).set("lease_expires_at", now + lease_ms)
        return self._fenced_update(expr, job, stale_message="heartbeat under a lost lease")

    def save_checkpoint(self, job: Job, checkpoint: Checkpoint, *, now: int, lease_ms: int) -> Job:
        """Progress after a finished step, under the lease, extending it. A finished step also
        settles the effect it opened, so the intent goes with it."""
        expr = fenced(job, now)
        _set_checkpoint(expr, checkpoint, outputs=kept_outputs(self._table, job, checkpoint))
        expr.set("lease_expires_at", now + lease_ms).remove("effect_intent")
        return self._fenced_update(expr, job, stale_message="checkpoint under a lost lease")

    def rebase(
        self,
        job: Job,
        checkpoint: Checkpoint,
        step_list: str,
        *,
        steps_total: int,
        now: int,
        lease_ms: int,
    ) -> Job:
        """Kind versions (decision KV3): the step list the job goes on under (and its length,
        for the view's progress), with the checkpoint mapped onto it, under the fence, before
        a step of it runs. Only a job that crossed a deploy changing its kind's steps (or that
        recorded none) makes this write."""
        expr = fenced(job, now)
        _set_checkpoint(expr, checkpoint, outputs=kept_outputs(self._table, job, checkpoint))
        expr.set("step_list", step_list).set("steps_total", steps_total)
        expr.set("lease_expires_at", now + lease_ms)
        if checkpoint.approved_step is None:  # set by `_set_checkpoint` otherwise
            expr.remove("approved_step")
        return self._fenced_update(expr, job, stale_message="step list under a lost lease")

    def save_progress(self, job: Job, state: JsonObject, *, now: int, lease_ms: int) -> Job:
        """A kind's own progress inside a step (the agent's checkpoint), under the fence,
        extending the lease: a resume starts from it. With a data bucket, progress over its
        inline share is written to S3 first and the item keeps the reference (LD16); the job
        returned holds it whole."""
        blobs = self._table.blobs
        stored = state if blobs is None else blobs.keep_state(job.job_id, job.epoch, state)
        expr = fenced(job, now).set("kind_state", json.dumps(stored, separators=(",", ":")))
        expr.set("lease_expires_at", now + lease_ms)
        saved = self._fenced_update(expr, job, stale_message="progress under a lost lease")
        saved.kind_state = state
        return saved

    def record_effect_intent(self, job: Job, intent: EffectIntent, *, now: int) -> Job:
        """The ledger entry written before an external effect (docs/architecture.md rule 6): while
        it is open, no
        outcome but the step's own completion removes it, and an expired lease makes the job
        `unknown`, never an automatic retry."""
        expr = fenced(job, now).set("effect_intent", intent)
        return self._fenced_update(expr, job, stale_message="effect intent under a lost lease")

    def finish(
        self,
        job: Job,
        target: JobState,
        *,
        now: int,
        checkpoint: Checkpoint,
        history: HistoryEntry,
        result: Any = None,
        error: dict[str, str] | None = None,
        stop_reason: str | None = None,
        retry_at: int | None = None,
        settle_effect: bool = False,
        also: list[RawItem] | None = None,
        shed: bool = False,
    ) -> None:
        """The outcome of this worker's attempt, under the fence (docs/architecture.md rules 3–5),
        in one
        transaction with the per-user slot release, a retry's delayed wake-up and any `also`
        items (a kind's own writes that must land with the outcome, or not at all).

        An open effect intent is kept unless `settle_effect` (the step that opened it ran to
        its end); `shed` removes the kind's saved progress (an item too large to end otherwise).
        Raises StaleEpochError when the fence fails, RelatedItemChangedError (with the item's
        index in `also`) when one of `also`'s conditions fails."""
        expr = fenced(job, now, require_deadline=target is not JobState.DEAD)
        live = target is not JobState.SUCCEEDED
        outputs = kept_outputs(self._table, job, checkpoint) if live else None
        _set_checkpoint(expr, checkpoint, live=live, outputs=outputs)
        state_change(expr, target, job.job_id, self._table, from_active=True)
        expr.remove("lease_owner", "lease_expires_at")
        if settle_effect:
            expr.remove("effect_intent")
        if shed:  # an item too large to end otherwise: the kind's saved progress goes
            expr.remove("kind_state")
        keep_for_operators(expr, target, now)
        set_history(expr, job, history)
        if result is not None:
            if self._table.blobs is not None:  # a large result: its blob, written first (LD4)
                result = self._table.blobs.keep(job.job_id, "result", result, epoch=job.epoch)
            expr.set("result", json.dumps(result, separators=(",", ":")))
        if target is JobState.SUCCEEDED:
            # The result carries what the steps produced: the checkpoint's copy goes, with what
            # only a live job needs, so the finished item stays under 1 KiB (one write unit)
            # where it can (decision C6).
            # A succeeded job never runs again (nor replays): its step list goes too (KV1).
            expr.remove("outputs", "step_failures", "last_dispatch_at", "step_list")
        if error is not None:
            expr.set("error", storable_error(error))
        if stop_reason is not None:
            expr.set("stop_reason", str(stop_reason))
        extra: list[RawItem] = list(also or [])
        extra.extend(end_items(job, target, now))  # after `also`: its indexes stand
        first_related = 1
        if target is JobState.QUEUED:
            assert retry_at is not None, "a retry needs retry_at"
            extra.insert(0, _queued_again(expr, job, retry_at, now))
            first_related = 2
        self._write(
            expr,
            job,
            extra,
            stale_message=f"{target} under a lost lease",
            first_related=first_related,
            related=len(also or []),
        )

    def hand_back(
        self, job: Job, *, now: int, checkpoint: Checkpoint, retry_at: int, history: HistoryEntry
    ) -> None:
        """Give the job back unfinished (not enough time left in this invocation for its next
        step): `queued` again at `retry_at` with a wake-up, checkpoint kept, the attempt given
        back — it was not a failed try. Never used while an effect is open."""
        expr = fenced(job, now)
        _set_checkpoint(expr, checkpoint)
        state_change(expr, JobState.QUEUED, job.job_id, self._table, from_active=True)
        expr.remove("lease_owner", "lease_expires_at").increment("attempts", -1)
        set_history(expr, job, history)
        wakeup = _queued_again(expr, job, retry_at, now)
        self._write(expr, job, [wakeup], stale_message="hand-back under a lost lease")

    def note_dispatch(
        self, job_id: str, *, now: int, waiting_for: WaitingFor | None = None
    ) -> None:
        """Record that a wake-up for this queued job was just sent straight to SQS (a slot wait,
        a hand-off), so the sweeper does not mistake it for lost and add another copy; and what
        it waits for, for the job view (its claim clears it)."""
        expr = Expression()
        expr.condition(f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}")
        expr.increment("version").set("updated_at", now).set("last_dispatch_at", now)
        if waiting_for is not None:
            expr.set("waiting_for", waiting_for)
        with contextlib.suppress(ConditionFailed):  # no longer queued: nothing to guard
            self._table.update(expr.update_params(job_key(job_id)), return_new=False)

    def _write(
        self,
        expr: Expression,
        job: Job,
        extra: list[RawItem],
        *,
        stale_message: str,
        first_related: int = 1,
        related: int = 0,
    ) -> None:
        """One UpdateItem when it alone gives the guarantee; a transaction when a wake-up or a
        kind's item must commit with it. The job leaves `running` here, so its slot token goes
        with it, and the slot is given back once the write is in (decision C5)."""
        expr.remove("slot_token", "slots")
        try:
            write_job(self._table, expr, job.job_id, extra)
        except ConditionFailed as failed:
            if not failed.reasons or failed.failed_at(0):
                raise StaleEpochError(stale_message) from failed
            for index in range(related):
                if failed.failed_at(first_related + index):
                    raise RelatedItemChangedError(
                        index, failed.old_item(first_related + index)
                    ) from failed
            raise LeaseholdError("a worker write failed a condition it cannot explain") from failed
        self.release_slot(job)


class LedgerStore:
    """The operation ledger on the job item (docs/architecture.md "External effects"), written
    under the worker's fence: an
    entry is `submitted` before the provider is called, then `confirmed` with the receipt or
    `failed` with the error. While one is submitted, `effect_intent` names it."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def blob_store(self) -> BlobStore | None:
        """The data bucket large receipts go to (None: an engine without DATA_BUCKET); a
        method, so a store seen through a wrapper (a test's crash point) still answers."""
        return self._table.blobs

    def _write(self, expr: Expression, job: Job, what: str) -> Job:
        try:
            item = self._table.update(expr.update_params(job_key(job.job_id)))
        except ConditionFailed as failed:
            raise StaleEpochError(f"{what} under a lost lease") from failed
        assert item is not None
        return same_payload(job, job_from_item(item))

    def submit(self, job: Job, entry: LedgerEntry, intent: EffectIntent, *, now: int) -> Job:
        expr = fenced(job, now).set_entry("operations", intent["operation_id"], entry)
        expr.set("effect_intent", intent)
        return self._write(expr, job, "operation submitted")

    def settle(self, job: Job, operation_id: str, entry: LedgerEntry, *, now: int) -> Job:
        expr = fenced(job, now).set_entry("operations", operation_id, entry)
        expr.remove("effect_intent")
        return self._write(expr, job, "operation settled")
