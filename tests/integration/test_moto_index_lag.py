"""The lagging-GSI fixture itself (leasehold_dev.local.moto.index_lag): an index Query sees the
table as it stood `lag` ago on the test's clock — an updated item's old version, a deleted item
still there, a new one not yet — while GetItem, BatchGetItem and base-table Queries are current;
once the lag has passed, the index agrees. Writes of every kind are recorded (Put, Update, Delete,
BatchWrite, TransactWrite, a cancelled transaction changing nothing), in-process and in the
embedded moto server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from leasehold.domain.clock import ManualClock
from leasehold_dev.local.moto import index_lag as moto_index_lag
from leasehold_dev.local.moto import queries as moto_queries
from leasehold_dev.local.resources import create_table
from tests.support.index_lag import lagging_index

T0 = 1_767_225_600_000


@pytest.fixture
def dynamodb(moto: None) -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_table(client)
    return client


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def lag(clock: ManualClock) -> Iterator[None]:
    with lagging_index(clock, 500):
        yield


def table_name(dynamodb: Any) -> str:
    return str(dynamodb.list_tables()["TableNames"][0])


def job(job_id: str, partition: str, **extra: Any) -> dict[str, Any]:
    item = {
        "pk": {"S": f"JOB#{job_id}"},
        "sk": {"S": "JOB"},
        "gsi1pk": {"S": partition},
        "gsi1sk": {"S": f"0001#{job_id}"},
        "gsi2pk": {"S": "OWNER#t#u"},
        "gsi2sk": {"S": f"0001#{job_id}"},
    }
    item.update({name: {"S": value} for name, value in extra.items()})
    return item


def key(job_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}


def listed(dynamodb: Any, partition: str, index: str = "by_state") -> list[str]:
    attribute = "gsi1pk" if index == "by_state" else "gsi2pk"
    page = dynamodb.query(
        TableName=table_name(dynamodb),
        IndexName=index,
        KeyConditionExpression=f"{attribute} = :p",
        ExpressionAttributeValues={":p": {"S": partition}},
    )
    return [item["pk"]["S"].removeprefix("JOB#") for item in page["Items"]]


def move(dynamodb: Any, job_id: str, partition: str) -> None:
    dynamodb.update_item(
        TableName=table_name(dynamodb),
        Key=key(job_id),
        UpdateExpression="SET gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": partition}},
    )


def test_an_item_updated_100_ms_ago_is_old_in_the_index_and_new_in_the_table(
    dynamodb: Any, clock: ManualClock, lag: None
) -> None:
    # Given a job written long ago in `queued`
    dynamodb.put_item(TableName=table_name(dynamodb), Item=job("a", "STATE#queued"))
    clock.advance(10_000)
    # When it moves to `failed`, and 100 ms pass
    move(dynamodb, "a", "STATE#failed")
    clock.advance(100)
    # Then the index (lag 500) still lists it under `queued` and not under `failed` ...
    assert listed(dynamodb, "STATE#queued") == ["a"]
    assert listed(dynamodb, "STATE#failed") == []
    # ... while GetItem, BatchGetItem and a base-table Query see it as it is
    name = table_name(dynamodb)
    assert dynamodb.get_item(TableName=name, Key=key("a"))["Item"]["gsi1pk"]["S"] == "STATE#failed"
    batch = dynamodb.batch_get_item(RequestItems={name: {"Keys": [key("a")]}})
    assert batch["Responses"][name][0]["gsi1pk"]["S"] == "STATE#failed"
    base = dynamodb.query(
        TableName=name,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "JOB#a"}},
    )
    assert base["Items"][0]["gsi1pk"]["S"] == "STATE#failed"
    # And once 500 ms have passed since the write, the index agrees
    clock.advance(399)
    assert listed(dynamodb, "STATE#queued") == ["a"]
    clock.advance(1)
    assert listed(dynamodb, "STATE#queued") == []
    assert listed(dynamodb, "STATE#failed") == ["a"]


def test_a_new_item_is_missing_and_a_deleted_one_still_listed_until_the_lag_passes(
    dynamodb: Any, clock: ManualClock, lag: None
) -> None:
    name = table_name(dynamodb)
    dynamodb.put_item(TableName=name, Item=job("old", "STATE#dead"))
    clock.advance(1_000)
    dynamodb.put_item(TableName=name, Item=job("new", "STATE#dead"))
    dynamodb.delete_item(TableName=name, Key=key("old"))
    clock.advance(250)
    assert listed(dynamodb, "STATE#dead") == ["old"]
    assert listed(dynamodb, "OWNER#t#u", index="by_owner") == ["old"]
    clock.advance(250)
    assert listed(dynamodb, "STATE#dead") == ["new"]


def test_the_version_seen_is_the_one_at_that_time_among_several_writes(
    dynamodb: Any, clock: ManualClock, lag: None
) -> None:
    name = table_name(dynamodb)
    dynamodb.put_item(TableName=name, Item=job("a", "P1"))
    clock.advance(1_000)
    for partition in ("P2", "P3", "P4"):  # one write every 200 ms
        move(dynamodb, "a", partition)
        clock.advance(200)
    # now = last write + 200: the index sees the table as of 500 ms ago, after the P2 write
    assert [p for p in ("P1", "P2", "P3", "P4") if listed(dynamodb, p)] == ["P2"]
    clock.advance(100)
    assert [p for p in ("P1", "P2", "P3", "P4") if listed(dynamodb, p)] == ["P3"]


def test_transactions_and_batch_writes_lag_and_a_cancelled_transaction_changes_nothing(
    dynamodb: Any, clock: ManualClock, lag: None
) -> None:
    name = table_name(dynamodb)
    dynamodb.put_item(TableName=name, Item=job("a", "P1"))
    clock.advance(1_000)
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": name, "Item": job("b", "P1")}},
            {
                "Update": {
                    "TableName": name,
                    "Key": key("a"),
                    "UpdateExpression": "SET gsi1pk = :p",
                    "ExpressionAttributeValues": {":p": {"S": "P2"}},
                }
            },
        ]
    )
    dynamodb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": job("c", "P1")}}]})
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": name, "Item": job("d", "P1")}},
                {
                    "Put": {
                        "TableName": name,
                        "Item": job("a", "P3"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    clock.advance(100)
    assert listed(dynamodb, "P1") == ["a"]
    assert listed(dynamodb, "P2") == []
    clock.advance(400)
    assert sorted(listed(dynamodb, "P1")) == ["b", "c"]
    assert listed(dynamodb, "P2") == ["a"]
    assert listed(dynamodb, "P3") == []


def test_a_lag_up_to_n_sees_the_past_sometimes_and_the_present_sometimes(
    dynamodb: Any, clock: ManualClock
) -> None:
    name = table_name(dynamodb)
    with lagging_index(clock, 500, random_up_to=True, seed=3):
        dynamodb.put_item(TableName=name, Item=job("a", "P1"))
        clock.advance(1_000)
        move(dynamodb, "a", "P2")
        clock.advance(250)
        seen = {tuple(listed(dynamodb, "P1")) for _ in range(40)}
        assert seen == {("a",), ()}
        clock.advance(250)
        assert {tuple(listed(dynamodb, "P1")) for _ in range(10)} == {()}


def test_lag_off_is_moto_as_it_was(dynamodb: Any, clock: ManualClock) -> None:
    name = table_name(dynamodb)
    with lagging_index(clock, 500):
        dynamodb.put_item(TableName=name, Item=job("a", "P1"))
    assert moto_index_lag.lag_ms() == 0
    assert listed(dynamodb, "P1") == ["a"]


def test_with_the_candidate_queries_installed_too_the_index_still_lags(
    dynamodb: Any, clock: ManualClock, lag: None
) -> None:
    # moto_queries picks the candidates of an index query: they must be picked from the past
    moto_queries.install()
    name = table_name(dynamodb)
    dynamodb.put_item(TableName=name, Item=job("a", "P1"))
    clock.advance(1_000)
    move(dynamodb, "a", "P2")
    assert listed(dynamodb, "P1") == ["a"]
    assert listed(dynamodb, "P2") == []


def test_a_lag_spec_that_is_not_whole_milliseconds_is_refused() -> None:
    assert moto_index_lag.parse_lag("") == 0
    assert moto_index_lag.parse_lag(" 250 ") == 250
    for bad in ("-1", "0.5", "500ms", "lots", "²"):
        with pytest.raises(moto_index_lag.IndexLagSpecError, match="LEASEHOLD_GSI_LAG_MS"):
            moto_index_lag.parse_lag(bad)


def test_the_embedded_server_lags_its_index_on_the_wall_clock(
    monkeypatch: pytest.MonkeyPatch, aws_env: None
) -> None:
    from leasehold_dev.local.moto.server import start_moto

    monkeypatch.setenv(moto_index_lag.LAG_ENVIRONMENT, "300")
    server, url = start_moto()
    try:
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=url)
        create_table(client)
        name = table_name(client)
        client.put_item(TableName=name, Item=job("a", "P1"))
        assert listed(client, "P1") == []  # written just now: not in the index yet
        assert "Item" in client.get_item(TableName=name, Key=key("a"))
        time.sleep(0.35)
        assert listed(client, "P1") == ["a"]
    finally:
        server.stop()
        moto_index_lag.configure(0)
