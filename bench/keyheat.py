"""The key-heat model (issue 30, DESIGN §18): from a recording of every request the bench's
scenarios made — each partition key a request touched, in the table or an index, with the
capacity units bench/meter.py priced it at — the load each partition key takes when the
capacity doc's mix runs at a target rate, against DynamoDB's per-partition limits, and the AWS
quotas that rate meets. Arithmetic only (no I/O, no moto): bench/scale.py records and writes
bench/scale.json; tests/unit/test_keyheat.py checks it on a recording made by hand.

How a key's load is spread (its `spread`):

- `job` — one key per job (`JOB#<id>`, `OUTBOX#<id>`): a job's own units land within its life
  (`job_seconds`), so a key takes units-per-job ÷ job_seconds whatever the rate;
- `user` / `tenant` — one key per user (`SLOTS#…`, `OWNER#…`) or tenant (`BOOKMARKS#…`,
  `SUBMITS#…`): the load ÷ the users (tenants) sharing it, plus a row for the hottest one;
- `fixed` — one key for everyone (`STATE#active`, `SCHEDULES#due`…), spread over `shards` keys
  when the layout shards it (shard 0 the bare key, shard k `<base>#<k>`: decision SH1);
- `pass` reads (the sweeper, the operator summary) come at a fixed rate, not per job."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WCU_LIMIT = 1000
"""Write units a second one partition serves (DynamoDB developer guide, on-demand throttling)."""
RCU_LIMIT = 3000
"""Read units a second one partition serves."""
TABLE_QUOTA = 40_000
"""On-demand table-level read and write throughput quota, each (Service Quotas default)."""
LAMBDA_CONCURRENCY = 1000
MAPPING_CONCURRENCY = 1000
"""An SQS event source mapping's MaximumConcurrency cannot go above 1,000."""
API_RATE = 10_000
SQS_IN_FLIGHT = 120_000
STREAM_SHARD_WRITES = 1000
"""Writes a second one stream shard carries (a shard follows a partition: ≈ 1,000 WCU/s)."""
MIN_QUERY_RCU = 0.5
"""The least an (eventually consistent) index Query costs."""

SHARDED_BASES = (
    "STATE#active",
    "STATE#due",
    "STATE#failed",
    "STATE#dead",
    "STATE#unknown",
    "STATE#waiting_approval",
    "SCHEDULES#due",
)
"""The keys the sharded layout spreads over `IndexShards` keys (decision SH1)."""


@dataclass(frozen=True)
class Touch:
    """One partition key one request touched, and what it cost there."""

    index: str
    """"table" or the index's name."""
    key: str
    wcu: float = 0.0
    rcu: float = 0.0
    operation: str = ""


@dataclass(frozen=True)
class Assumptions:
    """What the recording cannot say: the workload's shape (docs/capacity.md, "The workload")."""

    mix: tuple[tuple[str, float], ...]
    retry: tuple[str, str, float] | None = None
    """(retry scenario, the scenario it retries, share of jobs that retry once)."""
    job_seconds: float = 1.04
    """A job's life on the worker: 40 ms of claim and outcome + 1 s of steps."""
    jobs_per_user_per_second: float = 0.02
    """10,000 users at 200 jobs/s: users grow with the load."""
    users_per_tenant: int = 100
    hottest_user_jobs_per_second: float = 5 / 1.04
    """A user at the per-user limit (5) with 1-s jobs."""
    hottest_tenant_share: float = 0.01
    """The busiest tenant makes 1 % of the jobs."""
    api_ms: float = 40.0
    worker_batch: int = 5


@dataclass
class Recording:
    """Per scenario: its jobs and every touch; per pass: its rate and one run's touches; per
    scenario, what it asked of the other services per job."""

    scenarios: dict[str, tuple[int, list[Touch]]] = field(default_factory=dict)
    passes: dict[str, tuple[float, list[Touch]]] = field(default_factory=dict)
    services: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per scenario: api_requests, sqs_requests, stream_writes per job."""


# ---------------------------------------------------------------------------------- patterns

_PER_JOB = {"JOB", "OUTBOX", "IDEMP", "DISPATCH", "SETASIDE"}
_PER_USER = {"SLOTS", "OWNER"}
_PER_TENANT = {"BOOKMARKS", "SUBMITS"}


def pattern_of(key: str) -> tuple[str, str]:
    """(pattern, spread) of a partition key: ids become placeholders, a shard suffix `{shard}`."""
    for base in SHARDED_BASES:
        if key == base or re.fullmatch(re.escape(base) + r"#\d+", key):
            return f"{base}#{{shard}}", "fixed"
    prefix, _, rest = key.partition("#")
    if prefix in _PER_JOB:
        return f"{prefix}#<job>", "job"
    if prefix in _PER_USER:
        if rest.startswith("K#"):
            return "SLOTS#K#<kind>#<key>#<value>#<n>", "fixed"
        return f"{prefix}#<tenant>#<user>", "user"
    if prefix in _PER_TENANT:
        return f"{prefix}#<tenant>", "tenant"
    if prefix == "SCHED":
        return "SCHED#_kinds#<kind>" if rest.startswith("_kinds#") else "SCHED#<schedule>", "fixed"
    if prefix == "RATE":
        return "RATE#<kind>#<key>#<value>", "fixed"
    if prefix == "STATE":
        return key, "fixed"
    return (f"{prefix}#<id>" if rest else key), "fixed"


# ---------------------------------------------------------------------------------- the model


@dataclass
class _Load:
    wcu: float = 0.0
    rcu: float = 0.0
    distinct: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    queries: float = 0.0


def _per_job(recording: Recording, a: Assumptions) -> dict[tuple[str, str], _Load]:
    """Units per job of the mix on each (index, pattern): the mix's weighted scenarios plus the
    retry's extra cost on the jobs that retry."""
    total = sum(w for _, w in a.mix)
    weights: dict[str, float] = defaultdict(float)
    for name, weight in a.mix:
        weights[name] += weight / total
    if a.retry:
        retry, plain, share = a.retry
        weights[retry] += share
        weights[plain] -= share
    loads: dict[tuple[str, str], _Load] = defaultdict(_Load)
    for name, weight in weights.items():
        jobs, touches = recording.scenarios[name]
        for t in touches:
            pattern, _ = pattern_of(t.key)
            load = loads[(t.index, pattern)]
            load.wcu += weight * t.wcu / jobs
            load.rcu += weight * t.rcu / jobs
            load.distinct.add(t.key)
            if t.wcu:
                load.written.add(t.key)
    for load in loads.values():
        load.wcu, load.rcu = max(0.0, load.wcu), max(0.0, load.rcu)
    return loads


def _per_pass(touches: Iterable[Touch]) -> dict[tuple[str, str], _Load]:
    loads: dict[tuple[str, str], _Load] = defaultdict(_Load)
    for t in touches:
        pattern, _ = pattern_of(t.key)
        load = loads[(t.index, pattern)]
        load.wcu += t.wcu
        load.rcu += t.rcu
        load.distinct.add(t.key)
        load.queries += t.operation == "Query"
    return loads


def _share(wcu: float, rcu: float) -> float:
    return max(wcu / WCU_LIMIT, rcu / RCU_LIMIT)


def key_rows(
    recording: Recording, a: Assumptions, rate: float, shards: int
) -> list[dict[str, Any]]:
    """Every (index, pattern) with its per-key load at `rate` jobs a second, hottest first."""
    users = max(1.0, rate / a.jobs_per_user_per_second)
    tenants = max(1.0, users / a.users_per_tenant)
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(index: str, pattern: str, spread: str, keys: float) -> dict[str, Any]:
        found = rows.get((index, pattern))
        if found is None:
            found = rows[(index, pattern)] = {
                "key": pattern, "index": index, "wcu_per_second": 0.0, "rcu_per_second": 0.0,
                "limit": WCU_LIMIT, "rcu_limit": RCU_LIMIT, "share": 0.0, "spread": spread,
                "keys": keys, "total_wcu_per_second": 0.0, "total_rcu_per_second": 0.0,
                "keys_recorded": set(), "keys_written": set(),
            }  # fmt: skip
        return found

    for (index, pattern), load in _per_job(recording, a).items():
        spread = pattern_of(next(iter(load.distinct)))[1]
        total_w, total_r = rate * load.wcu, rate * load.rcu
        if spread == "job":
            keys = rate * a.job_seconds
            per_w, per_r = load.wcu / a.job_seconds, load.rcu / a.job_seconds
        elif spread in {"user", "tenant"}:
            keys = users if spread == "user" else tenants
            per_w, per_r = total_w / keys, total_r / keys
            hot = (
                a.hottest_user_jobs_per_second
                if spread == "user"
                else rate * a.hottest_tenant_share
            )
            hottest = row(index, f"{pattern} (hottest {spread})", spread, 1)
            hottest["wcu_per_second"] += hot * load.wcu
            hottest["rcu_per_second"] += hot * load.rcu
            hottest["total_wcu_per_second"] += hot * load.wcu
            hottest["total_rcu_per_second"] += hot * load.rcu
        else:
            keys = shards if pattern.endswith("{shard}") else len(load.distinct)
            per_w, per_r = total_w / keys, total_r / keys
        r = row(index, pattern, spread, keys)
        r["keys_recorded"] |= load.distinct
        r["keys_written"] |= load.written
        r["wcu_per_second"] += per_w
        r["rcu_per_second"] += per_r
        r["total_wcu_per_second"] += total_w
        r["total_rcu_per_second"] += total_r
    for per_second, touches in recording.passes.values():
        for (index, pattern), load in _per_pass(touches).items():
            spread = pattern_of(next(iter(load.distinct)))[1]
            sharded = pattern.endswith("{shard}")
            keys = float(shards if sharded else len(load.distinct))
            # A reader of N shards queries each one: every Query costs at least MIN_QUERY_RCU.
            queries_per_key = load.queries / len(load.distinct)
            per_r = (
                max(load.rcu / keys, MIN_QUERY_RCU * queries_per_key)
                if sharded
                else (load.rcu / keys)
            )
            r = row(index, pattern, "pass" if spread == "fixed" else spread, keys)
            r["keys_recorded"] |= load.distinct
            r["wcu_per_second"] += per_second * load.wcu / keys
            r["rcu_per_second"] += per_second * per_r
            r["total_wcu_per_second"] += per_second * load.wcu
            r["total_rcu_per_second"] += per_second * per_r * keys
    out = []
    for r in rows.values():
        r["share"] = _share(r["wcu_per_second"], r["rcu_per_second"])
        # distinct keys the recording touched, and wrote (the jobs', not the passes')
        r["keys_recorded"] = len(r["keys_recorded"])
        r["keys_written"] = len(r["keys_written"])
        out.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    return sorted(out, key=lambda r: (-r["share"], r["index"], r["key"]))


def quotas(
    recording: Recording, a: Assumptions, rate: float, rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each AWS quota the rate meets: what it needs, the default, what to ask."""
    per_job = _services(recording, a)
    table_w = sum(
        r["total_wcu_per_second"]
        for r in rows
        if r["index"] == "table" and "hottest" not in r["key"]
    )
    table_r = sum(r["total_rcu_per_second"] for r in rows if "hottest" not in r["key"])
    index_w = sum(
        r["total_wcu_per_second"]
        for r in rows
        if r["index"] != "table" and "hottest" not in r["key"]
    )
    worker = rate * a.job_seconds
    api = rate * per_job["api_requests"]
    stream_shards = max(1, math.ceil(table_w / STREAM_SHARD_WRITES))
    lam = api * a.api_ms / 1000 + worker + stream_shards + 1

    def q(name: str, needed: float, default: float | None, increase: str) -> dict[str, Any]:
        wanted = increase if default is None or needed > default else "none"
        return {"name": name, "needed": math.ceil(needed), "default": default, "increase": wanted}

    return [
        q(
            "DynamoDB table write throughput (WRU/s, table + its indexes)",
            table_w + index_w,
            TABLE_QUOTA,
            f"Service Quotas, DynamoDB 'Table-level write throughput limit' to "
            f"{_round_up(table_w + index_w)}; and set the table's warm throughput before launch",
        ),
        q(
            "DynamoDB table read throughput (RRU/s)",
            table_r,
            TABLE_QUOTA,
            f"Service Quotas, DynamoDB 'Table-level read throughput limit' to {_round_up(table_r)}",
        ),
        q(
            "Lambda concurrent executions (account, Region)",
            lam,
            LAMBDA_CONCURRENCY,
            f"Service Quotas, Lambda 'Concurrent executions' to {_round_up(lam)}",
        ),
        q(
            "SQS event source mapping concurrency (per mapping)",
            worker,
            MAPPING_CONCURRENCY,
            f"not raisable (MaximumConcurrency ≤ 1,000): shard the work queue into "
            f"{math.ceil(worker / MAPPING_CONCURRENCY)} queues, one mapping each",
        ),
        q(
            "API Gateway throttle (account, Region, requests/s)",
            api,
            API_RATE,
            f"Service Quotas, API Gateway 'Throttle rate' to {_round_up(api)} (and "
            f"ApiThrottlingRateLimit to match)",
        ),
        q(
            "SQS standard queue requests/s",
            rate * per_job["sqs_requests"],
            None,
            "none: a standard queue's throughput is nearly unlimited",
        ),
        q(
            "SQS messages in flight (per standard queue)",
            worker * a.worker_batch,
            SQS_IN_FLIGHT,
            "not raisable: spread the messages over more queues",
        ),
        q(
            "DynamoDB stream shards / relay concurrency",
            stream_shards,
            None,
            "none: shards follow the table's partitions, and the relay reserves no concurrency "
            "(one batch a shard × RelayParallelization at once, decision QS2); its executions "
            "count in the Lambda concurrency above",
        ),
    ]


def _round_up(n: float) -> str:
    step = 10 ** max(0, len(str(math.ceil(n))) - 2)
    return f"{math.ceil(n / step) * step:,}"


def _services(recording: Recording, a: Assumptions) -> dict[str, float]:
    total = sum(w for _, w in a.mix)
    out: dict[str, float] = defaultdict(float)
    for name, weight in a.mix:
        for k, v in recording.services.get(name, {}).items():
            out[k] += weight / total * v
    return out


def model(recording: Recording, a: Assumptions, rate: float, shards: int) -> dict[str, Any]:
    rows = key_rows(recording, a, rate, shards)
    return {
        "target_jobs_per_second": rate,
        "index_shards": shards,
        "keys": rows,
        "quotas": quotas(recording, a, rate, rows),
    }


def first_at(
    recording: Recording, a: Assumptions, shards: int, share: float = 0.8, top: float = 1e7
) -> tuple[float | None, str | None]:
    """The lowest rate (jobs/s, to 1 %) at which some key reaches `share` of its limit, and
    that key; (None, None) if none does below `top`."""

    def hottest(rate: float) -> dict[str, Any]:
        return key_rows(recording, a, rate, shards)[0]

    if hottest(top)["share"] < share:
        return None, None
    low, high = 0.0, top
    while high - low > max(0.01 * low, 0.5):
        mid = (low + high) / 2
        low, high = (mid, high) if hottest(mid)["share"] < share else (low, mid)
    at = hottest(high)
    return round(high), f"{at['index']} {at['key']}"


def reader_costs(
    recording: Recording,
    recorded_shards: int,
    counts: Sequence[int],
    read_unit_usd: float,
    per_second: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """What each shard count costs a pass that reads the index (the sweep, one console tab's
    summary): a reader of N shards sends one Query (≥ MIN_QUERY_RCU) per shard of each sharded
    key it reads, so each pass costs what was recorded (over `recorded_shards`) plus
    MIN_QUERY_RCU per extra Query. `per_second` overrides a pass's recorded rate."""
    month = 30 * 24 * 3600
    out = []
    for n in counts:
        row: dict[str, Any] = {"index_shards": n}
        for name, (rate, touches) in recording.passes.items():
            sharded = [
                t
                for t in touches
                if t.operation == "Query" and pattern_of(t.key)[0].endswith("{shard}")
            ]
            per_shard = len(sharded) / max(1, recorded_shards)
            queries = sum(t.operation == "Query" for t in touches) + per_shard * (
                n - recorded_shards
            )
            rcu = sum(t.rcu for t in touches) + MIN_QUERY_RCU * per_shard * (n - recorded_shards)
            passes = (per_second or {}).get(name, rate) * month
            row[name] = {
                "queries": round(queries),
                "rcu": round(rcu, 1),
                "usd_per_month": round(passes * rcu * read_unit_usd, 2),
            }
        out.append(row)
    return out


# ------------------------------------------------------------------ a fan-out's own keys (WF4)


@dataclass(frozen=True)
class FanoutRecording:
    """One fan-out recorded on moto, its counters spread over `shards` items. On each of the
    set's own keys (pattern → (wcu, rcu)): `per_end`, the units one child's end puts there (a
    counter: its own item's count and read); `per_set`, the units one such key takes once per
    fan-out whatever its size (the parent's park, wake, claim and end; a counter item's reads
    when a shard completes and at the parent's checks); `spawn`, the parent's item's units per
    child written."""

    children: int
    shards: int
    per_end: dict[str, tuple[float, float]]
    per_set: dict[str, tuple[float, float]]
    spawn: dict[str, tuple[float, float]]


def fanout_rows(
    rec: FanoutRecording,
    counts: Sequence[int],
    *,
    ends_per_second: float,
    spawned_per_second: float,
) -> list[dict[str, Any]]:
    """The load on a fan-out's own keys: a set of `sum(counts)` children whose ends come at
    `ends_per_second`, each counted on the counter item `counts` says (the set's real ids,
    `expected_per_shard`), with the recording's units per end on each key, plus its once-a-set
    units all in the same second (an upper bound); the parent's item while
    `spawned_per_second` children are written."""
    total = sum(counts)
    hottest = max(counts) / total
    rows = []
    for pattern in sorted(set(rec.per_end) | set(rec.per_set)):
        counter = pattern.startswith("FANIN#")
        wcu, rcu = rec.per_end.get(pattern, (0.0, 0.0))
        once_w, once_r = rec.per_set.get(pattern, (0.0, 0.0))
        # a counter item takes only its own children's ends; the set's other keys take them all
        share_of_ends = hottest if counter else 1.0
        w = ends_per_second * share_of_ends * wcu + once_w
        r = ends_per_second * share_of_ends * rcu + once_r
        rows.append({
            "key": pattern, "phase": "children ending", "keys": len(counts) if counter else 1,
            "share_of_ends": round(share_of_ends, 4),
            "wcu_per_end": round(wcu, 4), "rcu_per_end": round(rcu, 4),
            "wcu_once": round(once_w, 2), "rcu_once": round(once_r, 2),
            "wcu_per_second": round(w, 2), "rcu_per_second": round(r, 2),
            "share": round(_share(w, r), 4),
        })  # fmt: skip
    for pattern, (wcu, rcu) in sorted(rec.spawn.items()):
        w, r = spawned_per_second * wcu, spawned_per_second * rcu
        rows.append({
            "key": pattern, "phase": "children being written", "keys": 1,
            "share_of_ends": None, "wcu_per_end": None, "rcu_per_end": None,
            "wcu_once": None, "rcu_once": None, "wcu_per_second": round(w, 2),
            "rcu_per_second": round(r, 2), "share": round(_share(w, r), 4),
        })  # fmt: skip
    return sorted(rows, key=lambda row: -row["share"])
