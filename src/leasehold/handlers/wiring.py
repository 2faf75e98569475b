"""Builds the clients, stores and services of one function from its settings (once per cold
start). boto3 honours AWS_ENDPOINT_URL, which is how the local stack points these at moto."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.config import Config

from leasehold.domain.clock import SystemClock
from leasehold.handlers.settings import Settings, safety_margin_seconds
from leasehold.kinds import KindConfig, registry
from leasehold.sdk.apps import Engine, start_engine
from leasehold.sdk.loading import Loaded, load_kinds
from leasehold.service.kinds import JobKind
from leasehold.store import Stores, Table
from leasehold.store.queue import WakeupQueue

if TYPE_CHECKING:
    from leasehold.agent.planner import Planner
    from leasehold.store.documents import DocumentReader

# Bounded: a dependency that does not answer gives a 503 in seconds, not a hung request.
CLIENT_CONFIG = Config(
    connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"}
)

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
    kinds: dict[str, JobKind] = dict(legacy_kinds(settings))
    kinds.update(loaded.kinds)
    built = Runtime(
        settings=settings,
        stores=Stores.over(
            Table(dynamodb, settings.table_name),
            settings.user_concurrency_limit,
            slot_grace_ms=2 * settings.lease_seconds * 1000,
        ),
        queue=WakeupQueue(sqs, settings.queue_url, settings.dlq_url),
        clock=SystemClock(),
        telemetry=MetricsTelemetry(),
        kinds=kinds,
        loaded=loaded,
    )
    # What an application's routes reach through `leasehold.Engine.current()`: this door
    # (faults and all), clock and metrics — never a client of their own.
    engine = Engine(built.stores.table, built.clock, built.telemetry, settings.default_max_attempts)
    start_engine(engine, kinds)
    return built


def legacy_kinds(settings: Settings) -> dict[str, JobKind]:
    """The kinds not yet moved onto the public SDK (built from the engine's settings)."""
    return registry(
        KindConfig(
            max_step_ms=settings.max_step_seconds * 1000,
            documents=_documents(settings.documents_bucket),
            hosted_planner=_hosted_planner(settings),
            agent_safety_margin_ms=min(2_000, safety_margin_seconds(settings.lease_seconds) * 1000),
        )
    )


def _documents(bucket: str) -> Callable[[], DocumentReader]:
    """The documents bucket's reader, made at a doc_prep job's first S3 read (the API never
    reads documents, so it never makes an S3 client)."""

    def build() -> DocumentReader:
        from leasehold.store.documents import S3Documents

        return S3Documents.for_bucket(bucket)

    return build


def _hosted_planner(settings: Settings) -> Callable[[], Planner] | None:
    """The hosted planner when an endpoint is configured (never by default, never in tests).
    Its endpoint and model are checked now, at cold start; its API key is read from Secrets
    Manager at the worker's first hosted job, and never logged (HostedPlanner keeps it out of
    its repr and its request's repr)."""
    if not settings.hosted_planner_endpoint:
        return None
    from leasehold.agent.hosted import HostedPlanner, Urllib3Transport

    endpoint, model = settings.hosted_planner_endpoint, settings.hosted_planner_model
    HostedPlanner(endpoint, model, "", Urllib3Transport())  # HostedPlannerConfigError if unusable
    secret = settings.hosted_planner_api_key_secret

    def build() -> Planner:
        api_key = ""
        if secret:
            client = boto3.session.Session().client("secretsmanager", config=CLIENT_CONFIG)
            api_key = str(client.get_secret_value(SecretId=secret)["SecretString"])
        return HostedPlanner(endpoint, model, api_key, Urllib3Transport())

    return build


def worker_identity() -> str:
    """Which execution environment holds a lease: visible in the job and in the logs."""
    name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or f"pid-{os.getpid()}"
    return name[-48:]


LOG_CONTEXT_DROPPED = ("function_arn", "function_memory_size")


def trim_log_context(logger: Any) -> None:
    """Keep each log line small (CloudWatch Logs is priced per byte ingested, decision C7): the
    function's name, request id and cold start stay; its ARN and memory size, the same on every
    line of a log group, go."""
    logger.remove_keys(list(LOG_CONTEXT_DROPPED))
