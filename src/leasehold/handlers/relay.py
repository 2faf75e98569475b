"""Relay Lambda: outbox INSERTs on the table's stream → SQS wake-ups, failures per record."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import function_handler, runtime
from leasehold.service.relay import relay_records

logger = Logger(service="leasehold")


@function_handler(logger)
def handler(event: JsonObject, context: LambdaContext) -> JsonObject:
    rt = runtime()
    failed = relay_records(event.get("Records", []), rt.queue, rt.clock, rt.telemetry)
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed]}
