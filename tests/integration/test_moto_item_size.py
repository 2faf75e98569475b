"""leasehold_dev.local.moto.item_size: an UpdateItem that DynamoDB refuses for the item's size
changes nothing, as on AWS. moto 5.2.5 checks the 400 KB limit attribute by attribute while it
applies the update to the stored item, so the actions before the one that crossed the limit
stay applied (and a version counter moves) although the caller was told the write failed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from leasehold_dev.local.moto import item_size as moto_item_size

pytestmark = pytest.mark.integration

TABLE = "sizes"
KEY = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}}
BIG = "x" * 300_000  # with a second one, the item is over 400 KB


@pytest.fixture
def client(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        dynamodb.put_item(
            TableName=TABLE, Item={**KEY, "version": {"N": "1"}, "outputs": {"S": BIG}}
        )
        yield dynamodb


def _oversized_update(client: Any) -> ClientError:
    # Given an item of ~300 KB, when one update bumps its version and adds another 300 KB
    with pytest.raises(ClientError) as refused:
        client.update_item(
            TableName=TABLE,
            Key=KEY,
            UpdateExpression="SET version = version + :one, kind_state = :big",
            ConditionExpression="version = :v",
            ExpressionAttributeValues={":one": {"N": "1"}, ":big": {"S": BIG}, ":v": {"N": "1"}},
        )
    return refused.value


def test_an_update_refused_for_size_changes_nothing(client: Any) -> None:
    moto_item_size.install()
    refused = _oversized_update(client)
    # Then DynamoDB's answer, and the item as it was: no action of the refused update applied
    assert refused.response["Error"]["Code"] == "ValidationException"
    assert "size" in refused.response["Error"]["Message"]
    item = client.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)["Item"]
    assert item["version"] == {"N": "1"}
    assert "kind_state" not in item


def test_an_update_refused_for_size_creates_no_item(client: Any) -> None:
    moto_item_size.install()
    new_key = {"pk": {"S": "JOB#2"}, "sk": {"S": "JOB"}}
    with pytest.raises(ClientError):
        client.update_item(
            TableName=TABLE,
            Key=new_key,
            UpdateExpression="SET a = :big, b = :big",
            ExpressionAttributeValues={":big": {"S": BIG}},
        )
    assert "Item" not in client.get_item(TableName=TABLE, Key=new_key, ConsistentRead=True)


def test_an_update_that_fits_still_applies(client: Any) -> None:
    moto_item_size.install()
    client.update_item(
        TableName=TABLE,
        Key=KEY,
        UpdateExpression="SET version = version + :one, kind_state = :small",
        ExpressionAttributeValues={":one": {"N": "1"}, ":small": {"S": "ok"}},
    )
    item = client.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)["Item"]
    assert (item["version"], item["kind_state"]) == ({"N": "2"}, {"S": "ok"})


def test_moto_alone_applies_part_of_a_refused_update(client: Any) -> None:
    # Why the patch exists: moto's own update_item leaves the version bumped.
    with moto_item_size.uninstalled():
        _oversized_update(client)
        item = client.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)["Item"]
    assert item["version"] == {"N": "2"}
