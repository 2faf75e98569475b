"""PauseStore: which kinds an operator paused (decisions PA1–PA5), and the jobs parked while so.

One item, `PAUSES`, holds an attribute per paused (or resuming) kind: who paused it, when and
why, and who resumed it. A worker reads it whole once per few seconds (service/pausing.py), so
a claim costs no read for it. A job whose claim finds its kind paused is **parked**: it stays
`queued`, in the due index under a sort key no due time reaches (`~P#<kind>#…`), so neither
the sweeper nor a wake-up brings it back while the kind is paused; resume pages through those
entries of one kind (a Query per index shard) and makes each due now with a wake-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leasehold.domain.clock import iso
from leasehold.domain.ids import key_of
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.guards import append_history, set_history, write_job
from leasehold.store.history import entry
from leasehold.store.items import (
    ACTIVE_PARTITION,
    DUE_PARTITION,
    JOB_TTL_SECONDS,
    PARKED_PREFIX,
    STATE_INDEX,
    deserialize_item,
    job_from_item,
    job_key,
    time_sort_key,
)
from leasehold.store.leases import wakeup_item
from leasehold.store.shards import item_key, shard_keys
from leasehold.store.table import ConditionFailed, Table

PAUSES_KEY: RawItem = {"pk": {"S": "PAUSES"}, "sk": {"S": "PAUSES"}}
PAUSED = "paused"
RESUMING = "resuming"
"""Resumed, while parked jobs may be left to wake (a resume wakes a bounded number; the sweeper
the rest): a claim runs the kind's jobs as usual."""


def _attribute(kind: str) -> str:
    return f"kind:{kind}"


def parked_prefix(kind: str) -> str:
    return f"{PARKED_PREFIX}{key_of(kind)}#"


@dataclass(frozen=True)
class KindPause:
    """One kind's entry: `state` paused or resuming; who paused it, when, why; and the last
    resume's (None while paused)."""

    kind: str
    state: str
    since: int
    by: str
    note: str
    resumed_at: int | None = None
    resumed_by: str | None = None
    resumed_note: str | None = None

    @property
    def paused(self) -> bool:
        return self.state == PAUSED

    def as_item(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "state": self.state,
            "since": self.since,
            "by": self.by,
            "note": self.note,
        }
        if self.resumed_at is not None:
            doc |= {
                "resumed_at": self.resumed_at,
                "resumed_by": self.resumed_by,
                "resumed_note": self.resumed_note,
            }
        return doc

    def waiting_for(self) -> dict[str, Any]:
        """What a job parked under this pause waits for (its view's `waiting_for`)."""
        return {"paused": {"since": iso(self.since), "by": self.by}}


def _pause_of(kind: str, doc: dict[str, Any]) -> KindPause:
    return KindPause(
        kind=kind,
        state=str(doc["state"]),
        since=int(doc["since"]),
        by=str(doc["by"]),
        note=str(doc["note"]),
        resumed_at=int(doc["resumed_at"]) if "resumed_at" in doc else None,
        resumed_by=str(doc["resumed_by"]) if "resumed_by" in doc else None,
        resumed_note=str(doc["resumed_note"]) if "resumed_note" in doc else None,
    )


class PauseStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    # ------------------------------------------------------------------ the kinds' entries

    def read(self) -> dict[str, KindPause]:
        """Every paused or resuming kind (one GetItem)."""
        item = self._table.get(PAUSES_KEY)
        if item is None:
            return {}
        doc = deserialize_item(item)
        return {
            name.removeprefix("kind:"): _pause_of(name.removeprefix("kind:"), value)
            for name, value in doc.items()
            if name.startswith("kind:") and isinstance(value, dict)
        }

    def pause(self, kind: str, *, by: str, note: str, now: int) -> tuple[KindPause, bool]:
        """Pause `kind`: (its entry, True) — or (the entry as it was, False) when it is paused
        already (a second pause changes nothing: who paused it first and why stand, PA1)."""
        entry_now = KindPause(kind, PAUSED, now, by, note)
        expr = Expression()
        attribute = expr.key(_attribute(kind))
        expr.condition(
            f"attribute_not_exists({attribute}) OR {attribute}.{expr.name('state')}"
            f" <> {expr.value(PAUSED)}"
        )
        expr.set_attribute(_attribute(kind), entry_now.as_item())
        try:
            self._table.update(expr.update_params(PAUSES_KEY), return_new=False)
        except ConditionFailed:
            current = self.read().get(kind)
            if current is not None and current.paused:
                return current, False
            raise  # changed again meanwhile: the caller's 409
        return entry_now, True

    def resume(self, kind: str, *, by: str, note: str, now: int) -> KindPause | None:
        """Resume `kind`: its entry, now `resuming` (its parked jobs are woken next); None when
        it was not paused (nothing to do: resuming twice changes nothing, PA1)."""
        current = self.read().get(kind)
        if current is None or not current.paused:
            return None
        resumed = KindPause(kind, RESUMING, current.since, current.by, current.note, now, by, note)
        expr = Expression()
        attribute = expr.key(_attribute(kind))
        expr.condition(
            f"{attribute}.{expr.name('state')} = {expr.value(PAUSED)}"
            f" AND {attribute}.{expr.name('since')} = {expr.value(current.since)}"
        )
        expr.set_attribute(_attribute(kind), resumed.as_item())
        self._table.update(expr.update_params(PAUSES_KEY), return_new=False)
        return resumed

    def resumed(self, pause: KindPause) -> bool:
        """A resume whose parked jobs have all been woken: its entry goes (unless the kind was
        paused again meanwhile). False when the entry changed."""
        expr = Expression()
        attribute = expr.key(_attribute(pause.kind))
        expr.condition(
            f"{attribute}.{expr.name('state')} = {expr.value(RESUMING)}"
            f" AND {attribute}.{expr.name('since')} = {expr.value(pause.since)}"
        )
        expr.remove_attribute(_attribute(pause.kind))
        try:
            self._table.update(expr.update_params(PAUSES_KEY), return_new=False)
        except ConditionFailed:
            return False
        return True

    # ------------------------------------------------------------------ parked jobs

    def park(self, job_id: str, pause: KindPause, *, now: int) -> bool:
        """Park a queued job of a paused kind (one transaction: the kind still paused, the job
        still queued and of that kind, PA2). Its wake-up is let go; its TTL is lifted while it is
        parked (a pause has no end the job's TTL could know). False when either condition
        failed: the kind was resumed meanwhile, or the job is no longer queued."""
        shards = self._table.index_shards
        check = Expression()
        attribute = check.key(_attribute(pause.kind))
        check.condition(f"{attribute}.{check.name('state')} = {check.value(PAUSED)}")
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('kind')} = {expr.value(pause.kind)}"
        )
        expr.increment("version").set("updated_at", now).set("parked_at", now)
        expr.set("waiting_for", pause.waiting_for())
        expr.set("gsi1pk", item_key(DUE_PARTITION, job_id, shards))
        expr.set("gsi1sk", parked_prefix(pause.kind) + time_sort_key(now, job_id))
        expr.remove("expires_at")
        # once per pause and job (a parked job is not claimed again until woken): bounded
        append_history(
            expr, entry("kind_paused", at=now, state="queued", by=pause.by, note=pause.note)
        )
        condition_check = {
            "ConditionCheck": {
                "Key": PAUSES_KEY,
                "ConditionExpression": check.condition_expression(),
                "ExpressionAttributeNames": check.names,
                "ExpressionAttributeValues": check.values,
            }
        }
        try:
            self._table.transact([condition_check, {"Update": expr.update_params(job_key(job_id))}])
        except ConditionFailed:
            return False
        return True

    def parked_page(
        self, kind: str, shard: int, *, limit: int, start: RawItem | None = None
    ) -> tuple[list[tuple[Job, int]], RawItem | None]:
        """Up to `limit` index entries of parked jobs of `kind` on one due-index shard, from
        `start`: the jobs still parked (read back strongly consistent: the index may lag), each
        with when it was parked, and where the next page starts (None: the shard is done)."""
        partition = shard_keys(DUE_PARTITION, self._table.index_shards)[shard]
        params: dict[str, Any] = {
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": "gsi1pk = :p AND begins_with(gsi1sk, :k)",
            "ExpressionAttributeValues": {
                ":p": {"S": partition},
                ":k": {"S": parked_prefix(kind)},
            },
            "Limit": limit,
        }
        if start is not None:
            params["ExclusiveStartKey"] = start
        answer = self._table.query(**params)
        after = answer.get("LastEvaluatedKey")
        keys = [{"pk": e["pk"], "sk": e["sk"]} for e in answer.get("Items", [])]
        parked: list[tuple[Job, int]] = []
        for item in self._table.batch_get(keys) if keys else []:
            sort = item.get("gsi1sk", {}).get("S", "")
            if sort.startswith(parked_prefix(kind)) and "parked_at" in item:
                parked.append((job_from_item(item), int(item["parked_at"]["N"])))
        return parked, after

    def wake(self, job: Job, parked_at: int, *, by: str, now: int) -> bool:
        """A parked job due now, with a wake-up, its deadline moved on by the time it was parked
        (a pause is not the job's running time, as a durable wait is not, WF3) and its TTL back;
        its history says who resumed the kind. False when it changed meanwhile."""
        expr = Expression()
        expr.condition(
            f"{expr.name('version')} = {expr.value(job.version)}"
            f" AND {expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
        )
        expr.increment("version").set("updated_at", now).set("last_dispatch_at", now)
        due = max(now, job.next_attempt_at or now)
        expr.set("next_attempt_at", due)
        deadline = job.deadline_at + max(0, now - parked_at)
        expr.set("deadline_at", deadline).set("expires_at", deadline // 1000 + JOB_TTL_SECONDS)
        expr.remove("waiting_for", "parked_at")
        expr.set("gsi1pk", item_key(ACTIVE_PARTITION, job.job_id, self._table.index_shards))
        expr.set("gsi1sk", time_sort_key(job.created_at, job.job_id))
        set_history(expr, job, entry("kind_resumed", at=now, state="queued", by=by))
        try:
            write_job(self._table, expr, job.job_id, [wakeup_item(job, due, now)])
        except ConditionFailed:
            return False
        return True


__all__ = ["PAUSED", "RESUMING", "KindPause", "PauseStore", "parked_prefix"]
