"""The local gateway answers what API Gateway would, even to a malformed request."""

from __future__ import annotations

import json
import socket
from typing import Any

from leasehold.local.gateway import Gateway
from leasehold.local.template import Route


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
