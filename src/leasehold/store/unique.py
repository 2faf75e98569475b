"""Unique jobs in the table (decisions UQ2–UQ4): a job with a unique declaration commits, in its
accept transaction, a `UNIQUE#<key>` item naming it, Put on the condition that no such item
holds the key now — none exists, or its window (`until`, epoch ms) has passed. DynamoDB's TTL
(`expires_at`) removes the item some time after the window; the condition, not the TTL, is the
rule. A kind that declares nothing writes no such item.

When the condition fails, the item names the job that holds the key. If that job is in one of
the counting states (`Claim.counting`), the new one is a duplicate and is answered with it. If it
is not (it was cancelled, failed, dead, or has left the table), the item is replaced in one
transaction conditional on still naming that job, with a ConditionCheck that the job is still
not counting — so an operator's replay landing in between makes the new job a duplicate, not
a second one.

Two submissions racing for one key meet in DynamoDB: one commits, the other's condition fails
(or it is cancelled for TransactionConflict and, past the table's retries, answered from the
item the winner wrote), and it is answered as the duplicate — never a 503 while the item names
a counting job."""

from __future__ import annotations

from typing import Any

from leasehold.domain.errors import LeaseholdError, StoreUnavailableError, ValidationError
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.domain.unique import Claim
from leasehold.store.batch import Accepted, NewJobEntry, Outcome, accept_many
from leasehold.store.expressions import Expression
from leasehold.store.guards import new_job_writes
from leasehold.store.items import deserialize_item, job_key, unpacked_traceparent
from leasehold.store.keys import repeat_of
from leasehold.store.table import ConditionFailed, Table

UNIQUE_PREFIX = "UNIQUE#"
UNIQUE_SK = "UNIQUE"
MAX_TRIES = 4
"""Replacements of an item whose job stopped counting, before a bounded 503."""


def unique_key(claim: Claim) -> RawItem:
    return {"pk": {"S": f"{UNIQUE_PREFIX}{claim.key}"}, "sk": {"S": UNIQUE_SK}}


def claim_writes(claim: Claim, job: Job, replacing: str | None = None) -> list[dict[str, Any]]:
    """The transaction items that take the key for `job`: a Put of the unique item on "no item
    holds the key now" — or, `replacing` a job that no longer counts, on "the item still names
    it", with a ConditionCheck that that job is still not counting."""
    item: RawItem = {
        **unique_key(claim),
        "job_id": {"S": job.job_id},
        "kind": {"S": job.kind},
        "until": {"N": str(claim.until_ms)},
        "created_at": {"N": str(job.created_at)},
        "expires_at": {"N": str(claim.until_ms // 1000 + 1)},
    }
    expr = Expression()
    if replacing is None:
        expr.condition(
            f"attribute_not_exists(pk) OR {expr.name('until')} <= {expr.value(job.created_at)}"
        )
    else:
        expr.condition(f"{expr.name('job_id')} = {expr.value(replacing)}")
    put = {"Put": {"Item": item, **_condition(expr), **_all_old()}}
    if replacing is None:
        return [put]
    check = Expression()
    counting = sorted(state.value for state in claim.counting)
    values = ", ".join(check.value(state) for state in counting)
    check.condition(f"attribute_not_exists(pk) OR NOT ({check.name('state')} IN ({values}))")
    return [put, {"ConditionCheck": {"Key": job_key(replacing), **_condition(check)}}]


def _condition(expr: Expression) -> dict[str, Any]:
    return {
        "ConditionExpression": expr.condition_expression(),
        "ExpressionAttributeNames": expr.names,
        "ExpressionAttributeValues": expr.values,
    }


def _all_old() -> dict[str, str]:
    return {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def accept_unique(
    table: Table,
    job: Job,
    writes: list[dict[str, Any]],
    claim: Claim,
    *,
    fp_hash: str | None,
    token: str | None,
) -> Accepted:
    """Commit `writes` (the new job's) with the claim on its unique key (module docstring):
    the new job, a repeat of a keyed request (as `JobStore.accept` answers one), or the job
    that holds the key (`duplicate`)."""
    replacing: str | None = None
    for _ in range(MAX_TRIES):
        try:
            table.transact(
                writes + claim_writes(claim, job, replacing),
                token=token if replacing is None else None,
            )
        except ConditionFailed as failed:
            if failed.failed_at(0):
                return _repeat(failed, job, fp_hash)
            at = len(writes)
            if not any(failed.failed_at(i) for i in (at, at + 1)):
                raise LeaseholdError("accept failed a condition it cannot explain") from failed
            held = failed.old_item(at) if failed.failed_at(at) else table.get(unique_key(claim))
            holder = _holder(table, job, claim, held)
            if isinstance(holder, Accepted):
                return holder
            replacing = holder
            continue
        except StoreUnavailableError:
            # Cancelled for contention past the table's retries: the racing submission may
            # have taken the key. Answer with its job when it did, else the 503 stands.
            holder = _holder(table, job, claim, table.get(unique_key(claim)))
            if isinstance(holder, Accepted):
                return holder
            raise
        return Accepted(job.job_id, created=True)
    raise StoreUnavailableError(
        "the job holding this unique key kept changing state; nothing was accepted - retry"
    )


def accept_many_unique(
    table: Table, jobs: list[NewJobEntry], *, guard: RawItem | None = None
) -> list[Outcome]:
    """`accept_many` (store/batch.py) for a batch some of whose jobs have a unique claim: the
    others are packed as ever; each claimed job is committed on its own, after them, through
    `accept_unique` (decision UQ5), and a later job of the batch with a key an earlier one took
    is answered with that one's job. A guarded batch (one condition for the whole) cannot hold
    a claimed job: that job's answer is a ValidationError."""
    plain = [index for index, entry in enumerate(jobs) if entry.unique is None]
    outcomes: list[Outcome | None] = [None] * len(jobs)
    if plain:
        done = accept_many(table, [jobs[i] for i in plain], guard=guard)
        for index, outcome in zip(plain, done, strict=True):
            outcomes[index] = outcome
    taken: dict[str, Outcome] = {}
    for index, entry in enumerate(jobs):
        claim = entry.unique
        if claim is None:
            continue
        if guard is not None:
            outcomes[index] = ValidationError("a guarded batch cannot hold a unique job")
        elif claim.key in taken:
            first = taken[claim.key]
            outcomes[index] = (
                Accepted(first.job_id, created=False, state=first.state, duplicate=True)
                if isinstance(first, Accepted)
                else first
            )
        else:
            writes = new_job_writes(entry.job, entry.fp_hash, shards=table.index_shards)
            try:
                outcomes[index] = taken[claim.key] = accept_unique(
                    table, entry.job, writes, claim, fp_hash=entry.fp_hash, token=None
                )
            except StoreUnavailableError as unavailable:
                # As for the packed jobs (decision BA4): nothing committed yet, the whole call
                # is the 503; else this job and the claimed ones after it get their own.
                if not any(isinstance(o, Accepted) and o.created for o in outcomes):
                    raise
                for later, other in enumerate(jobs):
                    if later >= index and other.unique is not None:
                        outcomes[later] = StoreUnavailableError(
                            f"{unavailable} — this job may or may not have been accepted; "
                            "retry it with the same idempotency key to get the same job"
                        )
                break
            except LeaseholdError as refused:
                outcomes[index] = refused
    return [o if o is not None else LeaseholdError("not attempted") for o in outcomes]


def _holder(table: Table, job: Job, claim: Claim, raw: RawItem | None) -> Accepted | str | None:
    """Who holds the key, from its item as read: the answer when a counting job does (or this
    very job: an earlier try committed), else the id of the job to replace (None: no item, or
    its window has passed — the plain Put's own condition lets it go)."""
    if raw is None:
        return None
    held = deserialize_item(raw)
    holder = str(held.get("job_id", ""))
    if holder == job.job_id:
        return Accepted(job.job_id, created=True)
    if int(held.get("until", 0)) <= job.created_at:
        return None
    item = table.get(job_key(holder))
    if item is None:
        return holder
    old = deserialize_item(item)
    state = str(old.get("state", ""))
    if state not in {s.value for s in claim.counting}:
        return holder
    return Accepted(
        holder,
        created=False,
        state=state,
        traceparent=unpacked_traceparent(old.get("tp")),
        duplicate=True,
    )


def _repeat(failed: ConditionFailed, job: Job, fp_hash: str | None) -> Accepted:
    """The job's own Put failed: a repeat of a keyed request, or this call's lost answer."""
    if not repeat_of(failed, 0, fp_hash):
        return Accepted(job.job_id, created=True)
    old = deserialize_item(failed.old_item(0) or {})
    return Accepted(
        job.job_id,
        created=False,
        state=str(old.get("state", JobState.QUEUED.value)),
        traceparent=unpacked_traceparent(old.get("tp")),
    )


__all__ = ["UNIQUE_PREFIX", "accept_many_unique", "accept_unique", "claim_writes", "unique_key"]
