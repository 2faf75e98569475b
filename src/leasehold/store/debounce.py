"""Debounced accept (decisions DB1–DB6): a `DEBOUNCE#<key>` item names the pending job of a
key's window; a submission either collapses into that job or opens a new window.

- **Collapse**: one conditional UpdateItem of the pending job — still `queued` and never
  claimed (`attempts = 0`) — pushing `next_attempt_at` (and the deadline
  with it) to the window's new end, and with `keep="last"` the payload and its plan. The
  claim's own condition (`next_attempt_at <= now`) then refuses a wake-up that comes early;
  the refused wake-up is hidden until the new due time (service/claiming.py, NOT_DUE).
- **New window**: the new job's writes and a Put of the `DEBOUNCE#` item, in one
  transaction, conditional on the item being absent (no window yet) or still naming the
  job it named when read (that job has started or ended).

Whichever of a submission and a claim commits first wins on the one job item: a claim first
makes the collapse fail (`attempts` moved), and the submission opens the next window; a
collapse first makes the claim fail (not due). One run, never two, never none. A failed
condition is read again and tried again, a bounded number of times (then a 503)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from leasehold.domain.debounce import Debounce
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.ids import key_of
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.store.blobs import is_ref
from leasehold.store.expressions import Expression
from leasehold.store.guards import new_job_writes
from leasehold.store.items import (
    DUE_PARTITION,
    JOB_TTL_SECONDS,
    deserialize_item,
    job_from_item,
    job_key,
    serialize,
    time_sort_key,
)
from leasehold.store.table import ConditionFailed, Table

DEBOUNCE_SK = "DEBOUNCE"
DEBOUNCE_TRIES = 8
"""How often a submission reads again after a failed condition before it answers 503."""
KEEP_SECONDS = 24 * 3600
"""How long a window's item outlives the window's longest wait (TTL `expires_at`)."""


def debounce_key(key: str) -> RawItem:
    return {"pk": {"S": key_of("DEBOUNCE", key)}, "sk": {"S": DEBOUNCE_SK}}


@dataclass(frozen=True)
class DebouncePlan:
    """What one submission writes: `writes` (transaction entries; the first is the job's own)
    and the job it names — a new one (`debounced` False) or the pending one it collapses into."""

    job_id: str
    debounced: bool
    writes: list[dict[str, Any]]
    state: str = JobState.QUEUED.value


def plan_debounced(table: Table, job: Job, key: str, debounce: Debounce, now: int) -> DebouncePlan:
    """Read the key's window and its pending job (strongly consistent) and plan the writes of
    the submission that made `job` (not yet written, due at the window's end)."""
    window = table.get(debounce_key(key))
    doc = deserialize_item(window) if window else None
    pending_item = table.get(job_key(str(doc["job_id"]))) if doc else None
    if doc and pending_item:
        pending = job_from_item(pending_item)
        if pending.state is JobState.QUEUED and pending.attempts == 0:
            due = debounce.due(now, int(doc["window_from"]))
            new = _moved_payload(table, job, pending) if debounce.keep == "last" else job
            return DebouncePlan(
                pending.job_id, True, [_collapse(pending, pending_item, new, debounce, due)]
            )
    writes = new_job_writes(job, shards=table.index_shards)
    expr = Expression()
    if doc:
        expr.condition(f"{expr.name('job_id')} = {expr.value(doc['job_id'])}")
    else:
        expr.condition("attribute_not_exists(pk)")
    item = {
        **debounce_key(key),
        "job_id": serialize(job.job_id),
        "kind": serialize(job.kind),
        "window_from": serialize(now),
        "expires_at": serialize((now + debounce.max_wait * 1000) // 1000 + KEEP_SECONDS),
    }
    put: dict[str, Any] = {"Item": item, "ConditionExpression": expr.condition_expression()}
    if expr.names:
        put["ExpressionAttributeNames"] = expr.names
        put["ExpressionAttributeValues"] = expr.values
    return DebouncePlan(job.job_id, False, [*writes, {"Put": put}])


def _moved_payload(table: Table, job: Job, pending: Job) -> Job:
    """`job` with its payload as the pending job's item may hold it: a payload in the data bucket
    is copied under the pending job's prefix (a job reads only its own blobs, LD4) by one
    CopyObject, before the collapse names it (LD19); the new job's own blob is never referenced
    (its item is never written: the sweeper's blob pass removes it, LD11)."""
    if table.blobs is None or not is_ref(job.payload):
        return job
    return replace(job, payload=table.blobs.handed(job.job_id, job.payload, pending.job_id))


def _collapse(pending: Job, raw: RawItem, new: Job, debounce: Debounce, due: int) -> dict[str, Any]:
    """The pending job's update: due at `due` (its deadline as far after it as before), with
    the new submission's payload and plan when the kind keeps the last."""
    expr = Expression()
    # Never claimed, still queued: the claim's own write changes both (the fence, DB3). Not
    # the version: submissions racing each other may all collapse, in any order.
    expr.condition(
        f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
        f" AND {expr.name('attempts')} = {expr.value(0)}"
    )
    deadline_at = due + (pending.deadline_at - (pending.next_attempt_at or pending.created_at))
    expr.set("next_attempt_at", due).set("deadline_at", deadline_at)
    expr.set("expires_at", deadline_at // 1000 + JOB_TTL_SECONDS)
    expr.increment("version").set("updated_at", new.created_at)
    if raw.get("gsi1pk", {}).get("S", "").startswith(DUE_PARTITION):
        # the due index's order, while the job is in it (the sweeper may have moved it out)
        expr.condition(f"begins_with({expr.name('gsi1pk')}, {expr.value(DUE_PARTITION)})")
        expr.set("gsi1sk", time_sort_key(due, pending.job_id))
    if debounce.keep == "last":
        expr.set("payload", json.dumps(new.payload, separators=(",", ":")))
        if new.key_fields:  # the claim's keys follow the payload (LD15)
            expr.set("key_fields", dict(new.key_fields))
        elif pending.key_fields:
            expr.remove("key_fields")
        expr.set("steps_total", new.steps_total)
        if new.step_list is not None:
            expr.set("step_list", new.step_list)
    update = expr.update_params(job_key(pending.job_id))
    return {"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def commit_debounced(table: Table, plan: DebouncePlan) -> None:
    """The plan's writes: one UpdateItem for a collapse, one transaction for a new window.
    ConditionFailed when the window or the pending job changed since it was read."""
    if len(plan.writes) == 1:
        update = dict(plan.writes[0]["Update"])
        update.pop("ReturnValuesOnConditionCheckFailure", None)  # table.update asks for it
        table.update(update, return_new=False)
    else:
        table.transact(plan.writes)


def accept_debounced(
    table: Table, job: Job, key: str, debounce: Debounce, now: int
) -> DebouncePlan:
    """Plan and commit, reading again after a failed condition (another submission, or the
    claim, got there first); StoreUnavailableError after DEBOUNCE_TRIES (nothing committed)."""
    for attempt in range(1, DEBOUNCE_TRIES + 1):
        plan = plan_debounced(table, job, key, debounce, now)
        try:
            commit_debounced(table, plan)
        except ConditionFailed:
            table.retry.pause(min(attempt, 4))
            continue
        return plan
    raise StoreUnavailableError(
        f"the debounce window stayed contended over {DEBOUNCE_TRIES} tries; nothing was "
        "accepted - retry the submission"
    )


__all__ = ["DebouncePlan", "accept_debounced", "commit_debounced", "plan_debounced"]
