"""What one `GET /ops/summary` costs in DynamoDB reads, and what a console tab that polls it costs
a month (issue 27 item 6). A table on moto (in-process) holds `active` queued and running jobs
plus a few in every other state; the capacity meter (bench/meter.py) prices each request of the
summary by DynamoDB's rules — a Query by the index entries it evaluated (eventually consistent on
an index), a BatchGetItem by each item read — and counts the requests and the job items read.

    .venv/bin/python -m bench.ops_summary            # 100 and 2,000 active jobs
    .venv/bin/python -m bench.ops_summary 100 1000 2000 --out bench/ops_summary.json
    .venv/bin/python -m bench.ops_summary 1000 --shards 64 --rtt-ms 5   # latency, modelled

`--shards N` reads the table over N index shards (the template's default is 64: a count costs a
Query per shard). `--rtt-ms R` adds R ms to every DynamoDB request (a sleep in the client, which
releases the GIL as a network wait would): moto answers in-process, so its own seconds say
nothing about a round trip; with R the seconds are a model of the summary's latency — requests
made one after another add up, concurrent ones overlap. Not an AWS measurement.

The price is bench/pricing.py's on-demand read request unit (us-east-1 list price recorded there);
a month is 30 days. Counts come from moto: its items are the engine's own (new_job_item)."""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from bench.meter import CapacityMeter, TableSpec, client_requery, moto_peek
from bench.pricing import PRICES

POLL_SECONDS = (5, 30, 300)
"""The console overview's refresh periods: 5 s before issue 27, 30 s before issue 34, and 300 s
now (`OVERVIEW_REFRESH_MS` in the console's overview.js, decision OS4; a test holds the two)."""
MONTH_SECONDS = 30 * 24 * 3600
OTHER_STATES = {"waiting_approval": 3, "failed": 5, "dead": 5, "unknown": 2, "succeeded": 20}


def _seed(raw: Any, table: str, active: int, now_ms: int) -> None:
    from leasehold.domain.job import Budget, Checkpoint, Job, Owner
    from leasehold.domain.states import JobState
    from leasehold.store.history import entry
    from leasehold.store.items import new_job_item, serialize, state_partition

    states = [JobState.RUNNING if i % 4 == 0 else JobState.QUEUED for i in range(active)]
    for name, count in OTHER_STATES.items():
        states += [JobState(name)] * count
    items = []
    for i, state in enumerate(states):
        created = now_ms - 3_600_000 + i
        job = Job(
            job_id=f"j_{i:08d}_benchsummary0000",
            kind="synthetic",
            owner=Owner(f"tenant-{i % 7}", f"user-{i % 50}"),
            state=state,
            payload={"steps": [{"name": "a"}, {"name": "b"}]},
            attempts=1,
            max_attempts=3,
            epoch=1,
            version=3,
            created_at=created,
            updated_at=created,
            deadline_at=created + 3_600_000,
            next_attempt_at=created if state is JobState.QUEUED else None,
            budget=Budget(),
            checkpoint=Checkpoint(),
            steps_total=2,
        )
        item = new_job_item(job)
        partition = state_partition(state)
        if partition is None:
            item.pop("gsi1pk", None)
            item.pop("gsi1sk", None)
        if state is not JobState.QUEUED:
            item["history"] = serialize(
                [entry("stopped", at=now_ms - 60_000, state=state.value, attempt=1, epoch=1)]
            )
        items.append({"PutRequest": {"Item": item}})
    for start in range(0, len(items), 25):
        raw.batch_write_item(RequestItems={table: items[start : start + 25]})


def measure(active: int, shards: int = 1, rtt_ms: float = 0.0) -> dict[str, Any]:
    """One summary over a table of `active` queued/running jobs (and the others above), read
    over `shards` index shards, each DynamoDB request `rtt_ms` longer."""
    meter, summary, seconds = metered_summary(active, shards, rtt_ms=rtt_ms)
    report = _report(active, meter, summary, seconds)
    return {"index_shards": shards, "rtt_ms": rtt_ms, **report}


class _RoundTrip:
    """A modelled network round trip: every request of the client waits `ms` before it is
    sent (time.sleep releases the GIL, so concurrent requests overlap as on a network)."""

    def __init__(self, client: Any, ms: float) -> None:
        self._seconds = ms / 1000
        self._lock = threading.Lock()
        self.requests = 0
        client.meta.events.register("before-send.dynamodb", self._wait)

    def _wait(self, **_: Any) -> None:
        with self._lock:
            self.requests += 1
        if self._seconds:
            time.sleep(self._seconds)


def metered_summary(
    active: int, index_shards: int = 1, *, rtt_ms: float = 0.0
) -> tuple[CapacityMeter, dict[str, Any], float]:
    """The meter of one summary over a table of `active` queued/running jobs, the summary, and
    the seconds it took on moto (bench/scale.py reads the meter's reads, key by key), read over
    `index_shards` shards (the seeded entries sit in shard 0, the bare keys)."""
    from leasehold.domain.clock import SystemClock
    from leasehold.service.ops import OpsService
    from leasehold.service.telemetry import CountingTelemetry
    from leasehold.store import Stores, Table
    from leasehold.store.queue import WakeupQueue
    from leasehold_dev.local.resources import create_queues, create_table, template

    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        raw, metered, sqs = (session.client(s) for s in ("dynamodb", "dynamodb", "sqs"))
        name = create_table(raw, "jobs")["TableName"]
        queues = create_queues(sqs)
        clock = SystemClock()
        _seed(raw, name, active, clock.now_ms())
        definition = template()["Resources"]["JobsTable"]["Properties"]
        meter = CapacityMeter(
            TableSpec.from_definition(name, definition), moto_peek(), client_requery(raw)
        )
        meter.attach(metered)
        trips = _RoundTrip(metered, rtt_ms)
        ops = OpsService(
            Stores.over(Table(metered, name, index_shards=index_shards), 0),
            WakeupQueue(sqs, queues["work"], queues["dlq"]),
            clock,
            CountingTelemetry(),
        )
        started = time.perf_counter()
        summary = ops.summary()
        seconds = time.perf_counter() - started
    summary["_dynamodb_requests_sent"] = trips.requests
    return meter, summary, seconds


def _report(
    active: int, meter: CapacityMeter, summary: dict[str, Any], seconds: float
) -> dict[str, Any]:
    units = sum(read.units for read in meter.reads)
    by_operation: Counter[str] = Counter()
    items_read = 0
    for read in meter.reads:
        by_operation[read.operation] += read.units
        items_read += read.operation in {"GetItem", "BatchGetItem"}
    requests = sum(meter.requests["unassigned"].values())
    sent = summary.pop("_dynamodb_requests_sent", None)
    dynamodb = {k: v for k, v in meter.requests["unassigned"].items() if k.startswith("dynamodb")}
    price = PRICES["dynamodb_read_request_unit"]
    return {
        "active_jobs": active,
        "read_units": round(units, 2),
        "read_units_by_operation": {k: round(v, 2) for k, v in sorted(by_operation.items())},
        "job_items_read": items_read,
        "requests": dict(sorted(dynamodb.items())),
        "all_requests": requests,
        "dynamodb_requests_sent": sent,
        "counts": summary.get("counts"),
        "month_per_tab_usd": {
            f"every_{period}_s": round(units * MONTH_SECONDS / period * price, 2)
            for period in POLL_SECONDS
        },
        "seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("active", nargs="*", type=int, default=[100, 2000])
    parser.add_argument("--shards", type=int, nargs="*", default=[1])
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    runs = [
        measure(active, shards, args.rtt_ms) for active in args.active for shards in args.shards
    ]
    result = {
        "what": "DynamoDB read units of one GET /ops/summary (moto, capacity meter), and a "
        "console tab polling it for 30 days; `seconds`: on moto, each request made "
        f"{args.rtt_ms} ms longer (a modelled round trip, not AWS)",
        "price_per_read_unit_usd": PRICES["dynamodb_read_request_unit"],
        "price_source": f"bench/pricing.py ({PRICES['source']}; {PRICES['date']})",
        "other_jobs": OTHER_STATES,
        "runs": runs,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
