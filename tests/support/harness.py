"""A whole leasehold wired over moto with a manual clock: the stores, the queue, the services and
the relay pump, each test naming its own workers. Faults are injected at the client boundary
with `faults(spec)` (leasehold.store.faults), as `LEASEHOLD_FAULTS` does in the functions."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from leasehold.apps import Engine
from leasehold.domain.clock import Clock, ManualClock
from leasehold.domain.errors import LeaseholdError
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.job import Job, Owner
from leasehold.domain.limits import RateKey, SlotKey
from leasehold.domain.options import Submission
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.domain.states import JobState
from leasehold.handlers.wiring import CLIENT_CONFIG
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.claiming import Claimer, Flow
from leasehold.service.jobs import JobService
from leasehold.service.ops import OpsService
from leasehold.service.relay import relay_records
from leasehold.service.sweeper import SweepSettings, sweep_passes
from leasehold.service.telemetry import CountingTelemetry
from leasehold.service.worker import RemainingMs, WakeupResult, WorkerService, WorkerSettings
from leasehold.store import Stores, Table
from leasehold.store.faults import FaultInjector, FaultPlan, install_faults
from leasehold.store.items import cap_of, deserialize_item, job_key
from leasehold.store.queue import Wakeup, WakeupQueue
from leasehold.store.slots import running_slots
from leasehold.store.table import TransactionRetry
from leasehold.testing.iam import Role, acting_as, acting_proxy
from leasehold_apps.reading_list.enrich import EnrichKind
from leasehold_apps.reading_list.kinds import TitleKind
from leasehold_apps.reading_list.service import BookmarkService
from leasehold_apps.reading_list.titles.fixture import FixtureFetcher
from leasehold_dev.local.moto import transactions as moto_transactions
from leasehold_dev.local.pumps import QueuePoller, StreamPump
from tests.support.kinds import JobKind, registry
from tests.support.resources import (
    REGION,
    create_queues,
    create_table,
    function_roles,
    relay_mapping,
    worker_mapping,
)

ALICE = Owner("study-group", "alice")
BOB = Owner("study-group", "bob")
CAROL = Owner("other-group", "carol")
OPS = Owner("study-group", "ops", is_operator=True)
LEASE_MS = 10_000
SLOT_LIMIT = 2


def make_job(**overrides: Any) -> dict[str, Any]:
    """A valid POST /jobs body; override any field."""
    body: dict[str, Any] = {"kind": "synthetic", "payload": {"steps": [{"name": "only"}]}}
    body.update(overrides)
    return body


def steps(*specs: dict[str, Any]) -> dict[str, Any]:
    return {"steps": [{"name": f"s{i}", **spec} for i, spec in enumerate(specs)]}


def _counter_ids() -> Callable[[], str]:
    counter = iter(range(1, 10**9))
    return lambda: f"j_{next(counter):06d}"


class HookedFetcher:
    """The fixture fetcher with a test hook inside the fetch."""

    def __init__(self, hook: Callable[..., str | None]) -> None:
        self._hook = hook
        self._fixture = FixtureFetcher(slow_seconds=0)

    def fetch(self, url: str, *, mode: str | None, attempt: int, tick: Any) -> str:
        title = self._hook(url, mode, attempt, tick)
        return title or self._fixture.fetch(url, mode=mode, attempt=attempt, tick=tick)


class StoreReads:
    """What tests read back: the job, and the per-user slot holders."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores

    def get(self, job_id: str) -> Job | None:
        with acting_as(None):  # the test's eyes, also inside a function's call
            return self._stores.jobs.get(job_id)

    def running_slots(self, owner: Owner) -> set[str]:
        with acting_as(None):
            return running_slots(self._stores.table, owner)


@dataclass(frozen=True)
class OneOffClaims:
    """Claims as any worker, for any lease: the engine's `Claimer` belongs to one worker and one
    lease length; a test names them at each claim."""

    stores: Stores

    def claim(
        self,
        job_id: str,
        owner: Owner,
        *,
        worker_id: str,
        now: int,
        lease_ms: int,
        keys: list[SlotKey] | None = None,
        rates: list[RateKey] | None = None,
    ) -> Job:
        leases, claims = self.stores.leases, self.stores.claims
        claimer = Claimer(leases, claims, worker_id=worker_id, lease_ms=lease_ms)
        return claimer.claim(job_id, owner, now, Flow(keys, rates))


@dataclass
class Harness:
    clock: ManualClock
    dynamodb: Any
    sqs: Any
    table: str
    queues: dict[str, str]
    stream_arn: str
    stores: Stores
    queue: WakeupQueue
    injectors: list[FaultInjector]
    roles: dict[str, Role]
    """Each function's role (template.yaml, translated, over this harness's resources): the
    services it hands out act as their function (leasehold.testing.iam)."""
    telemetry: CountingTelemetry = field(default_factory=CountingTelemetry)
    new_id: Callable[[], str] = field(default_factory=_counter_ids)
    operator: Owner = OPS

    @staticmethod
    def create(
        slot_limit: int = SLOT_LIMIT,
        seed: int = 7,
        queue_shards: int = 1,
        index_shards: int | None = None,
    ) -> Harness:
        # 1 shard unless asked (HARNESS_INDEX_SHARDS runs a suite over sharded keys: decision SH4)
        if index_shards is None:
            index_shards = int(os.environ.get("HARNESS_INDEX_SHARDS", "1"))
        # The functions' own client configuration (botocore standard retries); the harness's
        # moto fixture makes botocore's backoff instant.
        session = boto3.session.Session(region_name=REGION)
        dynamodb = session.client("dynamodb", config=CLIENT_CONFIG)
        sqs = session.client("sqs", config=CLIENT_CONFIG)
        rng = random.Random(seed)
        injectors = [
            install_faults(dynamodb, FaultPlan(()), rng),
            install_faults(sqs, FaultPlan(()), rng),
        ]
        table = create_table(dynamodb)
        queues = create_queues(sqs, queue_shards)  # the template's WorkQueueShard<n> too
        store_table = Table(
            dynamodb,
            table["TableName"],
            retry=TransactionRetry(sleep=lambda _: None, rng=random.Random(seed)),
            index_shards=index_shards,
        )
        clock = ManualClock()
        # DynamoDB's ten minutes for a ClientRequestToken pass on the harness's clock
        moto_transactions.use_token_clock(clock.now_ms)
        return Harness(
            clock=clock,
            dynamodb=dynamodb,
            sqs=sqs,
            table=table["TableName"],
            queues=queues,
            stream_arn=table["LatestStreamArn"],
            stores=Stores.over(store_table, slot_limit, slot_grace_ms=2 * LEASE_MS),
            queue=WakeupQueue(
                sqs,
                queues["work"],
                queues["dlq"],
                shard_urls=[queues[f"work_{n}"] for n in range(1, queue_shards)],
            ),
            injectors=injectors,
            roles=function_roles(table, queues),
        )

    def edit_roles(self, edit: Callable[[dict[str, Any]], None]) -> None:
        """Re-read the functions' roles from the translated template as `edit` changes it (in
        memory): a test removing an action from a role, or adding one."""
        table = {"TableName": self.table, "LatestStreamArn": self.stream_arn}
        self.roles = function_roles(table, self.queues, edit=edit)

    def acting(self, function: str) -> Any:
        """A context in which AWS calls act as `function`'s role (`ApiFunction`, …)."""
        return acting_as(self.roles[function])

    # ------------------------------------------------------------------ faults

    def faults(self, spec: str) -> None:
        """Inject faults from now on (`""` switches them off)."""
        plan = FaultPlan.parse(spec)
        for injector in self.injectors:
            injector.use(plan)

    def injected(self, key: str) -> int:
        return sum(injector.injected.get(key, 0) for injector in self.injectors)

    # ------------------------------------------------------------------ services

    @property
    def store(self) -> StoreReads:
        return StoreReads(self.stores)

    @property
    def leases(self) -> Any:
        return self.stores.leases

    @property
    def claimer(self) -> OneOffClaims:
        """The worker's claim (its slot and rate decisions) over this harness's lease store, as
        any worker and for any lease, one call at a time."""
        return OneOffClaims(self.stores)

    def jobs(self) -> JobService:
        service = JobService(
            self.stores, registry(), self.clock, self.new_id, self.telemetry, default_max_attempts=3
        )
        return acting_proxy(service, self.roles["ApiFunction"])

    def title_kind(self, hook: Callable[..., str | None] | None = None) -> TitleKind:
        """The title kind with the fixture fetcher; `hook(url, mode, attempt, tick)` runs inside
        the fetch (act while a fetch is in flight) and may return the title to use."""
        fetcher = HookedFetcher(hook) if hook is not None else None
        return TitleKind("fixture", slow_seconds=0, fetcher=fetcher)

    def engine(self) -> Engine:
        """What an application's routes see of the engine: this harness's table, clock, counters."""
        return Engine(self.stores.table, self.clock, self.telemetry)

    def bookmarks(self, enrich: EnrichKind | None = None) -> BookmarkService:
        service = BookmarkService(
            self.engine(),
            title=self.title_kind(),
            enrich=enrich or EnrichKind("", "none"),
            new_bookmark_id=time_ordered_ids(self.clock, "b"),
            new_job_id=self.new_id,
        )
        return acting_proxy(service, self.roles["ApiFunction"])

    def kinds_with_title(self, hook: Callable[..., str | None]) -> dict[str, JobKind]:
        return {**registry(), "title": EngineKind(self.title_kind(hook))}

    def ops(self) -> OpsService:
        service = OpsService(self.stores, self.queue, self.clock, self.telemetry, registry())
        return acting_proxy(service, self.roles["ApiFunction"])

    def worker(
        self,
        name: str = "w1",
        *,
        kinds: dict[str, JobKind] | None = None,
        lease_ms: int = LEASE_MS,
        heartbeat_every_ms: int = 10**9,
        clock: Clock | None = None,
        stores: Stores | None = None,
        queue: Any = None,
    ) -> WorkerService:
        service = WorkerService(
            stores=stores or self.stores,
            queue=queue or self.queue,
            kinds=kinds or registry(),
            clock=clock or self.clock,
            settings=WorkerSettings(
                worker_id=name,
                lease=LeasePolicy(lease_ms=lease_ms, safety_margin_ms=500),
                retry=RetryPolicy(base_ms=1000, cap_ms=8000),
                slot_wait_ms=1000,
                heartbeat_every_ms=heartbeat_every_ms,
            ),
            telemetry=self.telemetry,
            rng=random.Random(7),
        )
        return acting_proxy(service, self.roles["WorkerFunction"])

    def submit(self, owner: Owner = ALICE, key: str | None = None, **body: Any) -> str:
        return self.jobs().accept(owner, Submission.from_body(make_job(**body), key)).job_id

    def claim(
        self, job_id: str, worker: str, owner: Owner = ALICE, lease_ms: int = LEASE_MS
    ) -> Job:
        """Claim as `worker` now, with the standard lease."""
        return self.claimer.claim(
            job_id, owner, worker_id=worker, now=self.clock.now_ms(), lease_ms=lease_ms
        )

    def complete(self, job: Job, result: Any) -> None:
        """Save `succeeded` under the epoch and lease `job` was claimed with."""
        self.stores.leases.finish(
            job,
            JobState.SUCCEEDED,
            now=self.clock.now_ms(),
            checkpoint=job.checkpoint,
            result=result,
            history={"ev": "succeeded", "t": self.clock.now_ms()},
        )

    def wakeup(self, job_id: str) -> Wakeup:
        job = self.store.get(job_id)
        assert job is not None
        # A child's share of its set's max_concurrency travels on its wake-ups (WF7).
        return Wakeup(job_id=job_id, owner=job.owner, dispatch_id="test", cap=cap_of(job))

    def deliver(
        self, job_id: str, worker: str = "w1", remaining_ms: RemainingMs | None = None
    ) -> WakeupResult:
        return self.worker(worker).handle(self.wakeup(job_id), remaining_ms=remaining_ms)

    def deliver_quietly(self, job_id: str, worker: str = "w1") -> WakeupResult | None:
        """Deliver, and let a store failure be what it is in production: the message stays."""
        try:
            return self.deliver(job_id, worker)
        except LeaseholdError:
            return None

    def relay_pump(self) -> StreamPump:
        def relay(event: dict[str, Any], _: Any) -> dict[str, Any]:
            with self.acting("RelayFunction"):
                failed = relay_records(event["Records"], self.queue, self.clock, self.telemetry)
            return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}

        return StreamPump("", relay_mapping(self.stream_arn), relay, "relay")

    def poller(self, handler: Any) -> QueuePoller:
        return QueuePoller("", worker_mapping(self.queues["work"]), handler, "worker")

    def sweep(self, grace_ms: int = 5_000) -> dict[str, int]:
        with self.acting("SweeperFunction"):
            result = sweep_passes(
                self.stores,
                self.clock,
                SweepSettings(grace_ms, active_rate=100, due_rate=100, interval_seconds=60),
                self.telemetry,
                registry(),
            )
        return dict(result.report)

    def sweep_quietly(self, grace_ms: int = 5_000) -> dict[str, int]:
        return self.sweep(grace_ms)

    # ------------------------------------------------------------------ reading the table

    def state(self, job_id: str) -> str:
        job = self.store.get(job_id)
        assert job is not None
        return job.state.value

    def raw(self, job_id: str) -> dict[str, Any]:
        """The job item as stored (attribute names as in the table)."""
        with acting_as(None):
            item = self.dynamodb.get_item(TableName=self.table, Key=job_key(job_id))["Item"]
        return deserialize_item(item)

    def outbox(self, job_id: str) -> list[dict[str, Any]]:
        """The job's outbox items (one per dispatch that went through the relay's path)."""
        with acting_as(None):
            answer = self.dynamodb.query(
                TableName=self.table,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": f"OUTBOX#{job_id}"}},
            )
        return [deserialize_item(item) for item in answer["Items"]]

    def receive_all(self, wait_for_delay: bool = False) -> list[dict[str, Any]]:
        """Every message on the work queue and its other shards, if any (moto's delays are real
        time: with `wait_for_delay` it keeps looking for a few seconds for delayed ones)."""
        messages: list[dict[str, Any]] = []
        for url in self.queue.shard_urls:
            messages.extend(self._receive_all(url, wait_for_delay))
        return messages

    def _receive_all(self, url: str, wait_for_delay: bool) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        deadline = time.monotonic() + (6 if wait_for_delay else 0)
        for _ in range(60):
            batch = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            messages.extend(batch)
            if not batch:
                attrs = self.sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessagesDelayed"],
                )["Attributes"]
                delayed = int(attrs.get("ApproximateNumberOfMessagesDelayed", 0))
                if not (wait_for_delay and delayed and time.monotonic() < deadline):
                    break
                time.sleep(0.25)
        return messages

    def bodies(self, wait_for_delay: bool = False) -> list[dict[str, Any]]:
        return [json.loads(m["Body"]) for m in self.receive_all(wait_for_delay)]
