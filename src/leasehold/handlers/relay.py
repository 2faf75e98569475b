"""Relay Lambda: outbox INSERTs on the table's stream → SQS wake-ups, failures per record."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.handlers.wiring import metrics, runtime, trim_log_context
from leasehold.service.relay import relay_records

logger = Logger(service="leasehold")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    trim_log_context(logger)
    rt = runtime()
    failed = relay_records(event.get("Records", []), rt.queue, rt.clock, rt.telemetry)
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed]}
