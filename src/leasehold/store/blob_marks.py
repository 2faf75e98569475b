"""Blob marks (decisions LD10–LD12): a small item for each job that has, or may have, blobs in
the data bucket, so the sweeper finds exactly those jobs — a job without blobs pays nothing.

Item: `pk = BLOBS#<job id>`, `sk = BLOBS`; in the sparse `by_state` index under `BLOBS#due`
(sharded like every `by_state` key, decision SH1) sorted by when the sweeper should look next
(`due_at`). `v` is a fresh token on every write: each later write is conditional on the token it
read, so a write made in between (a new blob's mark) always wins over a stale decision.

- **ensure** (before a job's first blob is written, by whatever writes it): a Put, due
  FIRST_LOOK_MS later, refused while a sweeper holds the mark to delete the job's prefix
  (`deleting`, fresh): then the writer gets a 503 and tries again; a held mark older than
  CLAIM_MS is a sweeper that crashed, and the Put takes it over.
- **claim** (the sweeper, the job item gone): `deleting` set, due CLAIM_MS later — a sweeper
  that crashes mid-delete finds it again; **release** (more objects than one visit deletes): due
  now, not held; **finish** (nothing left): out of the index, removed by the table's TTL.
- **push** (the job item alive): the next look, and which epoch's orphans were removed.

A process remembers the jobs it marked (or whose item it read a reference on: the mark exists
while the item does) for REMEMBER_MS, so a job's blobs cost one mark a process, not one each."""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.clock import Clock
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.items import (
    deserialize_item,
    due_sort_key,
    due_upto,
    job_key,
    serialize,
)
from leasehold.store.sharded import ShardedRange
from leasehold.store.shards import item_key
from leasehold.store.table import ConditionFailed, Table

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

MARK_PARTITION = "BLOBS#due"
MARK_SK = "BLOBS"
FIRST_LOOK_MS = 3600 * 1000
"""A new mark is due an hour after it is written: longer than any invocation that writes a blob
before the item naming it (an accept, a step, a spawn), so a sweeper never finds the item
missing because it is not written yet."""
CLAIM_MS = 15 * 60 * 1000
"""How long a sweeper's hold on a mark (`deleting`) keeps blob writers of the job away; a
sweeper that died holding it is taken over after this."""
REMEMBER_MS = 30 * 60 * 1000
"""How long a process trusts that a job it marked is still marked (under FIRST_LOOK_MS: a mark
whose job never came may be finished after that)."""
_REMEMBERED = 4096


def mark_key(job_id: str) -> RawItem:
    """A job's mark: its own partition, beside (not in) the job's item collection."""
    return {"pk": {"S": f"BLOBS#{job_id}"}, "sk": {"S": MARK_SK}}


@dataclass(frozen=True)
class Mark:
    """A mark as the sweeper read it (strongly consistent)."""

    job_id: str
    v: str
    due_at: int
    swept: int | None = None
    """The job item's epoch whose orphans were last removed (None: not yet)."""
    after: str | None = None
    """The last key a visit examined, when the listing has more (the next visit goes on)."""
    deleting: int | None = None


def mark_of(item: RawItem) -> Mark:
    doc = deserialize_item(item)
    return Mark(
        job_id=str(doc["job_id"]),
        v=str(doc["v"]),
        due_at=int(doc["due_at"]),
        swept=doc.get("swept"),
        after=doc.get("after"),
        deleting=doc.get("deleting"),
    )


class BlobMarks:
    """The marks of one table (the writers' `ensure`, the sweeper's page and decisions)."""

    def __init__(self, table: Table, clock: Clock) -> None:
        self._table = table
        self._clock = clock
        self._remembered: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # the sweeper's segments share an engine's store
        self.writes = 0
        """Marks this process wrote with `ensure` (a test counts them)."""

    # ------------------------------------------------------------------ writers

    def ensure(self, job_id: str) -> None:
        """The job is marked before its blob is written (one Put a process, REMEMBER_MS)."""
        now = self._clock.now_ms()
        with self._lock:
            until = self._remembered.get(job_id)
            if until is not None and until > now:
                return
        due = now + FIRST_LOOK_MS
        item = {
            **mark_key(job_id),
            "job_id": serialize(job_id),
            "v": serialize(_token()),
            "due_at": serialize(due),
            "created_at": serialize(now),
            **self._indexed(job_id, due),
        }
        try:
            self._table.put(
                {
                    "Item": item,
                    "ConditionExpression": (
                        "attribute_not_exists(pk) OR attribute_not_exists(deleting)"
                        " OR deleting < :stale"
                    ),
                    "ExpressionAttributeValues": {":stale": serialize(now - CLAIM_MS)},
                }
            )
        except ConditionFailed:
            raise StoreUnavailableError(
                f"job {job_id}'s data is being removed (its item is gone); try again"
            ) from None
        self.writes += 1
        self.note(job_id)

    def note(self, job_id: str) -> None:
        """The job is marked (this process marked it, or read a reference its item holds)."""
        with self._lock:
            self._remembered[job_id] = self._clock.now_ms() + REMEMBER_MS
            self._remembered.move_to_end(job_id)
            while len(self._remembered) > _REMEMBERED:
                self._remembered.popitem(last=False)

    # ------------------------------------------------------------------ the sweeper

    def page(
        self, shard: int, *, until: int, after: str | None, limit: int
    ) -> tuple[list[Mark], str | None]:
        """Marks of one shard due at or before `until`, soonest first, strictly after sort key
        `after`; each read back strongly consistent and kept only if still due (GL2)."""
        index = ShardedRange(MARK_PARTITION, self._table.index_shards, sort_upto=due_upto(until))
        entries, last = index.page(self._table, shard, after=after, limit=limit)
        keys = list({e["pk"]["S"]: {"pk": e["pk"], "sk": e["sk"]} for e in entries}.values())
        found = (
            {i["pk"]["S"]: mark_of(i) for i in self._table.batch_get(keys) if index.holds(i)}
            if keys
            else {}
        )
        return [found[k["pk"]["S"]] for k in keys if k["pk"]["S"] in found], last

    def collection(self, job_id: str, *, max_pages: int = 10) -> list[RawItem] | None:
        """Every item of the job's collection (`JOB#<id>`: the job, its signals), read
        consistently; None when it has more than `max_pages` pages (not judged this visit)."""
        items: list[RawItem] = []
        params: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": job_key(job_id)["pk"]},
            "ConsistentRead": True,
        }
        for _ in range(max_pages):
            answer = self._table.query(**params)
            items.extend(answer["Items"])
            if "LastEvaluatedKey" not in answer:
                return items
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return None

    def push(
        self, mark: Mark, due: int, *, swept: int | None = None, after: str | None = None
    ) -> bool:
        """The next look at `due` (False: the mark changed since it was read, nothing done)."""
        expr, _ = self._fenced(mark, due)
        expr.remove("deleting")
        if swept is not None:
            expr.set("swept", swept)
        if after is None:
            expr.remove("after")
        else:
            expr.set("after", after)
        return self._write(mark, expr)

    def claim(self, mark: Mark, now: int) -> Mark | None:
        """Held to delete the job's prefix (its item is gone): blob writers of the job are kept
        away until `finish`, `release` or CLAIM_MS. None when the mark changed since read."""
        due = now + CLAIM_MS
        expr, token = self._fenced(mark, due)
        expr.set("deleting", now)
        if not self._write(mark, expr):
            return None
        return Mark(mark.job_id, token, due, mark.swept, mark.after, now)

    def release(self, mark: Mark, due: int) -> bool:
        """A held mark with objects left: due again at `due`, not held (a later visit goes
        on; a blob writer of the job may mark it again in between)."""
        return self.push(mark, due)

    def finish(self, mark: Mark, now: int) -> bool:
        """Nothing of the job is left: the mark leaves the index; the table's TTL removes it."""
        expr = Expression()
        expr.condition(f"{expr.name('v')} = {expr.value(mark.v)}")
        expr.set("v", _token()).set("expires_at", now // 1000)
        expr.remove("gsi1pk", "gsi1sk", "deleting", "after")
        return self._write(mark, expr)

    # ------------------------------------------------------------------ helpers

    def _indexed(self, job_id: str, due: int) -> RawItem:
        return {
            "gsi1pk": {"S": item_key(MARK_PARTITION, job_id, self._table.index_shards)},
            "gsi1sk": {"S": due_sort_key(due, job_id)},
        }

    @staticmethod
    def _fenced(mark: Mark, due: int) -> tuple[Expression, str]:
        """A write of the mark as read (its token), with a new token and its next look."""
        token = _token()
        expr = Expression()
        expr.condition(f"{expr.name('v')} = {expr.value(mark.v)}")
        expr.set("v", token).set("due_at", due).set("gsi1sk", due_sort_key(due, mark.job_id))
        return expr, token

    def _write(self, mark: Mark, expr: Expression) -> bool:
        try:
            self._table.update(expr.update_params(mark_key(mark.job_id)), return_new=False)
        except ConditionFailed:
            return False
        return True


def _token() -> str:
    return secrets.token_hex(8)


# ---------------------------------------------------------------------- a job's prefix in S3

LIST_LIMIT = 1000
"""The most keys one ListObjectsV2 answers and one DeleteObjects takes."""


def listed(
    s3: S3Client, bucket: str, prefix: str, *, after: str | None = None, limit: int = LIST_LIMIT
) -> tuple[list[str], bool]:
    """Up to `limit` keys under `prefix` (a job's), in key order, strictly after `after`, and
    whether more follow (one ListObjectsV2)."""
    params: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": prefix,
        "MaxKeys": max(1, min(limit, LIST_LIMIT)),
    }
    if after is not None:
        params["StartAfter"] = after
    try:
        answer = s3.list_objects_v2(**params)
    except (ClientError, BotoCoreError) as failed:
        raise StoreUnavailableError(f"the data bucket did not list {prefix}: {failed}") from None
    return [str(o["Key"]) for o in answer.get("Contents", [])], bool(answer.get("IsTruncated"))


def deleted(s3: S3Client, bucket: str, keys: list[str]) -> int:
    """Delete `keys` (at most LIST_LIMIT, one DeleteObjects); a key that is already gone counts
    as deleted (S3's answer). Any key S3 could not delete is StoreUnavailableError."""
    if not keys:
        return 0
    try:
        answer = s3.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": key} for key in keys[:LIST_LIMIT]], "Quiet": True},
        )
    except (ClientError, BotoCoreError) as failed:
        raise StoreUnavailableError(f"the data bucket did not delete: {failed}") from None
    errors = answer.get("Errors") or []
    if errors:
        first = errors[0]
        raise StoreUnavailableError(
            f"the data bucket kept {len(errors)} key(s): {first.get('Key')} {first.get('Code')}"
        )
    return min(len(keys), LIST_LIMIT)
