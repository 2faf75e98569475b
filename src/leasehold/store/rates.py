"""Rate items (decision F3): one per rate key, holding `tat`, GCRA's theoretical arrival time of
the next start. A take is one conditional write — `tat <= now` (or no item yet), then `tat =
now + interval` — so starts are at least `interval` apart; a take refused returns the item, and
so when the next start is due."""

from __future__ import annotations

from typing import Any

from leasehold.store.expressions import Expression
from leasehold.store.items import deserialize_item
from leasehold.store.table import ConditionFailed, Table

RATE_TTL_SECONDS = 24 * 3600
"""A rate item nobody took from for a day is deleted by TTL (an idle key costs nothing)."""


def rate_item_key(name: str) -> dict[str, Any]:
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
