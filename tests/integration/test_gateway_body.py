"""A request body that is not UTF-8 is a 400 `malformed_json` on the local path as on the deployed
one (issue 28 item 8). The local gateway used to decode it with replacement characters, so a
body with a stray byte became valid JSON and a job. Now it hands such a body over base64-encoded
(`isBase64Encoded`), as API Gateway hands over a binary body, and the handler's `body_of`
decodes what is base64-encoded as strict UTF-8 (moto, the real Api handler)."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

import pytest

from leasehold.domain.errors import ValidationError
from leasehold.handlers import api
from leasehold.sdk.routes import body_of
from leasehold_dev.local.gateway import Gateway, build_event
from leasehold_dev.local.template import Route
from tests.support.api import Call

ROUTE = Route("POST", "/jobs", "Api", True)
NOT_UTF8 = b'{"kind": "synthetic", "payload": {"steps": [{"name": "caf\xe9"}]}}'
"""Latin-1 `café`: one byte 0xE9 that begins no UTF-8 sequence."""


def _event(body: bytes) -> dict[str, Any]:
    headers = {"content-type": "application/json", "x-demo-user": "alice"}
    return build_event(ROUTE, "POST", "/jobs", "", headers, body, {})


def test_the_gateway_hands_a_body_that_is_not_utf8_over_base64_encoded() -> None:
    event = _event(NOT_UTF8)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == NOT_UTF8
    with pytest.raises(ValidationError) as refused:
        body_of(event)
    assert refused.value.code == "malformed_json"


def test_a_utf8_body_is_handed_over_as_text() -> None:
    text = '{"kind": "synthetic", "payload": {"steps": [{"name": "café 😀"}]}}'
    event = _event(text.encode())
    assert event["isBase64Encoded"] is False and event["body"] == text
    assert body_of(event)["payload"]["steps"][0]["name"] == "café 😀"


@pytest.mark.parametrize(
    "data",
    [
        NOT_UTF8,
        '{"kind": "synthetic"}'.encode("utf-16"),  # JSON, but not in UTF-8 (RFC 8259 §8.1)
        '{"kind": "synthetic"}'.encode("utf-32"),
        b"\xff\xfe\xfd",
    ],
    ids=["latin-1", "utf-16", "utf-32", "no-text"],
)
def test_a_base64_body_that_is_not_utf8_is_malformed_json(data: bytes) -> None:
    """What API Gateway passes base64-encoded is decoded as UTF-8 and nothing else (json.loads
    of bytes would also have taken UTF-16 and UTF-32)."""
    with pytest.raises(ValidationError) as refused:
        body_of({"body": base64.b64encode(data).decode(), "isBase64Encoded": True})
    assert refused.value.code == "malformed_json"


def test_a_base64_body_in_utf8_is_read() -> None:
    data = '{"name": "café"}'.encode()
    event = {"body": base64.b64encode(data).decode(), "isBase64Encoded": True}
    assert body_of(event) == {"name": "café"}


def test_through_the_gateway_and_the_api_handler_it_is_a_400_and_no_job(call: Call) -> None:
    # `call` set the Api handler's environment (moto, the template's table and queues)
    gateway = Gateway(0, [ROUTE, Route("GET", "/jobs", "Api", True)], {"Api": api.handler})
    gateway.start()
    try:
        status, answer = _post(gateway.port, NOT_UTF8)
        assert status == 400 and answer["error"]["code"] == "malformed_json"
        status, _ = _post(gateway.port, NOT_UTF8.replace(b"\xe9", "é".encode()))
        assert status == 202
    finally:
        gateway.stop()
    _, page, _ = call("api-list-jobs.json", query={})
    assert [job["kind"] for job in page["jobs"]] == ["synthetic"]  # only the UTF-8 one


def _post(port: int, body: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "POST",
            "/jobs",
            body=body,
            headers={"Content-Type": "application/json", "X-Demo-User": "alice"},
        )
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        conn.close()
