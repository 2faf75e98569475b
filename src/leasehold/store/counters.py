"""Outcome counters (decision OS1): how many jobs succeeded, failed, died, were cancelled, ended
`unknown` or were retried, per minute, so the operator summary counts every outcome without
reading a job.

One item per minute and shard: `pk` `COUNT#outcomes` in shard k of the table's index shards
(`COUNT#outcomes#k`, the bare key for shard 0; k chosen at random per increment, so each shard
takes an even share and no key is hot: decision SH1's count), `sk` the minute's start in ms (13
digits), one number attribute per outcome. A write is an `ADD` of its own after the outcome was
written (a worker batch's outcomes in one, at its end) — best effort (a lost one is a chart a
job short, never a job lost) — and the item expires (`expires_at`, the table's TTL) a day after
its minute. Reading the last hour is one Query per shard of the minutes after the hour's start
(about 60 items of ~100 B: the minimum read unit), eventually consistent."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from leasehold.domain.types import RawItem
from leasehold.store.shards import shard_key
from leasehold.store.table import Table

COUNTER_BASE = "COUNT#outcomes"
MINUTE_MS = 60_000
COUNTER_TTL_SECONDS = 24 * 3600
"""A counter item outlives its minute by a day: only the last hour is read; DynamoDB's TTL
deletes it for nothing."""
OUTCOMES = ("succeeded", "failed", "dead", "cancelled", "unknown", "retried", "budget_exhausted")
"""What is counted: the states an attempt or an operator ends a job in, a retry, and a stop for
an exhausted budget (a `failed` job counted twice: as failed and as why)."""


def minute_of(at_ms: int) -> int:
    """The start of the minute `at_ms` falls in (ms)."""
    return at_ms - at_ms % MINUTE_MS


def counter_key(shard: int, minute: int) -> RawItem:
    return {"pk": {"S": shard_key(COUNTER_BASE, shard)}, "sk": {"S": f"{minute:013d}"}}


class OutcomeCounters:
    """The per-minute outcome counters of one table."""

    def __init__(self, table: Table, *, pick: Callable[[int], int] | None = None) -> None:
        self._table = table
        self._pick = pick or random.randrange

    @property
    def shards(self) -> int:
        return max(self._table.index_shards, 1)

    def add_many(self, at_ms: int, counts: dict[str, int]) -> None:
        """Count outcomes of one minute (`{"succeeded": 3, "retried": 1}`) in one UpdateItem
        (`ADD`) of a ~100-byte item: one write unit, one outcome or a worker batch's. Raises
        StoreUnavailableError like any write; the caller decides to let go."""
        chosen = {name: n for name, n in counts.items() if n > 0}
        if set(chosen) - set(OUTCOMES):
            raise ValueError(f"{sorted(set(chosen) - set(OUTCOMES))} are not outcomes kept here")
        if not chosen:
            return
        minute = minute_of(at_ms)
        names = {f"#o{i}": name for i, name in enumerate(sorted(chosen))}
        values = {f":n{i}": {"N": str(chosen[name])} for i, name in enumerate(sorted(chosen))}
        adds = ", ".join(f"#o{i} :n{i}" for i in range(len(names)))
        self._table.update(
            {
                "Key": counter_key(self._pick(self.shards), minute),
                "UpdateExpression": f"ADD {adds} SET #e = :e",
                "ExpressionAttributeNames": {**names, "#e": "expires_at"},
                "ExpressionAttributeValues": {
                    **values,
                    ":e": {"N": str(minute // 1000 + COUNTER_TTL_SECONDS)},
                },
            },
            return_new=False,
        )

    def shard_query(self, shard: int, since_ms: int) -> dict[str, object]:
        """The Query of one shard's minutes from `since_ms` on (eventually consistent)."""
        return {
            "KeyConditionExpression": "pk = :p AND sk >= :s",
            "ExpressionAttributeValues": {
                ":p": {"S": shard_key(COUNTER_BASE, shard)},
                ":s": {"S": f"{minute_of(since_ms):013d}"},
            },
        }

    def read_shard(self, shard: int, since_ms: int) -> list[RawItem]:
        """Every counter item of one shard from the minute of `since_ms` on."""
        params = self.shard_query(shard, since_ms)
        items: list[RawItem] = []
        while True:
            page = self._table.query(**params)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def per_minute(items: Iterable[RawItem], first: int, count: int) -> dict[int, dict[str, int]]:
    """The counter items summed by minute (every shard's item of a minute into one), for the
    `count` minutes from minute `first` on (oldest first); items of other minutes are left out."""
    minutes = {minute_of(first) + n * MINUTE_MS: dict.fromkeys(OUTCOMES, 0) for n in range(count)}
    for item in items:
        minute = int(item["sk"]["S"])
        if minute not in minutes:
            continue
        for outcome in OUTCOMES:
            if outcome in item:
                minutes[minute][outcome] += int(item[outcome]["N"])
    return minutes
