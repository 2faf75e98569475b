"""One trace per job, without I/O: the traceparent a job keeps, how the item packs it, how the
message carries it, and the OTLP JSON lines of `local up --traces` (decisions TR1–TR5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, set_span_in_context

from leasehold.domain.job import Owner
from leasehold.domain.options import JobOptions
from leasehold.handlers.trace_file import JsonLinesExporter
from leasehold.service.tracing import (
    context_of,
    current_traceparent,
    span_under,
    trace_id_of,
)
from leasehold.store.items import (
    outbox_item,
    packed_traceparent,
    serialize,
    unpacked_traceparent,
)
from leasehold.store.queue import Wakeup

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE}-{SPAN}-01"
W3C = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


@pytest.mark.parametrize(
    "malformed",
    [
        "",
        "garbage",
        f"00-{'0' * 32}-{SPAN}-01",  # an all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # an all-zero span id
        f"00-{TRACE.upper()}-{SPAN}-01",  # upper-case hex
        f"ff-{TRACE}-{SPAN}-01",  # version ff is forbidden
        f"00-{TRACE}-{SPAN}",  # no flags
        f"00-{TRACE[:-1]}-{SPAN}-01",  # short trace id
    ],
)
def test_a_malformed_traceparent_is_ignored_and_a_new_trace_started(malformed: str) -> None:
    # Given a malformed traceparent (OpenTelemetry's propagator ignores it: no 400)
    assert context_of(malformed) is None
    # When a job is accepted with it, outside any span
    made = current_traceparent(malformed)
    # Then the job gets a trace of its own, a new one each time
    assert W3C.fullmatch(made) and trace_id_of(made) != TRACE
    assert trace_id_of(current_traceparent(malformed)) != trace_id_of(made)


def test_a_valid_traceparent_is_kept_and_a_later_version_read_as_version_00() -> None:
    assert current_traceparent(TRACEPARENT) == TRACEPARENT
    assert trace_id_of(TRACEPARENT) == TRACE
    # a later version may carry more fields: the job keeps the version-00 part
    assert current_traceparent(f"01-{TRACE}-{SPAN}-01-more") == TRACEPARENT


def test_without_one_a_job_joins_the_current_span_else_starts_a_trace() -> None:
    # Inside a span under the caller's trace (tracing off: no SDK, the context still travels)
    with span_under("leasehold.test", TRACEPARENT):
        assert current_traceparent() == TRACEPARENT
    # a new trace ignores the current one
    with span_under("leasehold.test", None, new_trace=True):
        assert trace_id_of(current_traceparent()) != TRACE
    assert trace_id_of(current_traceparent()) != TRACE


def test_the_job_item_keeps_25_bytes_and_reads_them_back() -> None:
    # 27 bytes with its name: a 3-step job's item stays under 1 KiB (decision TR2)
    packed = packed_traceparent(TRACEPARENT)
    assert packed is not None and len(packed) == 25
    assert serialize(packed) == {"B": packed}
    assert unpacked_traceparent(packed) == TRACEPARENT
    assert packed_traceparent(None) is None and unpacked_traceparent(None) is None
    assert packed_traceparent("01-not-ours") is None and unpacked_traceparent(b"short") is None


def test_the_outbox_item_and_the_message_carry_the_trace() -> None:
    item = outbox_item(
        "j-1", Owner("t", "u"), version=1, deliver_at=0, now_ms=0, traceparent=TRACEPARENT
    )
    assert item["tp"] == {"S": TRACEPARENT}
    wakeup = Wakeup("j-1", Owner("t", "u"), "d-1", traceparent=TRACEPARENT)
    assert json.loads(wakeup.body())["tp"] == TRACEPARENT
    assert Wakeup.parse(wakeup.body()).traceparent == TRACEPARENT
    # a message from before traces has none; a trace is not a reason to drop a wake-up
    assert Wakeup.parse('{"job_id": "j", "tenant": "t", "user_id": "u"}').traceparent is None
    assert (
        Wakeup.parse('{"job_id": "j", "tenant": "t", "user_id": "u", "tp": 5}').traceparent is None
    )


def test_the_options_take_a_traceparent_outside_the_fingerprinted_body() -> None:
    options = JobOptions.of(traceparent=TRACEPARENT, max_attempts=2)
    assert options.traceparent == TRACEPARENT
    assert "traceparent" not in options.body_fields()  # it travels as the header


def test_spans_are_written_as_otlp_json_lines(tmp_path: Path) -> None:
    # Given an SDK provider writing to a file (as `local up --traces` installs one)
    path = tmp_path / "traces.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(str(path))))
    tracer = provider.get_tracer("leasehold")
    parent = context_of(TRACEPARENT)
    linked = context_of(f"00-{'1' * 32}-{'2' * 16}-01")
    assert parent is not None and linked is not None
    # When a span with a remote parent, attributes and a link ends
    from opentelemetry import trace

    link = Link(trace.get_current_span(linked).get_span_context())
    with tracer.start_as_current_span(
        "leasehold.attempt",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes={"leasehold.job_id": "j-1", "leasehold.attempt": 2, "ok": True},
        links=[link],
    ) as span:
        child = tracer.start_span("leasehold.step a", context=set_span_in_context(span))
        child.end()
    # Then each ended span is one line: resourceSpans → scopeSpans → spans, in OTLP's JSON
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    docs = [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for line in lines]
    step, attempt = docs
    assert attempt["traceId"] == TRACE and attempt["parentSpanId"] == SPAN
    assert attempt["kind"] == 5 and attempt["name"] == "leasehold.attempt"
    assert re.fullmatch(r"[0-9a-f]{16}", attempt["spanId"])
    assert int(attempt["endTimeUnixNano"]) >= int(attempt["startTimeUnixNano"]) > 0
    assert {"key": "leasehold.attempt", "value": {"intValue": "2"}} in attempt["attributes"]
    assert {"key": "leasehold.job_id", "value": {"stringValue": "j-1"}} in attempt["attributes"]
    assert {"key": "ok", "value": {"boolValue": True}} in attempt["attributes"]
    assert attempt["links"][0]["traceId"] == "1" * 32
    assert step["parentSpanId"] == attempt["spanId"] and step["traceId"] == TRACE
