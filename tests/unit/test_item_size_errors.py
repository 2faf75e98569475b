"""DynamoDB's refusal of an item over 400 KB is told apart from its other refusals, in one place
(store/errors.py, store/table.py): the worker ends a job for it (`item_too_large`) instead of
letting the message be re-delivered into the DLQ; any other ValidationException stays what it
was (a StoreRefusedError, a 400 at the API)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from leasehold.domain.errors import ItemTooLargeError, StoreRefusedError
from leasehold.store.errors import translate
from leasehold.store.table import Table

pytestmark = pytest.mark.unit


def _client_error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "UpdateItem")


@pytest.mark.parametrize(
    "message",
    [
        "Item size has exceeded the maximum allowed size",
        "Item size to update has exceeded the maximum allowed size",
    ],
)
def test_a_size_refusal_is_item_too_large_and_says_dynamodbs_words(message: str) -> None:
    error = translate(_client_error("ValidationException", message))
    assert isinstance(error, ItemTooLargeError)
    assert message in str(error)


def test_another_validation_exception_is_not_taken_for_a_size_refusal() -> None:
    error = translate(
        _client_error("ValidationException", "One or more parameter values were invalid")
    )
    assert isinstance(error, StoreRefusedError) and not isinstance(error, ItemTooLargeError)


def test_a_transaction_cancelled_for_an_items_size_is_item_too_large() -> None:
    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    reasons = [
        {"Code": "None"},
        {"Code": "ValidationError", "Message": "Item size has exceeded the maximum allowed size"},
    ]
    with Stubber(client) as stub:
        stub.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            service_message="Transaction cancelled",
            http_status_code=400,
            modeled_fields={"CancellationReasons": reasons},
        )
        with pytest.raises(ItemTooLargeError, match="maximum allowed size"):
            Table(client, "jobs").transact(
                [{"ConditionCheck": {"Key": {"pk": {"S": "a"}}, "ConditionExpression": "x"}}] * 2
            )
