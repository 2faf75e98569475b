"""The capacity meter at the client boundary, on moto with the template's table: each request's
units come from the item before and after it, however the request was made (single write,
transaction, failed condition, query, batch read)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from bench.meter import CapacityMeter, TableSpec, client_requery, item_size, moto_peek
from botocore.exceptions import ClientError

from tests.support.resources import REGION, create_table, template


@pytest.fixture
def metered(moto: None) -> tuple[Any, CapacityMeter]:
    client = boto3.client("dynamodb", region_name=REGION)
    create_table(client)
    definition = template()["Resources"]["JobsTable"]["Properties"]
    meter = CapacityMeter(
        TableSpec.from_definition("jobs", definition),
        moto_peek(),
        client_requery(boto3.client("dynamodb", region_name=REGION)),
        ask_moto=True,
    )
    meter.attach(client)
    return client, meter


def padded(pk: str, total: int, **extra: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": "JOB"}, **extra}
    item["pad"] = {"S": "x" * (total - item_size(item) - 3)}
    assert item_size(item) == total
    return item


def units(meter: CapacityMeter) -> list[int]:
    return [cost.total for _, cost in meter.priced_writes()]


def test_single_and_transactional_puts(metered: tuple[Any, CapacityMeter]) -> None:
    client, meter = metered
    client.put_item(TableName="jobs", Item=padded("A", 900))
    client.put_item(TableName="jobs", Item=padded("B", 1100))
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "jobs", "Item": padded("C", 500)}},
            {"Put": {"TableName": "jobs", "Item": padded("D", 500)}},
        ]
    )
    assert units(meter) == [1, 2, 2, 2]
    assert meter.requests["unassigned"] == {"dynamodb.PutItem": 2, "dynamodb.TransactWriteItems": 1}


def test_a_state_change_pays_for_the_index_entries_it_moves(
    metered: tuple[Any, CapacityMeter],
) -> None:
    client, meter = metered
    keys = {"gsi1sk": {"S": "0001"}, "gsi2pk": {"S": "OWNER#t#u"}, "gsi2sk": {"S": "0001"}}
    client.put_item(
        TableName="jobs",
        Item=padded("J", 600, gsi1pk={"S": "STATE#queued"}, state={"S": "queued"}, **keys),
    )
    meter.reset()
    client.update_item(
        TableName="jobs",
        Key={"pk": {"S": "J"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET gsi1pk = :r, #s = :running",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":r": {"S": "STATE#running"}, ":running": {"S": "running"}},
    )
    ((_, cost),) = meter.priced_writes()
    # by_state's key moved (delete + put); by_owner is keys-only: a state change costs it nothing
    assert (cost.base, cost.indexes) == (1, {"by_state": 2})
    meter.reset()
    client.update_item(
        TableName="jobs",
        Key={"pk": {"S": "J"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET lease = :l",
        ExpressionAttributeValues={":l": {"N": "5"}},
    )
    assert units(meter) == [1]


def test_failed_conditions_are_charged(metered: tuple[Any, CapacityMeter]) -> None:
    client, meter = metered
    client.put_item(TableName="jobs", Item=padded("F", 2500))
    meter.reset()
    with pytest.raises(ClientError):
        client.update_item(
            TableName="jobs",
            Key={"pk": {"S": "F"}, "sk": {"S": "JOB"}},
            UpdateExpression="SET a = :a",
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":a": {"S": "x"}},
        )
    with pytest.raises(ClientError):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "jobs", "Item": padded("G", 300)}},
                {
                    "Put": {
                        "TableName": "jobs",
                        "Item": padded("F", 300),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    # 2,500 bytes -> 3; the cancelled transaction: G would be 300 B (2), F is 2,500 B (2 x 3)
    assert units(meter) == [3, 2, 6]
    assert all(event.failed for event in meter.writes)


def test_reads(metered: tuple[Any, CapacityMeter]) -> None:
    client, meter = metered
    for pk in ("R1", "R2", "R3"):
        client.put_item(
            TableName="jobs",
            Item=padded(pk, 5 * 1024, gsi1pk={"S": "STATE#x"}, gsi1sk={"S": pk}),
        )
    meter.reset()
    key = {"pk": {"S": "R1"}, "sk": {"S": "JOB"}}
    client.get_item(TableName="jobs", Key=key, ConsistentRead=True)
    client.get_item(TableName="jobs", Key=key)
    client.get_item(TableName="jobs", Key={"pk": {"S": "nobody"}, "sk": {"S": "JOB"}})
    client.batch_get_item(
        RequestItems={
            "jobs": {
                "Keys": [key, {"pk": {"S": "R2"}, "sk": {"S": "JOB"}}],
                "ConsistentRead": True,
            }
        }
    )
    # three 5 KiB items on the table, eventually consistent: ceil(15/4) = 4 units, halved
    client.query(
        TableName="jobs",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "R1"}},
    )
    # a KEYS_ONLY index page: three small entries -> the minimum, halved
    client.query(
        TableName="jobs",
        IndexName="by_state",
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": "STATE#x"}},
        Select="COUNT",
    )
    assert [r.units for r in meter.reads] == [2, 1, 0.5, 2, 2, 1, 0.5]
    # each read names its partition (the key-heat model counts load per key, bench/keyheat.py)
    assert [(r.index, r.key) for r in meter.reads] == [
        ("table", "R1"),
        ("table", "R1"),
        ("table", "nobody"),
        ("table", "R1"),
        ("table", "R2"),
        ("table", "R1"),
        ("by_state", "STATE#x"),
    ]


def test_what_moto_reports_is_kept_beside_the_computed_units(
    metered: tuple[Any, CapacityMeter],
) -> None:
    client, meter = metered
    client.put_item(TableName="jobs", Item=padded("M", 3000))
    client.update_item(
        TableName="jobs",
        Key={"pk": {"S": "M"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET a = :a",
        ExpressionAttributeValues={":a": {"S": "x"}},
    )
    put, upd = meter.moto_check["PutItem"], meter.moto_check["UpdateItem"]
    assert (put.requests, put.computed) == (1, 3)
    assert put.missing + (put.reported > 0) == 1
    assert (upd.requests, upd.computed) == (1, 3)
