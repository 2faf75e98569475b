"""The local gateway answers what API Gateway would, even to a malformed request."""

from __future__ import annotations

import json
import socket
from typing import Any

from leasehold_dev.local.gateway import Gateway
from leasehold_dev.local.template import Route
from tests.support.burst import burst


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        chunks = []
        while True:
            data = conn.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def test_a_non_numeric_content_length_is_a_400_not_a_dropped_connection() -> None:
    calls: list[Any] = []

    def handler(event: dict[str, Any], _: Any) -> dict[str, Any]:
        calls.append(event)
        return {"statusCode": 200, "body": "{}"}

    gateway = Gateway(0, [Route("POST", "/jobs", "Api", True)], {"Api": handler})
    gateway.start()
    try:
        for bad in (b"abc", b"-5", b"\xc2\xb2", b"1e3"):
            answer = _raw(
                gateway.port,
                b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " + bad + b"\r\n\r\n{}",
            )
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400"), (bad, head)
            assert json.loads(body)["error"]["code"] == "invalid_request"
        assert calls == []
        ok = _raw(
            gateway.port,
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        assert ok.startswith(b"HTTP/1.1 200") and len(calls) == 1
    finally:
        gateway.stop()


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def test_the_gateway_serves_the_openapi_document_with_no_identity(tmp_path: Any) -> None:
    import yaml
    from openapi_spec_validator import validate

    from leasehold_dev.local.gateway import OPENAPI_DOCUMENT

    calls: list[Any] = []
    gateway = Gateway(
        0,
        [
            Route("GET", "/openapi.yaml", "Api", True)
        ],  # even a route of that name does not shadow it
        {"Api": lambda event, _: calls.append(event) or {"statusCode": 500, "body": "{}"}},
    )
    gateway.start()
    try:
        status, headers, body = _get(gateway.port, "/openapi.yaml")
        # Given no X-Demo-User, when the document is asked for, then it is the repository's file
        assert status == 200 and headers["Content-Type"] == "application/yaml"
        assert body == OPENAPI_DOCUMENT.read_bytes()
        document = yaml.safe_load(body)
        validate(document)  # a valid OpenAPI 3.1 document
        assert document["openapi"].startswith("3.1")
        assert calls == []  # served by the gateway, not the Api function
    finally:
        gateway.stop()
    # A checkout without the document answers 404 in the error envelope, not a crash
    missing = Gateway(0, [], {}, openapi=tmp_path / "nope.yaml")
    missing.start()
    try:
        status, _, body = _get(missing.port, "/openapi.yaml")
        assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    finally:
        missing.stop()


def test_a_method_no_route_has_is_a_404_in_the_envelope_not_a_501_page() -> None:
    calls: list[Any] = []

    def handler(event: dict[str, Any], _: Any) -> dict[str, Any]:
        calls.append(event)
        return {"statusCode": 200, "body": "{}"}

    gateway = Gateway(0, [Route("GET", "/health", "Api", False)], {"Api": handler})
    gateway.start()
    try:
        for method in (b"OPTIONS", b"TRACE", b"QUERY", b"PROPFIND"):
            answer = _raw(
                gateway.port, method + b" /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 404"), (method, head)
            assert json.loads(body) == {"error": {"code": "not_found", "message": "no such route"}}
        # HEAD: the same status, and headers only (a body would corrupt the next answer)
        answer = _raw(
            gateway.port, b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 404") and body == b""
        assert calls == []
    finally:
        gateway.stop()


def test_a_burst_of_64_clients_connecting_at_once_is_answered_without_a_reset() -> None:
    """64 clients open a connection each at the same instant and post `POST /jobs`: every one is
    answered (socketserver's listen backlog of 5 reset or timed out some: 4–7 in 320)."""
    served: list[int] = []

    def handler(event: dict[str, Any], _: Any) -> dict[str, Any]:
        served.append(1)
        return {"statusCode": 202, "body": "{}"}

    gateway = Gateway(0, [Route("POST", "/jobs", "Api", True)], {"Api": handler})
    gateway.start()
    request = (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    try:
        assert gateway.server.socket.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        assert gateway.server.request_queue_size >= 64
        for _ in range(3):
            assert burst(gateway.port, request, clients=64) == {"202": 64}
    finally:
        gateway.stop()
    assert len(served) == 3 * 64
