"""Outbox → SQS: each INSERT of an outbox item becomes one wake-up (a spawn item, one per child it
names), delayed until it is due."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.trace import Span, StatusCode

from leasehold.domain.clock import Clock
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.job import Owner
from leasehold.domain.policies import sqs_delay_seconds
from leasehold.service.telemetry import Telemetry
from leasehold.service.tracing import SpanKind, context_of, job_attributes, passed_on, tracer
from leasehold.store.items import OUTBOX_PREFIX, deserialize_item
from leasehold.store.queue import PRIORITY_QUEUES, Wakeup, WakeupQueue

SQS_BATCH = 10


@dataclass(frozen=True)
class OutboxRecord:
    sequence_number: str
    wakeup: Wakeup


def parse_stream_record(record: dict[str, Any], now: int) -> OutboxRecord | None:
    """An outbox INSERT as a wake-up; None for anything else (the template's filter should have
    dropped it already, but a relay never trusts a filter with its correctness)."""
    ddb = record.get("dynamodb", {})
    if record.get("eventName") != "INSERT":
        return None
    image = ddb.get("NewImage") or {}
    if not image.get("pk", {}).get("S", "").startswith(OUTBOX_PREFIX):
        return None
    doc = deserialize_item(image)
    return OutboxRecord(
        sequence_number=str(ddb.get("SequenceNumber", "")),
        wakeup=Wakeup(
            job_id=doc["job_id"],
            owner=Owner(tenant=doc["tenant"], user_id=doc["user_id"]),
            dispatch_id=f"{doc['pk']}/{doc['sk']}",
            delay_seconds=sqs_delay_seconds(now, int(doc.get("deliver_at", now))),
            kind=doc.get("kind") if isinstance(doc.get("kind"), str) else None,
            priority=doc["priority"] if doc.get("priority") in PRIORITY_QUEUES else "normal",
            traceparent=doc["tp"] if isinstance(doc.get("tp"), str) else None,
            cascade=doc["cascade"] if isinstance(doc.get("cascade"), str) else None,
            cap=doc["cap"] if isinstance(doc.get("cap"), str) else None,
        ),
    )


def spawned(record: dict[str, Any], item: OutboxRecord) -> list[OutboxRecord]:
    """The wake-ups one outbox record stands for: itself, or, for a parent's spawn (`spawn`,
    WF43), one per child it names (they share the item's trace). A message not sent fails
    the whole record: the stream sends it again, and a child woken twice is claimed once."""
    image = record.get("dynamodb", {}).get("NewImage") or {}
    ids = image.get("spawn", {}).get("L")
    if not isinstance(ids, list):
        return [item]
    wakeup = item.wakeup
    return [
        OutboxRecord(
            item.sequence_number,
            replace(
                wakeup,
                job_id=child["S"],
                dispatch_id=f"{wakeup.dispatch_id}/{number}",
            ),
        )
        for number, child in enumerate(ids)
    ]


@dataclass(frozen=True)
class TracedRecord(OutboxRecord):
    """An outbox record with its relay span open until its message is sent (or not)."""

    span: Span | None = None


def _traced(item: OutboxRecord) -> OutboxRecord:
    """The record with the relay's span of the job's trace (a child of the outbox item's
    `traceparent`), whose context the message carries on to the attempt (decision TR3)."""
    wakeup = item.wakeup
    span = tracer.start_span(
        "leasehold.relay",
        context=context_of(wakeup.traceparent),
        kind=SpanKind.PRODUCER,
        attributes={"leasehold.function": "relay", **job_attributes(wakeup.job_id)}
        | {"leasehold.dispatch_id": wakeup.dispatch_id},
    )
    carried = replace(wakeup, traceparent=passed_on(span, wakeup.traceparent))
    return TracedRecord(item.sequence_number, carried, span)


def _sent(item: OutboxRecord, sent: bool) -> None:
    if isinstance(item, TracedRecord) and item.span is not None:
        if not sent:
            item.span.set_status(StatusCode.ERROR, "not sent; the stream retries it")
        item.span.end()


def relay_records(
    records: list[dict[str, Any]], queue: WakeupQueue, clock: Clock, telemetry: Telemetry
) -> list[str]:
    """Send the batch's wake-ups with SendMessageBatch; returns the sequence numbers to report
    as failed (Lambda retries the stream from the lowest one, so nothing is skipped)."""
    now = clock.now_ms()
    parsed = [(record, parse_stream_record(record, now)) for record in records]
    outbox = [
        _traced(each)
        for record, item in parsed
        if item is not None
        for each in spawned(record, item)
    ]
    # Grouped by the queue each goes to (its priority's, or its job's normal shard: QS1), in
    # stream order within a queue, and cut into requests of 10 per queue: sharding adds no
    # request for a batch that fills them (no wake-up's order matters: SQS standard queues keep
    # none).
    by_queue: dict[str, list[OutboxRecord]] = {}
    for item in outbox:
        url = queue.url_for(item.wakeup.priority, item.wakeup.job_id)
        by_queue.setdefault(url, []).append(item)
    failed: list[str] = []
    for items in by_queue.values():
        for start in range(0, len(items), SQS_BATCH):
            chunk = items[start : start + SQS_BATCH]
            try:
                failed_ids = queue.send_batch([item.wakeup for item in chunk])
            except StoreUnavailableError:
                failed_ids = {item.wakeup.dispatch_id for item in chunk}
            failed.extend(i.sequence_number for i in chunk if i.wakeup.dispatch_id in failed_ids)
            for item in chunk:
                _sent(item, item.wakeup.dispatch_id not in failed_ids)
    telemetry.count("WakeupsRelayed", len(outbox) - len(failed))
    if failed:
        telemetry.count("RelayFailures", len(failed))
    return list(dict.fromkeys(failed))
