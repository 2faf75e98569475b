"""A whole leasehold wired over moto with a manual clock: the store, the queue, the services and
the relay pump, each test naming its own workers."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasehold.domain.clock import ManualClock
from leasehold.domain.job import Job, Owner
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.domain.states import JobState
from leasehold.kinds import JobKind, registry
from leasehold.kinds.synthetic import SyntheticKind
from leasehold.local.pumps import QueuePoller, StreamPump
from leasehold.service.jobs import JobService
from leasehold.service.relay import relay_records
from leasehold.service.sweeper import SweepSettings, sweep
from leasehold.service.telemetry import CountingTelemetry
from leasehold.service.worker import WorkerService, WorkerSettings
from leasehold.store.jobs import JobStore
from leasehold.store.queue import Wakeup, WakeupQueue
from tests.support.resources import (
    clients,
    create_queues,
    create_table,
    relay_mapping,
    worker_mapping,
)

ALICE = Owner("study-group", "alice")
BOB = Owner("study-group", "bob")
CAROL = Owner("other-group", "carol")
LEASE_MS = 10_000
SLOT_LIMIT = 2


def make_job(**overrides: Any) -> dict[str, Any]:
    """A valid POST /jobs body; override any field."""
    body: dict[str, Any] = {"kind": "synthetic", "payload": {"steps": [{"name": "only"}]}}
    body.update(overrides)
    return body


def steps(*specs: dict[str, Any]) -> dict[str, Any]:
    return {"steps": [{"name": f"s{i}", **spec} for i, spec in enumerate(specs)]}


class ScriptedKind(SyntheticKind):
    """The synthetic kind with a test hook inside each step: lets a test act *while* a worker is
    in the middle of a step (advance time, crash, let another worker in)."""

    name = "synthetic"

    def __init__(self, hook: Callable[[int, int, Callable[[], bool]], None]) -> None:
        self._hook = hook

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        self._hook(index, attempt, tick)
        return super().run_step(payload, index, attempt, tick)


def _counter_ids() -> Callable[[], str]:
    counter = iter(range(1, 10**9))
    return lambda: f"j_{next(counter):06d}"


@dataclass
class Harness:
    clock: ManualClock
    dynamodb: Any
    sqs: Any
    table: str
    queues: dict[str, str]
    stream_arn: str
    store: JobStore
    queue: WakeupQueue
    telemetry: CountingTelemetry = field(default_factory=CountingTelemetry)
    new_id: Callable[[], str] = field(default_factory=_counter_ids)

    @staticmethod
    def create(slot_limit: int = SLOT_LIMIT) -> Harness:
        dynamodb, sqs = clients()
        table = create_table(dynamodb)
        queues = create_queues(sqs)
        return Harness(
            clock=ManualClock(),
            dynamodb=dynamodb,
            sqs=sqs,
            table=table["TableName"],
            queues=queues,
            stream_arn=table["LatestStreamArn"],
            store=JobStore(dynamodb, table["TableName"], slot_limit),
            queue=WakeupQueue(sqs, queues["work"], queues["dlq"]),
        )

    def jobs(self) -> JobService:
        return JobService(
            self.store, registry(), self.clock, self.new_id, self.telemetry, default_max_attempts=3
        )

    def worker(
        self,
        name: str = "w1",
        *,
        kinds: dict[str, JobKind] | None = None,
        lease_ms: int = LEASE_MS,
        heartbeat_every_ms: int = 10**9,
    ) -> WorkerService:
        return WorkerService(
            store=self.store,
            queue=self.queue,
            kinds=kinds or registry(),
            clock=self.clock,
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

    def submit(self, owner: Owner = ALICE, key: str | None = None, **body: Any) -> str:
        return self.jobs().accept(owner, make_job(**body), key).job_id

    def claim(self, job_id: str, worker: str, owner: Owner = ALICE) -> Job:
        """Claim as `worker` now, with the standard lease."""
        return self.store.claim(
            job_id, owner, worker_id=worker, now=self.clock.now_ms(), lease_ms=LEASE_MS
        )

    def complete(self, job: Job, result: Any) -> None:
        """Save `succeeded` under the epoch and lease `job` was claimed with."""
        self.store.finish(
            job,
            JobState.SUCCEEDED,
            now=self.clock.now_ms(),
            checkpoint=job.checkpoint,
            result=result,
        )

    def wakeup(self, job_id: str) -> Wakeup:
        job = self.store.get(job_id)
        assert job is not None
        return Wakeup(job_id=job_id, owner=job.owner, dispatch_id="test")

    def relay_pump(self) -> StreamPump:
        def relay(event: dict[str, Any], _: Any) -> dict[str, Any]:
            failed = relay_records(event["Records"], self.queue, self.clock, self.telemetry)
            return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}

        return StreamPump("", relay_mapping(self.stream_arn), relay, "relay")

    def poller(self, handler: Any) -> QueuePoller:
        return QueuePoller("", worker_mapping(self.queues["work"]), handler, "worker")

    def sweep(self, grace_ms: int = 5_000) -> dict[str, int]:
        return sweep(self.store, self.clock, SweepSettings(100, grace_ms), self.telemetry)

    def state(self, job_id: str) -> str:
        job = self.store.get(job_id)
        assert job is not None
        return job.state.value

    def receive_all(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for _ in range(20):
            batch = self.sqs.receive_message(
                QueueUrl=self.queues["work"], MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                break
            messages.extend(batch)
        return messages

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(m["Body"]) for m in self.receive_all()]
