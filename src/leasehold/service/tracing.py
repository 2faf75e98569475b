"""One trace per job (docs/trace-walkthrough.md, decisions TR1–TR6).

A job keeps a W3C `traceparent` (`00-<trace id>-<parent span id>-<flags>`, 55 characters) from
accept to its end: the outbox item and the SQS message carry it, and every attempt and step is
a span of that trace. Spans are made with OpenTelemetry's API only (a light import); with no SDK
installed — deployed, and locally unless `local up --traces FILE` — they record nothing, and the
ids still travel, so the job view and the logs name the trace either way.

A malformed `traceparent` is ignored and a new trace started, as OpenTelemetry's W3C propagator
does (decision TR1)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from leasehold.domain.types import JsonObject

TRACEPARENT_LENGTH = 55
"""`00-` + 32 hex + `-` + 16 hex + `-` + 2 hex."""

_PROPAGATOR = TraceContextTextMapPropagator()
_ids = random.SystemRandom()

tracer = trace.get_tracer("leasehold")
"""Every span of the engine: a no-op until a provider is installed (handlers/trace_file.py)."""

Context = otel_context.Context


def context_of(traceparent: str | None) -> Context | None:
    """The context a valid `traceparent` names; None for a missing or malformed one (the W3C
    propagator's rules: version 00 or later, non-zero ids, lower-case hex)."""
    if not traceparent or not isinstance(traceparent, str) or len(traceparent) > 512:
        return None
    extracted = _PROPAGATOR.extract({"traceparent": traceparent})
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def traceparent_of(span_context: SpanContext) -> str:
    """`span_context` as a W3C traceparent."""
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
        f"{int(span_context.trace_flags):02x}"
    )


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex) of a stored traceparent; None for a job accepted before traces."""
    if not traceparent or len(traceparent) != TRACEPARENT_LENGTH:
        return None
    return traceparent[3:35]


def active_traceparent() -> str | None:
    """The current span's traceparent; None when there is no valid one."""
    current = trace.get_current_span().get_span_context()
    return traceparent_of(current) if current.is_valid else None


def current_traceparent(given: str | None = None) -> str:
    """The traceparent a new job keeps: `given` when it is valid (the caller's), else the
    current span's (the API request's, a worker's step submitting a child, a schedule's tick),
    else a new trace (a random trace id and span id, sampled)."""
    asked = context_of(given)
    if asked is not None:  # as version 00 (a later version's extra fields are not kept)
        return traceparent_of(trace.get_current_span(asked).get_span_context())
    active = active_traceparent()
    if active is not None:
        return active
    return traceparent_of(
        SpanContext(
            trace_id=_ids.getrandbits(128) or 1,
            span_id=_ids.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )


def passed_on(span: Span, parent: str | None) -> str | None:
    """What a span hands downstream: its own context when it records (a child of it), else the
    traceparent it was started under (tracing off: the job's trace still travels)."""
    own = span.get_span_context()
    if own.is_valid and span.is_recording():
        return traceparent_of(own)
    return parent


def job_attributes(job_id: str, attempt: int | None = None, epoch: int | None = None) -> JsonObject:
    """The attributes every span of a job carries."""
    attributes: JsonObject = {"leasehold.job_id": job_id}
    if attempt is not None:
        attributes["leasehold.attempt"] = attempt
    if epoch is not None:
        attributes["leasehold.epoch"] = epoch
    return attributes


@contextmanager
def span_under(
    name: str,
    traceparent: str | None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: JsonObject | None = None,
    links: list[str | None] | None = None,
    new_trace: bool = False,
) -> Iterator[Span]:
    """A current span named `name`, a child of `traceparent` (or of the current span when it
    is None or malformed; of nothing with `new_trace`), linked to each of `links`."""
    parent = context_of(traceparent)
    if parent is None and new_trace:
        parent = otel_context.Context()
    linked = [
        Link(trace.get_current_span(ctx).get_span_context())
        for ctx in (context_of(tp) for tp in links or [])
        if ctx is not None
    ]
    with tracer.start_as_current_span(
        name, context=parent, kind=kind, attributes=attributes, links=linked
    ) as span:
        yield span


__all__ = [
    "Context",
    "context_of",
    "active_traceparent",
    "current_traceparent",
    "job_attributes",
    "passed_on",
    "SpanKind",
    "span_under",
    "trace_id_of",
    "traceparent_of",
    "tracer",
]
