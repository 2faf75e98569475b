"""Every error code the store can meet reaches the caller as a 503 (with `Retry-After`: nothing
is promised) or a 400 (the store refused the request as sent), never a 500. The codes are the
documented errors of each DynamoDB and SQS operation the store calls (botocore's service models)
and the generic ones every AWS service may answer; each is injected on the wire (store/faults.py)
on every operation of both services while the API is driven through its routes, then the faults
stop and every job a 2xx acknowledged is still there."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest

from leasehold.store.errors import REFUSED_CODES
from tests.support.api import Call, call_fixture

STORE_OPERATIONS = {
    "dynamodb": ("GetItem", "Query", "UpdateItem", "TransactWriteItems", "BatchGetItem"),
    "sqs": (
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "StartMessageMoveTask",
    ),
}
GENERIC = (
    "ThrottlingException",
    "Throttling",
    "InternalServerError",
    "InternalFailure",
    "InternalError",
    "ServiceUnavailable",
    "RequestLimitExceeded",
    "AccessDeniedException",
    "AccessDenied",
    "ValidationException",
    "ValidationError",
    "UnrecognizedClientException",
    "ResourceNotFoundException",
    "IncompleteSignature",
    "InvalidClientTokenId",
    "ExpiredTokenException",
    "MissingAuthenticationToken",
    "NotAuthorized",
    "OptInRequired",
    "RequestExpired",
    "RequestTimeout",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "MissingParameter",
    "MalformedQueryString",
    "SerializationException",
    "AWS.SimpleQueueService.NonExistentQueue",
    "AWS.SimpleQueueService.RequestThrottled",
    "AWS.SimpleQueueService.MessageTooLong",
    "KMS.ThrottlingException",
)
HANDLED_BY_THE_STORE = {"ConditionalCheckFailedException", "TransactionCanceledException"}
"""Conditions, not errors: table.py turns them into ConditionFailed (tests of their own)."""


def _documented() -> set[str]:
    session = botocore.session.get_session()
    codes: set[str] = set()
    for service, operations in STORE_OPERATIONS.items():
        model = session.get_service_model(service)
        for name in operations:
            codes |= {s.error_code or s.name for s in model.operation_model(name).error_shapes}
    return codes


CODES = sorted((_documented() | set(GENERIC)) - HANDLED_BY_THE_STORE)
SUBMIT = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "cost": 1}]}}
URL = "https://example.org/articles/durable-jobs"


def _drive(call: Call) -> list[tuple[str, int, dict[str, Any], dict[str, str]]]:
    """Every kind of store call the API makes: a transaction, a query, a read, an update, the
    queues' attributes, an application's writes."""
    answers = []
    for event, kwargs in (
        ("api-submit-job.json", {"body": SUBMIT, "headers": {"idempotency-key": "k1"}}),
        ("api-submit-job.json", {"body": SUBMIT}),
        ("api-list-jobs.json", {}),
        ("api-get-job.json", {"path_id": "j_019d2a7f3c01f0e1d2c3b4"}),
        ("api-cancel-job.json", {"path_id": "j_019d2a7f3c01f0e1d2c3b4"}),
        ("api-ops-summary.json", {"user": "ops"}),
        ("api-ops-jobs.json", {"user": "ops"}),
        ("api-create-bookmark.json", {"body": {"url": URL}}),
        ("api-list-bookmarks.json", {}),
    ):
        answers.append((event, *call(event, **kwargs)))
    return answers


def test_the_codes_cover_every_documented_error_of_the_store_s_operations() -> None:
    assert {"ItemCollectionSizeLimitExceededException", "QueueDoesNotExist", "KmsDisabled"} <= set(
        CODES
    )
    assert len(CODES) >= 50


@pytest.mark.parametrize("code", CODES)
def test_every_store_error_code_is_a_503_or_a_400_never_a_500(
    moto: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    faulty = call_fixture(monkeypatch, LEASEHOLD_FAULTS=f"dynamodb.*:{code}=1,sqs.*:{code}=1")
    call = next(faulty)
    acknowledged = []
    for event, status, body, headers in _drive(call):
        assert status != 500, (code, event, body)
        if status == 503:
            assert headers.get("Retry-After"), (code, event)
            assert body["error"]["code"] == "store_unavailable"
        elif status == 400:
            assert code in REFUSED_CODES, (code, event, body)
        elif 200 <= status < 300 and "job_id" in body:
            acknowledged.append(body["job_id"])
        else:
            assert status in {404, 409}, (code, event, status, body)
    assert '"level":"ERROR"' not in capsys.readouterr().out.replace(" ", "")
    # The faults stop (a new cold start, the same tables): what was acknowledged is there
    monkeypatch.setenv("LEASEHOLD_FAULTS", "")
    for cached in _cached():
        cached.cache_clear()
    for job_id in acknowledged:
        status, view, _ = call("api-get-job.json", path_id=job_id)
        assert status == 200 and view["job_id"] == job_id
    faulty.close()


def _cached() -> tuple[Any, ...]:
    from tests.support.api import CACHED

    return CACHED
