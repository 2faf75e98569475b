"""Spans to a file, as JSON lines in OTLP's JSON encoding (`leasehold local up --traces FILE`).

Imported only when LEASEHOLD_TRACES names a file: it installs OpenTelemetry's SDK (tens of
milliseconds of import a deployed function never pays, decision TR5). Each ended span is one
line, a whole `ExportTraceServiceRequest` (resourceSpans → scopeSpans → spans), written with one
`write` on a file opened for appending — so every function of the local stack, in its own
process or a thread of the stack's, can share one file without a line torn by another."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

_KINDS = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
"""OTLP's `Span.SpanKind` numbers (the JSON encoding writes enums as integers)."""
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def any_value(value: Any) -> dict[str, Any]:
    """An attribute's value as OTLP JSON's `AnyValue` (64-bit integers as strings)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    return {"stringValue": str(value)}


def key_values(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": key, "value": any_value(value)} for key, value in (attributes or {}).items()]


def span_json(span: ReadableSpan) -> dict[str, Any]:
    """One span in OTLP's JSON encoding (ids as hex, times as strings of nanoseconds)."""
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    doc: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
        "name": span.name,
        "kind": _KINDS.get(span.kind, 1),
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": key_values(span.attributes),
        "status": {"code": _STATUS.get(span.status.status_code, 0)},
    }
    if span.parent is not None:
        doc["parentSpanId"] = f"{span.parent.span_id:016x}"
    if span.status.description:
        doc["status"]["message"] = span.status.description
    if span.links:
        doc["links"] = [
            {
                "traceId": f"{link.context.trace_id:032x}",
                "spanId": f"{link.context.span_id:016x}",
                "attributes": key_values(link.attributes),
            }
            for link in span.links
        ]
    if span.events:
        doc["events"] = [
            {
                "name": event.name,
                "timeUnixNano": str(event.timestamp),
                "attributes": key_values(event.attributes),
            }
            for event in span.events
        ]
    return doc


class JsonLinesExporter(SpanExporter):
    """Appends each batch of spans to `path` as one OTLP JSON line."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        resource = spans[0].resource
        scope = spans[0].instrumentation_scope
        line = {
            "resourceSpans": [
                {
                    "resource": {"attributes": key_values(resource.attributes)},
                    "scopeSpans": [
                        {
                            "scope": {"name": scope.name if scope else "leasehold"},
                            "spans": [span_json(span) for span in spans],
                        }
                    ],
                }
            ]
        }
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        try:
            with self._lock:
                handle = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(handle, data)
                finally:
                    os.close(handle)
        except OSError:
            return SpanExportResult.FAILURE  # a trace file is a view: the job never waits on it
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


_INSTALLED: list[str] = []


def install_trace_file(path: str, service: str) -> None:
    """Every span of this process from now on, to `path` (once per process: OpenTelemetry
    takes one global provider)."""
    if _INSTALLED:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)
    _INSTALLED.append(path)
