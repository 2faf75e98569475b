"""Worker Lambda: SQS wake-ups through Powertools' BatchProcessor. A record is reported failed
(kept by SQS) unless its outcome is saved — Lambda deletes only the others (docs/architecture.md
rule 4). Each
record is handled with the invocation's remaining time (docs/architecture.md rule 7)."""

from __future__ import annotations

from functools import cache

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import (
    function_handler,
    runtime,
    worker_identity,
    xray_subsegment,
)
from leasehold.service.outcome_counts import batched
from leasehold.service.tracing import trace_id_of
from leasehold.service.worker import Disposition, WorkerService
from leasehold.store.queue import Wakeup

logger = Logger(service="leasehold")


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's records and failures, and the local
    worker runs one invocation per priority queue at once in one process (decision F4) — a
    shared one let a second batch clear the first's failures, whose poller then deleted a
    message that had to stay. A batch whose every record must stay is still answered with
    batchItemFailures (not an error), so the local pump and Lambda see the same shape."""
    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class KeepMessageError(Exception):
    """Raised for a record whose message must stay in the queue."""


@cache
def worker() -> WorkerService:
    """This function's worker, as `build_engine` wires every worker (settings included)."""
    return runtime().worker(worker_identity())


def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
    try:
        wakeup = Wakeup.parse(record.body)
    except (ValueError, KeyError, TypeError):
        logger.error("not a wake-up; dropped", extra={"message_id": record.message_id})
        return "malformed"
    remaining = lambda_context.get_remaining_time_in_millis if lambda_context else None
    # Deployed, an X-Ray subsegment per record, annotated with the job's trace id (TR6).
    with xray_subsegment(
        "## wakeup",
        leasehold_job_id=wakeup.job_id,
        leasehold_trace_id=trace_id_of(wakeup.traceparent) or "",
    ):
        result = worker().handle(wakeup, record.receipt_handle, remaining_ms=remaining)
    if result.disposition is Disposition.KEEP:
        raise KeepMessageError(result.outcome)
    return result.outcome


@function_handler(logger)
def handler(event: JsonObject, context: LambdaContext) -> JsonObject:
    # the batch's outcomes are counted for the summary in one write at its end (decision OS1)
    with batched(runtime().telemetry):
        return process_partial_response(  # type: ignore[return-value]
            event=event,
            record_handler=record_handler,
            processor=_processor(),
            context=context,
        )
