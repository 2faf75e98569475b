"""Per-user concurrency slots (decision C5): one small item per tenant+user holding one attribute
per running job (its claim's token) and their count `n`. Taking and releasing a slot are single
conditional writes on that item — never a transaction shared with the job's own write, so the
item is not a hot spot that cancels every concurrent claim and outcome of the user.

The limit holds because of the order and the tokens:
- a worker takes a slot *before* it claims the job (the job records the token, `slot_token`),
  and releases it only *after* the job left `running` under its epoch; so every running job
  holds an entry, and entries never exceed the limit (`n < limit` is the take's condition);
- an entry is removed only by the claim that made it or adopted it (its token must match), or
  by the repair of entries older than a grace period whose job does not hold them (a worker that
  died between its outcome and its release); the grace (twice the lease) is far longer than a
  take followed by its claim, which the client's own timeouts bound to seconds.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.items import deserialize_item, job_from_item, job_key, slots_key
from leasehold.store.rates import RateStore
from leasehold.store.table import ConditionFailed, Table


def new_token(now: int) -> str:
    """A claim's slot token: when it was taken (for the repair's grace) and a random part."""
    return f"{now:x}.{secrets.token_hex(3)}"


def token_time(token: str) -> int:
    head = token.partition(".")[0]
    try:
        return int(head, 16)
    except ValueError:
        return 0


@dataclass(frozen=True)
class Take:
    took: bool
    held_token: str | None = None
    """The job already holds an entry (an earlier claim's, to be adopted or found stale)."""
    full_item: RawItem | None = None
    """The slot item when every slot was taken (for the repair)."""


def holders_of(item: RawItem | None) -> dict[str, str]:
    """The entries of a slot item: job id → token."""
    doc = deserialize_item(item) if item else {}
    return {name: value for name, value in doc.items() if name.startswith("j_")}


def slot_item_key(name: str) -> RawItem:
    """The key of a declared limit's slot item (decision F2)."""
    return {"pk": {"S": name}, "sk": {"S": "SLOTS"}}


Holds = Callable[[Job, str, str], bool]
"""Whether a job holds an entry (job, item name, token): it runs under that token."""


def holds_user_slot(job: Job, name: str, token: str) -> bool:
    return job.state is JobState.RUNNING and job.slot_token == token


def holds_declared_slot(job: Job, name: str, token: str) -> bool:
    return job.state is JobState.RUNNING and (job.slots or {}).get(name) == token


class SlotStore:
    def __init__(self, table: Table, limit: int, grace_ms: int) -> None:
        self._table = table
        self.limit = limit
        self._grace_ms = grace_ms

    def take(self, owner: Owner, job_id: str, token: str) -> Take:
        """A per-user slot (the default limit)."""
        return self.take_at(slots_key(owner), self.limit, job_id, token)

    def take_at(self, key: RawItem, limit: int, job_id: str, token: str) -> Take:
        """An entry on the slot item `key` holding at most `limit`: one conditional write."""
        expr = Expression()
        entry, count = expr.key(job_id), expr.name("n")
        expr.condition(
            f"attribute_not_exists({entry}) AND (attribute_not_exists({count})"
            f" OR {count} < {expr.value(limit)})"
        )
        expr.set_raw("n", f"if_not_exists({{x}}, {expr.value(0)}) + {expr.value(1)}")
        expr.set_attribute(job_id, token)
        try:
            self._table.update(expr.update_params(key), return_new=False)
        except ConditionFailed as failed:
            held = holders_of(failed.item).get(job_id)
            if held is not None:
                return Take(took=False, held_token=held)
            return Take(took=False, full_item=failed.item)
        return Take(took=True)

    def release(self, owner: Owner, job_id: str, token: str) -> bool:
        """Remove the job's entry if it is still `token`'s; False when it was not (already
        released, repaired, or another claim's)."""
        return self.release_at(slots_key(owner), job_id, token)

    def release_at(self, key: RawItem, job_id: str, token: str) -> bool:
        expr = Expression()
        entry = expr.key(job_id)
        expr.condition(f"{entry} = {expr.value(token)}")
        expr.remove_attribute(job_id).set_raw("n", f"{{x}} - {expr.value(1)}")
        try:
            self._table.update(expr.update_params(key), return_new=False)
        except ConditionFailed:
            return False
        return True

    def repair(self, owner: Owner, item: RawItem | None, now: int) -> int:
        """Free the entries, older than the grace, of jobs that do not hold them (left by a
        worker that died between its outcome and its release). Returns how many were freed."""
        return self.repair_at(slots_key(owner), item, now, holds_user_slot)

    def repair_at(self, key: RawItem, item: RawItem | None, now: int, holds: Holds) -> int:
        stale = {
            job_id: token
            for job_id, token in holders_of(item).items()
            if now - token_time(token) > self._grace_ms
        }
        if not stale:
            return 0
        jobs = {
            item["job_id"]["S"]: job_from_item(item)
            for item in self._table.batch_get([job_key(job_id) for job_id in stale])
        }
        name = key["pk"]["S"]
        freed = 0
        for job_id, token in stale.items():
            job = jobs.get(job_id)
            if job is not None and holds(job, name, token):
                continue  # its job runs under it
            freed += self.release_at(key, job_id, token)
        return freed

    def holders(self, owner: Owner) -> dict[str, str]:
        """Jobs holding one of the owner's slots, with their tokens (tests, operators)."""
        return holders_of(self._table.get(slots_key(owner)))


def running_slots(table: Table, owner: Owner) -> set[str]:
    """Jobs holding one of the owner's per-user slots."""
    return set(holders_of(table.get(slots_key(owner))))


@dataclass(frozen=True)
class ClaimStores:
    """What a claim may take before its own write (service/claiming.py decides which): the
    per-user slot (decision C5, None when the deployment sets no limit), the slot items of
    kinds' declared limits (F2) and the kinds' rates (F3)."""

    per_user: SlotStore | None
    declared: SlotStore
    rates: RateStore

    @staticmethod
    def over(table: Table, slot_limit: int = 0, slot_grace_ms: int = 120_000) -> ClaimStores:
        per_user = SlotStore(table, slot_limit, slot_grace_ms) if slot_limit > 0 else None
        return ClaimStores(per_user, SlotStore(table, 0, slot_grace_ms), RateStore(table))
