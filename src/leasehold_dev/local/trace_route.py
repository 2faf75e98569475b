"""`GET /local/traces/{trace_id}` on the local gateway: one trace's spans from the stack's
`--traces` file, for operators (the console's trace view; decision TR7).

Local only, like `/openapi.yaml`: deployed there is no file (X-Ray has the invocations) and
API Gateway has no such route. The identity is the local gateway's stand-in for a Cognito JWT
(`X-Demo-User`), and only a user of the `operators` group is answered — as `/ops` is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leasehold.sdk.routes import OPERATORS_GROUP
from leasehold.service.trace_links import TRACE_ID

MAX_TRACE_SPANS = 2000
"""The most spans one answer holds (`truncated: true` past it): a trace of a job with hundreds
of attempts or steps is still drawn, a runaway one does not fill the page."""


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"code": code, "message": message}}


def _service(resource_spans: Mapping[str, Any]) -> str:
    for entry in (resource_spans.get("resource") or {}).get("attributes") or []:
        if entry.get("key") == "service.name":
            return str((entry.get("value") or {}).get("stringValue", ""))
    return ""


def spans_of(path: Path, trace_id: str) -> tuple[list[dict[str, Any]], bool]:
    """Every span of `trace_id` in the trace file (OTLP JSON lines), oldest first, each with its
    resource's `service` name; and whether MAX_TRACE_SPANS cut the list short. A line torn or
    not JSON (a stack killed mid-write) is skipped: the file is a view, not a record."""
    spans: list[dict[str, Any]] = []
    truncated = False
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return spans, truncated  # no span written yet
    with handle:
        for line in handle:
            if trace_id not in line:
                continue  # most lines are other traces': no JSON parsed for them
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            for resource_spans in doc.get("resourceSpans") or []:
                service = _service(resource_spans)
                for scope in resource_spans.get("scopeSpans") or []:
                    for span in scope.get("spans") or []:
                        if span.get("traceId") != trace_id:
                            continue
                        if len(spans) >= MAX_TRACE_SPANS:
                            truncated = True
                            continue
                        spans.append({**span, "service": service})
    spans.sort(key=lambda span: int(span.get("startTimeUnixNano") or 0))
    return spans, truncated


def answer_trace(
    traces: Path | None, trace_id: str, claims: Mapping[str, str] | None
) -> tuple[int, dict[str, Any]]:
    """The route's status and JSON body for a caller with `claims` (None: no known user)."""
    if claims is None:
        return _error(401, "unauthenticated", "a signed-in user is required (X-Demo-User)")
    groups = claims.get("cognito:groups", "").strip("[]").replace(",", " ").split()
    if OPERATORS_GROUP not in groups:
        return _error(403, "forbidden", "operators only")
    if not TRACE_ID.fullmatch(trace_id):
        return _error(400, "invalid_request", "a trace id is 32 lower-case hex digits")
    if traces is None:
        return _error(
            404,
            "not_found",
            "this local stack writes no trace file: start it with `leasehold local up "
            "--traces FILE`",
        )
    spans, truncated = spans_of(traces, trace_id)
    return 200, {"trace_id": trace_id, "file": str(traces), "spans": spans, "truncated": truncated}


__all__ = ["MAX_TRACE_SPANS", "answer_trace", "spans_of"]
