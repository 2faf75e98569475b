"""The real functions on moto (in-process), driven the way their event sources drive them, with
the capacity meter on every client they use and their log output captured.

- the Api function gets API Gateway events (events/*.json with the caller and body set);
- the Relay function gets the table's stream through the local StreamPump (the template's filter
  and batch size); Lambda's own stream reads are free and not metered;
- the Worker function gets SQS events through the local QueuePoller (the template's batch size),
  whose ReceiveMessage / DeleteMessageBatch are metered (Lambda's poller pays for them);
- the Sweeper function gets the schedule's event.

Phases: each invocation starts in its function's phase (accept, relay, worker, sweeper); inside
the worker, store and queue calls are re-labelled claim, steps or outcome."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from bench.meter import CapacityMeter, TableSpec, client_requery, item_size, moto_peek

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"

WORKER_PHASES = {
    "claim": ("leases", ["claim", "note_dispatch"]),
    "steps": ("leases", ["heartbeat", "save_checkpoint", "save_progress", "record_effect_intent"]),
    "outcome": ("leases", ["finish", "hand_back"]),
}
"""LeaseStore methods by the phase they belong to when the worker calls them."""


LOG_STREAM = "2026/11/30/[$LATEST]3f1b6b9e1f6c4a7e9a1e2b7c5e0a1d2f"
"""A Lambda log stream name: the worker's identity (lease owner, history) is its last 48
characters on Lambda, so the job item is sized as deployed, not with a local `pid-1234`."""


class CountingStream(io.TextIOBase):
    """A text stream that keeps only the number of UTF-8 bytes written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.metric_bytes = 0
        """Of which CloudWatch embedded-metric-format lines (Powertools Metrics)."""

    def write(self, text: str) -> int:
        size = len(text.encode())
        self.bytes += size
        if '"_aws"' in text:
            self.metric_bytes += size
        return len(text)


@dataclass
class Invocations:
    count: Counter[str] = field(default_factory=Counter)
    log_bytes: Counter[str] = field(default_factory=Counter)
    metric_bytes: Counter[str] = field(default_factory=Counter)
    by_phase: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    wakeups: int = 0
    api_requests: int = 0

    def clear(self) -> None:
        self.count.clear()
        self.log_bytes.clear()
        self.metric_bytes.clear()
        self.by_phase.clear()
        self.wakeups = 0
        self.api_requests = 0


class Stack:
    """One table and its queues on moto; `configure()` (re)builds the functions' runtime with a
    given environment, as a new deployment would."""

    def __init__(self) -> None:
        from leasehold_dev.local.resources import (
            clients,
            create_data_bucket,
            create_queues,
            template,
        )

        self.template = template()
        self._definition = self.template["Resources"]["JobsTable"]["Properties"]
        raw = boto3.session.Session(region_name="us-east-1")
        self.raw_dynamodb = raw.client("dynamodb")
        self.raw_sqs = raw.client("sqs")
        self._dynamodb, sqs = clients()
        self.queues = create_queues(sqs)
        create_data_bucket()  # a value over the inline limit goes to S3 (DESIGN §20)
        self.peek = moto_peek()
        self.table: dict[str, Any] = {}
        self.spec = TableSpec.from_definition("jobs", self._definition)
        self.meter = CapacityMeter(
            self.spec, self.peek, client_requery(self.raw_dynamodb), ask_moto=True
        )
        self.invocations = Invocations()
        self.logs = CountingStream()
        self.env: dict[str, str] = {}
        self.base_env: dict[str, str] = {}
        self._tables = 0
        self._pump: Any = None
        self._poller: Any = None

    def fresh_table(self) -> None:
        """A new, empty table from the template (and an empty queue) for the next scenario:
        moto copies a whole table, stream included, for every transaction item, so a table
        that kept every scenario's items would make the run slower and slower."""
        from leasehold_dev.local.pumps import StreamPump
        from leasehold_dev.local.resources import create_table, relay_mapping, template_environment

        if self.table:
            self.raw_dynamodb.delete_table(TableName=self.table["TableName"])
        self._tables += 1
        self.table = create_table(self._dynamodb, f"jobs-{self._tables}")
        self.spec = TableSpec.from_definition(self.table["TableName"], self._definition)
        self.meter.table = self.spec
        self.base_env = template_environment(
            self.table["TableName"], self.queues, TITLE_FETCHER="fixture"
        )
        self._pump = StreamPump(
            "", relay_mapping(self.table["LatestStreamArn"]), self._relay, "relay"
        )
        self.purge_queue()

    # ------------------------------------------------------------------ runtime

    def configure(self, **overrides: str) -> Any:
        """A fresh runtime (clients, stores, kinds) with the template's environment and
        `overrides`, metered and phase-labelled, over the current table; returns it."""
        from leasehold.handlers import api, relay, sweeper, wiring, worker  # noqa: F401
        from leasehold_dev.local.pumps import QueuePoller
        from leasehold_dev.local.resources import worker_mapping

        # The benchmark's own kind (bench/kinds.py) is registered as a user's would be.
        kinds = f"{self.base_env['LEASEHOLD_KINDS']},bench.kinds"
        self.env = {
            **self.base_env,
            "LEASEHOLD_KINDS": kinds,
            "AWS_LAMBDA_LOG_STREAM_NAME": LOG_STREAM,
            **overrides,
        }
        os.environ.update(self.env)
        for cached in (
            wiring.runtime,
            worker.worker,
            api.jobs,
            api.ops,
            api.schedules,
            api.mounted,
        ):
            cached.cache_clear()
        rt = wiring.runtime()
        self.meter.attach(rt.stores.table.client)
        self.meter.attach(rt.queue._sqs)  # noqa: SLF001 - the bench meters the function's own client
        if rt.stores.table.blobs is not None:  # large values' S3 requests (LD1), priced too
            self.meter.attach(rt.stores.table.blobs.s3)
        self._label(rt)
        self._capture_logs()
        timeout_ms = int(self.env["WORKER_TIMEOUT_SECONDS"]) * 1000
        self._poller = QueuePoller(
            "", worker_mapping(self.queues["work"]), self._worker, "worker", timeout_ms=timeout_ms
        )
        self.meter.attach(self._poller._sqs)  # noqa: SLF001 - Lambda's SQS poller is billed
        return rt

    def _label(self, rt: Any) -> None:
        def relabel(owner: Any, method: str, phase: str) -> None:
            original = getattr(owner, method)

            def labelled(*args: Any, **kwargs: Any) -> Any:
                current = self.meter.phase
                if current != "worker" and not current.startswith("worker/"):
                    return original(*args, **kwargs)
                role = current.partition("/")[2]  # worker/<role>: a workflow's parent or child
                with self.meter.during(f"{role}:{phase}" if role else phase):
                    return original(*args, **kwargs)

            setattr(owner, method, labelled)

        for phase, (_, methods) in WORKER_PHASES.items():
            for method in methods:
                relabel(rt.stores.leases, method, phase)
        relabel(rt.stores.ledger, "submit", "steps")
        relabel(rt.stores.ledger, "settle", "steps")
        relabel(rt.stores.upkeep, "settle_expired_lease", "outcome")
        relabel(rt.queue, "send", "claim")
        relabel(rt.queue, "delay", "claim")

    def _capture_logs(self) -> None:
        """The functions' log lines go to the counter instead of the terminal (Powertools'
        handler keeps the stream it was made with; EMF lines are printed to sys.stdout)."""
        for handler in logging.getLogger("leasehold").handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(self.logs)

    @contextlib.contextmanager
    def _invocation(self, function: str, phase: str) -> Iterator[None]:
        before, metrics_before = self.logs.bytes, self.logs.metric_bytes
        self.invocations.count[function] += 1
        self.invocations.by_phase[phase][function] += 1
        with self.meter.during(phase), contextlib.redirect_stdout(self.logs):
            yield
        self.invocations.log_bytes[function] += self.logs.bytes - before
        self.invocations.metric_bytes[function] += self.logs.metric_bytes - metrics_before

    # ------------------------------------------------------------------ functions

    def _relay(self, event: dict[str, Any], context: Any) -> Any:
        from leasehold.handlers import relay

        with self._invocation("relay", "relay"):
            return relay.handler(event, context)

    def _worker(self, event: dict[str, Any], context: Any) -> Any:
        from leasehold.handlers import worker

        self.invocations.wakeups += len(event["Records"])
        with self._invocation("worker", "worker"):
            return worker.handler(event, context)

    def api(
        self,
        event_name: str,
        *,
        body: Any,
        user: str,
        tenant: str = "bench",
        key: str | None = None,
        path_id: str | None = None,
        phase: str = "accept",
    ) -> tuple[int, dict[str, Any]]:
        from leasehold.handlers import api
        from leasehold_dev.local.invoke import LocalContext

        event = copy.deepcopy(json.loads((EVENTS / event_name).read_text()))
        event["headers"].pop("idempotency-key", None)
        if key is not None:
            event["headers"]["idempotency-key"] = key
        event["body"] = json.dumps(body)
        claims = {"sub": user, "custom:tenant": tenant}
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
        if path_id is not None:
            (name,) = event["pathParameters"]
            old = event["pathParameters"][name]
            event["pathParameters"] = {name: path_id}
            event["rawPath"] = event["rawPath"].replace(old, path_id)
            event["requestContext"]["http"]["path"] = event["rawPath"]
        self.invocations.api_requests += 1
        with self._invocation("api", phase):
            answer = api.handler(event, LocalContext("api"))
        return int(answer["statusCode"]), json.loads(answer["body"] or "{}")

    def sweep(self, phase: str = "sweeper") -> dict[str, int]:
        from leasehold.handlers import sweeper
        from leasehold_dev.local.invoke import LocalContext

        event = json.loads((EVENTS / "sweeper-schedule.json").read_text())
        with self._invocation("sweeper", phase):
            return dict(sweeper.handler(event, LocalContext("sweeper", timeout_ms=60_000)))

    def relay_once(self, phase: str = "relay") -> int:
        with self.meter.during(phase):
            return int(self._pump.poll_once())

    def deliver_once(self, phase: str = "delivery") -> int:
        """One receive (+ invoke + delete). An empty receive is Lambda's poller idling, a cost
        of time, not of jobs: it is counted under `idle-poll`."""
        with self.meter.during(phase):
            received, _ = self._poller.poll_once(wait_seconds=0)
        if not received:
            self.meter.requests[phase]["sqs.ReceiveMessage"] -= 1
            self.meter.requests["idle-poll"]["sqs.ReceiveMessage"] += 1
        return int(received)

    # ------------------------------------------------------------------ reading (unmetered)

    def job(self, job_id: str) -> dict[str, Any] | None:
        from leasehold.store.items import deserialize_item, job_key

        item = self.peek(self.table["TableName"], job_key(job_id))
        return deserialize_item(item) if item else None

    def item_bytes(self, key: dict[str, Any]) -> int:
        return item_size(self.peek(self.table["TableName"], key))

    def drain(
        self,
        job_ids: list[str],
        done: Callable[[dict[str, Any]], bool],
        *,
        timeout_s: float = 90,
    ) -> None:
        """Relay and deliver until every job satisfies `done` (bounded by `timeout_s`)."""
        pending = set(job_ids)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            self.relay_once()
            received = self.deliver_once()
            pending = {j for j in pending if not done(self.job(j) or {})}
            if pending and not received:
                time.sleep(0.2)  # a delayed wake-up (retry backoff, slot wait) is not due yet

    def purge_queue(self) -> None:
        """Drop every visible message on the work queue (setup only; nothing is metered).
        Received and deleted, not PurgeQueue, which SQS allows once a minute."""
        url = self.queues["work"]
        for _ in range(10_000):
            batch = self.raw_sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                return
            self.raw_sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
                ],
            )


def quiet_warnings() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)


def set_credentials() -> None:
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.pop("AWS_PROFILE", None)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
