"""leasehold.local.moto_serving: the embedded server keeps a client's connection open between
requests (and never mistakes an unread body for the next request), and its two memos — the
backend of a host, the parse of an UpdateExpression — give moto's own answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from leasehold.local import moto_serving
from leasehold.local.resources import create_table
from leasehold.local.stack import OUTAGE_PATH, REGION, client, start_moto


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server, url = start_moto()
    try:
        yield url
    finally:
        server.stop()


def _connections_opened(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import urllib3.connection

    opened: list[int] = []
    original = urllib3.connection.HTTPConnection.connect

    def connect(self: Any) -> None:
        opened.append(1)
        original(self)

    monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", connect)
    return opened


def test_a_client_keeps_one_connection_for_many_requests(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = client("sqs", endpoint)
    dynamodb = client("dynamodb", endpoint)
    queue = sqs.create_queue(QueueName="keep-alive")["QueueUrl"]
    opened = _connections_opened(monkeypatch)
    for n in range(6):
        sqs.send_message(QueueUrl=queue, MessageBody=f"message {n}")
        dynamodb.list_tables()
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert len(received) == 6
    assert len(opened) <= 2, f"{len(opened)} connections for 13 requests"  # one per client


def _exchange(endpoint: str, raw: bytes) -> bytes:
    host, port = endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(raw)
        answer = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return answer
            answer += chunk


def test_a_body_the_application_does_not_read_is_not_taken_for_the_next_request(
    endpoint: str,
) -> None:
    # The outage switch's GET never reads its body; the second request follows on the same
    # connection and must be answered as itself.
    ignored = b'{"dynamodb": true}'
    first = (
        f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(ignored)}\r\n\r\n"
    ).encode() + ignored
    second = f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    answer = _exchange(endpoint, first + second)
    assert answer.count(b"HTTP/1.1 200 OK") == 2, answer
    assert answer.count(b'{"dynamodb": false}') == 2, answer
    assert b"400" not in answer.split(b"\r\n")[0]


def test_a_chunked_request_is_answered_and_the_connection_closed(endpoint: str) -> None:
    body = b'{"dynamodb": false}'
    raw = (
        (
            f"POST {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
    )
    answer = _exchange(endpoint, raw)  # returns only because the server closes
    head = answer.split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 400")  # the switch wants a Content-Length: it was read
    assert b"connection: close" in head


def test_the_backend_of_a_host_is_moto_s_and_found_once() -> None:
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    moto_serving.install()
    app = DomainDispatcherApplication(create_backend_app)
    hosts = [
        "dynamodb.us-east-1.amazonaws.com",
        "sqs.us-east-1.amazonaws.com",
        "s3.amazonaws.com",
        "moto_api",
        "events.us-east-1.amazonaws.com",
        "nothing.example",
    ]
    patched = [app.get_backend_for_host(host) for host in hosts]
    original = moto_serving._saved["dispatch"]
    assert patched == [original(app, host) for host in hosts]
    assert patched[:2] == ["dynamodb", "sqs"]
    listed: list[int] = []
    real = backends.list_of_moto_modules

    def counting() -> Any:
        listed.append(1)
        return real()

    backends.list_of_moto_modules = counting  # type: ignore[assignment]
    try:
        for _ in range(5):
            assert app.get_backend_for_host("dynamodb.us-east-1.amazonaws.com") == "dynamodb"
    finally:
        backends.list_of_moto_modules = real  # type: ignore[assignment]
    assert listed == []  # remembered: moto's directory is not listed again


BUMP = "SET #s = :s, epoch = epoch + :one, tags = list_append(if_not_exists(tags, :e), :t)"
UPDATES = [
    ("SET #s = :s, epoch = :one, tags = list_append(if_not_exists(tags, :e), :t)", None),
    (BUMP, "attribute_exists(pk)"),
    (BUMP, "attribute_exists(pk)"),  # the same expression again: from the memo once installed
    ("ADD visits :one REMOVE note", "epoch >= :one"),
    ("SET note = :s", "#s = :s"),
    ("SET note = :s", "#s = :s"),  # the state is state-0, :s is state-1: fails
    ("SET #s = :s REMOVE visits", "epoch > :one"),
    ("SET nothing = missing + :one", None),  # refers to an attribute the item lacks
]


def _run_updates(dynamodb: Any) -> list[Any]:
    seen: list[Any] = []
    for n, (update, condition) in enumerate(UPDATES):
        request: dict[str, Any] = {
            "TableName": "jobs",
            "Key": {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}},
            "UpdateExpression": update,
            "ExpressionAttributeValues": {
                ":s": {"S": f"state-{n % 2}"},
                ":one": {"N": "1"},
                ":e": {"L": []},
                ":t": {"L": [{"S": f"t{n}"}]},
            },
            "ReturnValues": "ALL_NEW",
        }
        if "#s" in update or (condition and "#s" in condition):
            request["ExpressionAttributeNames"] = {"#s": "state"}
        if condition:
            request["ConditionExpression"] = condition
        used = {v for v in request["ExpressionAttributeValues"] if v in update + (condition or "")}
        request["ExpressionAttributeValues"] = {
            k: v for k, v in request["ExpressionAttributeValues"].items() if k in used
        }
        try:
            seen.append(dynamodb.update_item(**request)["Attributes"])
        except ClientError as error:
            seen.append(error.response["Error"]["Code"])
    try:
        dynamodb.update_item(
            TableName="jobs",
            Key={"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}},
            UpdateExpression="SET = oops",
        )
    except ClientError as error:
        seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
    return seen


def _through_moto(aws_env: None) -> list[Any]:
    with mock_aws():
        dynamodb = boto3.session.Session(region_name=REGION).client("dynamodb")
        create_table(dynamodb, "jobs")
        return _run_updates(dynamodb)


def test_update_expressions_give_moto_s_answers_when_their_parse_is_remembered(
    aws_env: None,
) -> None:
    moto_serving.uninstall()
    expected = _through_moto(aws_env)
    moto_serving.install()
    try:
        first = _through_moto(aws_env)
        again = _through_moto(aws_env)  # every parse now comes from the memo
    finally:
        moto_serving.uninstall()
    assert first == expected
    assert again == expected
    assert expected[2]["epoch"] == {"N": "3"} and expected[2]["tags"]["L"][-1] == {"S": "t2"}
    assert expected[5] == "ConditionalCheckFailedException"
    assert "visits" not in expected[6] and expected[6]["note"] == {"S": "state-0"}
    assert expected[-2] == "ValidationException"
    assert expected[-1][0] == "ValidationException"
    moto_serving.install()  # as the rest of this process found it


CONDITIONS = [
    "attribute_exists(pk) AND #s = :s",
    "attribute_exists(pk) AND #s = :s",  # again: tokens from the memo once installed
    "attribute_not_exists(pk) OR epoch < :one",
    "NOT (#s IN (:s, :t)) AND size(tags) >= :one",
    "epoch BETWEEN :zero AND :one",
    "begins_with(#s, :prefix) AND contains(tags, :tag)",
    "(epoch > :zero AND (#s <> :s OR attribute_type(tags, :list)))",
    "nested.inner.#s = :s OR tags[0] = :tag",
    "epoch = :one $",  # a character no token starts with
]


def _run_conditions(dynamodb: Any) -> list[Any]:
    dynamodb.put_item(
        TableName="jobs",
        Item={
            "pk": {"S": "JOB#2"},
            "sk": {"S": "JOB"},
            "state": {"S": "running"},
            "epoch": {"N": "1"},
            "tags": {"L": [{"S": "a"}, {"S": "b"}]},
            "nested": {"M": {"inner": {"M": {"state": {"S": "queued"}}}}},
        },
    )
    values = {
        ":s": {"S": "running"},
        ":t": {"S": "queued"},
        ":one": {"N": "1"},
        ":zero": {"N": "0"},
        ":prefix": {"S": "run"},
        ":tag": {"S": "a"},
        ":list": {"S": "L"},
    }
    seen: list[Any] = []
    for condition in CONDITIONS:
        used = {k: v for k, v in values.items() if k in condition}
        request: dict[str, Any] = {
            "TableName": "jobs",
            "Key": {"pk": {"S": "JOB#2"}, "sk": {"S": "JOB"}},
            "UpdateExpression": "SET probe = :probe",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {**used, ":probe": {"S": condition}},
        }
        if "#s" in condition:
            request["ExpressionAttributeNames"] = {"#s": "state"}
        try:
            seen.append(dynamodb.update_item(**request, ReturnValues="UPDATED_NEW")["Attributes"])
        except ClientError as error:
            seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
        except ValueError as error:  # what moto's lexer raises in-process for a bad character
            seen.append(("ValueError", str(error)))
    return seen


def test_condition_expressions_give_moto_s_answers_when_their_tokens_are_remembered(
    aws_env: None,
) -> None:
    def through_moto() -> list[Any]:
        with mock_aws():
            dynamodb = boto3.session.Session(region_name=REGION).client("dynamodb")
            create_table(dynamodb, "jobs")
            return _run_conditions(dynamodb)

    moto_serving.uninstall()
    expected = through_moto()
    moto_serving.install()
    try:
        first, again = through_moto(), through_moto()
    finally:
        moto_serving.uninstall()
        moto_serving.install()
    assert first == expected
    assert again == expected
    outcomes = ["ok" if isinstance(answer, dict) else answer[0] for answer in expected]
    assert outcomes.count("ok") >= 4, expected
    assert "ConditionalCheckFailedException" in outcomes
    assert outcomes[-1] == "ValueError", expected
