"""The benchmark's capacity meter against items worked out by hand with DynamoDB's documented
size rules (bench/README.md, "Metering rules"): if the meter's arithmetic drifts, every figure
in bench/results.json is wrong, so each rule here has a number computed on paper."""

from __future__ import annotations

from typing import Any

import pytest
from bench.meter import (
    IndexSpec,
    TableSpec,
    WriteEvent,
    index_writes,
    item_size,
    number_size,
    price_write,
    read_units,
    value_size,
    write_units,
)

BY_STATE = IndexSpec("by_state", "gsi1pk", "gsi1sk", "KEYS_ONLY")
BY_OWNER = IndexSpec("by_owner", "gsi2pk", "gsi2sk", "INCLUDE", ("state",))
TABLE = TableSpec("jobs", "pk", "sk", (BY_STATE, BY_OWNER))


def sized(total: int, **extra: dict[str, Any]) -> dict[str, Any]:
    """An item of exactly `total` bytes: pk "p" (2 + 1) + sk "s" (2 + 1) + extra + a "pad"
    string (3 + n) making up the rest."""
    item: dict[str, Any] = {"pk": {"S": "p"}, "sk": {"S": "s"}, **extra}
    rest = total - item_size(item) - len("pad")
    assert rest >= 0
    item["pad"] = {"S": "x" * rest}
    assert item_size(item) == total
    return item


def put(new: dict[str, Any], *, old: dict[str, Any] | None = None, **kw: Any) -> WriteEvent:
    return WriteEvent(
        phase="t", operation="PutItem", key={"pk": new["pk"], "sk": new["sk"]},
        old=old, new=new, transactional=kw.get("transactional", False),
        failed=kw.get("failed", False), action="Put",
    )  # fmt: skip


def update(old: dict[str, Any] | None, new: dict[str, Any] | None, **kw: Any) -> WriteEvent:
    some = old or new or {"pk": {"S": "p"}, "sk": {"S": "s"}}
    key = {"pk": some["pk"], "sk": some["sk"]}
    return WriteEvent(
        phase="t", operation="UpdateItem", key=key, old=old, new=new,
        transactional=kw.get("transactional", False), failed=kw.get("failed", False),
    )  # fmt: skip


# ------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("0", 1),  # no significant digit: the 1-byte header only
        ("7", 2),  # 1 digit -> 1 byte + 1
        ("12345", 4),  # 5 digits -> 3 bytes + 1
        ("1700000000000", 2),  # trailing zeros trimmed: "17" -> 1 + 1
        ("-1.50", 2),  # sign and point do not count; "15" -> 1 + 1
        ("0.000123", 3),  # leading zeros trimmed: "123" -> 2 + 1
        ("1E+3", 2),  # exponent form is the number 1000: "1" -> 1 + 1
    ],
)
def test_number_size_is_a_byte_per_two_significant_digits_plus_one(text: str, size: int) -> None:
    assert number_size(text) == size


def test_value_sizes_follow_the_documented_rules() -> None:
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes, not characters
    assert value_size({"BOOL": True}) == 1
    assert value_size({"NULL": True}) == 1
    assert value_size({"B": b"\x00\x01\x02"}) == 3
    # map: 3 + per element (1 + name "a" 1 + "xy" 2) = 3 + 4
    assert value_size({"M": {"a": {"S": "xy"}}}) == 7
    # list: 3 + (1 + number "1" 2) + (1 + bool 1) = 8
    assert value_size({"L": [{"N": "1"}, {"BOOL": False}]}) == 8
    assert value_size({"M": {}}) == 3 and value_size({"L": []}) == 3
    # a string set: the elements' bytes (no documented overhead)
    assert value_size({"SS": ["ab", "cde"]}) == 5
    with pytest.raises(ValueError, match="not a DynamoDB attribute value"):
        value_size({"X": "?"})


def test_item_size_is_names_plus_values() -> None:
    # "state" 5 + "queued" 6 + "n" 1 + number 42 (2 digits: 2) = 14
    assert item_size({"state": {"S": "queued"}, "n": {"N": "42"}}) == 14
    assert item_size(None) == 0


# ------------------------------------------------------------------------------ writes


def test_a_900_byte_put_is_one_write_unit_and_1100_bytes_is_two() -> None:
    assert price_write(TableSpec("t", "pk", "sk"), put(sized(900))).total == 1
    assert price_write(TableSpec("t", "pk", "sk"), put(sized(1024))).total == 1
    assert price_write(TableSpec("t", "pk", "sk"), put(sized(1025))).total == 2
    assert price_write(TableSpec("t", "pk", "sk"), put(sized(1100))).total == 2


def test_a_transaction_of_two_500_byte_puts_is_four_write_units() -> None:
    items = [sized(500), {**sized(500), "sk": {"S": "t"}}]
    costs = [price_write(TABLE, put(item, transactional=True)) for item in items]
    assert [c.total for c in costs] == [2, 2]
    assert sum(c.total for c in costs) == 4


def test_a_write_costs_the_larger_of_the_item_before_and_after() -> None:
    # an update that shrinks a 2,500-byte item to 300 bytes still costs ceil(2500 / 1024) = 3
    assert price_write(TABLE, update(sized(2500), sized(300))).total == 3
    assert price_write(TABLE, update(sized(300), sized(2500))).total == 3


def test_a_failed_conditional_write_still_costs_and_writes_no_index() -> None:
    old = sized(2500, gsi1pk={"S": "STATE#queued"}, gsi1sk={"S": "1"})
    cost = price_write(TABLE, update(old, None, failed=True))
    assert (cost.base, cost.indexes) == (3, {})
    # nothing there: the minimum of 1
    assert price_write(TABLE, update(None, None, failed=True)).total == 1
    # a failed put is priced on the item it tried to write; in a transaction twice
    assert price_write(TABLE, put(sized(1500), failed=True, transactional=True)).total == 4


def job(state: str, **extra: dict[str, Any]) -> dict[str, Any]:
    return sized(
        600,
        gsi1pk={"S": f"STATE#{state}"},
        gsi1sk={"S": "0001#j1"},
        gsi2pk={"S": "OWNER#t#u"},
        gsi2sk={"S": "0001#j1"},
        state={"S": state},
        **extra,
    )


def test_an_update_that_changes_the_by_state_key_costs_base_plus_two_entries() -> None:
    old, new = job("queued"), job("running")
    by_state = index_writes(TABLE, BY_STATE, old, new)
    assert [(w.action, w.units) for w in by_state] == [("delete", 1), ("put", 1)]
    # by_owner projects `state`: its key stays, the projected value changes -> 1 update
    by_owner = index_writes(TABLE, BY_OWNER, old, new)
    assert [(w.action, w.units) for w in by_owner] == [("update", 1)]
    cost = price_write(TABLE, update(old, new))
    assert (cost.base, cost.indexes) == (1, {"by_state": 2, "by_owner": 1})
    # in a transaction the base doubles, the index entries do not
    cost = price_write(TABLE, update(old, new, transactional=True))
    assert (cost.base, cost.total) == (2, 5)


def test_an_update_of_a_non_projected_attribute_costs_the_base_only() -> None:
    old = job("running", lease={"N": "100"})
    new = {**old, "lease": {"N": "200"}}
    assert price_write(TABLE, update(old, new)).indexes == {}
    assert price_write(TABLE, update(old, new)).total == 1


def test_entering_and_leaving_a_sparse_index_is_one_entry_each() -> None:
    bare = sized(400)
    indexed = {**bare, "gsi1pk": {"S": "STATE#queued"}, "gsi1sk": {"S": "1"}}
    assert price_write(TABLE, put(indexed)).indexes == {"by_state": 1}
    left = price_write(TABLE, update(indexed, bare))
    assert left.indexes == {"by_state": 1}
    # only one of the two key attributes: not in the index at all
    half = {**bare, "gsi1pk": {"S": "STATE#queued"}}
    assert price_write(TABLE, put(half)).indexes == {}


def test_a_large_index_entry_costs_a_unit_per_kib() -> None:
    everything = IndexSpec("all", "gsi1pk", "gsi1sk", "ALL")
    table = TableSpec("t", "pk", "sk", (everything,))
    item = sized(1500, gsi1pk={"S": "a"}, gsi1sk={"S": "b"})
    assert price_write(table, put(item)).indexes == {"all": 2}
    # KEYS_ONLY copies only keys: 1 unit however big the item
    keys_only = TableSpec("t", "pk", "sk", (IndexSpec("k", "gsi1pk", "gsi1sk"),))
    assert price_write(keys_only, put(item)).indexes == {"k": 1}


def test_write_units_round_up_per_kib_with_a_minimum_of_one() -> None:
    assert [write_units(n) for n in (0, 1, 1024, 1025, 5 * 1024)] == [1, 1, 1, 2, 5]


# ------------------------------------------------------------------------------ reads


def test_a_5_kib_strongly_consistent_read_is_two_read_units() -> None:
    size = 5 * 1024
    assert read_units(size, consistent=True) == 2
    assert read_units(size, consistent=False) == 1
    assert read_units(size, consistent=True, transactional=True) == 4
    # a missing item (size 0) or a tiny one still costs the minimum
    assert read_units(0, consistent=True) == 1
    assert read_units(10, consistent=False) == 0.5
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2


def test_table_spec_reads_the_template_shape() -> None:
    definition = {
        "KeySchema": [
            {"AttributeName": "sk", "KeyType": "RANGE"},
            {"AttributeName": "pk", "KeyType": "HASH"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "by_owner",
                "KeySchema": [
                    {"AttributeName": "gsi2pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi2sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["state"]},
            }
        ],
    }
    spec = TableSpec.from_definition("jobs", definition)
    assert (spec.hash_key, spec.range_key) == ("pk", "sk")
    assert spec.indexes == (BY_OWNER,)
    assert spec.with_index(IndexSpec("by_owner", "gsi2pk", "gsi2sk")).indexes[0].projection == (
        "KEYS_ONLY"
    )
