"""`LeaseholdTestbed`: the whole of leasehold — accept, outbox, stream relay, SQS, worker,
sweeper, operator actions — running a user's kinds on moto, in the test's thread, on a clock
that moves only when the test says so."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack, cast

from leasehold.client.replay import Replays
from leasehold.domain.clock import ManualClock
from leasehold.domain.errors import JobNotFoundError, LeaseholdError
from leasehold.domain.job import Job, Owner
from leasehold.domain.options import JobOptions, OptionKeywords, Submission
from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import CLIENT_CONFIG, Runtime, build_engine
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind
from leasehold.service.telemetry import CountingTelemetry
from leasehold.service.view import history_view, operations_view
from leasehold.service.worker import WorkerService
from leasehold.store import Stores, Table
from leasehold.store.blobs import BlobStore, is_ref
from leasehold.store.leases import LeaseStore
from leasehold.store.table import S3_CLIENT_CONFIG, TransactionRetry
from leasehold.testing import iam, sessions
from leasehold.testing.applications import Answer, Applications
from leasehold.testing.config import (
    BackoffCeiling,
    KindsSpec,
    TestbedSettings,
    resolve_kinds,
    seeded_ids,
)
from leasehold.testing.crashes import Crashes, WatchedEnds, WatchedLeases, WatchedWaits
from leasehold.testing.definitions import Definitions, create_queues, create_table
from leasehold.testing.delivery import (
    QueueSource,
    StreamRelay,
)
from leasehold.testing.driving import TestbedDriving
from leasehold.testing.mocking import REGION, InjectedFaults, MotoWorld, OpenedByWith
from leasehold.testing.roles import function_roles, resource_attributes
from leasehold.testing.sessions import new_session

DEFAULT_OWNER = Owner("testing", "alice")
"""Who submits a job unless `owner=` says otherwise."""
OPERATOR = Owner("testing", "operator", is_operator=True)
"""Who replays and resolves jobs (an operator of the same tenant)."""
TABLE_NAME = "leasehold-jobs"
DATA_BUCKET = "leasehold-data"
"""The testbed's data bucket (template.yaml's DataBucket): large values, DESIGN §20."""
"""The jobs table's name on the testbed's moto."""
QUEUE_PREFIX = "leasehold-"
"""The queues are `leasehold-work`, `leasehold-dlq` and `leasehold-relay-failures`."""
_OPEN: list[LeaseholdTestbed] = []  # moto's SQS follows one clock: one open testbed at a time


class LeaseholdTestbed(TestbedDriving, Replays, OpenedByWith):
    """leasehold on moto with a manual clock, running your kinds; use it as a context manager.

        with LeaseholdTestbed([shout]) as tb:           # or LeaseholdTestbed("app.kinds")
            job_id = tb.submit("shout", {"text": "hi"})
            tb.run_until_idle()
            assert tb.view(job_id)["result"] == {"text": "HI"}

    `kinds`: `Kind` objects and/or `LEASEHOLD_KINDS`-style module strings. `settings`:
    overrides of `TestbedSettings` (template.yaml's defaults). `template`: a SAM template to read
    the table, queues and settings from (default: `LEASEHOLD_TEMPLATE`, leasehold's own in a
    source checkout, else the copy in the package). `seed` makes ids, jitter and injected
    faults repeatable.

    Time moves only with `advance` (or `drain`). A job runs the engine's code end to end: the
    API's validation and commit, the outbox on the table's stream, the relay, SQS with its
    delays and visibility timeouts (on the testbed's clock), the worker's fenced claims,
    checkpoints, leases and retries, the sweeper. Faults (`faults`) reach the functions'
    clients only; `view`, `history` and `operations` always read the table as it is."""

    def __init__(
        self,
        kinds: KindsSpec,
        *,
        settings: Mapping[str, Any] | None = None,
        template: str | Path | None = None,
        owner: Owner = DEFAULT_OWNER,
        seed: int = 7,
        start_ms: int | None = None,
        resources: Mapping[str, str] | None = None,
    ) -> None:
        self.resources: dict[str, str] = dict(resources or {})
        """Template resources a test makes itself, by logical id → physical name (a bucket its
        kind reads: `{"DocumentsBucket": "docs"}`): the functions' roles name them
        (leasehold.testing.roles); one not named here is in no role's reach."""
        self.definitions: Definitions = Definitions.find(template)
        """Where the table, queues and settings came from (`definitions.source`)."""
        self.settings: TestbedSettings = TestbedSettings.of(self.definitions, settings)
        self.clock: ManualClock = ManualClock() if start_ms is None else ManualClock(start_ms)
        """The engine's only clock: `now_ms()`; moved by `advance`."""
        self.owner = owner
        """The default owner of submitted jobs."""
        self.telemetry = CountingTelemetry()
        """What the services counted (`telemetry.counts["JobsSucceeded"]`)."""
        self._seed = seed
        self._crashes = Crashes()
        watched, routes = resolve_kinds(
            kinds, self._crashes, max_step_seconds=self.settings.max_step_seconds
        )
        self.kinds: dict[str, JobKind] = dict(watched)
        """The registered kinds by name, as the engine runs them."""
        self.applications = Applications(routes, self.clock)
        """What the applications' own code sees: `Engine.current()`, and the routes `request`
        reaches (`applications.routes`)."""
        self._world = MotoWorld(self.clock)
        self._open = False
        self._busy = False
        self._generation = 0

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Start moto and create the table and queues (`with` does it for you)."""
        if self._open:
            return
        if _OPEN:
            raise RuntimeError("another LeaseholdTestbed is open in this process: close it first")
        self._world.open()
        try:
            self._build()
            self.applications.open(self.runtime.engine(), self.kinds)
        except BaseException:
            self.applications.close()
            self._world.close()
            raise
        self._open = True
        _OPEN.append(self)

    def close(self) -> None:
        """Stop moto; every resource and job goes with it (inside a caller's own `mock_aws`,
        the testbed's table and queues are deleted, the caller's resources stay)."""
        if not self._open:
            return
        self._open = False
        _OPEN.remove(self)
        self.applications.close()
        try:
            self._dynamodb_plain.delete_table(TableName=TABLE_NAME)
            for url in self.queue_urls.values():
                self._sqs_plain.delete_queue(QueueUrl=url)
            s3 = new_session().client("s3")
            listed = s3.list_objects_v2(Bucket=DATA_BUCKET).get("Contents", [])
            for entry in listed:
                s3.delete_object(Bucket=DATA_BUCKET, Key=entry["Key"])
            s3.delete_bucket(Bucket=DATA_BUCKET)
        finally:
            self._world.close()

    def client(self, service: str) -> Any:
        """A boto3 client on this testbed's moto (for a kind's own resources: create a bucket
        your kind writes to, read what it wrote). No fault is injected into it."""
        return new_session().client(service)  # type: ignore[call-overload]

    def _build(self) -> None:
        iam.install()  # before the functions' clients are made: each call is judged by its role
        session = new_session()
        seed, settings = self._seed, self.settings
        # The functions' clients, with their configuration and the fault injectors...
        self._dynamodb = session.client("dynamodb", config=CLIENT_CONFIG)
        self._sqs = session.client("sqs", config=CLIENT_CONFIG)
        self._faults = InjectedFaults([self._dynamodb, self._sqs], seed)
        # ...and Lambda's pollers and the test's eyes, which no fault reaches.
        plain_dynamodb = self._dynamodb_plain = session.client("dynamodb")
        plain_sqs = self._sqs_plain = session.client("sqs")
        table = create_table(plain_dynamodb, self.definitions, TABLE_NAME)
        # The data bucket large values go to (DESIGN §20), judged by each function's role too
        session.client("s3").create_bucket(Bucket=DATA_BUCKET)
        self._s3 = session.client("s3", config=S3_CLIENT_CONFIG)
        self.queue_urls: dict[str, str] = create_queues(
            plain_sqs,
            self.definitions,
            QUEUE_PREFIX,
            settings.visibility_timeout_seconds,
            settings.queue_shards,
        )
        """The queues' URLs: `work` (normal priority; with `queue_shards` 2 or 4 also `work_1`
        …, its other shards), `high`, `low`, `dlq`, `relay_failures`."""
        shard_urls = tuple(self.queue_urls[f"work_{n}"] for n in range(1, settings.queue_shards))
        self.table_name: str = TABLE_NAME
        """The jobs table's name."""
        self._worker_rng: random.Random = (
            random.Random(seed) if settings.jitter else BackoffCeiling(seed)
        )
        # The engine as a deployed function's is built: by the same function, from the same
        # settings (decision OW3) — only the clock, the ids and the retry waits are the test's.
        self.runtime: Runtime = build_engine(
            settings.engine(
                TABLE_NAME,
                self.queue_urls["work"],
                self.queue_urls["dlq"],
                high_queue_url=self.queue_urls["high"],
                low_queue_url=self.queue_urls["low"],
                queue_shard_urls=shard_urls,
                data_bucket=DATA_BUCKET,
            ),
            self._dynamodb,
            self._sqs,
            clock=self.clock,
            telemetry=self.telemetry,
            kinds=self.kinds,
            new_id=seeded_ids(self.clock, random.Random(seed)),
            retry=TransactionRetry(sleep=lambda _: None, rng=random.Random(seed)),
            s3=self._s3,
        )
        """The engine the testbed's functions share (`leasehold.handlers.wiring.Runtime`)."""
        self._stores = self.runtime.stores
        self._reads = Stores.over(
            Table(plain_dynamodb, TABLE_NAME, index_shards=settings.index_shards), 0
        )
        self._queue = self.runtime.queue
        self.roles: dict[str, iam.Role] = self._roles(table)
        """Each function's execution role (`ApiFunction`, `WorkerFunction`, …) as the
        template deploys it, over this testbed's resources: every call the engine makes for a
        function is judged by that function's role, and a call it does not allow fails with
        AWS's AccessDenied, as the deployed function's would (the test's own reads — `view`,
        `state`, `client()` — act as no role)."""
        self._relay = StreamRelay(
            session.client("dynamodbstreams"),
            str(table["LatestStreamArn"]),
            self._queue,
            self.clock,
            self.telemetry,
            batch_size=int(self.definitions.relay["batch_size"]),
            max_retries=int(self.definitions.relay["max_retries"]),
            role=self.roles["RelayFunction"],
        )
        # One event source per priority queue and normal shard, as the worker has (decisions
        # F4, QS1): each round delivers a batch from each, high first, so no backlog holds up
        # another queue.
        normal = ["work", *(f"work_{n}" for n in range(1, settings.queue_shards))]
        self._sources = [
            QueueSource(plain_sqs, self.queue_urls[name], settings.worker_batch_size, name)
            for name in ("high", *normal, "low")
        ]
        api = self.roles["ApiFunction"]
        self._api = iam.acting_proxy(self.runtime.jobs(), api)
        self._flows_api = iam.acting_proxy(self.runtime.workflows(), api)
        self._viewer = JobService(
            self._reads, self.kinds, self.clock, self.runtime.new_id, self.telemetry
        )
        self._ops = iam.acting_proxy(self.runtime.ops(), api)
        self._worker = self._new_worker()

    def _new_worker(self) -> WorkerService:
        """A worker in a fresh execution environment (after a crash, another one takes over)."""
        self._generation += 1
        self._crashes.forget()
        leases = cast(LeaseStore, WatchedLeases(self._stores.leases, self._crashes))
        worker = self.runtime.worker(
            f"testbed-worker-{self._generation}",
            stores=replace(self._stores, leases=leases),
            rng=self._worker_rng,
            sleep=self._hold,
        )
        flows, outcomes = worker._flows, worker._outcomes  # noqa: SLF001 - the crash points
        flows._waits = WatchedWaits(flows.waits, self._crashes)  # noqa: SLF001
        outcomes._waits = WatchedEnds(outcomes._waits, self._crashes)  # noqa: SLF001
        return iam.acting_proxy(worker, self.roles["WorkerFunction"])

    def _hold(self, seconds: float) -> None:
        """A worker's held rate wait (`RATE_HOLD_MS`) passes on the testbed's clock, as an
        invocation's would on the wall clock: the test never waits for it."""
        self.clock.advance(round(seconds * 1000))

    def _roles(self, table: Mapping[str, Any]) -> dict[str, iam.Role]:
        physical = {
            "JobsTable": TABLE_NAME,
            "DataBucket": DATA_BUCKET,
            "WorkQueue": self.queue_urls["work"],
            "HighPriorityQueue": self.queue_urls["high"],
            "LowPriorityQueue": self.queue_urls["low"],
            "DeadLetterQueue": self.queue_urls["dlq"],
            "RelayFailureQueue": self.queue_urls["relay_failures"],
            **{
                f"WorkQueueShard{n}": self.queue_urls[f"work_{n}"]
                for n in range(1, self.settings.queue_shards)
            },
        }
        physical.update(self.resources)
        template = self.definitions.roles
        attributes = resource_attributes(
            template,
            physical,
            region=REGION,
            extra={"JobsTable": {"StreamArn": str(table["LatestStreamArn"])}},
        )
        shards = {"QueueShards": str(self.settings.queue_shards)}
        return function_roles(template, attributes, region=REGION, parameters=shards)

    def deploy(self, kinds: KindsSpec) -> None:
        """A deploy under jobs in flight: `kinds` replace the registered kinds of the same
        names (others are added), and the worker starts in a fresh execution environment, so
        a job waiting for its retry resumes under the new code — to test what a changed
        kind's steps do to in-flight jobs (docs/sdk.md, "Changing a kind's steps"). Kinds
        only: an application's routes stay as they were."""
        self._ready()
        watched, _ = resolve_kinds(
            kinds, self._crashes, max_step_seconds=self.settings.max_step_seconds
        )
        self.kinds.update(watched)  # the API, the operator and the worker share this mapping
        self._worker = self._new_worker()

    def _ready(self) -> None:
        if not self._open:
            raise RuntimeError("the testbed is not open: use `with LeaseholdTestbed(...) as tb:`")

    # ------------------------------------------------------------------ the caller's actions

    def submit(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        options: JobOptions | None = None,
        owner: Owner | None = None,
        **keywords: Unpack[OptionKeywords],
    ) -> str:
        """`POST /jobs`: validated and committed through the API's own accept path (an invalid
        request raises the API's `ValidationError`); returns the job id (the same one again for
        a repeated idempotency key). `options`: a `JobOptions`; the keyword arguments of the
        same names build one. The job is `queued`; nothing runs until `run_until_idle`. With
        `run_at` (ISO 8601 with an offset) or `delay_seconds` it does not start before then:
        `advance` (or `drain`) the clock to it. `priority` (high, normal, low; default the
        kind's): each round of `run_until_idle` delivers a batch from each priority's queue,
        high first, as each queue's own event source would."""
        self._ready()
        chosen = JobOptions.of(options, **keywords)
        submission = Submission(kind, dict(payload), chosen)
        return self._api.accept(owner or self.owner, submission).job_id

    def submit_many(
        self, jobs: Iterable[Submission], *, owner: Owner | None = None
    ) -> list[str | LeaseholdError]:
        """`POST /jobs/batch` through the API's own accept path for many: one answer a job, in
        order — its id, or the error `submit` would have raised for it alone (a key reused with
        another request, an invalid option, …); the accepted jobs are committed in as few
        transactions as DynamoDB allows. `jobs`: a `Submission(kind, payload, JobOptions(…))`
        each."""
        self._ready()
        outcomes = self._api.accept_many(owner or self.owner, list(jobs))
        return [o if isinstance(o, LeaseholdError) else o.job_id for o in outcomes]

    def approve(self, job_id: str) -> JsonObject:
        """`POST /jobs/{id}/approval` with `approve`, at the job's current version, as its
        owner; returns the job view (`queued` again: `run_until_idle` runs the step)."""
        return self._decide(job_id, "approve")

    def reject(self, job_id: str) -> JsonObject:
        """`POST /jobs/{id}/approval` with `reject`: the job ends `cancelled`."""
        return self._decide(job_id, "reject")

    def _decide(self, job_id: str, decision: str) -> JsonObject:
        job = self._job(job_id)
        body = {"decision": decision, "version": job.version}
        return self._api.decide_approval(job.owner, job_id, body)

    def cancel(self, job_id: str) -> JsonObject:
        """`POST /jobs/{id}/cancel` as its owner: a queued or paused job is `cancelled` at once,
        a running one stops before its next step."""
        return self._api.cancel(self._job(job_id).owner, job_id)

    def signal(
        self, job_id: str, name: str, body: Any = None, *, owner: Owner | None = None
    ) -> JsonObject:
        """`POST /jobs/{id}/signals/{name}` as the job's owner (or `owner`: another tenant's
        caller gets the API's not-found): the job view (a job waiting for it is `queued` and
        due: `run_until_idle` runs its next step)."""
        who = owner or self._job(job_id).owner
        return self._flows_api.signal(who, job_id, name, body)

    def callback(self, token: str, body: Any = None) -> JsonObject:
        """`POST /callbacks/{token}`, as a third party with no identity would."""
        return self._flows_api.callback(token, body)

    def children(self, job_id: str, *, owner: Owner | None = None) -> list[JsonObject]:
        """`GET /jobs/{id}/children`, every page: the job's children in order (as `owner`:
        another tenant's caller gets the API's not-found)."""
        owner, items, cursor = owner or self._job(job_id).owner, [], None
        while True:
            page = self._flows_api.children(owner, job_id, cursor=cursor, limit="100")
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        owner: Owner | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Call one of the applications' own routes (their modules' `Routes`) as the API
        function would, signed in as `owner` (default: the testbed's): returns `(status, body,
        headers)`, errors in the API's envelope. `path` may carry a query (`"/items?limit=2"`);
        `body` is sent as JSON (a `str` as it is). A job the route makes runs at the next
        `run_until_idle`. The engine's own routes are the other methods (`submit`, `view`, …):
        here they are a 404 `not_found`. Callable from inside a step (a change that races it)."""
        self._ready()
        who = owner or self.owner
        with iam.acting_as(self.roles["ApiFunction"]):  # an application's routes are the API's
            return self.applications.request(method, path, body, owner=who, headers=headers)

    def _send_replay(self, job_id: str, body: JsonObject) -> JsonObject:
        """`replay` (the operator's, `POST /ops/jobs/{id}/replay`) acts as the testbed's
        operator, through the API's own service."""
        self._ready()
        return self._ops.replay(job_id, OPERATOR, body)

    def resolve(
        self, job_id: str, outcome: str, note: str, *, receipt: str | None = None
    ) -> JsonObject:
        """The operator's resolve of an `unknown` job: `outcome` `succeeded` or `failed`."""
        self._ready()
        body: JsonObject = {"outcome": outcome, "note": note}
        if receipt is not None:
            body["receipt"] = receipt
        return self._ops.resolve(job_id, OPERATOR, body)

    def pause_kind(self, kind: str, note: str) -> JsonObject:
        """`POST /ops/kinds/{kind}/pause` as the operator: the kind's jobs are parked at their
        claim (a warm worker sees it within 5 s of the testbed's clock)."""
        self._ready()
        return self._ops.pause_kind(kind, OPERATOR, {"note": note})

    def resume_kind(self, kind: str, note: str) -> JsonObject:
        """`POST /ops/kinds/{kind}/resume` as the operator: its parked jobs are woken (the
        first 100 at once, the sweeper the rest)."""
        self._ready()
        return self._ops.resume_kind(kind, OPERATOR, {"note": note})

    # ------------------------------------------------------------------ reading jobs

    def _job(self, job_id: str) -> Job:
        self._ready()
        job = self._reads.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return job

    def view(self, job_id: str, *, owner: Owner | None = None) -> JsonObject:
        """The job as `GET /jobs/{id}` shows it to its owner (or to `owner`: another tenant's
        caller gets the API's not-found)."""
        return self._viewer.view(owner or self._job(job_id).owner, job_id)

    def result(self, job_id: str, *, owner: Owner | None = None) -> Any:
        """The succeeded job's result, whole, as `GET /jobs/{id}/result` reads it for its owner
        (or for `owner`: another tenant's caller gets the API's not-found)."""
        import json

        return json.loads(self._api.result(owner or self._job(job_id).owner, job_id))

    def state(self, job_id: str) -> str:
        """The job's state (`queued`, `running`, `succeeded`, `unknown`, …)."""
        return self._job(job_id).state.value

    def history(self, job_id: str) -> list[JsonObject]:
        """Every attempt's end and every act on the job, in order (as operators see it)."""
        return history_view(self._job(job_id))

    def operations(self, job_id: str) -> list[JsonObject]:
        """The job's operation ledger: one entry per effect step that opened one (`state`
        `submitted`, `confirmed`, `failed`, `released`; `key`, `receipt`, `reconciled`)."""
        return operations_view(self._job(job_id))

    def progress(self, job_id: str) -> JsonObject | None:
        """What the job's kind last saved with `StepContext.save_progress` (None before the
        first save): the `ctx.progress` its next attempt, or a replay, resumes from."""
        state = self._job(job_id).kind_state
        if is_ref(state):  # kept in the data bucket (decision LD16): read back whole
            state = BlobStore(new_session().client("s3"), DATA_BUCKET).load(job_id, state)
        return None if state is None else dict(state)

    def operator_view(self, job_id: str) -> JsonObject:
        """The job as `GET /ops/jobs/{id}` shows it (lease holder, history, ledger)."""
        self._ready()
        return self._ops.show(job_id)


__all__ = ["DEFAULT_OWNER", "OPERATOR", "LeaseholdTestbed"]

# Their old paths (the suite's conftest shares the loader's search paths through them).
_session = new_session
_SearchPaths = sessions._SearchPaths
