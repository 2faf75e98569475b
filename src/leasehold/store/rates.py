"""Rate items (decision F3): one per rate key, holding `tat`, GCRA's theoretical arrival time of
the next start. A take is one conditional write — `tat <= now` (or no item yet), then `tat =
now + interval` — so starts are at least `interval` apart; a take refused returns the item, and
so when the next start is due."""

from __future__ import annotations

from leasehold.domain.ids import key_of
from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.items import deserialize_item
from leasehold.store.table import ConditionFailed, Table

RATE_TTL_SECONDS = 24 * 3600
"""A rate item nobody took from for a day is deleted by TTL (an idle key costs nothing)."""


def rate_item_key(name: str) -> RawItem:
    return {"pk": {"S": name}, "sk": {"S": "RATE"}}


class RateStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def take(self, name: str, interval_ms: int, now: int) -> int | None:
        """Take a start now: None when taken, else the time (ms) the next start is due."""
        expr = Expression()
        tat = expr.name("tat")
        expr.condition(f"attribute_not_exists({tat}) OR {tat} <= {expr.value(now)}")
        expr.set("tat", now + interval_ms).set("expires_at", now // 1000 + RATE_TTL_SECONDS)
        try:
            self._table.update(expr.update_params(rate_item_key(name)), return_new=False)
        except ConditionFailed as failed:
            due = deserialize_item(failed.item or {}).get("tat")
            return int(due) if isinstance(due, int) else now + interval_ms
        return None


SUBMIT_COUNTER_TTL_SECONDS = 120
"""A second's submit counter is kept two minutes, then TTL deletes it (free)."""


def submit_counter_key(tenant: str, second: int) -> RawItem:
    """One item per tenant and second (decision Q3), the tenant encoded (decision ID1)."""
    return {"pk": {"S": key_of("SUBMITS", tenant)}, "sk": {"S": f"S#{second:011d}"}}


class SubmitCounter:
    """Fixed one-second windows of a tenant's submissions: a take is one conditional write,
    refused once the second holds `limit`."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def take(self, tenant: str, limit: int, now_ms: int, jobs: int = 1) -> bool:
        """Count `jobs` submissions of `tenant` (a batch's, decision BA5) in the second of
        `now_ms`; False when that second cannot hold them all within `limit` (nothing counted)."""
        second = now_ms // 1000
        if jobs > limit:
            return False
        expr = Expression()
        count = expr.name("n")
        expr.condition(f"attribute_not_exists({count}) OR {count} <= {expr.value(limit - jobs)}")
        expr.set_raw("n", "if_not_exists({x}, " + expr.value(0) + ") + " + expr.value(jobs))
        expr.set("expires_at", second + SUBMIT_COUNTER_TTL_SECONDS)
        try:
            self._table.update(
                expr.update_params(submit_counter_key(tenant, second)), return_new=False
            )
        except ConditionFailed:
            return False
        return True
