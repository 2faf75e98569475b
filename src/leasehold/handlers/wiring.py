"""Builds the engine — clients, stores, queue, services, worker — from one `Settings`
(`build_engine`; once per cold start for a function: `runtime()`). boto3 honours
AWS_ENDPOINT_URL, which is how the local stack points these at moto."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from leasehold.domain.clock import Clock, SystemClock
from leasehold.domain.ids import IdFactory, time_ordered_ids
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.domain.types import JsonObject
from leasehold.handlers.settings import Settings, safety_margin_seconds, xray_tracing
from leasehold.sdk.apps import Engine, start_engine
from leasehold.sdk.loading import Loaded, load_kinds
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind
from leasehold.service.ops import OpsService
from leasehold.service.outcome_counts import CountedOutcomes
from leasehold.service.schedules import ScheduleService
from leasehold.service.signals import WorkflowService
from leasehold.service.sweeper import SweepSettings
from leasehold.service.telemetry import Telemetry
from leasehold.service.trace_links import TraceLinks
from leasehold.service.uploads import UploadService
from leasehold.service.worker import WorkerService, WorkerSettings
from leasehold.store import Stores, Table
from leasehold.store.blob_marks import BlobMarks
from leasehold.store.blobs import BlobStore
from leasehold.store.counters import OutcomeCounters
from leasehold.store.queue import WakeupQueue
from leasehold.store.table import CLIENT_CONFIG as TABLE_CLIENT_CONFIG
from leasehold.store.table import S3_CLIENT_CONFIG, TransactionRetry
from leasehold.store.uploads import UploadStore

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

# Bounded: a dependency that does not answer gives a 503 in seconds, not a hung request.
CLIENT_CONFIG = TABLE_CLIENT_CONFIG

metrics = Metrics()


class MetricsTelemetry:
    """Service counters as CloudWatch EMF metrics (Powertools)."""

    def count(self, name: str, value: int = 1) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


RATE_HOLD_MS = 1000
"""A rate start due within a second is waited for in the invocation (SQS's least delay is 1 s):
at most a second of the invocation's time per wake-up, and only when a lease still fits."""


def worker_settings(settings: Settings, worker_id: str) -> WorkerSettings:
    """The worker's settings of a deployment's `Settings`: its lease and safety margin, retry
    backoff, slot wait, a heartbeat every third of the lease, and rate waits held up to
    RATE_HOLD_MS. The one place they are derived (decision OW3): the deployed worker, the local
    stack's and the testbed's are all made here."""
    lease_ms = settings.lease_seconds * 1000
    return WorkerSettings(
        worker_id=worker_id,
        lease=LeasePolicy(
            lease_ms=lease_ms,
            safety_margin_ms=safety_margin_seconds(settings.lease_seconds) * 1000,
        ),
        retry=RetryPolicy(base_ms=settings.backoff_base_ms, cap_ms=settings.backoff_cap_ms),
        slot_wait_ms=settings.slot_wait_seconds * 1000,
        heartbeat_every_ms=max(250, lease_ms // 3),
        rate_hold_ms=RATE_HOLD_MS,
    )


def sweep_settings(settings: Settings) -> SweepSettings:
    """The sweeper's settings of a deployment's `Settings`."""
    return SweepSettings(
        lost_wakeup_grace_ms=settings.lost_wakeup_grace_seconds * 1000,
        active_rate=settings.sweep_active_rate,
        due_rate=settings.sweep_due_rate,
        schedule_rate=settings.sweep_schedule_rate,
        interval_seconds=settings.sweep_interval_seconds,
        segments=settings.sweep_segments,
    )


@dataclass(frozen=True)
class Runtime:
    """One engine, built by `build_engine` from one `Settings`: the stores, the queue, the
    clock, the metrics and the kinds, and the services every function makes of them."""

    settings: Settings
    stores: Stores
    queue: WakeupQueue
    clock: Clock
    telemetry: Telemetry
    kinds: dict[str, JobKind]
    new_id: IdFactory
    """The ids of new jobs (time-ordered; a testbed's are seeded)."""
    loaded: Loaded | None = None
    """The modules `LEASEHOLD_KINDS` loaded (their routes, for the API function)."""

    def jobs(self) -> JobService:
        """The caller's use cases (`POST /jobs`, `/jobs/…`)."""
        return JobService(
            self.stores,
            self.kinds,
            self.clock,
            self.new_id,
            self.telemetry,
            default_max_attempts=self.settings.default_max_attempts,
            tenancy=self.settings.tenancy,
            uploads=self.uploads(),
        )

    def uploads(self) -> UploadService | None:
        """Presigned uploads into the data bucket (decision LD7); None without one."""
        blobs = self.stores.table.blobs
        if blobs is None:
            return None
        store = UploadStore(blobs.s3, blobs.bucket, local_key=self.settings.local_uploads)
        return UploadService(store, self.clock, self.new_id)

    def schedules(self) -> ScheduleService:
        """The schedules' routes and their trigger."""
        return ScheduleService(
            self.stores.table,
            self.kinds,
            self.clock,
            time_ordered_ids(self.clock, "s"),
            self.telemetry,
            default_max_attempts=self.settings.default_max_attempts,
            tenancy=self.settings.tenancy,
        )

    def workflows(self) -> WorkflowService:
        """The workflow routes: signals, callbacks, children (DESIGN §19)."""
        return WorkflowService(self.stores, self.kinds, self.clock, self.telemetry)

    def ops(self) -> OpsService:
        """The operator's routes."""
        links = TraceLinks(self.settings.xray_region, trace_file=bool(self.settings.traces))
        return OpsService(
            self.stores, self.queue, self.clock, self.telemetry, self.kinds, trace_links=links
        )

    def worker(
        self,
        worker_id: str,
        *,
        stores: Stores | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> WorkerService:
        """The worker, its settings from `worker_settings`. `stores`: the same stores seen
        through a test's eyes (a testbed's crash points); `sleep`: how a held rate wait passes
        (a testbed moves its manual clock instead of the wall clock's)."""
        return WorkerService(
            stores=stores or self.stores,
            queue=self.queue,
            kinds=self.kinds,
            clock=self.clock,
            settings=worker_settings(self.settings, worker_id),
            telemetry=self.telemetry,
            rng=rng,
            sleep=sleep,
        )

    def sweep_settings(self) -> SweepSettings:
        """The sweeper's settings."""
        return sweep_settings(self.settings)

    def engine(self) -> Engine:
        """What an application's own code reaches through `Engine.current()`: this table door
        (faults and all), clock, metrics, default attempts and tenant limits."""
        return Engine(
            self.stores.table,
            self.clock,
            self.telemetry,
            self.settings.default_max_attempts,
            self.settings.tenancy,
        )


def build_engine(
    settings: Settings,
    dynamodb: DynamoDBClient,
    sqs: SQSClient,
    *,
    clock: Clock,
    telemetry: Telemetry,
    kinds: dict[str, JobKind],
    loaded: Loaded | None = None,
    new_id: IdFactory | None = None,
    retry: TransactionRetry | None = None,
    s3: Any = None,
) -> Runtime:
    """The one place an engine is wired (River's `NewClient`, decision OW3): the stores over the
    table, the wake-up queues (a queue per priority the deployment has) and the services, all
    from `settings`. The Lambda handlers (through `runtime()`), the local stack (which runs
    those handlers) and `leasehold.testing` build theirs here, so a test harness cannot run
    with settings a deployed function does not have. `retry`: how a conflicted transaction is
    retried (a testbed's waits take no time). `s3`: the data bucket's client (DESIGN §20),
    used when `settings.data_bucket` names one."""
    table = Table(dynamodb, settings.table_name, retry=retry, index_shards=settings.index_shards)
    if settings.data_bucket and s3 is not None:
        table.blobs = BlobStore(s3, settings.data_bucket)
        table.blobs.marks = BlobMarks(table, clock)  # a job with blobs is marked (LD10)
    return Runtime(
        settings=settings,
        stores=Stores.over(
            table,
            settings.user_concurrency_limit,
            slot_grace_ms=2 * settings.lease_seconds * 1000,
        ),
        queue=WakeupQueue(
            sqs,
            settings.queue_url,
            settings.dlq_url,
            priority_urls=settings.priority_urls(),
            shard_urls=settings.queue_shard_urls,
        ),
        clock=clock,
        # the outcome metrics are counted in the table as well, for the summary (OS1)
        telemetry=CountedOutcomes(telemetry, OutcomeCounters(table), clock),
        kinds=kinds,  # shared, not copied: a testbed's deploy replaces kinds in it
        new_id=new_id or time_ordered_ids(clock),
        loaded=loaded,
    )


@cache
def runtime() -> Runtime:
    """This function's engine, built once per cold start from its environment."""
    settings = Settings.from_env()
    metrics.namespace = settings.metrics_namespace
    session = boto3.session.Session()
    dynamodb = session.client("dynamodb", config=CLIENT_CONFIG)
    sqs = session.client("sqs", config=CLIENT_CONFIG)
    s3 = session.client("s3", config=S3_CLIENT_CONFIG) if settings.data_bucket else None
    if settings.faults:  # tests and `local up --faults` only (docs/architecture.md rule 9)
        from leasehold.store.faults import FaultPlan, install_faults

        plan = FaultPlan.parse(settings.faults)
        install_faults(dynamodb, plan)
        install_faults(sqs, plan)
    if settings.traces:  # `local up --traces FILE` only: the SDK is imported only then (TR5)
        from leasehold.handlers.trace_file import install_trace_file

        install_trace_file(settings.traces, service=settings.metrics_namespace)
    loaded = load_kinds(settings.kinds, max_step_seconds=settings.max_step_seconds)
    built = build_engine(
        settings,
        dynamodb,
        sqs,
        clock=SystemClock(),
        telemetry=MetricsTelemetry(),
        kinds=dict(loaded.kinds),
        loaded=loaded,
        s3=s3,
    )
    # What an application's routes reach through `leasehold.apps.Engine.current()`: this door
    # (faults and all), clock and metrics — never a client of their own.
    start_engine(built.engine(), built.kinds)
    return built


def worker_identity() -> str:
    """Which execution environment holds a lease: visible in the job and in the logs."""
    name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or f"pid-{os.getpid()}"
    return name[-48:]


Handler = Callable[[JsonObject, Any], JsonObject]


@cache
def xray_tracer() -> Tracer | None:
    """Powertools' Tracer where X-Ray records this function (template `Tracing: Active` sets
    POWERTOOLS_TRACE_DISABLED=false); None elsewhere — outside Lambda, or tracing off — so the
    X-Ray SDK's import (~150 ms measured, decision TR5) is paid only where it traces."""
    if not xray_tracing():
        return None
    from aws_lambda_powertools import Tracer

    return Tracer(service="leasehold")


_XRAY_WRAPPED: dict[Handler, Handler] = {}


def xray_traced(body: Handler) -> Handler:
    """`body` under Powertools' `capture_lambda_handler` when X-Ray traces this function."""

    @functools.wraps(body)
    def handler(event: JsonObject, context: Any) -> JsonObject:
        tracer = xray_tracer()
        if tracer is None:
            return body(event, context)
        if body not in _XRAY_WRAPPED:
            _XRAY_WRAPPED[body] = tracer.capture_lambda_handler(body)
        return _XRAY_WRAPPED[body](event, context)

    return handler


def xray_annotate(**annotations: str) -> None:
    """Indexed X-Ray annotations on the invocation's segment (`leasehold_trace_id`, …): how a
    job's own trace id finds the X-Ray traces of its invocations (decision TR6)."""
    tracer = xray_tracer()
    if tracer is not None:
        for key, value in annotations.items():
            tracer.put_annotation(key, value)


@contextlib.contextmanager
def xray_subsegment(name: str, **annotations: str) -> Iterator[None]:
    """A subsegment per job in a batch (the worker's records), annotated as `xray_annotate`."""
    tracer = xray_tracer()
    if tracer is None:
        yield
        return
    with tracer.provider.in_subsegment(name) as subsegment:
        for key, value in annotations.items():
            subsegment.put_annotation(key, value)
        yield


def function_handler(logger: Logger) -> Callable[[Handler], Handler]:
    """The preamble every function's handler shares: the Lambda context on `logger` (state
    cleared per invocation), the EMF metrics flushed at the end, the log context trimmed, and
    X-Ray's capture where the function is traced."""

    def wrap(body: Handler) -> Handler:
        @logger.inject_lambda_context(clear_state=True)
        @metrics.log_metrics
        @xray_traced
        @functools.wraps(body)
        def handler(event: JsonObject, context: Any) -> JsonObject:
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
