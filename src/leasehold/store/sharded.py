"""Reading a sharded `by_state` key (decision SH2): one shard's page (the sweeper's passes), or
every shard merged in sort order (the operator's views, the summary, the merged sweeps).

A page of a merged listing costs one Query per shard (each Limit'ed to the page's size, keys
only) before the first item, and one more per shard a page exhausts; its cursor is the index key
of the last entry examined, and every shard resumes strictly after that entry's sort key — sort
keys end with the item's id, so no entry is skipped or repeated."""

from __future__ import annotations

import contextlib
import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from leasehold.domain.errors import LeaseholdError
from leasehold.domain.types import RawItem
from leasehold.store.cursors import decode_cursor, encode_cursor
from leasehold.store.expressions import Expression
from leasehold.store.items import STATE_INDEX
from leasehold.store.shards import base_of, shard_key, shard_keys
from leasehold.store.table import ConditionFailed, QueryParams, Table

PK, SK = "gsi1pk", "gsi1sk"

_A = TypeVar("_A")
_R = TypeVar("_R")


class Fan(Protocol):
    """How a reader runs one request per shard: `serial` (one after another; None means it) or
    a thread pool's `map` (the summary's: decision OS3), results in the order of `items`."""

    def __call__(self, fn: Callable[[_A], _R], items: Iterable[_A], /) -> Iterator[_R]: ...


def serial(fn: Callable[[_A], _R], items: Iterable[_A], /) -> Iterator[_R]:
    """One request after another."""
    return (fn(item) for item in items)


@dataclass(frozen=True)
class IndexRange:
    """What an index Query asked for: items whose `partition_attribute` is `partition` (and
    whose `sort_attribute` is at most `sort_upto`, when given). A GSI is eventually consistent:
    it may list an item that has left the range since, so each item read back is checked
    against the range again (decision GL2) before it is believed."""

    partition_attribute: str
    partition: str
    sort_attribute: str
    sort_upto: str | None = None

    def holds(self, item: RawItem) -> bool:
        """Whether the item, as stored now, is still in the range the index listed it in."""
        partition = item.get(self.partition_attribute, {}).get("S")
        if partition != self.partition:
            return False
        if self.sort_upto is None:
            return True
        sort = item.get(self.sort_attribute, {}).get("S")
        return sort is not None and sort <= self.sort_upto

    def query(self, index_name: str, *, forward: bool) -> QueryParams:
        """The parameters of a Query for this range of the index `index_name`."""
        condition = f"{self.partition_attribute} = :p"
        values = {":p": {"S": self.partition}}
        if self.sort_upto is not None:
            condition += f" AND {self.sort_attribute} <= :u"
            values[":u"] = {"S": self.sort_upto}
        return {
            "IndexName": index_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": forward,
        }

    def start(self, cursor: str | None) -> RawItem | None:
        """Where a page of this range starts: the key a cursor names (a 400 for another
        partition's or a malformed one), or None from the start."""
        return decode_cursor(
            cursor,
            partition_attribute=self.partition_attribute,
            partition=self.partition,
            sort_attribute=self.sort_attribute,
        )


def merged_cursor(entry: RawItem | None) -> str | None:
    """A merged listing's cursor: the index key of the last entry examined."""
    if entry is None:
        return None
    return encode_cursor({name: entry[name] for name in ("pk", "sk", "gsi1pk", "gsi1sk")})


def sort_of(item: RawItem) -> str:
    """An index entry's sort key."""
    return str(item[SK]["S"])


@dataclass(frozen=True)
class ShardedRange:
    """The entries of `base`'s `count` shards (sorted at most up to `sort_upto`, when given). A GSI
    is eventually consistent: each item read back is checked against the range again (decision
    GL2) — in any shard of `base`, since a job re-keyed after a count was raised moved shards."""

    base: str
    count: int
    sort_upto: str | None = None

    def holds(self, item: RawItem) -> bool:
        """Whether the item, as stored now, is still in the range the index listed it in."""
        partition = item.get(PK, {}).get("S")
        return (
            partition is not None
            and base_of(partition) == self.base
            and self.shard_range(partition).holds(item)
        )

    def shard_range(self, partition: str) -> IndexRange:
        """One shard's part of the range: the shard whose partition key is `partition`."""
        return IndexRange(PK, partition, SK, self.sort_upto)

    def query(
        self, shard: int, *, after: str | None, limit: int, forward: bool = True
    ) -> QueryParams:
        """One shard's Query, strictly after sort key `after` in the direction read (the
        lower bound of a range with an upper one is inclusive: the entry at `after` is dropped
        by `page`)."""
        if not forward and self.sort_upto is not None:
            raise ValueError("a newest-first page of a range with an upper bound is not needed")
        params = self.shard_range(shard_key(self.base, shard)).query(STATE_INDEX, forward=forward)
        if after is not None:  # the range's bound `<= :u`, if any, becomes `BETWEEN :a AND :u`
            bound = (
                "BETWEEN :a AND :u" if self.sort_upto is not None else "> :a" if forward else "< :a"
            )
            params["KeyConditionExpression"] = f"{PK} = :p AND {SK} {bound}"
            params["ExpressionAttributeValues"][":a"] = {"S": after}
        params["Limit"] = limit
        return params

    def page(
        self, table: Table, shard: int, *, after: str | None, limit: int, forward: bool = True
    ) -> tuple[list[RawItem], str | None]:
        """Up to `limit` index entries of one shard strictly after `after`, in sort order, and
        the last sort key read — None when the shard has no more."""
        if forward and after is not None and self.sort_upto is not None and after >= self.sort_upto:
            return [], None  # nothing is after the range's end (BETWEEN refuses it)
        answer = table.query(**self.query(shard, after=after, limit=limit, forward=forward))
        entries = [e for e in answer["Items"] if after is None or sort_of(e) != after]
        if "LastEvaluatedKey" not in answer:
            return entries, None
        return entries, str(answer["LastEvaluatedKey"][SK]["S"])

    def shard_entries(
        self, table: Table, shard: int, *, after: str | None, chunk: int, forward: bool = True
    ) -> Iterator[RawItem]:
        """Every entry of one shard after `after`, read `chunk` at a time, lazily."""
        while True:
            entries, last = self.page(table, shard, after=after, limit=chunk, forward=forward)
            yield from entries
            if last is None:
                return
            after = last

    def merged(
        self,
        table: Table,
        *,
        after: str | None,
        chunk: int,
        forward: bool = True,
        fan: Fan | None = None,
    ) -> Iterator[RawItem]:
        """Every shard's entries after `after`, merged in sort order (oldest first when
        `forward`), read lazily: the first entry costs a Query per shard (with a `fan`, the
        first page of every shard read by it: at once with a thread pool's). `chunk` is what
        the caller means to take; each shard is read a share of it at a time (twice an even
        share, at least 10), and again only if the merge reaches its end."""
        count = max(self.count, 1)
        per_shard = min(chunk, max(10, -(-2 * chunk // count)))

        def first(shard: int) -> tuple[list[RawItem], str | None]:
            return self.page(table, shard, after=after, limit=per_shard, forward=forward)

        def entries(shard: int, page: list[RawItem], last: str | None) -> Iterator[RawItem]:
            yield from page
            if last is not None:
                yield from self.shard_entries(
                    table, shard, after=last, chunk=per_shard, forward=forward
                )

        pages = list(fan(first, range(count))) if fan is not None else None
        shards = [
            entries(shard, *pages[shard])
            if pages is not None
            else self.shard_entries(table, shard, after=after, chunk=per_shard, forward=forward)
            for shard in range(count)
        ]
        return heapq.merge(*shards, key=sort_of, reverse=not forward)


def count_entries(
    table: Table, base: str, shards: int, *, cap: int, fan: Fan | None = None
) -> tuple[int, bool]:
    """How many entries `base`'s shards hold, up to `cap` in all: (count, whether the count
    stopped at the cap — then there are at least that many). One `Select=COUNT` Query per shard
    (run by `fan`), each Limit'ed to an even share of the cap (at least 1) so that all may run
    at once; a shard that fills its share is read on, one after another, Limit'ed to what the
    cap leaves — the cap bounds the entries read, however the shards' counts lean."""
    counts, capped = tally_entries(table, base, shards, cap=cap, fan=fan)
    return min(sum(counts.values()), cap), capped


def tally_entries(
    table: Table,
    base: str,
    shards: int,
    *,
    cap: int,
    fan: Fan | None = None,
    classify: Callable[[str], str] | None = None,
) -> tuple[Counter[str], bool]:
    """`count_entries`, each entry counted under what `classify` makes of its sort key (with
    none, all under `""`): the same Queries, reading the sort keys instead of `Select=COUNT` —
    the same read units (a Query costs by the entries it reads, not by what it returns)."""
    keys = shard_keys(base, shards)
    share = max(1, -(-cap // len(keys)))

    def count(key: str, *, limit: int, start: Any = None) -> tuple[Counter[str], Any]:
        params: dict[str, Any] = {
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": f"{PK} = :p",
            "ExpressionAttributeValues": {":p": {"S": key}},
            "Limit": limit,
        }
        if classify is None:
            params["Select"] = "COUNT"
        else:
            params["ProjectionExpression"] = SK
        if start is not None:
            params["ExclusiveStartKey"] = start
        page = table.query(**params)
        if classify is None:
            return Counter({"": int(page["Count"])}), page.get("LastEvaluatedKey")
        return Counter(classify(sort_of(e)) for e in page["Items"]), page.get("LastEvaluatedKey")

    counted = list((fan or serial)(lambda key: count(key, limit=share), keys))
    tally: Counter[str] = sum((n for n, _ in counted), Counter())
    unread = [(key, last) for key, (_, last) in zip(keys, counted, strict=True) if last]
    while unread and tally.total() < cap:
        key, start = unread.pop(0)
        more, last = count(key, limit=cap - tally.total(), start=start)
        tally += more
        if last:
            unread.insert(0, (key, last))
    total = tally.total()
    return tally, total >= cap and (total > cap or bool(unread))


SHARDS_KEY: RawItem = {"pk": {"S": "META#index_shards"}, "sk": {"S": "META"}}
"""The item recording the highest `IndexShards` the table was written with (decision SH3)."""


class ShardCountLoweredError(LeaseholdError):
    """`IndexShards` is below the highest count the table was written with: entries in the
    shards above it would be read by nobody. Raise it back (decision SH3)."""


def record_shard_count(table: Table) -> int:
    """Record `table.index_shards` as the highest count used, or refuse a lower one (decision
    SH3): one strongly consistent GetItem, and an UpdateItem only when the count was raised
    (once per raise). The sweeper does it at the start of every run."""
    configured = table.index_shards
    item = table.get(SHARDS_KEY)
    recorded = int(item["count"]["N"]) if item else 1
    if configured < recorded:
        raise ShardCountLoweredError(
            f"IndexShards is {configured}, but the table was written with {recorded} shards: "
            f"the jobs keyed in shards {configured} to {recorded - 1} would be read by no one. "
            f"Deploy with IndexShards={recorded} (a shard count can be raised, never lowered)"
        )
    if configured > recorded:
        expr = Expression()
        count = expr.name("count")
        expr.condition(f"attribute_not_exists({count}) OR {count} < {expr.value(configured)}")
        expr.set("count", configured)
        with contextlib.suppress(ConditionFailed):  # another run recorded as much or more
            table.update(expr.update_params(SHARDS_KEY), return_new=False)
    return configured
