"""The local stack's DynamoDB outage switch (`make demo`'s storage outage): while it is on, the
embedded server answers every DynamoDB request 503 `ServiceUnavailable` — which the store turns
into `StoreUnavailableError` — and SQS still answers; when it is off, the table is back as it
was."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from leasehold_dev.local.moto.server import set_dynamodb_outage
from leasehold_dev.local.stack import REGION


@pytest.fixture
def endpoint(moto_server: str) -> str:
    return moto_server


def _client(service: str, endpoint: str) -> Any:
    import boto3

    return boto3.session.Session().client(  # type: ignore[call-overload]
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def test_the_outage_switch_makes_the_table_unavailable_and_gives_it_back(endpoint: str) -> None:
    dynamodb = _client("dynamodb", endpoint)
    sqs = _client("sqs", endpoint)
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName="t", Item={"pk": {"S": "before"}})
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    # When the outage is switched on
    assert set_dynamodb_outage(endpoint, True) is True
    # Then every DynamoDB request is a 503 ServiceUnavailable, and nothing is written
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "during"}})
    assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    with pytest.raises(ClientError):
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "before"}})
    # and SQS still answers
    sqs.send_message(QueueUrl=queue, MessageBody="still here")
    # When it is switched off, the table is as it was before the outage
    assert set_dynamodb_outage(endpoint, False) is False
    keys = {item["pk"]["S"] for item in dynamodb.scan(TableName="t")["Items"]}
    assert keys == {"before"}


def test_the_switch_refuses_a_body_that_is_not_on_or_off(endpoint: str) -> None:
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        endpoint + "/_leasehold/outage", data=json.dumps({"dynamodb": "yes"}).encode()
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400
