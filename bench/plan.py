"""Capacity on paper (docs/capacity.md) from the measured per-job figures in bench/results.json:
`python -m bench.plan [--scale 10]` prints the request rates, capacity units, hot keys,
concurrency and the monthly bill for the stated workload. Arithmetic only — every input is
either a measured per-job figure (moto, counts) or an assumption named here."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.pricing import GIB, LAMBDA, PRICES

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Workload:
    jobs_per_day: float = 1_000_000
    peak_jobs_per_second: float = 200
    users: int = 10_000
    retry_share: float = 0.01
    step_seconds: float = 1.0
    """Average time a job's steps take (their own work), for Lambda concurrency."""
    mix: tuple[tuple[str, float], ...] = (
        ("1-step burst, ~200 B, key", 0.60),
        ("3-step burst, ~200 B, key", 0.15),
        ("title job (POST /bookmarks), key", 0.10),
        ("1-step burst, 1 KiB, key", 0.05),
        ("1-step burst, ~200 B, no key", 0.05),
        ("1-step burst, ~200 B, key, approval", 0.03),
        ("1-step burst, 8 KiB, key", 0.02),
    )

    def scaled(self, factor: float) -> Workload:
        return Workload(
            jobs_per_day=self.jobs_per_day * factor,
            peak_jobs_per_second=self.peak_jobs_per_second * factor,
            users=int(self.users * factor),
            retry_share=self.retry_share,
            step_seconds=self.step_seconds,
            mix=self.mix,
        )


RETRY = "1-step burst, ~200 B, key, retry-once"
HEADLINE = "1-step burst, ~200 B, key"
BUSY_USER = "1-step burst, ~200 B, key, a user with 50 jobs running"
DAYS_PER_MONTH = 30
WORKER_BATCH = 5
"""template.yaml's WorkerBatchSize default."""
WORKER_MAX_CONCURRENCY = 20
"""The Wakeups mapping's MaximumConcurrency in samconfig.toml's production profile
(`WorkerConcurrencyNormal`; the template's default, for a fresh account, is 2)."""
API_RATE_LIMIT = 50
"""template.yaml's ApiThrottlingRateLimit default (requests a second, burst 100)."""
USER_CONCURRENCY_LIMIT = 5
"""template.yaml's UserConcurrencyLimit default."""
SLOT_WAIT_SECONDS = 10
"""template.yaml's SlotWaitSeconds default."""
SWEEP_ACTIVE_BUDGET = 600
"""Active jobs one sweep reads at template.yaml's defaults: SweepActiveRate (10 a second) ×
SweepSchedule's period (60 s), from where the last sweep stopped (decision SP2)."""
PAGE_JOBS = 100
"""Jobs one page of the active walk reads (service/passes.py PAGE_LIMIT): the bench's loaded sweep
reads one page."""
HOT_KEY_WCU = 1000
"""Write units a second one partition (so one partition key value) serves."""
SHARD_TARGET_WCU = 800
"""Plan a sharded key for 80 % of a partition's write units."""
OUTBOX_ITEM_BYTES = 250
"""An outbox item (kept 2 days by its TTL) with its 100 B of storage overhead (an estimate)."""
OUTBOX_DAYS = 2
STORAGE_OVERHEAD_BYTES = 100
"""DynamoDB stores 100 bytes of overhead per item and per index entry."""


def weighted(results: dict[str, Any], load: Workload) -> dict[str, Any]:
    """The mix's average job, plus `retry_share` of a retry's extra cost."""
    scenarios = results["scenarios"]
    total = sum(share for _, share in load.mix)
    out: dict[str, float] = {}

    def add(name: str, share: float) -> None:
        s = scenarios[name]
        job = s["per_job"]
        parts = {
            "wcu": job["wcu"],
            "rcu": job["rcu"],
            "dynamodb_requests": job["dynamodb_requests"],
            "sqs_requests": job["sqs_requests"],
            "api_requests": job["api_requests"],
            "log_bytes": job["log_bytes"],
            "usd_per_million": s["usd_per_million_jobs"]["total"],
            **{f"lambda_{fn}": n for fn, n in job["lambda_invocations"].items()},
        }
        for phase in s["phases"].values():
            for part, units in phase["wcu_by_part"].items():
                key = "wcu_index_" + part.split(":")[1] if part.startswith("index:") else "wcu_base"
                parts[key] = parts.get(key, 0.0) + units
        for key, value in parts.items():
            out[key] = out.get(key, 0.0) + share * value

    for name, share in load.mix:
        add(name, share / total)
    retry, head = scenarios[RETRY], scenarios[HEADLINE]
    out["wcu"] += load.retry_share * (retry["per_job"]["wcu"] - head["per_job"]["wcu"])
    out["rcu"] += load.retry_share * (retry["per_job"]["rcu"] - head["per_job"]["rcu"])
    out["usd_per_million"] += load.retry_share * (
        retry["usd_per_million_jobs"]["total"] - head["usd_per_million_jobs"]["total"]
    )
    return out


def active_partition(avg: dict[str, float], peak: float) -> dict[str, float]:
    """`STATE#active`, the one `by_state` partition key that `queued` and `running` share
    (decision C3): an accept puts the job's entry there, a success or a cancel removes it, and a
    claim or a retry moves nothing. Every `by_state` write of the mix is counted on it — an upper
    bound: the few entries of `waiting_approval`, `failed` and `dead` jobs sit in their own
    partitions."""
    per_job = avg.get("wcu_index_by_state", 0.0)
    wru = peak * per_job
    return {
        "wru_per_job": round(per_job, 3),
        "wru_per_second_peak": round(wru),
        "jobs_per_second_at_1000_wru": round(HOT_KEY_WCU / per_job) if per_job else math.inf,
        "shards_needed_at_80_percent": max(1, math.ceil(wru / SHARD_TARGET_WCU)),
    }


def slot_item(results: dict[str, Any], worker_seconds: float) -> dict[str, float]:
    """A busy user's slot item (decision C5): one single conditional write to take a slot (the
    claim) and one to release it (after the outcome), each priced on the item's size. With the
    limit `USER_CONCURRENCY_LIMIT`, a user runs at most limit ÷ (time a job holds its slot) jobs
    a second; a job that finds every slot taken retries its take every `SLOT_WAIT_SECONDS`."""
    head = results["scenarios"][HEADLINE]["phases"]
    per_job = sum(
        units
        for phase in head.values()
        for part, units in phase["wcu_by_part"].items()
        if part.startswith("base:SLOTS")
    )
    busy = results["scenarios"][BUSY_USER]
    holders, item_bytes = busy["per_user_limit"], busy["slot_item_bytes_max"]
    # Entries are the same size, so the item grows linearly with the limit (an upper bound:
    # the measured size includes the item's key).
    bytes_at_limit = item_bytes * USER_CONCURRENCY_LIMIT / holders
    units_at_limit = max(1, math.ceil(bytes_at_limit / 1024))
    jobs_per_second = USER_CONCURRENCY_LIMIT / worker_seconds
    wait = busy["slot_wait"]
    # A slot wait: the job's own write (last_dispatch_at) + the failed take, priced on the item.
    wait_wru = wait["wcu_per_wait"] - wait["wcu_by_part_per_wait"].get("base:SLOTS (failed)", 0)
    wait_wru += units_at_limit
    busy_wru = jobs_per_second * per_job * units_at_limit
    return {
        "limit": USER_CONCURRENCY_LIMIT,
        "item_bytes_at_limit": round(bytes_at_limit),
        "wru_per_slot_write_at_limit": units_at_limit,
        "slot_writes_per_job": per_job,
        "jobs_per_second_per_user_at_limit": round(jobs_per_second, 2),
        "wru_per_second_busy_user": round(busy_wru, 1),
        "jobs_per_second_per_user_at_1000_wru": round(HOT_KEY_WCU / (per_job * units_at_limit)),
        "wru_per_slot_wait": wait_wru,
        "waiting_jobs_per_user_at_1000_wru": math.floor(
            (HOT_KEY_WCU - busy_wru) * SLOT_WAIT_SECONDS / units_at_limit
        ),
        "measured_item_bytes": item_bytes,
        "measured_holders": holders,
    }


def sweeper_reach(results: dict[str, Any], peak: float, worker_seconds: float) -> dict[str, Any]:
    """One sweep reads up to `SWEEP_ACTIVE_BUDGET` active jobs, a page of `PAGE_JOBS` at a time,
    from where the last one stopped: every active job is read once per lap (decision SP2)."""
    loaded = results["sweeper"]["loaded_sweep"]
    return {
        "jobs_listed_per_sweep": SWEEP_ACTIVE_BUDGET,
        "rcu_per_loaded_sweep": loaded["rcu"],
        "rcu_per_listed_job": round(loaded["rcu"] / PAGE_JOBS, 4),
        "wcu_per_rescue": results["sweeper"]["wcu_per_rescue"],
        "running_at_peak": math.ceil(peak * worker_seconds),
    }


def plan(results: dict[str, Any], load: Workload) -> dict[str, Any]:
    avg = weighted(results, load)
    peak, mean = load.peak_jobs_per_second, load.jobs_per_day / 86_400
    month_jobs = load.jobs_per_day * DAYS_PER_MONTH
    sweeper = results["sweeper"]
    lam = LAMBDA
    # Little's law: concurrency = arrival rate × time each arrival holds an environment.
    worker_seconds = lam.worker_ms_per_wakeup / 1000 + load.step_seconds
    concurrency = {
        "api": peak * avg["api_requests"] * lam.api_ms / 1000,
        "worker": peak * worker_seconds,
        "relay": "one per stream shard (x ParallelizationFactor)",
        "sweeper": 1,
    }
    head = results["scenarios"][HEADLINE]["phases"]
    active = active_partition(avg, peak)
    slot = slot_item(results, worker_seconds)
    sweeps_per_month = 43_200
    sweep_usd = sweeps_per_month * (
        PRICES["lambda_request"]
        + lam.sweeper_ms / 1000 * lam.memory_mb / 1024 * PRICES["lambda_arm64_gb_second"]
        + sweeper["loaded_sweep"]["rcu"] * PRICES["dynamodb_read_request_unit"]
    )
    headline = results["scenarios"][HEADLINE]
    # Stored: the finished job item and its by_owner entry (kept 30 days after the job ends; a
    # succeeded job has no by_state entry), each with 100 B of overhead, + the outbox items of the
    # last 2 days.
    owner_entry = sum(
        headline["job_item_attribute_bytes"].get(name, 0)
        for name in ("pk", "sk", "gsi2pk", "gsi2sk")
    )
    per_job_stored = headline["job_item_bytes_at_end"] + owner_entry + 2 * STORAGE_OVERHEAD_BYTES
    stored_gb = (
        month_jobs * per_job_stored + load.jobs_per_day * OUTBOX_DAYS * OUTBOX_ITEM_BYTES
    ) / GIB
    fixed = {
        "sweeper (every minute, loaded)": sweep_usd,
        "SQS poller idle receives (~15 a minute)": 15
        * 60
        * 24
        * 30
        * PRICES["sqs_standard_request"],
        "DynamoDB storage (30-day retention)": stored_gb * PRICES["dynamodb_storage_gb_month"],
        "DynamoDB PITR (0.20/GB-month)": stored_gb * 0.20,
        "CloudWatch Logs storage (14 days)": month_jobs
        * avg["log_bytes"]
        / GIB
        * 14
        / 30
        * PRICES["cloudwatch_logs_stored_gb_month"],
        "CloudWatch metrics (~25 EMF metrics) + dashboard + alarms": 25 * 0.30 + 3 + 15 * 0.10,
    }
    return {
        "workload": load.__dict__ | {"mix": dict(load.mix)},
        "average_job": {k: round(v, 3) for k, v in avg.items()},
        "rates": {
            "jobs_per_second_mean": round(mean, 1),
            "jobs_per_second_peak": peak,
            "dynamodb_wcu_per_second_peak": round(peak * avg["wcu"]),
            "of_which_base_table": round(peak * avg["wcu_base"]),
            "of_which_by_state": round(peak * avg.get("wcu_index_by_state", 0)),
            "of_which_by_owner": round(peak * avg.get("wcu_index_by_owner", 0)),
            "dynamodb_rcu_per_second_peak": round(peak * avg["rcu"]),
            "dynamodb_requests_per_second_peak": round(peak * avg["dynamodb_requests"]),
            "sqs_requests_per_second_peak": round(peak * avg["sqs_requests"]),
            "api_requests_per_second_peak": round(peak * avg["api_requests"]),
            "lambda_invocations_per_second_peak": round(
                peak * sum(v for k, v in avg.items() if k.startswith("lambda_"))
            ),
            "log_mb_per_second_peak": round(peak * avg["log_bytes"] / 1e6, 2),
        },
        "hot_keys": {
            "by_state STATE#active": active,
            "per-user slot item": slot,
            "headline_phase_split": {p: v["wcu"] for p, v in head.items() if v["wcu"]},
        },
        "sweeper": sweeper_reach(results, peak, worker_seconds),
        "api_throttle_template_rps": API_RATE_LIMIT,
        "lambda_concurrency_peak": concurrency,
        # A message stays in flight until its whole batch is done (records run one by one).
        "sqs_in_flight_peak": math.ceil(peak * WORKER_BATCH * worker_seconds),
        "worker_max_concurrency_template": WORKER_MAX_CONCURRENCY,
        "worker_jobs_per_second_at_that_cap": round(WORKER_MAX_CONCURRENCY / worker_seconds, 1),
        "monthly_usd": {
            "per_job_services": round(month_jobs * avg["usd_per_million"] / 1e6, 2),
            **{k: round(v, 2) for k, v in fixed.items()},
            "total": round(month_jobs * avg["usd_per_million"] / 1e6 + sum(fixed.values()), 2),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results.json")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the workload")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    print(json.dumps(plan(results, Workload().scaled(args.scale)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
