"""Relay Lambda: outbox INSERTs on the table's stream → SQS wake-ups, failures per record."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.handlers.wiring import function_handler, runtime
from leasehold.service.relay import relay_records

logger = Logger(service="leasehold")


@function_handler(logger)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()
    failed = relay_records(event.get("Records", []), rt.queue, rt.clock, rt.telemetry)
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed]}
