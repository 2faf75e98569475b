"""Keeps moto's TransactWriteItems from getting slower with every item in the table.

moto makes a rollback copy of a whole table — every item and every stream record — for every
item of every transaction (`copy.deepcopy(self.tables[name])`), so a benchmark of a few hundred
jobs spends its minutes copying. `cheap_transaction_snapshots()` swaps that one copy for an
equivalent, cheaper snapshot while a transaction runs: the table object shallow-copied, its item
dictionaries copied (not the items), the items the transaction names deep-copied (an Update
changes its item in place), and the stream shard with its record list copied. Rolled back, moto
puts the snapshot in the table's place exactly as it would have put the full copy: the items
and stream records are those from before the transaction.

Benchmark-only: nothing in leasehold imports it, and the meter never reads moto's counts.
tests/integration/test_capacity_meter_moto.py checks that a cancelled transaction still leaves
the items and the stream as they were."""

from __future__ import annotations

import contextlib
import copy as _copy
import threading
from collections import defaultdict
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

_local = threading.local()


def _snapshot(table: Any, keys: list[tuple[Any, Any]]) -> Any:
    from moto.dynamodb.models.dynamo_type import DynamoType

    clone = _copy.copy(table)
    if table.range_key_attr:
        items: Any = defaultdict(dict, {h: dict(r) for h, r in table.items.items()})
    else:
        items = defaultdict(dict, dict(table.items))
    for hash_value, range_value in keys:
        hashed, ranged = (
            DynamoType(hash_value),
            (DynamoType(range_value) if range_value is not None else None),
        )
        if ranged is not None and ranged in items.get(hashed, {}):
            items[hashed][ranged] = _copy.deepcopy(items[hashed][ranged])
        elif ranged is None and hashed in items:
            items[hashed] = _copy.deepcopy(items[hashed])
    clone.items = items
    if table.stream_shard is not None:
        shard = _copy.copy(table.stream_shard)
        shard.items = list(table.stream_shard.items)
        shard.table = clone
        clone.stream_shard = shard
    return clone


def _deepcopy(value: Any, memo: Any = None) -> Any:
    from moto.dynamodb.models.table import Table

    keys = getattr(_local, "keys", None)
    if keys is not None and isinstance(value, Table):
        return _snapshot(value, keys.get(value.name, []))
    return _copy.deepcopy(value, memo)


@contextlib.contextmanager
def cheap_transaction_snapshots() -> Iterator[None]:
    """While active, moto's in-process TransactWriteItems snapshots only what it may change."""
    from moto.dynamodb import models

    original_module_copy = models.copy
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        keys: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            source = op.get("Item") or op.get("Key") or {}
            hash_value = source.get(table.hash_key_attr)
            range_value = source.get(table.range_key_attr) if table.range_key_attr else None
            if hash_value is not None:
                keys[table.name].append((hash_value, range_value))
        _local.keys = keys
        try:
            return original(self, transact_items)
        finally:
            _local.keys = None

    models.copy = SimpleNamespace(deepcopy=_deepcopy, copy=_copy.copy)  # type: ignore[assignment]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.copy = original_module_copy
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]
