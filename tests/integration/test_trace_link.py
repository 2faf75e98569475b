"""An operator's way from a job to its trace (decision TR7): the operator view's `trace_url`
through the real Api handler on moto (X-Ray deployed), and the local gateway's
`GET /local/traces/{trace_id}`, which answers one trace's spans from the `--traces` file to
operators only."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from leasehold.handlers import settings
from leasehold_dev.local.gateway import Gateway
from leasehold_dev.local.trace_route import MAX_TRACE_SPANS
from tests.support.api import Call, call_fixture

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "0af7651916cd43dd8448eb211c80319c"
QUEUED = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}


@pytest.fixture
def xray_call(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """The Api handler as deployed with `Tracing: Active` in eu-west-1: the settings see X-Ray
    on (the X-Ray SDK itself stays off: it would need Lambda's daemon)."""
    monkeypatch.setattr(settings, "xray_tracing", lambda env=None: True)
    yield from call_fixture(monkeypatch, AWS_REGION="eu-west-1")


def test_deployed_the_operator_view_links_the_jobs_trace_to_xray(xray_call: Call) -> None:
    # Given a job submitted under a caller's trace
    status, accepted, _ = xray_call(
        "api-submit-job.json",
        body=QUEUED,
        headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"},
    )
    assert status == 202
    # When the operator opens it (the answer is checked against docs/openapi.yaml)
    status, view, _ = xray_call("api-ops-show-job.json", path_id=accepted["job_id"], user="ops")
    # Then it links to X-Ray's traces annotated with its trace id, in the stack's region
    assert status == 200 and view["trace_id"] == TRACE
    assert view["trace_source"] == "xray"
    assert view["trace_url"].startswith(
        "https://console.aws.amazon.com/xray/home?region=eu-west-1#/traces?filter="
    )
    assert f'annotation.leasehold_trace_id = "{TRACE}"' in unquote(view["trace_url"])
    # ...and the owner's own view has no such link (it is an operator's)
    _, own, _ = xray_call("api-get-job.json", path_id=accepted["job_id"], user="alice")
    assert own["trace_id"] == TRACE and "trace_url" not in own


def test_without_a_recorder_the_operator_view_has_no_link(call: Call) -> None:
    job_id = call("api-submit-job.json", body=QUEUED)[1]["job_id"]
    _, view, _ = call("api-ops-show-job.json", path_id=job_id, user="ops")
    assert len(view["trace_id"]) == 32
    assert "trace_url" not in view and "trace_source" not in view


def _span(
    trace_id: str, span_id: str, name: str, start: int, parent: str | None = None
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1000),
        "attributes": [{"key": "leasehold.function", "value": {"stringValue": "worker"}}],
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _line(*spans: dict[str, Any]) -> str:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "Leasehold"}}]}
    doc = {
        "resourceSpans": [
            {
                "resource": resource,
                "scopeSpans": [{"scope": {"name": "leasehold"}, "spans": list(spans)}],
            }
        ]
    }
    return json.dumps(doc) + "\n"


def _get(port: int, path: str, user: str | None) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"X-Demo-User": user} if user else {})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def test_the_local_route_answers_one_traces_spans_to_operators_only(tmp_path: Path) -> None:
    # Given a trace file holding two traces' spans (out of order) and a line torn by a kill
    traces = tmp_path / "traces.jsonl"
    traces.write_text(
        _line(_span(TRACE, "b" * 16, "leasehold.attempt", 300, parent="a" * 16))
        + _line(
            _span(OTHER, "c" * 16, "POST /jobs", 100), _span(TRACE, "a" * 16, "POST /jobs", 100)
        )
        + '{"resourceSpans": [{"'
        + TRACE
    )
    calls: list[Any] = []
    gateway = Gateway(0, [], {"Api": lambda event, _: calls.append(event)}, traces=traces)
    gateway.start()
    try:
        # When an operator asks for one trace
        status, body = _get(gateway.port, f"/local/traces/{TRACE}", "ops")
        # Then they get its spans only, oldest first, each with its function's service name
        assert status == 200 and body["trace_id"] == TRACE and body["truncated"] is False
        assert [(s["name"], s["spanId"]) for s in body["spans"]] == [
            ("POST /jobs", "a" * 16),
            ("leasehold.attempt", "b" * 16),
        ]
        assert {s["service"] for s in body["spans"]} == {"Leasehold"}
        assert body["file"] == str(traces)
        # A trace with no span yet is an empty list, not an error
        assert _get(gateway.port, f"/local/traces/{'1' * 32}", "ops") == (
            200,
            {"trace_id": "1" * 32, "file": str(traces), "spans": [], "truncated": False},
        )
        # And no one else: no identity 401, a non-operator 403, a bad id 400
        assert _get(gateway.port, f"/local/traces/{TRACE}", None)[0] == 401
        status, body = _get(gateway.port, f"/local/traces/{TRACE}", "alice")
        assert status == 403 and body["error"]["code"] == "forbidden"
        for bad in ("not-a-trace", TRACE.upper(), TRACE + "0", "../../etc/passwd"):
            status, body = _get(gateway.port, f"/local/traces/{bad}", "ops")
            assert (status, body["error"]["code"]) == (400, "invalid_request"), bad
        assert calls == []  # the gateway's own route: the Api function never saw it
    finally:
        gateway.stop()


def test_the_local_route_is_a_404_without_a_trace_file_and_caps_a_huge_trace(
    tmp_path: Path,
) -> None:
    gateway = Gateway(0, [], {})
    gateway.start()
    try:
        status, body = _get(gateway.port, f"/local/traces/{TRACE}", "ops")
        assert status == 404 and "--traces" in body["error"]["message"]
    finally:
        gateway.stop()
    traces = tmp_path / "traces.jsonl"
    many = [_span(TRACE, f"{n:016x}", "leasehold.step s", n) for n in range(MAX_TRACE_SPANS + 5)]
    traces.write_text(_line(*many))
    capped = Gateway(0, [], {}, traces=traces)
    capped.start()
    try:
        status, body = _get(capped.port, f"/local/traces/{TRACE}", "ops")
        assert status == 200 and len(body["spans"]) == MAX_TRACE_SPANS and body["truncated"] is True
    finally:
        capped.stop()
