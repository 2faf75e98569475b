"""The conditions and shared transaction pieces every job write is built from: the worker's
fence, the owner check, the outbox wake-up, and the bounded history write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leasehold.domain.job import Job, Owner
from leasehold.domain.policies import in_due_index
from leasehold.domain.records import HistoryEntry
from leasehold.domain.states import JobState
from leasehold.store.expressions import Expression
from leasehold.store.history import appended
from leasehold.store.items import (
    ACTIVE_STATES,
    JOB_TTL_SECONDS,
    cap_of,
    job_key,
    job_partition,
    new_job_item,
    outbox_item,
)

if TYPE_CHECKING:
    from leasehold.domain.types import RawItem
    from leasehold.store.table import Table


def new_job_writes(
    job: Job, fingerprint: str | None = None, *, shards: int = 1
) -> list[dict[str, Any]]:
    """A new job and its first wake-up: the two Puts every creation commits together
    (docs/architecture.md rule 1), each conditional on not existing. A job made under an
    idempotency key keeps
    the hash of its request (`fp`), and a failed condition returns the job as it is.

    A job due further ahead than SQS can hold a wake-up (15 minutes) has no wake-up yet: it
    waits in the due index, and the sweeper gives it one when it comes within reach
    (decision F1). A nearer delay is the wake-up's own `deliver_at` (SQS DelaySeconds).
    `shards`: the table's index shards (decision SH1)."""
    due_at = job.next_attempt_at or job.created_at
    due_indexed = in_due_index(job.created_at, due_at)
    item = new_job_item(job, due_indexed=due_indexed, shards=shards)
    if fingerprint is not None:
        item["fp"] = {"S": fingerprint}
    return [
        {
            "Put": {
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ] + (
        []
        if due_indexed
        else [
            outbox_put(
                outbox_item(
                    job.job_id,
                    job.owner,
                    version=job.version,
                    deliver_at=due_at,
                    now_ms=job.created_at,
                    kind=job.kind,
                    priority=job.priority,
                    traceparent=job.traceparent,
                    cap=cap_of(job),
                )
            )
        ]
    )


def state_change(
    expr: Expression, target: JobState, job_id: str, table: Table | None, *, from_active: bool
) -> Expression:
    """Set the state and move the job's `by_state` entry only when its partition changes (an
    index write costs a write unit; `queued` ↔ `running` costs none). The new entry is in the
    job's shard among `table`'s index shards (decision SH1); `table` may be None only for a
    state the index leaves out (the job needs no shard then)."""
    expr.set("state", target.value)
    partition = job_partition(target, job_id, 1 if table is None else table.index_shards)
    if partition is None:  # it leaves the index for good: its sort key is no longer needed
        expr.remove("gsi1pk", "gsi1sk")
    elif table is None:
        raise ValueError(f"a job going to {target.value} needs its table's index shards")
    elif not (from_active and target in ACTIVE_STATES):
        expr.set("gsi1pk", partition)
    return expr


def on_lease(job: Job, now: int, *, live: bool) -> Expression:
    """A write on the lease of `job` as last seen (its epoch, still `running`): a live lease
    (the worker's writes, `fenced`) or an expired one (the sweeper's rescue, so a live worker
    is never overtaken). Bumps `version` and `updated_at`."""
    expr = Expression()
    expr.condition(
        f"{expr.name('epoch')} = {expr.value(job.epoch)}"
        f" AND {expr.name('state')} = {expr.value(JobState.RUNNING.value)}"
        f" AND {expr.name('lease_expires_at')} {'>' if live else '<'} {expr.value(now)}"
    )
    return expr.increment("version").set("updated_at", now)


def fenced(job: Job, now: int, *, require_deadline: bool = True) -> Expression:
    """The guard of every worker write after the claim (docs/architecture.md rule 3): my epoch,
    still running, my lease not expired, the deadline not passed. Bumps `version` and
    `updated_at`."""
    expr = on_lease(job, now, live=True)
    if require_deadline:
        expr.condition(f"{expr.name('deadline_at')} > {expr.value(now)}")
    return expr


def owned(expr: Expression, owner: Owner) -> Expression:
    """Only the job's own tenant and user may act on it."""
    return expr.condition(
        f"{expr.name('tenant')} = {expr.value(owner.tenant)}"
        f" AND {expr.name('user_id')} = {expr.value(owner.user_id)}"
    )


def outbox_put(item: RawItem) -> dict[str, Any]:
    """The Put of a new wake-up (`outbox_item`), committed with the write that needs it
    (docs/architecture.md rules 1, 5): conditional on the item not existing."""
    return {"Put": {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def set_history(expr: Expression, job: Job, new: HistoryEntry) -> None:
    """Write the bounded history computed from `job` — valid because every caller's condition
    (the fence, or the version it read) guarantees `job` is the item as it is now."""
    history, dropped = appended(job.history, new)
    expr.set("history", history)
    if dropped:
        expr.set_raw(
            "history_dropped", f"if_not_exists({{x}}, {expr.value(0)}) + {expr.value(dropped)}"
        )


def append_history(expr: Expression, new: HistoryEntry) -> None:
    """Append without having read the item (API controls: cancel, approval). Bounded by the
    state machine: each can happen once per pause or once per life; the next bounded write
    trims the list."""
    expr.set_raw(
        "history", f"list_append(if_not_exists({{x}}, {expr.value([])}), {expr.value([new])})"
    )


def keep_for_operators(expr: Expression, target: JobState, now: int) -> None:
    """How long the table keeps a job after this write (TTL `expires_at`): a job that waits for
    an operator is never deleted silently — `unknown` has no TTL at all, `dead` and `failed` are
    kept JOB_TTL_SECONDS from the moment they got there (not from the deadline)."""
    if target is JobState.UNKNOWN:
        expr.remove("expires_at")
    elif target in {JobState.DEAD, JobState.FAILED, JobState.SUCCEEDED, JobState.CANCELLED}:
        expr.set("expires_at", now // 1000 + JOB_TTL_SECONDS)


def write_job(table: Table, expr: Expression, job_id: str, extra: list[RawItem]) -> None:
    """A worker-side write of one job: its conditional update alone (one UpdateItem) when that
    gives the guarantee, or first in one transaction with `extra` (a wake-up, a kind's items),
    returning the job as it was (ALL_OLD) when its own condition fails. ConditionFailed either
    way; what a failure means is the caller's to say."""
    update = expr.update_params(job_key(job_id))
    if not extra:
        table.update(update, return_new=False)
        return
    table.transact(
        [{"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}, *extra]
    )
