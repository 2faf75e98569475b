"""Sweeper Lambda (schedule): rescue expired leases and lost wake-ups; end jobs past deadline;
fire the schedules whose tick has come (decision FS5)."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import function_handler, runtime
from leasehold.service.sweeper import sweep
from leasehold.store.sharded import record_shard_count

logger = Logger(service="leasehold")
_declared_synced: list[bool] = []
"""Whether this process made the kinds' declared schedules stored (once per cold start)."""


@function_handler(logger)
def handler(event: JsonObject, context: LambdaContext) -> JsonObject:
    rt = runtime()
    # IndexShards recorded as the highest used, or a lowered count refused (decision SH3)
    record_shard_count(rt.stores.table)
    report = sweep(rt.stores, rt.clock, rt.sweep_settings(), rt.telemetry, rt.kinds)
    schedules = rt.schedules()
    synced: dict[str, int] = {}
    if not _declared_synced:
        try:
            synced = schedules.sync_declared()
            _declared_synced.append(True)
        except StoreUnavailableError as unavailable:  # the next run tries again
            logger.warning("declared schedules not synced", extra={"detail": str(unavailable)})
    return {**report, **synced, **schedules.fire_due()}
