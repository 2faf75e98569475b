"""JobStore: how a job comes into the table and how it is read back — accept (job + outbox
wake-up in one transaction, docs/architecture.md rule 1), get, and the listings."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import (
    JobNotFoundError,
    ValidationError,
)
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.domain.unique import Claim
from leasehold.store.batch import NewJobEntry, Outcome, accept_many
from leasehold.store.cursors import (
    cursor_partition,
    decode_cursor,  # noqa: F401 - its home before SH2
    decode_sharded_cursor,
    encode_cursor,
)
from leasehold.store.errors import translate
from leasehold.store.guards import new_job_writes
from leasehold.store.items import (
    ACTIVE_PARTITION,
    DUE_PARTITION,
    OWNER_INDEX,
    STATE_INDEX,
    deserialize_item,
    due_upto,
    job_from_item,
    job_key,
    owner_partition,
    state_partition,
    unpacked_traceparent,
)
from leasehold.store.keys import (  # their home before they moved out
    fingerprint_hash,
    repeat_of,
    request_token,
)
from leasehold.store.sharded import Fan, IndexRange, ShardedRange, count_entries, merged_cursor
from leasehold.store.shards import base_of, shard_keys
from leasehold.store.table import ConditionFailed, QueryParams, Table
from leasehold.store.unique import accept_many_unique, accept_unique


@dataclass(frozen=True)
class AcceptResult:
    job_id: str
    created: bool
    state: str = JobState.QUEUED.value
    """`queued` for a new job; a repeat's state as its failed condition found the job."""
    traceparent: str | None = None
    """A repeat's trace, as its failed condition found the job (a new job's is its own)."""
    duplicate: bool = False
    """Not created: the job that holds the request's unique key (decision UQ2)."""


DUE_START = "due"
"""The cursor of `queued` jobs that goes on at the start of the due index (decision F1)."""


class JobStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def accept(
        self, job: Job, *, idempotency: str | None, fingerprint: str, unique: Claim | None = None
    ) -> AcceptResult:
        """Job + outbox wake-up in one transaction, each Put on `attribute_not_exists`.
        Returns only after the commit (docs/architecture.md rule 1). With an idempotency key
        the job's id is derived from the key (decision C4), so the key needs no item of its
        own: a repeat fails the job's own condition and finds the first job in the failure —
        the same body answers it, another body is a conflict. With a `unique` claim the
        transaction also takes its key (store/unique.py); without one it writes nothing more."""
        fp_hash = fingerprint_hash(fingerprint)
        keyed = idempotency is not None
        items = new_job_writes(job, fp_hash if keyed else None, shards=self._table.index_shards)
        token = request_token(job.owner, idempotency, fp_hash) if idempotency else None
        if unique is not None:
            done = accept_unique(
                self._table, job, items, unique, fp_hash=fp_hash if keyed else None, token=token
            )
            return AcceptResult(
                done.job_id, done.created, done.state, done.traceparent, duplicate=done.duplicate
            )
        try:
            if len(items) == 1:
                # A job in the due index has no wake-up yet (decision F1): its Put alone is
                # the commit, at half a transaction's price.
                self._table.put(items[0]["Put"])
            else:
                self._table.transact(items, token=token)
        except ConditionFailed as failed:
            if not repeat_of(failed, 0, fp_hash if keyed else None):
                return AcceptResult(job_id=job.job_id, created=True)
            # The job as the condition found it: a repeat needs no second read.
            old = deserialize_item(failed.old_item(0) or {})
            state = str(old.get("state", JobState.QUEUED.value))
            traceparent = unpacked_traceparent(old.get("tp"))
            return AcceptResult(job.job_id, created=False, state=state, traceparent=traceparent)
        return AcceptResult(job_id=job.job_id, created=True)

    def accept_many(
        self, jobs: list[NewJobEntry], *, guard: RawItem | None = None
    ) -> list[Outcome]:
        """Many new jobs, few transactions, each job answered on its own (store/batch.py; a job
        with a unique claim on its own, store/unique.py)."""
        if any(entry.unique is not None for entry in jobs):
            return accept_many_unique(self._table, jobs, guard=guard)
        return accept_many(self._table, jobs, guard=guard)

    def states(self, job_ids: list[str]) -> dict[str, str]:
        """The current state of each job named (one BatchGetItem per hundred; an id with no job
        is left out)."""
        keys = [job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        return {item["job_id"]["S"]: item["state"]["S"] for item in self._table.batch_get(keys)}

    def get(self, job_id: str) -> Job | None:
        item = self._table.get(job_key(job_id))
        return job_from_item(item) if item else None

    def get_owned(self, owner: Owner, job_id: str) -> Job:
        """The job if it is the caller's; otherwise the same JobNotFoundError as an unknown id."""
        job = self.get(job_id)
        if job is None or (job.owner.tenant, job.owner.user_id) != (owner.tenant, owner.user_id):
            raise JobNotFoundError(f"no job {job_id}")
        return job

    def list_for_owner(
        self, owner: Owner, *, state: JobState | None, limit: int, cursor: str | None
    ) -> tuple[list[Job], str | None]:
        """The owner's jobs, newest first (index `by_owner`, keys only: a state filter is
        applied to the items read, decision C2)."""
        index = IndexRange("gsi2pk", owner_partition(owner), "gsi2sk")
        return self._query_jobs(
            index.query(OWNER_INDEX, forward=False),
            limit=limit,
            start=index.start(cursor),
            keep=None if state is None else (lambda job: job.state is state),
            index=index,
        )

    def list_by_state(
        self,
        state: JobState,
        *,
        limit: int,
        cursor: str | None = None,
        kind: str | None = None,
        tenant: str | None = None,
        include_delayed: bool = True,
    ) -> tuple[list[Job], str | None]:
        """Jobs in one state, oldest first (index `by_state`; `queued` and `running` share a
        partition and are told apart by reading the items). `succeeded` and `cancelled` jobs are
        not in the index (decision C3). `kind` and `tenant` filter the items read (the index is
        keys only, decision C2's way): a page may come back short, with a cursor to go on.
        `queued` lists the jobs delayed beyond 15 minutes (the due index) after the others,
        unless `include_delayed` is False."""
        partition = state_partition(state)
        if partition is None:
            raise ValidationError(
                f"{state.value} jobs are not listed by state: finished jobs leave the state "
                "index; find them by id, or by owner with GET /jobs?state="
            )
        if state is JobState.QUEUED and include_delayed:
            return self._list_queued(limit=limit, cursor=cursor, kind=kind, tenant=tenant)
        return self._list_partition(
            state, partition, limit=limit, cursor=cursor, kind=kind, tenant=tenant
        )

    def _list_queued(
        self, *, limit: int, cursor: str | None, kind: str | None, tenant: str | None
    ) -> tuple[list[Job], str | None]:
        """`queued` jobs: those that may run now or within 15 minutes (the active shards,
        oldest first), then the delayed ones of the due index (decision F1, soonest due
        first). A cursor names the index it is in; `DUE_START` is the due index from its
        start, when a page ended exactly at the active jobs' end."""
        in_due = cursor == DUE_START or base_of(cursor_partition(cursor) or "") == DUE_PARTITION
        jobs: list[Job] = []
        next_cursor: str | None = None
        if not in_due:
            jobs, next_cursor = self._list_partition(
                JobState.QUEUED,
                ACTIVE_PARTITION,
                limit=limit,
                cursor=cursor,
                kind=kind,
                tenant=tenant,
            )
            if next_cursor is not None:
                return jobs, next_cursor
            if len(jobs) == limit:  # the active jobs ended with this page: the due ones next
                return jobs, DUE_START if self.count_due(max_pages=1) else None
            cursor = None
        due, next_cursor = self._list_partition(
            JobState.QUEUED,
            DUE_PARTITION,
            limit=limit - len(jobs),
            cursor=None if cursor == DUE_START else cursor,
            kind=kind,
            tenant=tenant,
        )
        return jobs + due, next_cursor

    def _list_partition(
        self,
        state: JobState,
        base: str,
        *,
        limit: int,
        cursor: str | None,
        kind: str | None,
        tenant: str | None,
    ) -> tuple[list[Job], str | None]:
        def keep(job: Job) -> bool:
            # queued and running share a partition; a job in the due index is queued, and a
            # lagging index may still list one that has been cancelled since
            return (
                job.state is state
                and (kind is None or job.kind == kind)
                and (tenant is None or job.owner.tenant == tenant)
            )

        start = decode_sharded_cursor(cursor, base=base)
        return self._merged_jobs(
            ShardedRange(base, self.shard_count),
            limit=limit,
            after=start[0] if start else None,
            keep=keep,
        )

    @property
    def shard_count(self) -> int:
        """How many shards each `by_state` key is read over (decision SH1)."""
        return self._table.index_shards

    def active_page(
        self, shard: int, *, after: str | None, limit: int
    ) -> tuple[list[Job], str | None]:
        """queued+running jobs of one active shard, oldest first, strictly after sort key
        `after` (None: from the start); returns (jobs, last sort key read — None when the shard
        is exhausted). `limit` bounds the index entries read; each item is read back strongly
        consistent and kept only while it is still active (decision GL2)."""
        return self._shard_jobs(
            ShardedRange(ACTIVE_PARTITION, self.shard_count), shard, after, limit
        )

    def due_page(
        self, shard: int, *, until: int, after: str | None, limit: int
    ) -> tuple[list[Job], str | None]:
        """jobs of one due shard due at or before `until`, soonest first, after `after`; same
        return as `active_page` (each still in the due index and due by then, decision GL2)."""
        index = ShardedRange(DUE_PARTITION, self.shard_count, sort_upto=due_upto(until))
        return self._shard_jobs(index, shard, after, limit)

    def _shard_jobs(
        self, index: ShardedRange, shard: int, after: str | None, limit: int
    ) -> tuple[list[Job], str | None]:
        if not 0 <= shard < self.shard_count:
            raise ValueError(f"no shard {shard} of {self.shard_count}")
        entries, last = index.page(self._table, shard, after=after, limit=limit)
        return self._read_back(entries, index), last

    def _read_back(self, entries: list[RawItem], index: ShardedRange) -> list[Job]:
        """The jobs the entries name, in their order, read strongly consistent, each kept only
        if it is still in the range (decision GL2), each once."""
        keys = list({e["pk"]["S"]: {"pk": e["pk"], "sk": e["sk"]} for e in entries}.values())
        if not keys:
            return []
        found = {
            item["pk"]["S"]: job_from_item(item)
            for item in self._table.batch_get(keys)
            if index.holds(item)
        }
        return [found[key["pk"]["S"]] for key in keys if key["pk"]["S"] in found]

    def list_active(self, *, limit: int) -> list[Job]:
        """`queued` and `running` jobs, oldest first, merged over the shards (a Query each)."""
        index = ShardedRange(ACTIVE_PARTITION, self.shard_count)
        jobs, _ = self._merged_jobs(index, limit=limit, after=None, keep=None)
        return jobs

    def list_due(self, *, until: int, limit: int) -> list[Job]:
        """Jobs in the due index (decision F1) due at or before `until`, soonest first — each
        still in the due index and due by then as its item says (decision GL2)."""
        index = ShardedRange(DUE_PARTITION, self.shard_count, sort_upto=due_upto(until))
        jobs, _ = self._merged_jobs(index, limit=limit, after=None, keep=None)
        return jobs

    def unfinished_consistent(self, *, max_pages: int = 100) -> tuple[list[Job], list[Job]]:
        """Every job with something left to do — (active: queued and running; delayed: in the due
        index) — from a strongly consistent Scan of the table, not from an index: for a small
        table whose reader must not take an eventually consistent index's word that nothing is
        left (the testbed's idle check, decision GL4). Costs the whole table in reads. Every
        shard's key matches (decision SH2): the base key itself, or the base and `#`."""
        params: dict[str, Any] = {
            "TableName": self._table.name,
            "ConsistentRead": True,
            "FilterExpression": (
                "gsi1pk IN (:active, :due) OR begins_with(gsi1pk, :active_k)"
                " OR begins_with(gsi1pk, :due_k)"
            ),
            "ExpressionAttributeValues": {
                ":active": {"S": ACTIVE_PARTITION},
                ":due": {"S": DUE_PARTITION},
                ":active_k": {"S": f"{ACTIVE_PARTITION}#"},
                ":due_k": {"S": f"{DUE_PARTITION}#"},
            },
        }
        active: list[Job] = []
        delayed: list[Job] = []
        for _ in range(max_pages):
            try:
                page = self._table.client.scan(**params)
            except (ClientError, BotoCoreError) as exc:
                raise translate(exc) from exc
            for item in page["Items"]:
                due = base_of(item["gsi1pk"]["S"]) == DUE_PARTITION
                (delayed if due else active).append(job_from_item(item))
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return active, delayed

    def count_due(self, *, max_pages: int = 10) -> int:
        """Jobs waiting in the due index (bounded: at most `max_pages` pages a shard)."""
        total = 0
        for key in shard_keys(DUE_PARTITION, self.shard_count):
            params: QueryParams = {
                "IndexName": STATE_INDEX,
                "KeyConditionExpression": "gsi1pk = :p",
                "ExpressionAttributeValues": {":p": {"S": key}},
                "Select": "COUNT",
            }
            for _ in range(max_pages):
                page = self._table.query(**params)
                total += page["Count"]
                if "LastEvaluatedKey" not in page:
                    break
                params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return total

    @staticmethod
    def _base(which: JobState | str) -> str | None:
        if which == "active":
            return ACTIVE_PARTITION
        if which == "delayed":
            return DUE_PARTITION
        return state_partition(JobState(which))

    def count_indexed(
        self, which: JobState | str, *, cap: int, fan: Fan | None = None
    ) -> tuple[int, bool]:
        """How many index entries a `by_state` key holds over its shards, counted up to `cap`:
        (count, whether it reached the cap — then there are at least that many). `which` is a
        state the index holds apart (waiting_approval, failed, dead, unknown), `"active"` (queued
        and running: one key) or `"delayed"` (the due index, decision F1).

        A Query per shard (run by `fan`), `Select=COUNT`, `Limit`ed by the cap: no job item read;
        the keys-only index costs by its entries (~100 B each, so ≤ 1,000 entries ≈ 13 read
        units), eventually consistent — a count may lag a write by a second, which an overview
        can afford."""
        base = self._base(which)
        if base is None or (base == ACTIVE_PARTITION and which != "active"):
            raise ValueError(f"{which} is not counted apart in the state index")
        return count_entries(self._table, base, self.shard_count, cap=cap, fan=fan)

    def sample(
        self, which: JobState | str, *, limit: int, newest: bool = False, fan: Fan | None = None
    ) -> list[Job]:
        """Up to `limit` jobs of a `by_state` key (as `count_indexed` names them), oldest
        first (or newest first): a Query of `limit` index keys per shard, merged, and one
        BatchGetItem of their items, read eventually consistent — what an overview shows, at a
        bounded cost."""
        base = self._base(which)
        if base is None:
            return []
        index = ShardedRange(base, self.shard_count)
        entries = list(
            itertools.islice(
                index.merged(self._table, after=None, chunk=limit, forward=not newest, fan=fan),
                limit,
            )
        )
        keys = [{"pk": item["pk"], "sk": item["sk"]} for item in entries]
        if not keys:
            return []
        found = {
            item["pk"]["S"]: job_from_item(item)
            for item in self._table.batch_get(keys, consistent=False)
        }
        return [found[key["pk"]["S"]] for key in keys if key["pk"]["S"] in found]

    def _merged_jobs(
        self,
        index: ShardedRange,
        *,
        limit: int,
        after: str | None,
        keep: Callable[[Job], bool] | None,
        max_pages: int = 10,
    ) -> tuple[list[Job], str | None]:
        """The jobs of every shard of `index`, merged oldest first, strictly after sort key
        `after`: entries taken in order a batch at a time, their items read strongly consistent
        and kept while still in the range (decision GL2) and accepted by `keep`, until `limit`
        jobs or `max_pages` batches. The cursor is the index key of the last entry examined
        (None when none is left), so nothing is skipped or repeated."""
        entries = index.merged(self._table, after=after, chunk=limit)
        jobs: list[Job] = []
        last: RawItem | None = None
        for _ in range(max_pages):
            batch: list[RawItem] = []
            for entry in entries:
                if last is not None and entry["pk"] == last["pk"]:
                    continue  # the same job under two shards' keys (a raise, a lag)
                batch.append(entry)
                last = entry
                if len(batch) == (limit if keep is not None else limit - len(jobs)):
                    break
            if not batch:
                return jobs, None
            by_pk = {job.job_id: job for job in self._read_back(batch, index)}
            for entry in batch:
                job = by_pk.get(entry["pk"]["S"].removeprefix("JOB#"))
                if job is None or (keep is not None and not keep(job)):
                    continue
                jobs.append(job)
                if len(jobs) == limit:
                    last = entry
                    more = entry is not batch[-1] or next(entries, None) is not None
                    return jobs, merged_cursor(last) if more else None
        return jobs, merged_cursor(last)

    def _query_jobs(
        self,
        params: QueryParams,
        *,
        limit: int,
        start: RawItem | None,
        keep: Callable[[Job], bool] | None,
        index: IndexRange,
        max_pages: int = 10,
    ) -> tuple[list[Job], str | None]:
        """Query the index page by page, read the items (strongly consistent), keep those still
        in the `index` range asked for and that `keep` accepts (all of them when it is None),
        until `limit` jobs or the pages run out. The cursor is the index key of the last job
        returned (or of the last page read), so nothing is skipped or repeated."""
        index_keys = (index.partition_attribute, index.sort_attribute)
        jobs: list[Job] = []
        last_key: RawItem | None = None
        for _ in range(max_pages):
            page_params: QueryParams = {
                **params,
                "Limit": limit if keep is not None else limit - len(jobs),
            }
            if start:
                page_params["ExclusiveStartKey"] = start
            page = self._table.query(**page_params)
            keys = [{"pk": item["pk"], "sk": item["sk"]} for item in page["Items"]]
            found = {
                item["pk"]["S"]: job_from_item(item)
                for item in self._table.batch_get(keys)
                if index.holds(item)
            }
            last_key = page.get("LastEvaluatedKey")
            for key in keys:
                job = found.get(key["pk"]["S"])
                if job is None or (keep is not None and not keep(job)):
                    continue
                jobs.append(job)
                if len(jobs) == limit:
                    item_key = {"pk": key["pk"], "sk": key["sk"]}
                    raw = next(i for i in page["Items"] if i["pk"] == key["pk"])
                    item_key.update({name: raw[name] for name in index_keys})
                    more = last_key is not None or key is not keys[-1]
                    return jobs, encode_cursor(item_key) if more else None
            if not last_key:
                break
            start = last_key
        return jobs, encode_cursor(last_key)
