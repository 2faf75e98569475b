"""A global secondary index that lags behind its table, in moto.

On AWS a GSI is eventually consistent: a Query on it may answer from the table as it stood some
time ago (usually well under a second, unbounded under load) — listing an item that no longer
matches, leaving out one that now does, showing an old sort key. moto keeps every index in step
with its table, so a reader that trusts the index passes here and fails there. This module makes
moto's index reads lag, server side (in moto's DynamoDB backend, so the in-process mock and the
local stack's embedded server behave alike, whatever client asks):

- while lag is on, every write that changes an item — PutItem, UpdateItem, DeleteItem,
  BatchWriteItem, each write of a TransactWriteItems, at the Table's `put_item` / `delete_item`
  and the backend's `update_item` — records the item's prior version (or that it was absent)
  with the time of the write;
- a Query with `IndexName` answers from the table *as it stood at `now − lag`*: each item written
  since then is replaced by its version at that time, or left out if it did not exist. Base-table
  reads (GetItem, BatchGetItem, a Query without `IndexName`, Scan) are never lagged: they are
  what a reader re-checks an index entry against.

`lag_ms` is fixed (every index read is the full lag behind: the worst case, and deterministic)
or, with `random_up_to`, drawn per Query uniformly from 0…lag_ms with a seeded generator (so two
reads may see different pasts, as two replicas would). The clock is any `() -> ms`: the wall
clock by default; tests pass their ManualClock's `now_ms`, so "100 ms ago" is exact.

Switched on by `configure(lag_ms, …)` (tests), or for the local stack by `LEASEHOLD_GSI_LAG_MS`
in the moto server's environment (`leasehold local up --gsi-lag-ms N` sets it); `configure(0)`
switches it off and forgets what was recorded. Records older than the lag are pruned as they
age out, so memory stays in proportion to the writes of the last `lag_ms`.

`install()` runs in either order with leasehold_dev.local.moto.queries': installed first, this
module's query looks through moto_queries' candidate view to the table and answers from the
lagged items; installed after, moto_queries picks its candidates from the lagged items.
"""

from __future__ import annotations

import copy
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from leasehold_dev.local.moto.transactions import require_pinned_moto

LAG_ENVIRONMENT = "LEASEHOLD_GSI_LAG_MS"
"""The embedded moto server's index lag in ms (`500`; `0` or unset: none)."""

_HISTORY = "_leasehold_index_history"  # per moto Table: {(hash, range): [(written_at, prior)]}
_saved: dict[str, Callable[..., Any]] = {}  # moto's methods, once install() replaced them
_UNCHANGED = object()  # an item not written since the read's point in the past


class IndexLagSpecError(ValueError):
    """A LEASEHOLD_GSI_LAG_MS that is not a whole number of milliseconds ≥ 0."""


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Lag:
    lag_ms: int = 0
    random_up_to: bool = False
    clock: Callable[[], int] = wall_clock_ms
    rng: random.Random = field(default_factory=random.Random)
    generation: int = 0  # bumped by configure(): history of an earlier setting is ignored
    stale_reads: int = 0  # index reads that saw at least one item other than as stored
    current_reads: int = 0  # > 0 inside current_index(): reads see the table as stored

    def read_lag(self) -> int:
        if self.random_up_to:
            return self.rng.randint(0, self.lag_ms)
        return self.lag_ms


_lag = _Lag()
# The embedded server's DynamoDB lock already serialises requests; the in-process mock does not.
_lock = threading.Lock()


def configure(
    lag_ms: int,
    *,
    clock: Callable[[], int] | None = None,
    random_up_to: bool = False,
    seed: int | None = None,
) -> None:
    """Index reads from now on see the table as of `now − lag_ms` by `clock` (wall clock by
    default); with `random_up_to`, a lag drawn per read from 0…lag_ms (`seed`: repeatable).
    `lag_ms = 0` switches lag off. What was recorded under an earlier setting is forgotten."""
    if lag_ms < 0:
        raise IndexLagSpecError(f"an index lag is 0 ms or more, not {lag_ms}")
    with _lock:
        _lag.lag_ms = lag_ms
        _lag.random_up_to = random_up_to
        _lag.clock = clock or wall_clock_ms
        _lag.rng = random.Random(seed)
        _lag.generation += 1
        _lag.stale_reads = 0


def lag_ms() -> int:
    """The lag now configured (0: off)."""
    return _lag.lag_ms


@contextmanager
def current_index() -> Iterator[None]:
    """Index reads inside the block see the table as stored (writes are still recorded): for a
    test's own look at the index, which should not wait out the lag it imposes on the code."""
    with _lock:
        _lag.current_reads += 1
    try:
        yield
    finally:
        with _lock:
            _lag.current_reads -= 1


def stale_reads() -> int:
    """Index reads since `configure` that answered from a past unlike the table as stored
    (tests check that the lag they turned on was met at all)."""
    return _lag.stale_reads


def parse_lag(text: str | None) -> int:
    """`LEASEHOLD_GSI_LAG_MS` → ms (empty: 0). Anything else is IndexLagSpecError, never ignored."""
    value = (text or "").strip()
    if not value:
        return 0
    if not (value.isascii() and value.isdigit()):
        raise IndexLagSpecError(f"{LAG_ENVIRONMENT}={text!r}: a whole number of ms (e.g. 500)")
    return int(value)


def configure_from_environment() -> int:
    """The embedded server's switch: `LEASEHOLD_GSI_LAG_MS`, on the wall clock. The lag set."""
    configured = parse_lag(os.environ.get(LAG_ENVIRONMENT))
    configure(configured)
    return configured


# ---------------------------------------------------------------------- recording writes


def _history(table: Any) -> dict[tuple[Any, Any], list[tuple[int, Any]]]:
    """This table's records under the current setting (a fresh dict after configure())."""
    held = table.__dict__.get(_HISTORY)
    if held is None or held[0] != _lag.generation:
        held = (_lag.generation, {})
        table.__dict__[_HISTORY] = held
    history: dict[tuple[Any, Any], list[tuple[int, Any]]] = held[1]
    return history


def _stored(table: Any, hash_key: Any, range_key: Any) -> Any:
    """The item at the key, or None — without moto's get_item, which may leave an empty
    bucket behind in a table with a range key."""
    if table.range_key_attr is None:
        return table.items.get(hash_key)
    bucket = table.items.get(hash_key)
    return None if bucket is None else bucket.get(range_key)


def _record(table: Any, hash_key: Any, range_key: Any, prior: Any, now: int) -> None:
    records = _history(table).setdefault((hash_key, range_key), [])
    oldest_needed = now - _lag.lag_ms
    while records and records[0][0] <= oldest_needed:  # no read looks back that far any more
        records.pop(0)
    records.append((now, prior))


def _table_put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    if not _lag.lag_ms:
        return _saved["put_item"](self, item_attrs, *args, **kwargs)
    from moto.dynamodb.models.dynamo_type import DynamoType

    prior, key = None, None
    try:
        hash_key = DynamoType(item_attrs[self.hash_key_attr])
        range_key = DynamoType(item_attrs[self.range_key_attr]) if self.range_key_attr else None
        key = (hash_key, range_key)
        prior = _stored(self, hash_key, range_key)
    except (KeyError, TypeError):
        pass  # moto's put_item refuses the item itself, with its own error
    item = _saved["put_item"](self, item_attrs, *args, **kwargs)
    if key is not None:
        with _lock:
            # put_item replaces the stored object (the prior one is never changed again)
            _record(self, key[0], key[1], prior, _lag.clock())
    return item


def _table_delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
    removed = _saved["delete_item"](self, hash_key, range_key)
    if removed is not None and _lag.lag_ms:
        with _lock:
            _record(self, hash_key, range_key, removed, _lag.clock())
    return removed


def _backend_update_item(
    self: Any, table_name: str, key: dict[str, Any], *args: Any, **kw: Any
) -> Any:
    if not _lag.lag_ms:
        return _saved["update_item"](self, table_name, key, *args, **kw)
    # moto updates the stored item in place: its prior version must be copied first
    table = self.get_table(table_name)
    try:
        hash_key, range_key = self.get_keys_value(table, key)
        prior = copy.deepcopy(_stored(table, hash_key, range_key))
    except Exception:  # moto's update_item raises its own error for a key it cannot read
        return _saved["update_item"](self, table_name, key, *args, **kw)
    item = _saved["update_item"](self, table_name, key, *args, **kw)
    with _lock:
        # An update that creates the item went through put_item too: a second record of the
        # same absence at the same time changes no answer.
        _record(table, hash_key, range_key, prior, _lag.clock())
    return item


# ---------------------------------------------------------------------- lagged index reads


class _LaggedView:
    """The table as an index Query sees it: everything is the table's, except its items, which
    are the items as they stood at the read's point in the past."""

    def __init__(self, table: Any, items: dict[Any, Any]) -> None:
        self._table = table
        self.items = items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def all_items(self) -> list[Any]:
        rows = (
            [i for bucket in self.items.values() for i in bucket.values()]
            if self._table.range_key_attr
            else list(self.items.values())
        )
        return sorted(rows, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


def items_as_of(table: Any, as_of: int) -> dict[Any, Any]:
    """The table's `items` (moto's shape: hash → item, or hash → range → item) as they stood at
    `as_of`: each item written after it replaced by the version the first such write replaced,
    or left out if that write created it. Prunes records no read can need any more."""
    history = _history(table)
    items = dict(table.items)
    ranged = table.range_key_attr is not None
    copied: set[Any] = set()
    stale = False
    oldest_needed = _lag.clock() - _lag.lag_ms
    for key in list(history):
        records = history[key]
        while records and records[0][0] <= oldest_needed:
            records.pop(0)
        if not records:
            del history[key]
            continue
        then = next((prior for written_at, prior in records if written_at > as_of), _UNCHANGED)
        if then is _UNCHANGED:
            continue  # nothing written since as_of: the item as stored is the item then
        stale = True
        hash_key, range_key = key
        if not ranged:
            if then is None:
                items.pop(hash_key, None)
            else:
                items[hash_key] = then
            continue
        if hash_key not in copied:
            items[hash_key] = dict(items.get(hash_key) or {})
            copied.add(hash_key)
        if then is None:
            items[hash_key].pop(range_key, None)
        else:
            items[hash_key][range_key] = then
    _lag.stale_reads += stale
    return items


def _table_query(self: Any, *args: Any, **kwargs: Any) -> Any:
    index_name = kwargs.get("index_name") if "index_name" in kwargs else _arg(args, 7)
    if not index_name or not _lag.lag_ms or _lag.current_reads:
        return _saved["query"](self, *args, **kwargs)
    # Called through moto_queries' candidate view when that was installed after this module:
    # the lagged items are the table's, whatever candidates it picked from the current ones.
    table = self
    while "_table" in table.__dict__:
        table = table.__dict__["_table"]
    with _lock:
        as_of = _lag.clock() - _lag.read_lag()
        view = _LaggedView(table, items_as_of(table, as_of))
    return _saved["query"](view, *args, **kwargs)


def _arg(args: tuple[Any, ...], index: int) -> Any:
    return args[index] if len(args) > index else None


# ---------------------------------------------------------------------- install


def installed() -> bool:
    return "query" in _saved


def install() -> None:
    """Record writes and lag index reads in every moto DynamoDB backend of this process, once
    `configure` sets a lag (until then the patched methods only call moto's). Idempotent, and in
    either order with moto_queries.install(). Raises MotoVersionError, changing nothing, on any
    moto but the pinned release."""
    require_pinned_moto("index_lag", "Table.query, Table.put_item/delete_item, update_item")
    if installed():
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    _saved["put_item"] = Table.put_item
    _saved["delete_item"] = Table.delete_item
    _saved["update_item"] = DynamoDBBackend.update_item
    _saved["query"] = Table.query  # moto's, or moto_queries' when it was installed first
    Table.query = _table_query  # type: ignore[method-assign]
    Table.put_item = _table_put_item  # type: ignore[method-assign]
    Table.delete_item = _table_delete_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _backend_update_item  # type: ignore[method-assign]
