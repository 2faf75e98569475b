"""The writes of jobs that wait between steps (DESIGN §19, decisions WF1–WF9): a parked job,
its wake, its signals and callback tokens, its children and the fan-in counters their ends are
counted on. Every write is conditional: a stale worker can neither park, spawn nor hand out a
token (the fence), a wake moves only a job still parked on that wait, a signal is kept once, a
token is taken once, and a child's end is counted in the same transaction as the end itself."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from leasehold.domain.errors import JobNotFoundError, StaleEpochError
from leasehold.domain.job import Checkpoint, Job, Owner
from leasehold.domain.policies import in_due_index
from leasehold.domain.records import HistoryEntry
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.domain.waits import WaitRecord
from leasehold.store.expressions import Expression
from leasehold.store.guards import (
    fenced,
    new_job_writes,
    outbox_put,
    owned,
    set_history,
    state_change,
    write_job,
)
from leasehold.store.items import (
    ACTIVE_PARTITION,
    DUE_PARTITION,
    JOB_TTL_SECONDS,
    OUTBOX_PREFIX,
    due_sort_key,
    job_from_item,
    job_key,
    serialize,
)
from leasehold.store.leases import kept_outputs, wakeup_item
from leasehold.store.shards import item_key
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits_ends import _expires, fanin_key

TRANSACTION_ACTIONS = 100
_CHILDREN_PER_TRANSACTION = TRANSACTION_ACTIONS - 2
"""A transaction is the parent's fence, its children's items and one wake-up naming them all
(WF43): 98 children, when they share how they are delivered (as a `map`'s children do)."""

_SHARED = ("tenant", "user_id", "deliver_at", "kind", "priority", "cap", "tp")
"""What a spawn wake-up's children share (`spawn_item`): a child differing in one of these
starts a wake-up of its own in the transaction."""


def signal_key(job_id: str, name: str) -> RawItem:
    """A signal of a job: kept in the job's item collection (`JOB#<id>`, `SIGNAL#<name>`)."""
    pk = job_key(job_id)["pk"]
    return {"pk": pk, "sk": {"S": f"SIGNAL#{name}"}}


def callback_key(token_hash: str) -> RawItem:
    """A callback token, only ever stored hashed (`CALLBACK#<sha256>`)."""
    return {"pk": {"S": f"CALLBACK#{token_hash}"}, "sk": {"S": "CALLBACK"}}


@dataclass(frozen=True)
class FanIn:
    """A children set's ends as counted (strongly consistent)."""

    ended: int
    failed: int


@dataclass(frozen=True)
class Signal:
    """A signal as stored: its body, or the mark that its wait timed out first."""

    body: Any
    timed_out: bool


class WaitStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    # ------------------------------------------------------------------ the parked job

    def park(
        self,
        job: Job,
        checkpoint: Checkpoint,
        wait: WaitRecord,
        *,
        due_at: int | None,
        now: int,
        history: HistoryEntry | None,
        spawned: list[list[int]] | None = None,
    ) -> Job:
        """The step's checkpoint and its wait, under the fence, in one write: `queued`, due at
        `due_at` (in the due index when SQS cannot hold the wake-up that long, decision F1),
        the lease let go and the attempt given back — a wait is not a failed try. The deadline
        moves on by the wait's length: it counts the job's running time, not its waits (WF3).
        `history` None: a look that found the wait not over (no entry for it). An approval's
        wait (`due_at` None) is due at no time: `waiting_approval` until it is decided, its
        deadline where it was (WF50)."""
        expr = fenced(job, now)
        expr.set("next_step", checkpoint.next_step).set("cost_used", checkpoint.cost_used)
        expr.set("steps_used", checkpoint.steps_used).set("step_failures", 0)
        outputs = kept_outputs(self._table, job, checkpoint)  # large ones as blobs (LD4)
        expr.set("outputs", json.dumps(outputs, separators=(",", ":")))
        expr.set("wait", wait)
        expr.remove("lease_owner", "lease_expires_at", "effect_intent", "slot_token", "slots")
        expr.increment("attempts", -1)
        if spawned is not None:
            expr.set("spawned", spawned)
        if history is not None:
            set_history(expr, job, history)
        extra: list[RawItem] = []
        if due_at is None:
            state_change(expr, JobState.WAITING_APPROVAL, job.job_id, self._table, from_active=True)
            expr.remove("next_attempt_at")
        else:
            self._due(expr, job, due_at, now, extra, wait.get("type"))
        try:
            write_job(self._table, expr, job.job_id, extra)
        except ConditionFailed as failed:
            raise StaleEpochError("wait under a lost lease") from failed
        got = self._table.get(job_key(job.job_id))
        if got is None:
            raise StaleEpochError("the job is gone")
        return job_from_item(got)

    def _due(
        self,
        expr: Expression,
        job: Job,
        due_at: int,
        now: int,
        extra: list[RawItem],
        wait: str | None,
    ) -> None:
        """A parked job `queued`, due at `due_at`, its deadline moved on by the wait (WF3); in
        the due index, its sort key says what it waits for (OS6)."""
        expr.set("state", JobState.QUEUED.value)
        expr.set("next_attempt_at", due_at).set("last_dispatch_at", now)
        deadline = job.deadline_at + max(0, due_at - now)
        expr.set("deadline_at", deadline).set("expires_at", deadline // 1000 + JOB_TTL_SECONDS)
        shards = self._table.index_shards
        if in_due_index(now, due_at):
            expr.set("gsi1pk", item_key(DUE_PARTITION, job.job_id, shards))
            expr.set("gsi1sk", due_sort_key(due_at, job.job_id, wait))
        else:
            expr.set("gsi1pk", item_key(ACTIVE_PARTITION, job.job_id, shards))
            extra.append(wakeup_item(job, due_at, now))

    def wake(self, job_id: str, step: int, now: int) -> bool:
        """A parked job's wait may be over (a signal came, its last child ended): due now,
        with a wake-up, if it is still parked on the wait of `step` and not already due.
        False when it is not (woken already, moved on, gone): nothing written."""
        got = self._table.get(job_key(job_id))
        if got is None:
            return False
        job = job_from_item(got)
        if job.wait is None or job.state is not JobState.QUEUED:
            return False
        try:
            self.wake_read(job, step, now)
        except ConditionFailed:
            return False
        return True

    def wake_read(
        self,
        job: Job,
        step: int,
        now: int,
        *,
        owner: Owner | None = None,
        also: list[RawItem] | None = None,
        history: HistoryEntry | None = None,
    ) -> None:
        """The wake of `job` as read (its version), parked on the wait of `step`: due now, with
        a wake-up, and `also` in the same transaction (an approval's signal). A job paused
        for an approval (`waiting_approval`, WF50) is `queued` again by it; `owner`: only its
        owner's. ConditionFailed when the job is no longer as read."""
        expr = Expression()
        if owner is not None:
            owned(expr, owner)
        paused = job.state is JobState.WAITING_APPROVAL
        state = JobState.WAITING_APPROVAL if paused else JobState.QUEUED
        expr.condition(
            f"{expr.name('state')} = {expr.value(state.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
        )
        if paused:  # written whole: an item paused before WF50 had none (`legacy_approval_wait`)
            assert job.wait is not None
            expr.set("wait", job.wait).remove("approval")
            state_change(expr, JobState.QUEUED, job.job_id, self._table, from_active=False)
        else:
            wait_step = f"{expr.name('wait')}.{expr.name('step')}"
            expr.condition(f"{wait_step} = {expr.value(step)}")
            expr.set("gsi1pk", item_key(ACTIVE_PARTITION, job.job_id, self._table.index_shards))
        expr.increment("version").set("updated_at", now)
        expr.set("next_attempt_at", now).set("last_dispatch_at", now)
        if history is not None:
            set_history(expr, job, history)
        write_job(self._table, expr, job.job_id, [wakeup_item(job, now, now), *(also or [])])

    # ------------------------------------------------------------------ signals

    def put_signal(
        self, job: Job, name: str, body: Any, *, now: int, token_hash: str | None = None
    ) -> bool:
        """Keep a signal's body; False when one of that name is there already (or its wait
        timed out first). Sent through its callback (`token_hash`), the token is marked used
        in the same transaction: a crash between the two would have lost the signal, its
        caller's retry finding the token used (decision WF11). An unknown, used or expired
        token is JobNotFoundError (404)."""
        put = signal_put(job, name, body, now)["Put"]
        try:
            if token_hash is None:
                self._table.put(put)
            else:
                self._table.transact([{"Update": _use_token(token_hash, now)}, {"Put": put}])
        except ConditionFailed as failed:
            if token_hash is not None and failed.failed_at(0):
                raise JobNotFoundError("no such callback (unknown, used or expired)") from failed
            return False
        return True

    def signal(self, job_id: str, name: str) -> Signal | None:
        got = self._table.get(signal_key(job_id, name))
        if got is None:
            return None
        if "timed_out" in got:
            return Signal(None, True)
        return Signal(json.loads(got["body"]["S"]), False)

    def mark_timed_out(self, job: Job, name: str, *, now: int) -> bool:
        """The wait for `name` ran out: mark it so, unless the signal came first (False)."""
        item = {
            **signal_key(job.job_id, name),
            "timed_out": serialize(True),
            "at": serialize(now),
            "expires_at": serialize(_expires(job)),
        }
        try:
            self._table.put({"Item": item, "ConditionExpression": "attribute_not_exists(pk)"})
        except ConditionFailed:
            return False
        return True

    def put_callback(self, job: Job, token_hash: str, name: str, until: int, *, now: int) -> None:
        """Store a callback token's hash, under the fence: a stale worker hands out none."""
        fence = fenced(job, now)
        check = fence_check(job, fence)
        item = {
            **callback_key(token_hash),
            "job_id": serialize(job.job_id),
            "name": serialize(name),
            "until": serialize(until),
            "expires_at": serialize(until // 1000 + 24 * 3600),
        }
        try:
            self._table.transact(
                [check, {"Put": {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}]
            )
        except ConditionFailed as failed:
            raise StaleEpochError("callback token under a lost lease") from failed

    def callback_target(self, token_hash: str, *, now: int) -> tuple[str, str]:
        """A callback token's (job id, signal name), if it may still be used; an unknown, used
        or expired token is JobNotFoundError (404). It is used by `put_signal`, atomically."""
        got = self._table.get(callback_key(token_hash))
        if got is None or "used" in got or int(got["until"]["N"]) <= now:
            raise JobNotFoundError("no such callback (unknown, used or expired)")
        return got["job_id"]["S"], got["name"]["S"]

    # ------------------------------------------------------------------ children

    def write_children(self, parent: Job, children: list[Job], *, now: int) -> int:
        """The children's items and wake-ups, fenced by the parent's lease: a stale parent
        starts none. In as few transactions as DynamoDB allows: the fence, up to 98 children and
        one wake-up item naming them (the relay sends each its message: WF43); a child that
        exists already (a re-run of the step after a crash) is left as it is, so a re-run
        starts no second set. Returns how many were written now."""
        written = 0
        shards = self._table.index_shards
        chunk: list[Job] = []
        groups: set[tuple[str, ...]] = set()
        for child in children:
            group = _group_of(child, shards)
            grown = groups | ({group} if group else set())
            if chunk and 1 + len(chunk) + 1 + len(grown) > TRANSACTION_ACTIONS:
                written += self._write_chunk(parent, chunk, now, shards)
                chunk, grown = [], {group} if group else set()
            chunk.append(child)
            groups = grown
        if chunk:
            written += self._write_chunk(parent, chunk, now, shards)
        return written

    def _write_chunk(self, parent: Job, chunk: list[Job], now: int, shards: int) -> int:
        pending = list(chunk)
        while pending:
            items: list[RawItem] = [fence_check(parent, fenced(parent, now))]
            items += [new_job_writes(child, shards=shards)[0] for child in pending]
            items += spawn_items(parent, pending, shards)
            try:
                self._table.transact(items)
                return len(pending)
            except ConditionFailed as failed:
                if failed.failed_at(0):
                    raise StaleEpochError("children under a lost lease") from failed
                exists = {i - 1 for i in range(1, len(pending) + 1) if failed.failed_at(i)}
                if not exists:
                    raise
                pending = [child for i, child in enumerate(pending) if i not in exists]
        return 0

    def fanin_one(self, key: RawItem) -> int:
        """How many ends one counter item has counted (strongly consistent)."""
        got = self._table.get(key)
        return int((got or {}).get("ended", {}).get("N", "0"))

    def fanin(self, parent_id: str, step: int, shards: int) -> FanIn:
        """A set's ends so far, summed over its counter items (strongly consistent)."""
        keys = [fanin_key(parent_id, step, shard) for shard in range(shards)]
        ended = failed = 0
        for item in self._table.batch_get(keys):
            ended += int(item.get("ended", {}).get("N", "0"))
            failed += int(item.get("failed", {}).get("N", "0"))
        return FanIn(ended, failed)

    def children_states(self, ids: list[str]) -> list[Job | None]:
        """The children named, in order (None for one not written yet). Strongly consistent:
        the step after the wait reads their results, and the cascade decides from their states
        which to cancel — a read a second behind could show an ended child still running, or
        miss a child just written."""
        found = {
            job.job_id: job
            for job in (
                job_from_item(item)
                for item in self._table.batch_get([job_key(i) for i in ids], consistent=True)
            )
        }
        return [found.get(i) for i in ids]


def signal_put(job: Job, name: str, body: Any, now: int) -> RawItem:
    """The Put that keeps signal `name` of `job` once (a second one fails its condition)."""
    item = {
        **signal_key(job.job_id, name),
        "body": serialize(json.dumps(body, separators=(",", ":"))),
        "at": serialize(now),
        "expires_at": serialize(_expires(job)),
    }
    return {"Put": {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def _use_token(token_hash: str, now: int) -> dict[str, Any]:
    """The update that marks a callback token used, if it is known, unused and not expired."""
    expr = Expression()
    expr.condition(
        f"attribute_exists({expr.name('pk')}) AND attribute_not_exists({expr.name('used')})"
        f" AND {expr.name('until')} > {expr.value(now)}"
    )
    expr.set("used", now)
    return expr.update_params(callback_key(token_hash))


def _group_of(child: Job, shards: int) -> tuple[str, ...]:
    """What `child`'s wake-up shares with others (`_SHARED`); () for a child due beyond SQS's
    reach, which has no wake-up yet (the sweeper's due pass gives it one: decision F1)."""
    writes = new_job_writes(child, shards=shards)
    if len(writes) < 2:
        return ()
    item = writes[1]["Put"]["Item"]
    return tuple(json.dumps(item.get(name), sort_keys=True) for name in _SHARED)


def spawn_items(parent: Job, children: list[Job], shards: int) -> list[RawItem]:
    """The wake-ups of `children`, one outbox item per group sharing how they are delivered
    (WF43): `spawn` lists the children's ids (a `map`'s share one trace: the parent's). The
    relay sends one message per child; its key names the parent's step, epoch and first
    child, so a re-run (a new epoch) never collides with the run before."""
    grouped: dict[tuple[str, ...], list[RawItem]] = {}
    for child in children:
        writes = new_job_writes(child, shards=shards)
        if len(writes) > 1:
            item = writes[1]["Put"]["Item"]
            grouped.setdefault(_group_of(child, shards), []).append(item)
    puts: list[RawItem] = []
    for number, items in enumerate(grouped.values()):
        first = items[0]
        link = children[0].parent
        step = int(link["step"]) if link else 0
        index = int(link["index"]) if link else 0
        spawn: RawItem = {
            name: first[name] for name in (*_SHARED, "expires_at") if name in first
        } | {
            "pk": {"S": f"{OUTBOX_PREFIX}{parent.job_id}"},
            "sk": {"S": f"SPAWN#{step:05d}#{parent.epoch:06d}#{index:05d}#{number:03d}"},
            "job_id": {"S": parent.job_id},
            "spawn": {"L": [item["job_id"] for item in items]},
        }
        puts.append(outbox_put(spawn))
    return puts


def fence_check(job: Job, fence: Expression) -> RawItem:
    """A transaction's ConditionCheck of `fence` (a worker's guard) on `job`'s item: only the
    names and values the condition uses (DynamoDB refuses unused ones)."""
    params = fence.update_params(job_key(job.job_id))
    condition = params.get("ConditionExpression", "")
    used = set(re.findall(r"[:#][A-Za-z0-9_]+", condition))
    check: dict[str, Any] = {"Key": params["Key"], "ConditionExpression": condition}
    names = {k: v for k, v in (params.get("ExpressionAttributeNames") or {}).items() if k in used}
    values = {k: v for k, v in (params.get("ExpressionAttributeValues") or {}).items() if k in used}
    if names:
        check["ExpressionAttributeNames"] = names
    if values:
        check["ExpressionAttributeValues"] = values
    return {"ConditionCheck": check}


__all__ = [
    "FanIn",
    "Signal",
    "WaitStore",
    "fence_check",
    "signal_key",
    "signal_put",
]
