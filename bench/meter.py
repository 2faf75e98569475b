"""A capacity meter at the client boundary: every DynamoDB request a botocore client sends is
priced with DynamoDB's own documented size rules, from the request and the table's state before
and after it. Requests to any other service are counted.

Why not ask the service? moto answers `ReturnConsumedCapacity` with constants (PutItem and Query
1.0, GetItem 0.5 whatever the item, nothing for UpdateItem and TransactWriteItems), so the
figures here are computed, and `moto_reported` keeps what moto said for comparison.

The rules (sources in bench/README.md, "Metering rules"):

- item size = sum over attributes of (UTF-8 bytes of the name + size of the value); a string is
  its UTF-8 bytes, a number 1 byte per two significant digits + 1, binary its raw bytes, a
  boolean or null 1, a list or map 3 + per element (1 + element size, map keys counted as
  names); a set is the sum of its elements (the documentation gives no set overhead);
- a write costs ceil(size / 1 KiB) write units (at least 1) of the larger of the item before and
  after it; in TransactWriteItems every item costs twice (prepare + commit), a ConditionCheck
  included; a write whose condition fails still costs (1 unit when the item does not exist);
  a cancelled transaction still costs every item twice;
- each global secondary index costs ceil(entry / 1 KiB) per entry written: an entry appears or
  disappears = 1, its key changes = 2 (delete + put), only a projected attribute changes = 1,
  nothing projected changes = 0. Index writes are not doubled in a transaction (the index is
  updated after the commit);
- a read costs ceil(size / 4 KiB) read units (at least 1; half when eventually consistent);
  Query sums the item sizes of the page before rounding; BatchGetItem rounds per item; every
  item of TransactGetItems costs twice; reading a missing item still costs the minimum.

The meter is single-threaded by design: one request is in flight at a time, so the item it reads
before a write and after it are that write's own."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.capacity import (
    KIB,
    READ_UNIT_BYTES,
    WRITE_UNIT_BYTES,
    IndexSpec,
    IndexWrite,
    Item,
    ReadEvent,
    TableSpec,
    WriteCost,
    WriteEvent,
    index_entry,
    index_writes,
    item_kind,
    item_size,
    number_size,
    price_write,
    read_units,
    value_size,
    write_units,
)

__all__ = [
    "KIB",
    "READ_UNIT_BYTES",
    "WRITE_UNIT_BYTES",
    "CapacityMeter",
    "IndexSpec",
    "IndexWrite",
    "Item",
    "MotoCheck",
    "Peek",
    "PhaseTotals",
    "ReadEvent",
    "Requery",
    "TableSpec",
    "WriteCost",
    "WriteEvent",
    "client_requery",
    "index_entry",
    "index_writes",
    "item_kind",
    "item_size",
    "moto_peek",
    "number_size",
    "price_write",
    "read_units",
    "totals_by_phase",
    "value_size",
    "write_units",
]

Peek = Callable[[str, Item], Item | None]
"""Reads an item by table and key without being metered (the meter's view of the table)."""

Requery = Callable[[dict[str, Any]], list[Item]]
"""Runs a Query/Scan again, unmetered, returning every item it evaluated (no filter, no
projection, no COUNT): what DynamoDB charges for."""


# ---------------------------------------------------------------------------------------- meter


@dataclass
class MotoCheck:
    """What moto said (ReturnConsumedCapacity=TOTAL) against what the meter computed."""

    requests: int = 0
    reported: float = 0.0
    missing: int = 0
    computed: float = 0.0


class CapacityMeter:
    """Attach to botocore clients; read `writes`, `reads` and `requests` afterwards.

    `phase` names where the next requests belong (accept, claim, …); `during(phase)` sets it
    for a block. With `ask_moto`, DynamoDB requests also ask for ReturnConsumedCapacity and the
    answers are kept in `moto_check` by operation."""

    def __init__(
        self,
        table: TableSpec,
        peek: Peek,
        requery: Requery | None = None,
        *,
        ask_moto: bool = False,
    ) -> None:
        self.table = table
        self._peek = peek
        self._requery = requery
        self.ask_moto = ask_moto
        self.phase = "unassigned"
        self.writes: list[WriteEvent] = []
        self.reads: list[ReadEvent] = []
        self.requests: dict[str, Counter[str]] = defaultdict(Counter)
        self.moto_check: dict[str, MotoCheck] = defaultdict(MotoCheck)
        self._request_serial = 0
        self._attached: set[int] = set()

    # -------------------------------------------------------------- wiring

    def attach(self, client: Any) -> None:
        """Meter every request of `client` (once, however often it is attached)."""
        if id(client) in self._attached:
            return
        self._attached.add(id(client))
        client.meta.events.register("before-parameter-build", self._before)
        client.meta.events.register("after-call", self._after)

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        previous, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = previous

    def reset(self) -> None:
        """Forget the events and request counts (`moto_check` accumulates across resets)."""
        self.writes.clear()
        self.reads.clear()
        self.requests.clear()

    # -------------------------------------------------------------- hooks

    def _before(self, params: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        service = model.service_model.service_name
        self.requests[self.phase][f"{service}.{model.name}"] += 1
        if service != "dynamodb":
            return
        if self.ask_moto and "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
        self._request_serial += 1
        context["capacity_meter"] = {
            "serial": self._request_serial,
            "phase": self.phase,
            "targets": [
                (table, key, action, put_item, self._peek(table, key))
                for table, key, action, put_item in self._write_targets(model.name, params)
            ],
            "params": dict(params),
        }

    def _write_targets(
        self, operation: str, params: Mapping[str, Any]
    ) -> list[tuple[str, dict[str, Any], str, Item | None]]:
        """(table, key, action, the Put's item) of every item the request may write."""
        targets: list[tuple[str, dict[str, Any], str, Item | None]] = []
        if operation == "PutItem":
            item = params["Item"]
            targets.append((params["TableName"], self.table.key_of(item), "Put", item))
        elif operation in {"UpdateItem", "DeleteItem"}:
            action = operation.removesuffix("Item")
            targets.append((params["TableName"], dict(params["Key"]), action, None))
        elif operation == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((action, body),) = entry.items()
                item = body.get("Item")
                key = dict(body["Key"]) if "Key" in body else self.table.key_of(item)
                targets.append((body["TableName"], key, action, item))
        elif operation == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        targets.append((table, self.table.key_of(item), "Put", item))
                    else:
                        targets.append(
                            (table, dict(request["DeleteRequest"]["Key"]), "Delete", None)
                        )
        return [t for t in targets if t[0] == self.table.name]

    def _after(self, parsed: Mapping[str, Any], model: Any, context: Any, **_: Any) -> None:
        state = context.get("capacity_meter")
        if model.service_model.service_name != "dynamodb" or state is None:
            return
        operation, phase = model.name, state["phase"]
        failed = "Error" in parsed
        transactional = operation == "TransactWriteItems"
        computed = 0.0
        kinds = tuple(item_kind(key) for _, key, _, _, _ in state["targets"])
        for table, key, action, put_item, old in state["targets"]:
            new = None if failed else self._peek(table, key)
            if failed and action == "Put":
                new = put_item  # what the request would have written
            event = WriteEvent(
                phase=phase,
                operation=operation,
                key=key,
                old=old,
                new=new,
                transactional=transactional,
                failed=failed,
                action=action,
                transaction_kinds=kinds if transactional else (),
                request=state["serial"],
            )
            self.writes.append(event)
            computed += price_write(self.table, event).total
        if not failed:
            costs = self._read_costs(operation, state["params"], parsed)
            for (units, size, consistent), (index, pk) in zip(
                costs, self._read_keys(operation, state["params"], parsed), strict=True
            ):
                self.reads.append(
                    ReadEvent(phase, operation, units, size, consistent, index=index, key=pk)
                )
                computed += units
        if self.ask_moto:
            check = self.moto_check[operation]
            check.requests += 1
            check.computed += computed
            reported = parsed.get("ConsumedCapacity")
            if isinstance(reported, list):
                reported = reported[0] if reported else None
            if reported and "CapacityUnits" in reported:
                check.reported += float(reported["CapacityUnits"])
            else:
                check.missing += 1

    # -------------------------------------------------------------- reads

    def _read_costs(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> list[tuple[float, int, bool]]:
        if operation == "GetItem":
            consistent = bool(params.get("ConsistentRead"))
            size = item_size(self._peek(params["TableName"], params["Key"]))
            return [(read_units(size, consistent=consistent), size, consistent)]
        if operation == "BatchGetItem":
            costs = []
            for table, request in params["RequestItems"].items():
                consistent = bool(request.get("ConsistentRead"))
                unprocessed = {
                    _frozen(k)
                    for k in (parsed.get("UnprocessedKeys") or {}).get(table, {}).get("Keys", [])
                }
                for key in request["Keys"]:
                    if _frozen(key) in unprocessed:
                        continue
                    size = item_size(self._peek(table, key))
                    costs.append((read_units(size, consistent=consistent), size, consistent))
            return costs
        if operation == "TransactGetItems":
            costs = []
            for entry in params["TransactItems"]:
                body = entry["Get"]
                size = item_size(self._peek(body["TableName"], body["Key"]))
                costs.append((read_units(size, consistent=True, transactional=True), size, True))
            return costs
        if operation in {"Query", "Scan"}:
            # Indexes are read eventually consistent whatever the request says.
            consistent = bool(params.get("ConsistentRead")) and "IndexName" not in params
            evaluated = self._evaluated_items(params, parsed)
            size = sum(item_size(item) for item in evaluated)
            return [(read_units(size, consistent=consistent), size, consistent)]
        return []

    def _read_keys(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> list[tuple[str, str]]:
        """(index or "table", partition key value) of each cost `_read_costs` returns, in the
        same order — what the key-heat model (bench/keyheat.py) counts per partition."""
        if operation == "GetItem":
            return [("table", self._pk(params["Key"]))]
        if operation == "BatchGetItem":
            return [
                ("table", self._pk(key))
                for table, request in params["RequestItems"].items()
                for key in request["Keys"]
                if _frozen(key)
                not in {
                    _frozen(k)
                    for k in (parsed.get("UnprocessedKeys") or {}).get(table, {}).get("Keys", [])
                }
            ]
        if operation == "TransactGetItems":
            return [("table", self._pk(entry["Get"]["Key"])) for entry in params["TransactItems"]]
        if operation == "Scan":
            return [(str(params.get("IndexName", "table")), "*")]
        if operation == "Query":
            index = str(params.get("IndexName", "table"))
            return [(index, _query_partition(self.table, index, params))]
        return []

    def _pk(self, key: Mapping[str, Any]) -> str:
        value = key.get(self.table.hash_key, {})
        return str(value.get("S", "")) if isinstance(value, Mapping) else str(value)

    def _evaluated_items(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[Item]:
        """The items a Query/Scan page read: the returned ones, unless a filter, a projection
        or COUNT hid some — then the same page is run again without them (unmetered)."""
        hides = {"FilterExpression", "ProjectionExpression", "Select", "AttributesToGet"}
        if not hides & set(params):
            return list(parsed.get("Items", []))
        if self._requery is None:
            raise RuntimeError("a Query with a filter, projection or COUNT needs `requery`")
        again = {k: v for k, v in params.items() if k not in hides | {"ReturnConsumedCapacity"}}
        if "Limit" not in again and parsed.get("ScannedCount") is not None:
            again["Limit"] = max(1, int(parsed["ScannedCount"]))
        # The filter's own placeholders must go too, or DynamoDB refuses unused ones.
        for name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            again.pop(name, None)
        if "KeyConditionExpression" in params:
            again["KeyConditionExpression"] = params["KeyConditionExpression"]
            again.update(_used_placeholders(params, str(params["KeyConditionExpression"])))
        return self._requery(again)

    # -------------------------------------------------------------- totals

    def priced_writes(self, table: TableSpec | None = None) -> list[tuple[WriteEvent, WriteCost]]:
        spec = table or self.table
        return [(event, price_write(spec, event)) for event in self.writes]


def _query_partition(table: TableSpec, index: str, params: Mapping[str, Any]) -> str:
    """The partition key value a Query names in its key condition ("" if it cannot be read)."""
    hash_key = table.hash_key
    for spec in table.indexes:
        if spec.name == index:
            hash_key = spec.hash_key
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    condition = str(params.get("KeyConditionExpression", ""))
    for name, placeholder in re.findall(r"([#A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)", condition):
        if names.get(name, name) == hash_key and placeholder in values:
            return str(values[placeholder].get("S", ""))
    return ""


def _frozen(key: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in key.items()))


def _used_placeholders(params: Mapping[str, Any], expression: str) -> dict[str, Any]:
    """The #name and :value placeholders `expression` uses (DynamoDB refuses unused ones)."""
    tokens = set(re.findall(r"[#:][A-Za-z0-9_]+", expression))
    used: dict[str, Any] = {}
    names = {k: v for k, v in params.get("ExpressionAttributeNames", {}).items() if k in tokens}
    values = {k: v for k, v in params.get("ExpressionAttributeValues", {}).items() if k in tokens}
    if names:
        used["ExpressionAttributeNames"] = names
    if values:
        used["ExpressionAttributeValues"] = values
    return used


# ---------------------------------------------------------------------------------------- views


def moto_peek(account_id: str = "123456789012", region: str = "us-east-1") -> Peek:
    """Read items straight from moto's in-process backend (no request, nothing metered)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    def peek(table_name: str, key: Item) -> Item | None:
        table = dynamodb_backends[account_id][region].get_table(table_name)
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        found = table.get_item(hash_key, range_key)
        return found.to_json()["Attributes"] if found else None

    return peek


def client_requery(client: Any) -> Requery:
    """Run a Query/Scan with a client the meter is not attached to, following its pages."""

    def requery(params: dict[str, Any]) -> list[Item]:
        operation = client.scan if "KeyConditionExpression" not in params else client.query
        answer = operation(**params)
        return list(answer.get("Items", []))

    return requery


@dataclass
class PhaseTotals:
    wcu: float = 0.0
    rcu: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    wcu_by_part: Counter[str] = field(default_factory=Counter)
    """Write units by where they land: base:<item kind>[ (tx)], index:<name>."""


def totals_by_phase(meter: CapacityMeter, table: TableSpec | None = None) -> dict[str, PhaseTotals]:
    """Write and read units and requests per phase (what the report shows)."""
    phases: dict[str, PhaseTotals] = defaultdict(PhaseTotals)
    for event, cost in meter.priced_writes(table):
        totals = phases[event.phase]
        totals.wcu += cost.total
        suffix = " (tx)" if event.transactional else ""
        suffix += " (failed)" if event.failed else ""
        totals.wcu_by_part[f"base:{event.kind}{suffix}"] += cost.base
        for index, units in cost.indexes.items():
            totals.wcu_by_part[f"index:{index}"] += units
    for read in meter.reads:
        phases[read.phase].rcu += read.units
    for phase, counts in meter.requests.items():
        phases[phase].requests.update(counts)
    return dict(phases)
