"""leasehold_dev.local.moto.serialization against moto's own serializer: every response that carries
attribute values (GetItem, Query, Scan, BatchGetItem, GetRecords, a cancelled transaction's
CancellationReasons) is byte for byte the same with and without the fast path."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.serialize import BaseJSONSerializer

from leasehold_dev.local.moto import serialization as moto_serialization
from leasehold_dev.local.resources import create_table

TABLE = "jobs"

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_#", min_size=1, max_size=8)
numbers = st.one_of(
    st.integers(-(10**15), 10**15).map(str),
    st.decimals(-(10**6), 10**6, places=3, allow_nan=False).map(lambda d: str(Decimal(d))),
)
scalars = st.one_of(
    st.text(max_size=12).map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    st.binary(min_size=1, max_size=12).map(lambda b: {"B": b}),
    st.lists(st.text(max_size=6), min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    st.lists(st.integers(-999, 999).map(str), min_size=1, max_size=3, unique=True).map(
        lambda v: {"NS": v}
    ),
    st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=3, unique=True).map(
        lambda v: {"BS": v}
    ),
    st.just({"NULL": True}),
    st.booleans().map(lambda b: {"BOOL": b}),
)
attribute_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.dictionaries(names, inner, max_size=3).map(lambda m: {"M": m}),
        st.lists(inner, max_size=3).map(lambda items: {"L": items}),
    ),
    max_leaves=8,
)
items = st.dictionaries(names, attribute_values, min_size=1, max_size=6)


class RawBodies:
    """The raw JSON bodies moto answered, captured before botocore parses them."""

    def __init__(self, *clients: Any) -> None:
        self.bodies: list[bytes] = []
        for client in clients:
            client.meta.events.register("before-parse", self._capture)

    def _capture(self, response_dict: dict[str, Any], **_: Any) -> None:
        # A GetRecords answer names a new, random iterator each time: the one part that differs.
        body = re.sub(
            rb'"NextShardIterator": "[^"]*"', b'"NextShardIterator": "-"', response_dict["body"]
        )
        self.bodies.append(body)


@pytest.fixture
def stack(aws_env: None) -> Iterator[dict[str, Any]]:
    moto_serialization.install()
    with mock_aws():
        dynamodb = boto3.session.Session(region_name="us-east-1").client("dynamodb")
        streams = boto3.session.Session(region_name="us-east-1").client("dynamodbstreams")
        arn = create_table(dynamodb, TABLE)["LatestStreamArn"]
        yield {"dynamodb": dynamodb, "streams": streams, "arn": arn}


def both_ways(
    monkeypatch: pytest.MonkeyPatch, raw: RawBodies, call: Callable[[], Any]
) -> tuple[list[bytes], list[bytes]]:
    """(moto's bodies, the fast path's bodies) for the same calls on the same state."""
    raw.bodies.clear()
    with monkeypatch.context() as patch:
        patch.setattr(
            BaseJSONSerializer, "_serialize_type_structure", moto_serialization.moto_original()
        )
        call()
    theirs = list(raw.bodies)
    raw.bodies.clear()
    assert moto_serialization.installed()
    call()
    return theirs, list(raw.bodies)


def latest_iterator(stack: dict[str, Any]) -> str:
    streams = stack["streams"]
    shard = streams.describe_stream(StreamArn=stack["arn"])["StreamDescription"]["Shards"][0]
    return str(
        streams.get_shard_iterator(
            StreamArn=stack["arn"], ShardId=shard["ShardId"], ShardIteratorType="LATEST"
        )["ShardIterator"]
    )


def reads(stack: dict[str, Any], item: dict[str, Any], iterator: str) -> list[Callable[[], Any]]:
    """Every read that answers with attribute values; `iterator` is where the stream is read."""
    dynamodb, streams = stack["dynamodb"], stack["streams"]
    key = {"pk": item["pk"], "sk": item["sk"]}

    def records() -> Any:
        return streams.get_records(ShardIterator=iterator)

    def cancelled() -> Any:
        with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
            dynamodb.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": key,
                            "ConditionExpression": "attribute_not_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    }
                ]
            )

    return [
        lambda: dynamodb.get_item(TableName=TABLE, Key=key),
        lambda: dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": item["pk"]},
        ),
        lambda: dynamodb.scan(TableName=TABLE),
        lambda: dynamodb.batch_get_item(RequestItems={TABLE: {"Keys": [key]}}),
        records,
        cancelled,
    ]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=items, second=items)
def test_attribute_values_serialize_byte_for_byte_as_moto_does(
    stack: dict[str, Any], monkeypatch: pytest.MonkeyPatch, first: Any, second: Any
) -> None:
    # Given an item written, then overwritten (a stream record with both images)
    dynamodb = stack["dynamodb"]
    key = {"pk": {"S": "job#1"}, "sk": {"S": "job"}}
    iterator = latest_iterator(stack)
    dynamodb.put_item(TableName=TABLE, Item={**first, **key})
    dynamodb.put_item(TableName=TABLE, Item={**second, **key})
    raw = RawBodies(dynamodb, stack["streams"])
    # When each read is answered by moto's serializer and by the fast path
    for read in reads(stack, {**second, **key}, iterator):
        theirs, ours = both_ways(monkeypatch, raw, read)
        # Then the bodies are the same bytes
        assert ours == theirs
    dynamodb.delete_item(TableName=TABLE, Key=key)


def test_response_transformers_apply_as_in_moto(
    stack: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a registered response transformer whose path ends inside an attribute value
    from moto.core.responses import BaseResponse

    dynamodb = stack["dynamodb"]
    key = {"pk": {"S": "job#1"}, "sk": {"S": "job"}}
    dynamodb.put_item(TableName=TABLE, Item={**key, "n": {"N": "7"}, "m": {"M": {"s": {"S": "x"}}}})
    transformers = {"n.N": lambda value: "8", "s.S": lambda value: None}
    monkeypatch.setattr(BaseResponse, "RESPONSE_KEY_PATH_TO_TRANSFORMER", transformers)
    raw = RawBodies(dynamodb)
    # When the item is read both ways
    theirs, ours = both_ways(monkeypatch, raw, lambda: dynamodb.get_item(TableName=TABLE, Key=key))
    # Then both transformed the same members the same way
    assert ours == theirs
    assert b'"n": {"N": "8"}' in ours[0] and b'"s": {}' in ours[0]


def test_the_fast_path_is_taken_and_is_faster(
    stack: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    dynamodb = stack["dynamodb"]
    item = {"pk": {"S": "job#1"}, "sk": {"S": "job"}}
    item |= {f"a{n}": {"M": {"x": {"S": "y"}, "n": {"N": str(n)}}} for n in range(30)}
    dynamodb.put_item(TableName=TABLE, Item=item)
    taken: list[int] = []
    real = moto_serialization.moto_original()

    def counting(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        taken.append(1)
        real(self, serialized, value, shape, key)

    def best_of(times: int) -> float:
        best = float("inf")
        for _ in range(times):
            started = time.perf_counter()
            dynamodb.get_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
            best = min(best, time.perf_counter() - started)
        return best

    fast = best_of(10)
    with monkeypatch.context() as patch:
        patch.setattr(moto_serialization, "moto_original", lambda: counting)
        dynamodb.get_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
    # Only the structures around the attribute values reach moto's own method
    assert 0 < len(taken) < 5
    with monkeypatch.context() as patch:
        patch.setattr(BaseJSONSerializer, "_serialize_type_structure", real)
        slow = best_of(10)
    assert fast < slow, f"fast path {fast * 1000:.1f} ms, moto's {slow * 1000:.1f} ms"
