"""Many new jobs in as few transactions as DynamoDB allows (`JobStore.accept_many`, issue 33
item 3, decisions BA1–BA6).

Each job brings the writes `new_job_writes` makes for it alone — its item and its outbox item
(one Put when it waits in the due index), each conditional on not existing; with an idempotency
key the job's id is derived from the key (decision C4), so a key adds no item. The jobs are
packed in order into TransactWriteItems of at most `MAX_ACTIONS` actions and `MAX_TRANSACTION_BYTES`
of items (DynamoDB's 100 actions and 4 MB), a job's writes never split between two.

A transaction cancelled because some of its conditions failed names them (CancellationReasons,
in the order of its items): each failing job gets its own answer — a repeat of an earlier
request with the same key and body (the job as it is), a key reused with another body
(`IdempotencyConflictError`) — and the rest are sent again without it. A transaction DynamoDB
refuses for another reason (an item too large) is split into one transaction a job, so only the
job at fault fails. Nothing is all-or-nothing by accident.

`guard`: a ConditionCheck added to every transaction (a parent fencing the children it writes
under its epoch). When it fails the call raises `GuardFailedError`, naming what earlier
transactions committed: the guard is the whole call's condition, not an item's.

The store not answering (after the table's bounded retries) raises `StoreUnavailableError` when
nothing of this call has been committed; otherwise the committed jobs are answered and every job
not committed gets its own `StoreUnavailableError` (decision BA4)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leasehold.domain.errors import (
    ConflictError,
    IdempotencyConflictError,
    LeaseholdError,
    StoreUnavailableError,
)
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.domain.unique import Claim
from leasehold.store.guards import new_job_writes
from leasehold.store.items import deserialize_item
from leasehold.store.table import ConditionFailed, Table

MAX_ACTIONS = 100
"""DynamoDB's most actions in one TransactWriteItems."""
MAX_TRANSACTION_BYTES = 4_000_000
"""DynamoDB's 4 MB of items in one transaction (counted as MB = 10^6 bytes, to be safe)."""
ACTION_OVERHEAD_BYTES = 256
"""Counted for each action besides its item's size (key, condition text): a margin."""


@dataclass(frozen=True)
class NewJobEntry:
    """One job of a batch, as the accept path prepared it."""

    job: Job
    fp_hash: str | None = None
    """With an idempotency key: the hash of the request (`fp`), compared on a repeat."""
    unique: Claim | None = None
    """With a unique rule: the key the job takes (committed on its own, store/unique.py)."""


@dataclass(frozen=True)
class Accepted:
    """A job of a batch that is in the table: made by this call (`created`), or by an earlier
    request with the same key and body (`created` False, `state` as the job is now)."""

    job_id: str
    created: bool
    state: str = JobState.QUEUED.value
    traceparent: str | None = None
    """The trace the new job joined (a repeat's: the one its first request gave it)."""
    debounced: bool = False
    """The submission collapsed into its debounce key's pending job (decision DB2)."""
    duplicate: bool = False
    """Not created: another job holds the request's unique key (decision UQ2); this is it."""


Outcome = Accepted | LeaseholdError
"""A job's answer: accepted, or the error that refused it (its own, as `POST /jobs` would)."""


class GuardFailedError(ConflictError):
    """The batch's guard (a ConditionCheck in every transaction) did not hold: nothing more was
    written. `outcomes` holds, in the batch's order, what earlier transactions committed (None
    for a job not committed)."""

    def __init__(self, outcomes: list[Outcome | None]) -> None:
        super().__init__("the batch's guard condition failed; nothing more was written")
        self.code = "guard_failed"
        self.outcomes = outcomes


def attribute_size(value: RawItem | Any) -> int:
    """A value's size as DynamoDB counts it, close enough for a margin (numbers by their
    digits, a list or map 3 bytes plus 1 an element)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return len(str(inner))
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(v) for k, v in inner.items())
    return sum(len(str(v).encode()) for v in inner)  # SS, NS, BS


def item_size(item: RawItem) -> int:
    """An item's size: its attribute names and values (DynamoDB's rule)."""
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def write_size(write: dict[str, Any]) -> int:
    """What one action counts against a transaction's 4 MB."""
    ((_, body),) = write.items()
    return ACTION_OVERHEAD_BYTES + item_size(body.get("Item") or body.get("Key") or {})


@dataclass
class _Planned:
    index: int
    """Where the job is in the batch."""
    entry: NewJobEntry
    writes: list[dict[str, Any]]
    size: int


def pack_sizes(
    jobs: Sequence[tuple[int, int]],
    *,
    actions: int = MAX_ACTIONS,
    budget: int = MAX_TRANSACTION_BYTES,
) -> list[list[int]]:
    """Jobs given as (actions, bytes), in order, packed into as few transactions of at most
    `actions` actions and `budget` bytes as they fit in: the jobs' positions, a list each."""
    chunks: list[list[int]] = []
    count = size = 0
    for index, (writes, bytes_) in enumerate(jobs):
        if not chunks or count + writes > actions or size + bytes_ > budget:
            chunks.append([])
            count = size = 0
        chunks[-1].append(index)
        count += writes
        size += bytes_
    return chunks


def pack(
    planned: Sequence[_Planned], *, guard: dict[str, Any] | None = None
) -> list[list[_Planned]]:
    """The jobs, in order, in as few transactions as the limits allow (a guard takes one action
    and its size in each)."""
    chunks = pack_sizes(
        [(len(p.writes), p.size) for p in planned],
        actions=MAX_ACTIONS - (1 if guard else 0),
        budget=MAX_TRANSACTION_BYTES - (write_size(guard) if guard else 0),
    )
    return [[planned[i] for i in chunk] for chunk in chunks]


def chunk_token(chunk: Sequence[_Planned]) -> str:
    """The chunk's ClientRequestToken: its jobs and their request hashes, so an SDK retry of a
    commit whose answer was lost is a no-op (store/table.py: a token met with other items is
    sent again without it)."""
    parts = "|".join(f"{p.entry.job.job_id}:{p.entry.fp_hash or ''}" for p in chunk)
    return hashlib.sha256(parts.encode()).hexdigest()[:36]


def _guard_action(guard: RawItem | None) -> dict[str, Any] | None:
    if guard is None:
        return None
    return guard if "ConditionCheck" in guard else {"ConditionCheck": guard}


def _plan(jobs: Sequence[NewJobEntry], shards: int) -> list[_Planned]:
    planned = []
    for index, entry in enumerate(jobs):
        writes = new_job_writes(entry.job, entry.fp_hash, shards=shards)
        planned.append(_Planned(index, entry, writes, sum(write_size(w) for w in writes)))
    return planned


def accept_many(
    table: Table, jobs: Sequence[NewJobEntry], *, guard: RawItem | None = None
) -> list[Outcome]:
    """Commit `jobs` (module docstring): one outcome a job, in their order."""
    outcomes: list[Outcome | None] = [None] * len(jobs)
    leaders: list[NewJobEntry] = []
    first_of: dict[str, int] = {}
    followers: list[tuple[int, int]] = []
    for index, entry in enumerate(jobs):
        seen = first_of.get(entry.job.job_id)
        if seen is None:
            first_of[entry.job.job_id] = index
            leaders.append(entry)
        elif jobs[seen].fp_hash == entry.fp_hash:
            followers.append((index, seen))  # the same key and body twice: one job
        else:
            outcomes[index] = IdempotencyConflictError(
                "this idempotency_key was used with a different body earlier in this batch"
            )
    check = _guard_action(guard)
    planned = _plan(leaders, table.index_shards)
    for job in planned:
        job.index = first_of[job.entry.job.job_id]
    chunks = pack(planned, guard=check)
    for number, chunk in enumerate(chunks):
        try:
            _commit(table, chunk, check, outcomes)
        except StoreUnavailableError as unavailable:
            if not any(isinstance(o, Accepted) and o.created for o in outcomes):
                raise
            for job in (p for later in chunks[number:] for p in later):
                if outcomes[job.index] is None:
                    outcomes[job.index] = StoreUnavailableError(
                        f"{unavailable} — this job may or may not have been accepted; retry "
                        "it with the same idempotency key to get the same job"
                    )
            break
    for index, seen in followers:
        first = outcomes[seen]
        outcomes[index] = (
            Accepted(first.job_id, created=False, state=first.state)
            if isinstance(first, Accepted)
            else first
        )
    return [o if o is not None else LeaseholdError("not attempted") for o in outcomes]


def _commit(
    table: Table,
    chunk: list[_Planned],
    guard: dict[str, Any] | None,
    outcomes: list[Outcome | None],
) -> None:
    """Commit one packed chunk: retried without each job whose condition failed (that job
    answered on its own), split into single jobs when DynamoDB refuses it for another reason."""
    pending = list(chunk)
    while pending:
        writes = [w for p in pending for w in p.writes]
        try:
            if len(writes) == 1 and guard is None:
                table.put(writes[0]["Put"])  # a due-index job alone: half a transaction's price
            else:
                table.transact(writes + ([guard] if guard else []), token=chunk_token(pending))
        except ConditionFailed as failed:
            if guard is not None and failed.failed_at(len(writes)):
                raise GuardFailedError(list(outcomes)) from failed
            pending = _settle_failed(failed, pending, outcomes, single=len(writes) == 1)
            continue
        except StoreUnavailableError:
            raise
        except LeaseholdError as refused:
            if len(pending) == 1:
                outcomes[pending[0].index] = refused
            else:
                for job in pending:
                    _commit(table, [job], guard, outcomes)
            return
        for job in pending:
            outcomes[job.index] = Accepted(job.entry.job.job_id, created=True)
        return


def _settle_failed(
    failed: ConditionFailed,
    pending: list[_Planned],
    outcomes: list[Outcome | None],
    *,
    single: bool,
) -> list[_Planned]:
    """Answer each job whose condition failed; the jobs left to send again."""
    left: list[_Planned] = []
    offset = 0
    for job in pending:
        at = [offset + i for i in range(len(job.writes))]
        offset += len(job.writes)
        if single or any(failed.failed_at(i) for i in at):
            outcomes[job.index] = _answer(failed, at[0], job, single=single)
        else:
            left.append(job)
    if len(left) == len(pending):  # nothing named: not one of ours to explain
        raise LeaseholdError("a batch's transaction failed a condition it cannot explain")
    return left


def _answer(failed: ConditionFailed, index: int, job: _Planned, *, single: bool) -> Outcome:
    """A failed job's answer: its own item's condition (at `index`) found the job there."""
    old_raw = failed.item if single else failed.old_item(index)
    if not (single or failed.failed_at(index)) or old_raw is None:
        return LeaseholdError("a job of the batch failed a condition it cannot explain")
    old = deserialize_item(old_raw)
    if job.entry.fp_hash is None:  # its own fresh id: an earlier try of this call committed
        return Accepted(job.entry.job.job_id, created=True)
    if old.get("fp") != job.entry.fp_hash:
        return IdempotencyConflictError("this idempotency_key was used with a different body")
    return Accepted(job.entry.job.job_id, created=False, state=str(old.get("state", "queued")))


__all__ = [
    "MAX_ACTIONS",
    "MAX_TRANSACTION_BYTES",
    "Accepted",
    "GuardFailedError",
    "NewJobEntry",
    "Outcome",
    "accept_many",
    "pack_sizes",
    "write_size",
]
