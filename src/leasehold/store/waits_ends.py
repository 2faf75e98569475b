"""What commits with a job's end when it is a child or a parent (DESIGN §19, WF4, WF6): its
count on its parent's fan-in, and the wake-up that cancels its own unfinished children. Kept
apart from store/waits.py so every writer of an end (store/leases.py, upkeep.py, operator.py,
controls.py) can import it."""

from __future__ import annotations

from typing import Any

from leasehold.domain.job import Job
from leasehold.domain.states import TERMINAL_STATES, JobState
from leasehold.domain.types import RawItem
from leasehold.domain.waits import fanin_shard
from leasehold.store.expressions import Expression
from leasehold.store.guards import outbox_put
from leasehold.store.items import JOB_TTL_SECONDS, OUTBOX_PREFIX, OUTBOX_TTL_SECONDS


def fanin_key(parent_id: str, step: int, shard: int) -> RawItem:
    """A fan-in counter item: one of a children set's `shards`, each its own partition (WF4)."""
    return {"pk": {"S": f"FANIN#{parent_id}#{step}#{shard}"}, "sk": {"S": "FANIN"}}


def _expires(job: Job) -> int:
    return job.deadline_at // 1000 + JOB_TTL_SECONDS


def child_end_item(job: Job, target: JobState) -> RawItem | None:
    """The fan-in count of a child's end, to commit in the same transaction as the end itself
    (so a redelivery, which finds the child ended, never counts it again); None for a job that
    is no child or a state that is no end."""
    parent = job.parent
    if parent is None or target not in TERMINAL_STATES:
        return None
    failed = 0 if target is JobState.SUCCEEDED else 1
    return _fanin_add(job, parent, 1, failed)


def end_items(job: Job, target: JobState, now: int) -> list[RawItem]:
    """What must commit with any end of `job` (DESIGN §19): its count on its parent's fan-in,
    if it is a child; and, if it was waiting for children of its own, the wake-up that cancels
    those not ended yet (WF6)."""
    items: list[RawItem] = []
    counted = child_end_item(job, target)
    if counted is not None:
        items.append(counted)
    wait = job.wait
    if target in TERMINAL_STATES and wait is not None and wait.get("type") == "children":
        items.append(cascade_item(job, int(wait.get("step", 0)), 0, now))
    return items


def child_reopen_item(job: Job) -> RawItem | None:
    """An operator's replay of an ended child takes its end back off the count (it will end
    again and be counted again)."""
    parent = job.parent
    if parent is None or job.state not in TERMINAL_STATES:
        return None
    return _fanin_add(job, parent, -1, 0 if job.state is JobState.SUCCEEDED else -1)


def _fanin_add(job: Job, parent: Any, ended: int, failed: int) -> RawItem:
    shard = fanin_shard(job.job_id, int(parent["shards"]))
    expr = Expression()
    expr.set_raw("ended", "if_not_exists({x}, " + expr.value(0) + ") + " + expr.value(ended))
    expr.set_raw("failed", "if_not_exists({x}, " + expr.value(0) + ") + " + expr.value(failed))
    expr.set("expires_at", _expires(job))
    return {"Update": expr.update_params(fanin_key(parent["job_id"], int(parent["step"]), shard))}


def cascade_item(job: Job, step: int, start: int, now: int) -> RawItem:
    """A wake-up that cancels the children of `job`'s set `step` from index `start` (the worker
    pages through them, WF6): committed with the parent's end, so it is never lost."""
    return outbox_put(
        {
            "pk": {"S": f"{OUTBOX_PREFIX}{job.job_id}"},
            "sk": {"S": f"CASCADE#{step:05d}#{start:06d}#{job.version + 1:010d}"},
            "job_id": {"S": job.job_id},
            "tenant": {"S": job.owner.tenant},
            "user_id": {"S": job.owner.user_id},
            "deliver_at": {"N": str(now)},
            "cascade": {"S": f"{step}:{start}"},
            "expires_at": {"N": str(now // 1000 + OUTBOX_TTL_SECONDS)},
        }
    )


__all__ = ["cascade_item", "child_end_item", "child_reopen_item", "end_items", "fanin_key"]
