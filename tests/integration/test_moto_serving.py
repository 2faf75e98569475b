"""leasehold_dev.local.moto.serving: the embedded server keeps a client's connection open between
requests (and never mistakes an unread body for the next request), and its memo of the backend
of a host gives moto's own answers."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold_dev.local.moto import serving as moto_serving
from leasehold_dev.local.moto.server import OUTAGE_PATH
from leasehold_dev.local.stack import client
from tests.support.burst import burst


@pytest.fixture
def endpoint(moto_server: str) -> str:
    return moto_server


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
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:  # a server closing on bytes it did not read resets
                return answer
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


_SMUGGLED = f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.parametrize(
    ("refused", "status"),
    [
        # http.server reads 65,537 bytes of a request line, refuses it, and must then close: the
        # rest of that line is not a request
        (b"GET /" + b"a" * (65537 - 5) + _SMUGGLED, b"414"),
        # it reads 101 header lines, refuses the request; the lines after them are not a request
        (
            f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\n".encode()
            + b"".join(b"X-%d: y\r\n" % n for n in range(100))
            + _SMUGGLED,
            b"431",
        ),
    ],
    ids=["request-line-too-long", "too-many-headers"],
)
def test_a_request_http_server_refuses_closes_the_connection_even_after_a_kept_one(
    endpoint: str, refused: bytes, status: bytes
) -> None:
    # The first request leaves the connection open; the second is refused by http.server before
    # Werkzeug sees it, with `Connection: close`, which must still close the connection.
    first = f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answer = _exchange(endpoint, first + refused)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3})", answer)
    assert statuses == [b"200", status], answer[-600:]


def test_a_request_with_an_invalid_content_length_is_answered_as_moto_answers_it(
    endpoint: str,
) -> None:
    # Werkzeug takes a Content-Length it cannot read as 0 and answers; so must the server here.
    raw = (
        f"GET {OUTAGE_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n"
    ).encode()
    answer = _exchange(endpoint, raw)
    assert answer.startswith(b"HTTP/1.1 200 OK"), answer
    assert b'{"dynamodb": false}' in answer


def test_a_response_cut_short_by_the_application_closes_the_connection() -> None:
    # An application that fails after its headers went out leaves a body shorter than its
    # Content-Length: only closing the connection tells the client; the next response must not
    # be read as the rest of this one.
    import threading

    from werkzeug.serving import make_server

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/short":
            start_response("200 OK", [("Content-Length", "10")])

            def body() -> Iterator[bytes]:
                yield b"12345"
                raise RuntimeError("the application fails mid-body")

            return body()
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    server = make_server(
        "127.0.0.1", 0, app, True, request_handler=moto_serving.KeepAliveRequestHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        raw = (
            b"GET /short HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        answer = _exchange(f"http://127.0.0.1:{server.server_address[1]}", raw)
    finally:
        server.shutdown()
        server.server_close()
    assert answer.endswith(b"\r\n\r\n12345"), answer  # cut short, then closed
    assert answer.count(b"HTTP/1.1 200 OK") == 1, answer


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


@pytest.mark.parametrize(
    "module",
    ["transactions", "queries", "serialization", "serving", "expressions"],
)
def test_every_moto_patch_refuses_another_moto_release(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from leasehold_dev.local.moto import transactions as moto_transactions

    patch = importlib.import_module(f"leasehold_dev.local.moto.{module}")
    monkeypatch.setattr(moto_transactions, "_moto_version", lambda: "5.3.0")
    with pytest.raises(
        moto_transactions.MotoVersionError, match=rf"{module} .* 5\.3\.0 is installed"
    ):
        patch.install()


def test_a_burst_of_64_clients_connecting_at_once_is_answered_without_a_reset(
    endpoint: str,
) -> None:
    """64 clients open a connection each at the same instant and send a DynamoDB request: every
    one is answered (the listen backlog is LISTEN_BACKLOG, not socketserver's 5)."""
    port = int(endpoint.rsplit(":", 1)[1])
    request = (
        b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        b"Content-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 "
        b"Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, "
        b"Signature=x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    for _ in range(3):
        assert burst(port, request, clients=64) == {"200": 64}


def test_a_json_template_is_read_as_moto_reads_it_and_yaml_is_still_moto_s() -> None:
    """The translated template (JSON) gives moto's own answer; YAML (a JSON parse fails) and a
    JSON document that is not an object go to moto's parser, which alone reads them."""
    from moto.cloudformation.models import Stack

    from leasehold_dev.local.template import load_template, translate
    from tests.support.resources import TEMPLATE

    moto_serving.install()
    original = moto_serving._saved["template"].__func__
    translated = json.dumps(translate(load_template(TEMPLATE), "us-east-1"))
    assert Stack.parse_template(translated) == original(translated)
    assert len(Stack.parse_template(translated)["Resources"]) > 50
    yaml_text = "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties: {QueueName: !Ref N}\n"
    assert Stack.parse_template(yaml_text) == original(yaml_text)
    assert Stack.parse_template('{"a": 1, }') == original('{"a": 1, }')  # YAML reads it


@pytest.mark.parametrize(
    "template",
    [
        '{"a": 1e5}',
        '{"a": 1.5e10}',
        '{"a": 1e-05}',  # json.dumps(0.00001)
        '{"a": 1.5E+10, "b": [0.5, -2]}',
        '{"a": "\\ud83d\\ude00"}',  # json.dumps("😀")
        '{"a": "\\u00e9 x\\/y", "b": true, "c": null}',
    ],
)
def test_a_json_template_yaml_reads_otherwise_is_read_as_moto_reads_it(template: str) -> None:
    """A number with an exponent is a string to YAML 1.1 unless it has a dot and a sign, and a
    surrogate pair two characters: moto's parser (YAML first) is the answer to keep."""
    from moto.cloudformation.models import Stack

    moto_serving.install()
    original = moto_serving._saved["template"].__func__
    assert Stack.parse_template(template) == original(template)
