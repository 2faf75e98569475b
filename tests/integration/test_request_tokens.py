"""DynamoDB's `ClientRequestToken` as the service keeps it (issue 27, item 3): the fixture
remembers a committed transaction's token for ten minutes — the same request again is a no-op
that answers as the first did, any other request is `IdempotentParameterMismatchException` — and
every writer that sends a token gets the same job (or bookmark) back from a keyed retry after a
lost answer, seconds or minutes later, never a 503."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from leasehold.domain.clock import ManualClock, SystemClock
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.options import Submission
from leasehold.store.items import deserialize_item
from leasehold_dev.local.moto import transactions as moto_transactions
from tests.support.api import CACHED, Call
from tests.support.harness import ALICE, Harness, make_job

MINUTE = 60_000
LOST_ANSWER = "dynamodb.TransactWriteItems:ReadTimeout=1@1"


def _bump(harness: Harness, amount: int) -> dict[str, Any]:
    """A transaction item that adds `amount` to a counter item (a write a repeat would show)."""
    return {
        "Update": {
            "TableName": harness.table,
            "Key": {"pk": {"S": "COUNTER#c"}, "sk": {"S": "COUNTER"}},
            "UpdateExpression": "ADD hits :n",
            "ExpressionAttributeValues": {":n": {"N": str(amount)}},
        }
    }


def _hits(harness: Harness) -> int:
    item = harness.dynamodb.get_item(
        TableName=harness.table, Key={"pk": {"S": "COUNTER#c"}, "sk": {"S": "COUNTER"}}
    ).get("Item")
    return int(item["hits"]["N"]) if item else 0


def _stream_records(harness: Harness) -> int:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    total = 0
    for shard in streams.describe_stream(StreamArn=harness.stream_arn)["StreamDescription"][
        "Shards"
    ]:
        iterator = streams.get_shard_iterator(
            StreamArn=harness.stream_arn,
            ShardId=shard["ShardId"],
            ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        total += len(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])
    return total


def _jobs(harness: Harness) -> list[dict[str, Any]]:
    items = harness.dynamodb.scan(TableName=harness.table)["Items"]
    return [deserialize_item(i) for i in items if i["pk"]["S"].startswith("JOB#")]


# ------------------------------------------------------------------ the fixture


def test_the_same_token_and_request_is_a_no_op_that_answers_as_the_first(
    harness: Harness,
) -> None:
    first = harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 1)], ClientRequestToken="t-1"
    )
    records = _stream_records(harness)
    harness.clock.advance(9 * MINUTE)
    again = harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 1)], ClientRequestToken="t-1"
    )
    assert _hits(harness) == 1  # not applied twice
    assert _stream_records(harness) == records  # and no stream record for the no-op
    assert {k: v for k, v in again.items() if k != "ResponseMetadata"} == {
        k: v for k, v in first.items() if k != "ResponseMetadata"
    }


def test_the_same_token_with_another_request_is_a_mismatch(harness: Harness) -> None:
    harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 1)], ClientRequestToken="t-1"
    )
    harness.clock.advance(9 * MINUTE + 59_999)
    with pytest.raises(ClientError) as refused:
        harness.dynamodb.transact_write_items(
            TransactItems=[_bump(harness, 2)], ClientRequestToken="t-1"
        )
    error = refused.value.response
    assert error["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "idempotent token that was already used" in error["Error"]["Message"]
    assert _hits(harness) == 1
    # the same request under another parameter is another request too
    with pytest.raises(ClientError, match="IdempotentParameterMismatch"):
        harness.dynamodb.transact_write_items(
            TransactItems=[_bump(harness, 1)],
            ClientRequestToken="t-1",
            ReturnConsumedCapacity="TOTAL",
        )


def test_a_token_is_forgotten_after_ten_minutes(harness: Harness) -> None:
    harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 1)], ClientRequestToken="t-1"
    )
    harness.clock.advance(10 * MINUTE)
    harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 2)], ClientRequestToken="t-1"
    )
    harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 2)], ClientRequestToken="t-1"
    )  # remembered again, from the second commit
    assert _hits(harness) == 3


def test_a_cancelled_transaction_does_not_spend_its_token(harness: Harness) -> None:
    refused = {
        "ConditionCheck": {
            "TableName": harness.table,
            "Key": {"pk": {"S": "NONE"}, "sk": {"S": "NONE"}},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
    with pytest.raises(ClientError, match="TransactionCanceled"):
        harness.dynamodb.transact_write_items(
            TransactItems=[_bump(harness, 5), refused], ClientRequestToken="t-1"
        )
    harness.dynamodb.transact_write_items(
        TransactItems=[_bump(harness, 1)], ClientRequestToken="t-1"
    )
    assert _hits(harness) == 1


def test_the_local_stacks_moto_server_keeps_tokens(moto_server: str) -> None:
    client = boto3.client(
        "dynamodb",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def put(value: str) -> dict[str, Any]:
        return {"Put": {"TableName": "t", "Item": {"id": {"S": "a"}, "v": {"S": value}}}}

    client.transact_write_items(TransactItems=[put("1")], ClientRequestToken="t-1")
    client.transact_write_items(TransactItems=[put("1")], ClientRequestToken="t-1")
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(TransactItems=[put("2")], ClientRequestToken="t-1")
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert client.get_item(TableName="t", Key={"id": {"S": "a"}})["Item"]["v"]["S"] == "1"


# ---------------------------------------------------------- keyed retries after a lost answer


@pytest.mark.parametrize("later_ms", [0, 3_000, 4 * MINUTE, 9 * MINUTE])
def test_a_keyed_retry_after_a_lost_answer_gets_the_same_job(
    harness: Harness, later_ms: int
) -> None:
    body = make_job()
    harness.faults(LOST_ANSWER)
    with pytest.raises(StoreUnavailableError, match="same Idempotency-Key"):
        harness.jobs().accept(ALICE, Submission.from_body(body, "k-lost"))
    (made,) = _jobs(harness)  # the commit happened; its answer did not arrive
    harness.clock.advance(later_ms)
    again = harness.jobs().accept(ALICE, Submission.from_body(body, "k-lost"))
    assert again.job_id == made["job_id"]
    assert [job["job_id"] for job in _jobs(harness)] == [made["job_id"]]
    # each request carries its own trace, kept on the item it writes (decision TR2), so even an
    # immediate repeat is not DynamoDB's identical no-op: it is sent again without its token,
    # and its own condition finds the first job
    assert harness.stores.table.stats.token_mismatches == 1
    # one wake-up for the relay to send, not two
    assert harness.relay_pump().poll_once() == 1 and len(harness.receive_all()) == 1


def test_a_keyed_retry_with_another_body_is_still_a_conflict(harness: Harness) -> None:
    harness.faults(LOST_ANSWER)
    with pytest.raises(StoreUnavailableError):
        harness.jobs().accept(ALICE, Submission.from_body(make_job(), "k-lost"))
    harness.clock.advance(MINUTE)
    from leasehold.domain.errors import IdempotencyConflictError

    with pytest.raises(IdempotencyConflictError):
        harness.jobs().accept(
            ALICE, Submission.from_body(make_job(payload={"steps": [{"name": "b"}]}), "k-lost")
        )


@pytest.mark.parametrize("later_ms", [3_000, 4 * MINUTE])
def test_a_keyed_bookmark_retried_after_a_lost_answer_is_the_same_bookmark(
    harness: Harness, later_ms: int
) -> None:
    body = {"url": "https://example.org/a"}
    harness.faults(LOST_ANSWER)
    with pytest.raises(StoreUnavailableError, match="same Idempotency-Key"):
        harness.bookmarks().create(ALICE, body, "k-bm")
    (job,) = _jobs(harness)
    harness.clock.advance(later_ms)
    view, created = harness.bookmarks().create(ALICE, body, "k-bm")
    assert not created and view["title_job"]["job_id"] == job["job_id"]
    bookmarks = [
        i for i in harness.dynamodb.scan(TableName=harness.table)["Items"] if "bookmark_id" in i
    ]
    assert [b["bookmark_id"]["S"] for b in bookmarks] == [view["id"]]
    assert [j["job_id"] for j in _jobs(harness)] == [job["job_id"]]


# ------------------------------------------------------------------ through the API handler


class _MovableClock(ManualClock):
    """The API function's clock (SystemClock) and the token window's, moved by the test."""


@pytest.fixture
def api_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[_MovableClock]:
    clock = _MovableClock(SystemClock().now_ms())
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: clock.now_ms())
    moto_transactions.use_token_clock(clock.now_ms)
    yield clock
    moto_transactions.use_token_clock(None)


def _cold_start_with_faults(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv("LEASEHOLD_FAULTS", spec)
    for cached in CACHED:
        cached.cache_clear()


@pytest.mark.parametrize("later_ms", [2_000, 6 * MINUTE])
def test_a_keyed_post_retried_after_a_lost_answer_is_202_with_the_same_job(
    call: Call, monkeypatch: pytest.MonkeyPatch, api_clock: _MovableClock, later_ms: int
) -> None:
    body = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "cost": 1}]}}
    headers = {"idempotency-key": "k-lost"}
    _cold_start_with_faults(monkeypatch, "dynamodb.TransactWriteItems:ReadTimeout=1")
    status, lost, _ = call("api-submit-job.json", body=body, headers=headers)
    assert status == 503 and "Idempotency-Key" in lost["error"]["message"]
    _cold_start_with_faults(monkeypatch, "")
    api_clock.advance(later_ms)
    status, again, _ = call("api-submit-job.json", body=body, headers=headers)
    assert status == 202, again
    status, view, _ = call("api-get-job.json", path_id=again["job_id"])
    assert status == 200 and view["state"] == "queued"
    status, listed, _ = call("api-list-jobs.json")
    assert [job["job_id"] for job in listed["jobs"]] == [again["job_id"]]
