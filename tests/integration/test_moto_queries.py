"""leasehold_dev.local.moto.queries against moto's own Table.query: every page of every query (table
or index, key conditions, both directions, limits, paging, filters, COUNT) is the same with and
without the candidate view — and an index query's cost follows its partition, not the table."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models.table import Table

from leasehold_dev.local.moto import queries as moto_queries
from leasehold_dev.local.resources import create_table

JOBS = "jobs"
COUNTERS = "counters"  # hash key only, with an index on a number and no index range key

pks = st.sampled_from(["job#1", "job#2", "job#3", "outbox#1"])
sks = st.sampled_from(["job", "d#1", "d#2", "d#10", "slot"])
gsi_pks = st.sampled_from(["state#queued", "state#running", "owner#alice"])
short = st.text(alphabet="0123456789#ab", min_size=1, max_size=4)


@st.composite
def job_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": draw(pks)}, "sk": {"S": draw(sks)}}
    item["state"] = {"S": draw(st.sampled_from(["queued", "running"]))}
    if draw(st.booleans()):
        item["gsi1pk"] = {"S": draw(gsi_pks)}
        if draw(st.integers(0, 4)):  # mostly with its range key, sometimes without
            item["gsi1sk"] = {"S": draw(short)}
    if draw(st.booleans()):
        item["gsi2pk"] = {"S": draw(gsi_pks)}
        item["gsi2sk"] = {"S": draw(short)}
    return item


@st.composite
def counter_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"id": {"S": draw(short)}}
    if draw(st.booleans()):
        item["bucket"] = {"N": draw(st.sampled_from(["1", "2", "2.0", "3"]))}
    return item


@st.composite
def queries(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["table", "by_state", "by_owner", "by_bucket"]))
    values: dict[str, Any] = {}
    if kind == "table":
        params: dict[str, Any] = {"TableName": JOBS, "KeyConditionExpression": "pk = :p"}
        values[":p"] = {"S": draw(pks)}
        range_attr = "sk"
    elif kind == "by_bucket":
        params = {"TableName": COUNTERS, "IndexName": "by_bucket"}
        params["KeyConditionExpression"] = "bucket = :p"
        values[":p"] = {"N": draw(st.sampled_from(["1", "2", "3"]))}
        range_attr = None
    else:
        attrs = ("gsi1pk", "gsi1sk") if kind == "by_state" else ("gsi2pk", "gsi2sk")
        params = {"TableName": JOBS, "IndexName": kind}
        params["KeyConditionExpression"] = f"{attrs[0]} = :p"
        values[":p"] = {"S": draw(gsi_pks)}
        range_attr = attrs[1]
    if range_attr and draw(st.booleans()):
        if draw(st.booleans()):
            params["KeyConditionExpression"] += f" AND begins_with({range_attr}, :r)"
        else:
            params["KeyConditionExpression"] += f" AND {range_attr} > :r"
        values[":r"] = {"S": draw(st.sampled_from(["d", "1", "#", "a"]))}
    if kind != "by_bucket" and draw(st.booleans()):
        params["FilterExpression"] = "#s = :s"
        params["ExpressionAttributeNames"] = {"#s": "state"}
        values[":s"] = {"S": "queued"}
    if draw(st.booleans()):
        params["Limit"] = draw(st.integers(1, 3))
    params["ScanIndexForward"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        params["Select"] = "COUNT"
    params["ExpressionAttributeValues"] = values
    return params


def pages(client: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a query, following LastEvaluatedKey (bounded)."""
    answers = []
    request = dict(params)
    for _ in range(40):
        answer = client.query(**request)
        answer.pop("ResponseMetadata")
        answers.append(answer)
        if "LastEvaluatedKey" not in answer:
            break
        request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    return answers


@pytest.fixture
def client(aws_env: None) -> Iterator[Any]:
    moto_queries.install()
    with mock_aws():
        dynamodb = boto3.session.Session(region_name="us-east-1").client("dynamodb")
        create_table(dynamodb, JOBS)
        dynamodb.create_table(
            TableName=COUNTERS,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "id", "AttributeType": "S"},
                {"AttributeName": "bucket", "AttributeType": "N"},
            ],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by_bucket",
                    "KeySchema": [{"AttributeName": "bucket", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        yield dynamodb


def both_ways(
    client: Any, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]
) -> tuple[Any, Any]:
    """(moto's pages, the patch's pages) for the same query on the same items."""
    with monkeypatch.context() as patch:
        patch.setattr(Table, "query", moto_queries.moto_original())
        theirs = pages(client, params)
    assert moto_queries.installed()
    return theirs, pages(client, params)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    jobs=st.lists(job_items(), max_size=14),
    counters=st.lists(counter_items(), max_size=6),
    asked=st.lists(queries(), min_size=1, max_size=6),
)
def test_queries_answer_as_moto_does(
    client: Any,
    monkeypatch: pytest.MonkeyPatch,
    jobs: list[dict[str, Any]],
    counters: list[dict[str, Any]],
    asked: list[dict[str, Any]],
) -> None:
    # Given random items (later writes overwrite earlier ones with the same key)
    for table, items in ((JOBS, jobs), (COUNTERS, counters)):
        for old in client.scan(TableName=table)["Items"]:
            key = {k: old[k] for k in (("pk", "sk") if table == JOBS else ("id",))}
            client.delete_item(TableName=table, Key=key)
        for item in items:
            client.put_item(TableName=table, Item=item)
    # When each query runs against moto's method and the patched one, page by page
    for params in asked:
        theirs, ours = both_ways(client, monkeypatch, params)
        # Then every page is the same: items, order, counts and LastEvaluatedKey
        assert ours == theirs


def test_a_missing_partition_leaves_no_trace(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # moto's own query never creates the hash bucket it looks up; neither may the candidates
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    client.query(
        TableName=JOBS,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "job#absent"}},
    )
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[JOBS]
    assert len(table.items) == 0


def test_an_index_query_does_not_sort_the_table(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]

    def fill(count: int) -> None:
        for n in range(len(backend.tables[JOBS]), count):
            item = {"pk": {"S": f"job#{n}"}, "sk": {"S": "job"}}
            item |= {"gsi1pk": {"S": "state#succeeded"}, "gsi1sk": {"S": f"{n:08d}"}}
            backend.put_item(JOBS, item)

    def cost() -> float:
        best = float("inf")
        for _ in range(7):
            started = time.perf_counter()
            client.query(
                TableName=JOBS,
                IndexName="by_state",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": {"S": "state#queued"}},
                Limit=100,
            )
            best = min(best, time.perf_counter() - started)
        return best

    # Given the sweeper's query for queued jobs, on a table of 10,000 succeeded ones
    fill(10_000)
    # When it runs with the candidates and with moto's own method
    ours = cost()
    with monkeypatch.context() as patch:
        patch.setattr(Table, "query", moto_queries.moto_original())
        theirs = cost()
    # Then it costs a fraction of moto's (which sorts all 10,000 items first)
    assert ours < theirs / 3, f"{ours * 1000:.1f} ms, moto's own {theirs * 1000:.1f} ms"
