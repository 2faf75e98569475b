"""Builds the clients, stores and services of one function from its settings (once per cold
start). boto3 honours AWS_ENDPOINT_URL, which is how the local stack points these at moto."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from leasehold.domain.clock import SystemClock
from leasehold.handlers.settings import Settings
from leasehold.sdk.apps import Engine, start_engine
from leasehold.sdk.loading import Loaded, load_kinds
from leasehold.service.kinds import JobKind
from leasehold.store import Stores, Table
from leasehold.store.queue import WakeupQueue
from leasehold.store.table import CLIENT_CONFIG as TABLE_CLIENT_CONFIG

# Bounded: a dependency that does not answer gives a 503 in seconds, not a hung request.
CLIENT_CONFIG = TABLE_CLIENT_CONFIG

metrics = Metrics()


class MetricsTelemetry:
    """Service counters as CloudWatch EMF metrics (Powertools)."""

    def count(self, name: str, value: int = 1) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    stores: Stores
    queue: WakeupQueue
    clock: SystemClock
    telemetry: MetricsTelemetry
    kinds: dict[str, JobKind]
    loaded: Loaded


@cache
def runtime() -> Runtime:
    settings = Settings.from_env()
    metrics.namespace = settings.metrics_namespace
    session = boto3.session.Session()
    dynamodb = session.client("dynamodb", config=CLIENT_CONFIG)
    sqs = session.client("sqs", config=CLIENT_CONFIG)
    if settings.faults:  # tests and `leasehold local up --faults` only (arch §3.9)
        from leasehold.store.faults import FaultPlan, install_faults

        plan = FaultPlan.parse(settings.faults)
        install_faults(dynamodb, plan)
        install_faults(sqs, plan)
    loaded = load_kinds(settings.kinds, max_step_seconds=settings.max_step_seconds)
    kinds: dict[str, JobKind] = dict(loaded.kinds)
    built = Runtime(
        settings=settings,
        stores=Stores.over(
            Table(dynamodb, settings.table_name),
            settings.user_concurrency_limit,
            slot_grace_ms=2 * settings.lease_seconds * 1000,
        ),
        queue=WakeupQueue(
            sqs, settings.queue_url, settings.dlq_url, priority_urls=settings.priority_urls()
        ),
        clock=SystemClock(),
        telemetry=MetricsTelemetry(),
        kinds=kinds,
        loaded=loaded,
    )
    # What an application's routes reach through `leasehold.apps.Engine.current()`: this door
    # (faults and all), clock and metrics — never a client of their own.
    engine = Engine(built.stores.table, built.clock, built.telemetry, settings.default_max_attempts)
    start_engine(engine, kinds)
    return built


def worker_identity() -> str:
    """Which execution environment holds a lease: visible in the job and in the logs."""
    name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or f"pid-{os.getpid()}"
    return name[-48:]


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def function_handler(logger: Logger) -> Callable[[Handler], Handler]:
    """The preamble every function's handler shares: the Lambda context on `logger` (state
    cleared per invocation), the EMF metrics flushed at the end, the log context trimmed."""

    def wrap(body: Handler) -> Handler:
        @logger.inject_lambda_context(clear_state=True)
        @metrics.log_metrics
        @functools.wraps(body)
        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            trim_log_context(logger)
            return body(event, context)

        return handler

    return wrap


LOG_CONTEXT_DROPPED = ("function_arn", "function_memory_size")


def trim_log_context(logger: Any) -> None:
    """Keep each log line small (CloudWatch Logs is priced per byte ingested, decision C7): the
    function's name, request id and cold start stay; its ARN and memory size, the same on every
    line of a log group, go."""
    logger.remove_keys(list(LOG_CONTEXT_DROPPED))
