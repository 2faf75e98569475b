"""Keys and item shapes of the single table, and the codec between items and `Job`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from leasehold.domain.errors import JobNotFoundError
from leasehold.domain.ids import key_of
from leasehold.domain.job import Budget, Checkpoint, Job, Owner
from leasehold.domain.records import ApprovalRequest
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.domain.waits import WaitRecord, approval_wait
from leasehold.store.shards import item_key

JOB_SK = "JOB"
OUTBOX_PREFIX = "OUTBOX#"
STATE_INDEX = "by_state"
OWNER_INDEX = "by_owner"
OUTBOX_TTL_SECONDS = 2 * 24 * 3600
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
JOB_TTL_SECONDS = 30 * 24 * 3600

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


_JOB_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


def job_key(job_id: str) -> RawItem:
    """The job item's key. An id that could never have been issued is an unknown job (404), not
    a request for DynamoDB to reject."""
    if not _JOB_ID.fullmatch(job_id):
        raise JobNotFoundError(f"no job {job_id[:100]!r}")
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": JOB_SK}}


def slots_key(owner: Owner) -> RawItem:
    """The owner's own slots (`SLOTS#<tenant>#<user>`, encoded: decision ID1)."""
    return {"pk": {"S": key_of("SLOTS", owner.tenant, owner.user_id)}, "sk": {"S": "SLOTS"}}


ACTIVE_PARTITION = "STATE#active"
DUE_PARTITION = "STATE#due"
"""The due index (decision F1): `queued` jobs due further ahead than SQS holds a wake-up wait
here, sorted by when they are due, until the sweeper moves them to ACTIVE_PARTITION with a
wake-up. Only those jobs ever have an entry in it."""
ACTIVE_STATES = frozenset({JobState.QUEUED, JobState.RUNNING})
UNINDEXED_STATES = frozenset({JobState.SUCCEEDED, JobState.CANCELLED})


def job_partition(state: JobState, job_id: str, shards: int) -> str | None:
    """The job's `by_state` partition key: its state's partition, in the job's shard among
    `shards` (decision SH1); None when the state is not indexed."""
    base = state_partition(state)
    return None if base is None else item_key(base, job_id, shards)


def state_partition(state: JobState) -> str | None:
    """The job's `by_state` partition (a sparse index, decision C3): `queued` and `running`
    share one, so a claim or a retry moves no index entry; `succeeded` and `cancelled` leave the
    index (None); every state an operator acts on keeps its own."""
    if state in ACTIVE_STATES:
        return ACTIVE_PARTITION
    if state in UNINDEXED_STATES:
        return None
    return f"STATE#{state.value}"


def owner_partition(owner: Owner) -> str:
    """The owner's `by_owner` partition (`OWNER#<tenant>#<user>`, encoded: decision ID1)."""
    return key_of("OWNER", owner.tenant, owner.user_id)


def time_sort_key(created_at: int, job_id: str) -> str:
    return f"{created_at:013d}#{job_id}"


def serialize(value: Any) -> dict[str, Any]:
    """A value as a DynamoDB attribute value. A float becomes the Decimal of its shortest repr
    (exact: 17 significant digits at most; boto3 refuses floats), read back as the same float."""
    return dict(_serializer.serialize(_decimals(value)))


def _decimals(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _decimals(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decimals(v) for v in value]
    return value


def deserialize_item(item: Mapping[str, Any]) -> RawItem:
    return {name: _plain(_deserializer.deserialize(value)) for name, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


def packed_traceparent(traceparent: str | None) -> bytes | None:
    """A `00-<trace id>-<span id>-<flags>` traceparent as the job item keeps it: its 25 bytes
    (binary), 27 bytes with the name instead of 57 as text — a 3-step job's item stays under
    1 KiB, so no write of it costs a second write unit (decision TR2). None for no trace."""
    if traceparent is None or len(traceparent) != 55 or not traceparent.startswith("00-"):
        return None
    try:
        return bytes.fromhex(traceparent[3:35] + traceparent[36:52] + traceparent[53:55])
    except ValueError:
        return None


def unpacked_traceparent(value: Any) -> str | None:
    """The traceparent `packed_traceparent` packed (None for an item without one)."""
    raw = value.value if isinstance(value, Binary) else value  # type: ignore[attr-defined]
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 25:
        return None
    text = bytes(raw).hex()
    return f"00-{text[:32]}-{text[32:48]}-{text[48:]}"


def outbox_item(
    job_id: str,
    owner: Owner,
    *,
    version: int,
    deliver_at: int,
    now_ms: int,
    kind: str | None = None,
    priority: str = "normal",
    traceparent: str | None = None,
    cap: str | None = None,
) -> RawItem:
    """A wake-up waiting for the relay: the stream's INSERT of this item becomes one SQS message.
    It is never updated or deleted by code; TTL removes it (deletes by TTL are free). The sort
    key is the job's version after the write that dispatches, so each dispatch is a new item."""
    item = {
        "pk": {"S": f"{OUTBOX_PREFIX}{job_id}"},
        "sk": {"S": f"DISPATCH#{version:010d}"},
        "job_id": {"S": job_id},
        "tenant": {"S": owner.tenant},
        "user_id": {"S": owner.user_id},
        "deliver_at": {"N": str(deliver_at)},
        "expires_at": {"N": str(now_ms // 1000 + OUTBOX_TTL_SECONDS)},
    }
    if kind is not None:
        # the worker knows the job's concurrency limits without reading it (decision F2)
        item["kind"] = {"S": kind}
    if priority != "normal":
        # the relay sends it to that priority's queue (decision F4)
        item["priority"] = {"S": priority}
    if traceparent is not None:
        # the job's trace, to the relay and on to every attempt (decision TR2)
        item["tp"] = {"S": traceparent}
    if cap is not None:
        item["cap"] = {"S": cap}  # a child's max_concurrency, taken at its claim (WF7)
    return item


def cap_of(job: Job) -> str | None:
    """A child's `cap` as its wake-ups carry it (`<slot item>|<max>`), or None."""
    if not job.cap:
        return None
    return f"{job.cap['base']}|{job.cap['max']}"


def due_upto(until_ms: int) -> str:
    """The due index's sort key bound: every job due at or before `until_ms` sorts below it."""
    return f"{until_ms:013d}~"


PARKED_PREFIX = "~P#"
"""Parked jobs' due-index sort keys start with it: after every due time (digits), so the due
pass, which reads up to a time, never reaches them (decision PA2)."""
DUE_WAITS = ("signal", "children")
"""The waits a job parked in the due index says in its sort key (decision OS6)."""


def due_sort_key(due_at: int, job_id: str, wait: str | None = None) -> str:
    """A due-index sort key: when the job is due, its id and, for a wait of DUE_WAITS, the
    wait's type (`<ms>#<id>#signal`), so the summary counts each wait from the index's keys
    alone (OS6); `#` sorts below `~`, so `due_upto` still bounds it by time."""
    key = time_sort_key(due_at, job_id)
    return f"{key}#{wait}" if wait in DUE_WAITS else key


def due_wait_of(sort_key: str) -> str:
    """What a due-index entry waits for, from its sort key: `paused` (its kind, PA2), a wait
    of DUE_WAITS, else `delayed` (a delay, a retry's backoff, a durable sleep)."""
    if sort_key.startswith(PARKED_PREFIX):
        return "paused"
    wait = sort_key.split("#")[2:]  # a job id holds no `#` (_JOB_ID)
    return wait[0] if wait and wait[0] in DUE_WAITS else "delayed"


def new_job_item(job: Job, *, due_indexed: bool = False, shards: int = 1) -> RawItem:
    """The job's item; `due_indexed` puts it in the due index, sorted by when it is due; its
    `by_state` key is in the job's shard among `shards` (decision SH1)."""
    due_sort = time_sort_key(job.next_attempt_at or job.created_at, job.job_id)
    doc: RawItem = {
        "pk": f"JOB#{job.job_id}",
        "sk": JOB_SK,
        "gsi1pk": (
            item_key(DUE_PARTITION, job.job_id, shards)
            if due_indexed
            else job_partition(job.state, job.job_id, shards)
        ),
        "gsi1sk": due_sort if due_indexed else time_sort_key(job.created_at, job.job_id),
        "gsi2pk": owner_partition(job.owner),
        "gsi2sk": time_sort_key(job.created_at, job.job_id),
        "job_id": job.job_id,
        "kind": job.kind,
        "tenant": job.owner.tenant,
        "user_id": job.owner.user_id,
        "state": job.state.value,
        "payload": json.dumps(job.payload, separators=(",", ":")),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "epoch": job.epoch,
        "version": job.version,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "deadline_at": job.deadline_at,
        "next_attempt_at": job.next_attempt_at,
        "last_dispatch_at": job.last_dispatch_at,
        "steps_total": job.steps_total,
        "next_step": 0,
        "cost_used": 0,
        "steps_used": 0,
        "step_failures": 0,
        "outputs": "[]",
        "replays": 0,
        "operations": {},
        "expires_at": job.deadline_at // 1000 + JOB_TTL_SECONDS,
    }
    if job.priority != "normal":  # a normal job's item is as it was before priorities
        doc["priority"] = job.priority
    if job.step_list is not None:
        doc["step_list"] = job.step_list  # what its checkpoints will refer to (decision KV1)
    packed = packed_traceparent(job.traceparent)
    if packed is not None:
        doc["tp"] = packed  # its trace, 27 bytes on the item (decision TR2)
    if job.parent is not None:
        doc["parent"] = dict(job.parent)
    if job.cap is not None:
        doc["cap"] = dict(job.cap)
    if job.key_fields:
        doc["key_fields"] = dict(job.key_fields)  # a large payload's keyed fields (LD15)
    if job.budget.max_cost is not None:
        doc["max_cost"] = job.budget.max_cost
    if job.budget.max_steps is not None:
        doc["max_steps"] = job.budget.max_steps
    return {name: serialize(value) for name, value in doc.items() if value is not None}


def approval_of(doc: Mapping[str, Any]) -> ApprovalRequest | None:
    """A job paused for an approval shows it (`approval` in the view), read from its wait
    (decision WF50), or from the `approval` an item paused before WF50 holds."""
    wait = doc.get("wait")
    if doc.get("state") != JobState.WAITING_APPROVAL.value:
        return None
    if not wait or wait.get("type") != "approval":
        return doc.get("approval")
    return {
        "step": wait.get("step"),
        "step_name": wait.get("step_name"),
        "requested_at": wait.get("requested_at"),
    }


def legacy_approval_wait(doc: Mapping[str, Any]) -> WaitRecord | None:
    """An item paused for an approval before WF50 (`approval`, no `wait`) read as the wait
    it would have now, so its decision takes the one path."""
    old = doc.get("approval")
    if not old or doc.get("state") != JobState.WAITING_APPROVAL.value:
        return None
    return approval_wait(
        int(old["step"]), str(old.get("step_name", "")), int(old["requested_at"]), doc["epoch"]
    )


def job_from_item(item: Mapping[str, Any]) -> Job:
    doc = deserialize_item(item)
    return Job(
        job_id=doc["job_id"],
        kind=doc["kind"],
        owner=Owner(tenant=doc["tenant"], user_id=doc["user_id"]),
        state=JobState(doc["state"]),
        payload=json.loads(doc["payload"]),
        attempts=doc["attempts"],
        max_attempts=doc["max_attempts"],
        epoch=doc["epoch"],
        version=doc["version"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        deadline_at=doc["deadline_at"],
        next_attempt_at=doc.get("next_attempt_at"),
        budget=Budget(max_cost=doc.get("max_cost"), max_steps=doc.get("max_steps")),
        checkpoint=Checkpoint(
            next_step=doc.get("next_step", 0),
            cost_used=doc.get("cost_used", 0),
            steps_used=doc.get("steps_used", 0),
            outputs=json.loads(doc.get("outputs", "[]")),
            approved_step=doc.get("approved_step"),
            step_failures=doc.get("step_failures", 0),
        ),
        steps_total=doc.get("steps_total", 0),
        cancel_requested=bool(doc.get("cancel_requested", False)),
        lease_owner=doc.get("lease_owner"),
        slot_token=doc.get("slot_token"),
        slots=doc.get("slots"),
        waiting_for=doc.get("waiting_for"),
        lease_expires_at=doc.get("lease_expires_at"),
        approval=approval_of(doc),
        result=json.loads(doc["result"]) if "result" in doc else None,
        error=doc.get("error"),
        stop_reason=doc.get("stop_reason"),
        effect_intent=doc.get("effect_intent"),
        operations=doc.get("operations") or {},
        kind_state=json.loads(doc["kind_state"]) if "kind_state" in doc else None,
        replays=doc.get("replays", 0),
        history=doc.get("history", []),
        history_dropped=doc.get("history_dropped", 0),
        resolution=doc.get("resolution"),
        last_dispatch_at=doc.get("last_dispatch_at"),
        claimed_at=doc.get("claimed_at"),
        priority=doc.get("priority", "normal"),
        step_list=doc.get("step_list"),
        traceparent=unpacked_traceparent(doc.get("tp")),
        wait=doc.get("wait") or legacy_approval_wait(doc),
        parent=doc.get("parent"),
        spawned=doc.get("spawned"),
        cap=doc.get("cap"),
        key_fields=doc.get("key_fields"),
    )
