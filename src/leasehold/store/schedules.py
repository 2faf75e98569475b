"""ScheduleStore: schedules as items of the one table (decision FS3), and the fire that
advances a schedule and makes its tick's job in one transaction (decision FS4).

Item: `pk = SCHED#<tenant>#<user>`, `sk = SCHED#<id>` — so a read or delete by another owner
meets no item (404), and the owner's listing is one Query. While a schedule has a next tick it
sits in the sparse `by_state` index under `SCHEDULES#due`, sorted by `next_tick_at`: the
trigger asks for the due ones with one Query."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

from leasehold.domain.errors import (
    LeaseholdError,
    ScheduleNotFoundError,
    ScheduleQuotaExceededError,
)
from leasehold.domain.ids import key_of
from leasehold.domain.job import Owner
from leasehold.domain.schedule import (
    SCHEDULE_ACTIVE,
    SCHEDULE_DELETED,
    MissedTicks,
    Schedule,
)
from leasehold.domain.types import RawItem
from leasehold.store.cursors import decode_cursor, encode_cursor
from leasehold.store.expressions import Expression
from leasehold.store.history import appended, entry
from leasehold.store.items import JOB_TTL_SECONDS, deserialize_item, serialize
from leasehold.store.sharded import ShardedRange
from leasehold.store.shards import item_key
from leasehold.store.table import ConditionFailed, QueryParams, Table

DUE_PARTITION = "SCHEDULES#due"
SCHEDULE_PREFIX = "SCHED#"


def schedule_partition(tenant: str, user_id: str) -> str:
    """The owner's schedules' partition (`SCHED#<tenant>#<user>`, encoded: decision ID1)."""
    return key_of(SCHEDULE_PREFIX.rstrip("#"), tenant, user_id)


def schedule_key(tenant: str, user_id: str, schedule_id: str) -> RawItem:
    return {
        "pk": {"S": schedule_partition(tenant, user_id)},
        "sk": {"S": f"{SCHEDULE_PREFIX}{schedule_id}"},
    }


COUNT_SORT_KEY = "SCHEDCOUNT"
"""The owner's count of active schedules (decision Q2) sits in the owner's partition under this
sort key: not `SCHED#…`, so the owner's listing never meets it."""


def count_key(tenant: str, user_id: str) -> RawItem:
    return {"pk": {"S": schedule_partition(tenant, user_id)}, "sk": {"S": COUNT_SORT_KEY}}


def due_sort_key(next_tick_at: int, schedule_id: str) -> str:
    return f"{next_tick_at:013d}#{schedule_id}"


def schedule_item(schedule: Schedule, *, shards: int = 1) -> RawItem:
    """The schedule's item; while it has a next tick it is in the due index, in its shard
    among `shards` (decision SH1)."""
    doc: RawItem = {
        **{k: v["S"] for k, v in schedule_key(*_owner_id(schedule)).items()},
        "schedule_id": schedule.schedule_id,
        "tenant": schedule.owner_tenant,
        "user_id": schedule.owner_user,
        "expression": schedule.expression,
        "timezone": schedule.timezone,
        "missed": schedule.missed.value,
        "job": json.dumps(schedule.job, separators=(",", ":")),
        "anchor_at": schedule.anchor_at,
        "created_at": schedule.created_at,
        "updated_at": schedule.updated_at,
        "state": schedule.state,
        "version": schedule.version,
        "ticks_fired": schedule.ticks_fired,
        "ticks_skipped": schedule.ticks_skipped,
        "declared_by_kind": schedule.declared_by_kind,
        "history": list(schedule.history),
    }
    if schedule.counted:
        doc["counted"] = True
    if schedule.next_tick_at is not None:
        doc["next_tick_at"] = schedule.next_tick_at
        doc["gsi1pk"] = item_key(DUE_PARTITION, schedule.schedule_id, shards)
        doc["gsi1sk"] = due_sort_key(schedule.next_tick_at, schedule.schedule_id)
    return {name: serialize(value) for name, value in doc.items()}


def _due_at(schedule: Schedule, now: int) -> bool:
    """Whether the schedule, as its item says, is active with a tick at or before `now`."""
    tick = schedule.next_tick_at
    return schedule.state == SCHEDULE_ACTIVE and tick is not None and tick <= now


def _owner_id(schedule: Schedule) -> tuple[str, str, str]:
    return schedule.owner_tenant, schedule.owner_user, schedule.schedule_id


def schedule_from_item(item: RawItem) -> Schedule:
    doc = deserialize_item(item)
    return Schedule(
        schedule_id=doc["schedule_id"],
        owner_tenant=doc["tenant"],
        owner_user=doc["user_id"],
        expression=doc["expression"],
        timezone=doc["timezone"],
        missed=MissedTicks(doc["missed"]),
        job=json.loads(doc["job"]),
        anchor_at=doc["anchor_at"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        next_tick_at=doc.get("next_tick_at"),
        state=doc["state"],
        version=doc["version"],
        ticks_fired=doc.get("ticks_fired", 0),
        ticks_skipped=doc.get("ticks_skipped", 0),
        last_tick_at=doc.get("last_tick_at"),
        last_job_id=doc.get("last_job_id"),
        last_error=doc.get("last_error"),
        declared_by_kind=bool(doc.get("declared_by_kind", False)),
        history=tuple(doc.get("history") or ()),
        counted=bool(doc.get("counted", False)),
    )


def _count_change(schedule: Schedule, by: int, quota: int | None) -> dict[str, Any]:
    """The Update of the owner's schedule count by `by`: below `quota` to add one (0 or None:
    no limit), above 0 to take one away."""
    expr = Expression()
    count = expr.name("n")
    if by > 0 and quota:
        expr.condition(f"attribute_not_exists({count}) OR {count} < {expr.value(quota)}")
    if by < 0:
        expr.condition(f"{count} > {expr.value(0)}")
    expr.set_raw("n", "if_not_exists({x}, " + expr.value(0) + ") + " + expr.value(by))
    return expr.update_params(count_key(schedule.owner_tenant, schedule.owner_user))


class ScheduleStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    @property
    def shard_count(self) -> int:
        """How many shards the due schedules' key is written and read over (decision SH1)."""
        return self._table.index_shards

    def create(
        self, schedule: Schedule, *, replace_deleted: bool = False, quota: int | None = None
    ) -> bool:
        """Put the schedule if its id is new (or, with `replace_deleted`, names a deleted one:
        a kind's declaration removed, then declared again); False when it exists already (a
        declared schedule created by another cold start).

        With `quota` (an owner's schedule: 0 = no limit), the owner's count of active schedules
        goes up by one in the same transaction, refused with ScheduleQuotaExceededError when it
        is at `quota` already; the schedule is marked `counted`, so its delete gives it back."""
        condition = "attribute_not_exists(pk)"
        values: dict[str, Any] = {}
        if replace_deleted:
            condition += " OR #state = :deleted"
            values = {
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":deleted": {"S": SCHEDULE_DELETED}},
            }
        if quota is not None:
            schedule = replace(schedule, counted=True)
        writes: list[dict[str, Any]] = [
            {
                "Put": {
                    "Item": schedule_item(schedule, shards=self.shard_count),
                    "ConditionExpression": condition,
                    **values,
                }
            }
        ]
        if quota is not None:
            writes.append({"Update": _count_change(schedule, +1, quota)})
        try:
            self._table.transact(writes)
        except ConditionFailed as failed:
            if quota is not None and failed.failed_at(1):
                raise ScheduleQuotaExceededError(
                    f"you have {quota} active schedules, the most this deployment allows one "
                    "caller (SchedulesPerOwner); delete one to make another"
                ) from failed
            return False
        return True

    def get(self, owner: Owner, schedule_id: str) -> Schedule:
        """The caller's schedule (a deleted one too, with its history, until it expires);
        anything else is the same 404 as an unknown id."""
        if not schedule_id or len(schedule_id) > 100:
            raise ScheduleNotFoundError(f"no schedule {schedule_id[:100]!r}")
        item = self._table.get(schedule_key(owner.tenant, owner.user_id, schedule_id))
        if item is None:
            raise ScheduleNotFoundError(f"no schedule {schedule_id!r}")
        return schedule_from_item(item)

    def list_for_owner(
        self, owner: Owner, *, limit: int, cursor: str | None
    ) -> tuple[list[Schedule], str | None]:
        """The owner's schedules, newest first (ids are time-ordered), one Query page."""
        partition = schedule_partition(owner.tenant, owner.user_id)
        params: QueryParams = {
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":p": {"S": partition}, ":s": {"S": SCHEDULE_PREFIX}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        start = decode_cursor(
            cursor,
            partition_attribute="pk",
            partition=partition,
            sort_attribute="sk",
            index_keys=False,
        )
        if start:
            params["ExclusiveStartKey"] = start
        page = self._table.query(**params)
        schedules = [schedule_from_item(item) for item in page["Items"]]
        return schedules, encode_cursor(page.get("LastEvaluatedKey"))

    def delete(self, owner: Owner, schedule_id: str, *, by: str, now: int) -> Schedule:
        """Stop the schedule for good: it leaves the due index, keeps its history (who deleted it
        and when) and expires after the job retention. Conditional on the version read, so a
        fire in between is not undone; deleting a deleted schedule is a 404."""
        for _ in range(5):
            current = self.get(owner, schedule_id)
            if current.state != SCHEDULE_ACTIVE:
                raise ScheduleNotFoundError(f"no schedule {schedule_id!r}")
            history, _dropped = appended(list(current.history), entry("deleted", at=now, by=by))
            expr = Expression()
            expr.condition(f"{expr.name('version')} = {expr.value(current.version)}")
            expr.set("state", SCHEDULE_DELETED).set("updated_at", now).set("history", history)
            expr.set("expires_at", now // 1000 + JOB_TTL_SECONDS).increment("version")
            expr.remove("gsi1pk", "gsi1sk")
            key = schedule_key(owner.tenant, owner.user_id, schedule_id)
            if not current.counted:
                try:
                    item = self._table.update(expr.update_params(key))
                except ConditionFailed:
                    continue  # a fire moved it: read again
                assert item is not None
                return schedule_from_item(item)
            # A counted schedule gives its place in the owner's quota back in the same write.
            try:
                self._table.transact(
                    [
                        {"Update": expr.update_params(key)},
                        {"Update": _count_change(current, -1, None)},
                    ]
                )
            except ConditionFailed:
                continue  # a fire moved it: read again
            return self.get(owner, schedule_id)
        raise LeaseholdError("the schedule kept changing while it was being deleted")

    def due(self, now: int, *, limit: int) -> list[Schedule]:
        """Active schedules whose next tick is at or before `now`, earliest first.

        The index only nominates: a GSI is eventually consistent, so it may still list a
        schedule at a tick fired a moment ago (its next tick a period away) or one deleted since.
        Each is kept only if its item — read strongly consistent — is active and due at `now`.
        Merged over the shards (decision SH2): a Query per shard, the `limit` earliest taken."""
        index = ShardedRange(DUE_PARTITION, self.shard_count, sort_upto=f"{now:013d}#~")
        entries = list(itertools.islice(index.merged(self._table, after=None, chunk=limit), limit))
        return self._read_due(entries, now)

    def due_page(
        self, shard: int, *, now: int, after: str | None, limit: int
    ) -> tuple[list[Schedule], str | None]:
        """Active schedules of one due shard whose next tick is at or before `now`, earliest
        first, strictly after sort key `after` (None: from the start); returns (schedules, last
        sort key read — None when the shard is exhausted). `limit` bounds the entries read;
        each is re-checked on its item (decision GL2)."""
        if not 0 <= shard < self.shard_count:
            raise ValueError(f"no shard {shard} of {self.shard_count}")
        index = ShardedRange(DUE_PARTITION, self.shard_count, sort_upto=f"{now:013d}#~")
        entries, last = index.page(self._table, shard, after=after, limit=limit)
        return self._read_due(entries, now), last

    def _read_due(self, entries: list[RawItem], now: int) -> list[Schedule]:
        keys = list(
            {(e["pk"]["S"], e["sk"]["S"]): {"pk": e["pk"], "sk": e["sk"]} for e in entries}.values()
        )
        if not keys:
            return []
        found = [schedule_from_item(item) for item in self._table.batch_get(keys)]
        return sorted(
            (s for s in found if _due_at(s, now)),
            key=lambda s: (s.next_tick_at or 0, s.schedule_id),
        )

    def advance(
        self,
        schedule: Schedule,
        *,
        next_tick_at: int | None,
        fired: int,
        skipped: int,
        last_tick_at: int,
        last_job_id: str | None,
        last_error: str | None,
        now: int,
    ) -> dict[str, Any]:
        """The transaction item that moves the schedule past its due tick — conditional on the
        tick still being the one due (and the schedule active), so of two fires of one tick
        only one commits."""
        expr = Expression()
        expr.condition(
            f"{expr.name('next_tick_at')} = {expr.value(schedule.next_tick_at)}"
            f" AND {expr.name('state')} = {expr.value(SCHEDULE_ACTIVE)}"
        )
        expr.increment("version").set("updated_at", now).set("last_tick_at", last_tick_at)
        expr.increment("ticks_fired", fired).increment("ticks_skipped", skipped)
        if next_tick_at is None:
            expr.remove("next_tick_at", "gsi1pk", "gsi1sk")
        else:
            expr.set("next_tick_at", next_tick_at)
            expr.set("gsi1sk", due_sort_key(next_tick_at, schedule.schedule_id))
        if last_job_id is not None:
            expr.set("last_job_id", last_job_id)
        if last_error is not None:
            expr.set("last_error", last_error[:200])
        else:
            expr.remove("last_error")
        params = expr.update_params(schedule_key(*_owner_id(schedule)))
        return {"Update": params}

    def fire(self, advance: dict[str, Any], job_writes: list[list[dict[str, Any]]]) -> int | None:
        """Commit the schedule's advance with its tick jobs' writes, all or nothing; the number
        of jobs it wrote. None when another fire moved the schedule first (nothing written).
        A tick's job that exists
        already (the same tick fired before, its advance lost) is left as it is and the advance
        commits without it: one job per tick, and the schedule never sticks on a tick."""
        pending = list(job_writes)
        for _ in range(len(job_writes) + 1):
            items = [advance, *(write for writes in pending for write in writes)]
            try:
                self._table.transact(items)
                return len(pending)
            except ConditionFailed as failed:
                if failed.failed_at(0):
                    return None
                offset, kept = 1, []
                for writes in pending:
                    if not any(failed.failed_at(offset + i) for i in range(len(writes))):
                        kept.append(writes)
                    offset += len(writes)
                if len(kept) == len(pending):
                    raise LeaseholdError(
                        "a schedule's fire failed a condition it cannot explain"
                    ) from failed
                pending = kept
        raise LeaseholdError("a schedule's fire kept failing")
