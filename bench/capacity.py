"""DynamoDB's capacity rules as functions: item sizes, write and read units, index entries,
and the price of one write. Pure (no I/O); bench/meter.py applies them to real requests, and
tests/unit/test_capacity_meter.py checks them against items worked out by hand. The rules and
their sources are listed in bench/meter.py and bench/README.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

KIB = 1024
WRITE_UNIT_BYTES = KIB
READ_UNIT_BYTES = 4 * KIB

Item = Mapping[str, Any]
"""An item in DynamoDB's wire format: {name: {"S": ...} | {"N": ...} | ...}."""


# ---------------------------------------------------------------------------------------- sizes


def number_size(text: str) -> int:
    """1 byte per two significant digits + 1 (leading and trailing zeros trimmed)."""
    digits = text.strip().lstrip("+-").replace(".", "")
    if "e" in digits.lower():
        digits = format(Decimal(text).normalize(), "f").lstrip("+-").replace(".", "")
    significant = digits.strip("0")
    return math.ceil(len(significant) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Size of one attribute value (without its name)."""
    ((kind, body),) = value.items()
    if kind == "S":
        return len(str(body).encode())
    if kind == "N":
        return number_size(str(body))
    if kind == "B":
        return len(body) if isinstance(body, bytes | bytearray) else len(str(body).encode())
    if kind in {"BOOL", "NULL"}:
        return 1
    if kind == "SS":
        return sum(len(str(v).encode()) for v in body)
    if kind == "NS":
        return sum(number_size(str(v)) for v in body)
    if kind == "BS":
        return sum(len(v) if isinstance(v, bytes | bytearray) else len(str(v)) for v in body)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in body)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in body.items())
    raise ValueError(f"not a DynamoDB attribute value: {kind!r}")


def item_size(item: Item | None) -> int:
    """Attribute names (UTF-8) + values; 0 for no item."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    units = float(max(1, math.ceil(size / READ_UNIT_BYTES)))
    if transactional:
        return 2 * units
    return units if consistent else units / 2


# ---------------------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class IndexSpec:
    name: str
    hash_key: str
    range_key: str | None
    projection: str = "KEYS_ONLY"
    """KEYS_ONLY, INCLUDE or ALL."""
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    name: str
    hash_key: str
    range_key: str | None
    indexes: tuple[IndexSpec, ...] = ()

    @staticmethod
    def from_definition(name: str, definition: Mapping[str, Any]) -> TableSpec:
        """From CreateTable/DescribeTable shapes (KeySchema, GlobalSecondaryIndexes)."""

        def keys(schema: list[Mapping[str, str]]) -> tuple[str, str | None]:
            by_type = {k["KeyType"]: k["AttributeName"] for k in schema}
            return by_type["HASH"], by_type.get("RANGE")

        hash_key, range_key = keys(list(definition["KeySchema"]))
        indexes = []
        for index in definition.get("GlobalSecondaryIndexes", []):
            index_hash, index_range = keys(list(index["KeySchema"]))
            projection = index.get("Projection", {})
            indexes.append(
                IndexSpec(
                    name=index["IndexName"],
                    hash_key=index_hash,
                    range_key=index_range,
                    projection=projection.get("ProjectionType", "KEYS_ONLY"),
                    non_key_attributes=tuple(projection.get("NonKeyAttributes", ())),
                )
            )
        return TableSpec(name, hash_key, range_key, tuple(indexes))

    def key_of(self, item: Item) -> dict[str, Any]:
        names = [self.hash_key] + ([self.range_key] if self.range_key else [])
        return {name: item[name] for name in names}

    def with_index(self, index: IndexSpec) -> TableSpec:
        """The same table with one index replaced (what-if pricing)."""
        return replace(
            self, indexes=tuple(index if i.name == index.name else i for i in self.indexes)
        )


def index_entry(table: TableSpec, index: IndexSpec, item: Item | None) -> dict[str, Any] | None:
    """The entry `item` has in `index` (None when an index key attribute is missing: sparse)."""
    if not item or index.hash_key not in item:
        return None
    if index.range_key and index.range_key not in item:
        return None
    if index.projection == "ALL":
        return dict(item)
    names = {table.hash_key, index.hash_key}
    names.update(n for n in (table.range_key, index.range_key) if n)
    if index.projection == "INCLUDE":
        names.update(index.non_key_attributes)
    return {name: item[name] for name in names if name in item}


@dataclass(frozen=True)
class IndexWrite:
    index: str
    action: str
    """put, delete or update."""
    units: int


def index_writes(
    table: TableSpec, index: IndexSpec, old: Item | None, new: Item | None
) -> list[IndexWrite]:
    """The entries a base-table write changes in one index (developer guide, GSI writes)."""
    before, after = index_entry(table, index, old), index_entry(table, index, new)
    if before is None and after is None:
        return []
    if before is None:
        return [IndexWrite(index.name, "put", write_units(item_size(after)))]
    if after is None:
        return [IndexWrite(index.name, "delete", write_units(item_size(before)))]
    key_names = [index.hash_key] + ([index.range_key] if index.range_key else [])
    if any(before.get(k) != after.get(k) for k in key_names):
        return [
            IndexWrite(index.name, "delete", write_units(item_size(before))),
            IndexWrite(index.name, "put", write_units(item_size(after))),
        ]
    if before != after:
        return [IndexWrite(index.name, "update", write_units(item_size(after)))]
    return []


# ---------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class WriteEvent:
    """One item written (or attempted) by one request: enough to price it again under other
    rules (bench/whatif.py)."""

    phase: str
    operation: str
    key: dict[str, Any]
    old: Item | None
    new: Item | None
    transactional: bool
    failed: bool
    action: str = "Update"
    """Put, Update, Delete or ConditionCheck."""
    transaction_kinds: tuple[str, ...] = ()
    """Kinds (item_kind) of every item of the transaction this write was part of."""
    request: int = 0
    """Which request it belonged to (items of one transaction share it)."""

    @property
    def kind(self) -> str:
        return item_kind(self.key)


@dataclass(frozen=True)
class WriteCost:
    base: int
    indexes: dict[str, int]

    @property
    def total(self) -> int:
        return self.base + sum(self.indexes.values())


def item_kind(key: Mapping[str, Any]) -> str:
    """JOB, OUTBOX, SLOTS, IDEMP, BOOKMARKS…: the pk's prefix (the single table's item kinds)."""
    pk = next(iter(key.values()))
    text = str(pk.get("S", "")) if isinstance(pk, Mapping) else str(pk)
    return text.split("#", 1)[0] or "?"


def price_write(table: TableSpec, event: WriteEvent) -> WriteCost:
    """Write units of one item of one request, base table and each index."""
    # The larger of the item before and after; for a failed write, `new` is what the request
    # would have written (a Put's item) or nothing (an Update: the existing item counts).
    size = max(item_size(event.old), item_size(event.new))
    base = write_units(size) * (2 if event.transactional else 1)
    indexes: dict[str, int] = {}
    if not event.failed and event.action != "ConditionCheck":
        for index in table.indexes:
            units = sum(w.units for w in index_writes(table, index, event.old, event.new))
            if units:
                indexes[index.name] = units
    return WriteCost(base, indexes)


@dataclass(frozen=True)
class ReadEvent:
    phase: str
    operation: str
    units: float
    size: int
    consistent: bool
    index: str = "table"
    """Where the read landed: "table" or the index's name (bench/keyheat.py)."""
    key: str = ""
    """The partition key value it read ("" when unknown; "*" for a Scan)."""
