"""`make bench-scale`: the key-heat model (bench/keyheat.py) on a fresh recording. Runs the
scenarios the capacity doc's mix names through the real handlers on moto, as `make bench` does
(bench/scenarios.py, metered by bench/meter.py), plus one loaded sweep and one operator summary;
keeps every partition key each request touched with its capacity units; replays the mix at
`--rate` jobs a second over `--shards` index shards and writes bench/scale.json. Prints the
rate at which the first key reaches 80 % of its partition's limit with one shard (the layout
before issue 30) and with `--shards`. Counts on moto — not an AWS measurement.

Run: `python -m bench.scale [--rate 10000] [--shards N] [--out bench/scale.json]`."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.capacity import ReadEvent, TableSpec, WriteEvent, index_entry, index_writes, price_write
from bench.keyheat import Assumptions, Recording, Touch, first_at, model, reader_costs
from bench.plan import RETRY, Workload, weighted
from bench.pricing import LAMBDA, PRICES
from bench.scenarios import HEADLINE, SCENARIOS, Runner

HERE = Path(__file__).resolve().parent
RATES = (1_000, 10_000, 50_000)
"""The rates docs/capacity.md states what to request at."""
SCENARIO_JOBS = 20
"""Jobs a scenario runs here (make bench runs 20 to 100): per-job units do not depend on it."""
CONSOLE_TABS = 10
"""Operator consoles open at once, each polling the summary every 30 s (docs/capacity.md)."""
SUMMARY_SECONDS = 30
PROVISIONED = {"wcu_hour": 0.00065, "rcu_hour": 0.00013, "utilisation": 0.7}
"""us-east-1 provisioned capacity per WCU-hour and RCU-hour — recalled, not fetched (the
stored copies of the pricing page found here render no figures); auto scaling's 70 % target."""


def touches(spec: TableSpec, writes: list[WriteEvent], reads: list[ReadEvent]) -> list[Touch]:
    """Every partition key the requests touched: a write's base-table key and each index entry
    it wrote or removed (under that entry's own index partition key), each read's key."""
    out: list[Touch] = []
    for event in writes:
        cost = price_write(spec, event)
        out.append(
            Touch("table", _pk(event.key, spec.hash_key), wcu=cost.base, operation=event.operation)
        )
        if event.failed or event.action == "ConditionCheck":
            continue
        for index in spec.indexes:
            before = index_entry(spec, index, event.old)
            after = index_entry(spec, index, event.new)
            for write in index_writes(spec, index, event.old, event.new):
                entry = before if write.action == "delete" else after
                assert entry is not None
                out.append(
                    Touch(index.name, _pk(entry, index.hash_key), wcu=write.units,
                          operation=event.operation)
                )  # fmt: skip
    out.extend(Touch(r.index, r.key, rcu=r.units, operation=r.operation) for r in reads)
    return out


def _pk(item: Any, name: str) -> str:
    return str(item[name].get("S", ""))


def record(*, progress: Any = print) -> tuple[Recording, Assumptions, dict[str, Any], int]:
    """Run the mix's scenarios, one loaded sweep and one summary on moto; return the recording,
    the assumptions, the template and the index shards the functions ran with."""
    from moto import mock_aws

    from bench.ops_summary import metered_summary
    from bench.stack import Stack, quiet_warnings, set_credentials
    from leasehold_dev.local.moto import transactions as moto_transactions

    load = Workload()
    names = {name for name, _ in load.mix} | {RETRY, HEADLINE}
    assumptions = Assumptions(
        mix=load.mix, retry=(RETRY, HEADLINE, load.retry_share),
        job_seconds=LAMBDA.worker_ms_per_wakeup / 1000 + load.step_seconds,
        jobs_per_user_per_second=load.peak_jobs_per_second / load.users,
    )  # fmt: skip
    recording = Recording()
    set_credentials()
    quiet_warnings()
    moto_transactions.install()
    with mock_aws():
        stack = Stack()
        runner = Runner(stack)
        template = stack.template
        for scenario in SCENARIOS:
            if scenario.name not in names:
                continue
            started = time.monotonic()
            measured = runner.run(replace(scenario, jobs=min(scenario.jobs, SCENARIO_JOBS)))
            recording.scenarios[scenario.name] = (
                measured.jobs, touches(stack.spec, measured.writes, measured.reads)
            )  # fmt: skip
            sqs = sum(
                n
                for c in measured.requests.values()
                for op, n in c.items()
                if op.startswith("sqs.")
            )
            recording.services[scenario.name] = {
                "api_requests": measured.invocations["api_requests"] / measured.jobs,
                "sqs_requests": sqs / measured.jobs,
            }
            progress(
                f"  {scenario.name}: {measured.jobs} jobs ({time.monotonic() - started:.1f} s)"
            )
        started = time.monotonic()
        runner.sweeper(running=100, expired=10, queued=100)
        from leasehold.handlers import wiring

        recorded_shards = int(getattr(wiring.runtime().settings, "index_shards", 1))
        writes, reads = runner.last_sweep
        sweep_reads = touches(stack.spec, [], reads)  # rescues' writes: per lapsed lease, rare
        recording.passes["sweep"] = (1 / _sweep_seconds(template), sweep_reads)
        progress(f"  one loaded sweep, 210 in flight ({time.monotonic() - started:.1f} s)")
    started = time.monotonic()
    meter, _, _ = metered_summary(1000, recorded_shards)
    recording.passes["summary"] = (
        CONSOLE_TABS / SUMMARY_SECONDS, touches(meter.table, [], meter.reads)
    )  # fmt: skip
    progress(f"  one operator summary, 1,000 active ({time.monotonic() - started:.1f} s)")
    return recording, assumptions, template, recorded_shards


def _sweep_seconds(template: dict[str, Any]) -> float:
    """SweepSchedule's default, `rate(N minute[s]|second[s]|hour[s])`, in seconds."""
    default = str(template["Parameters"]["SweepSchedule"]["Default"])
    found = re.fullmatch(r"rate\((\d+) (second|minute|hour)s?\)", default)
    if not found:
        raise ValueError(f"SweepSchedule {default!r} is not rate(N unit)")
    return int(found[1]) * {"second": 1, "minute": 60, "hour": 3600}[found[2]]


def default_shards(template: dict[str, Any]) -> int:
    """template.yaml's IndexShards default (1 before the layout had shards)."""
    return int(template["Parameters"].get("IndexShards", {}).get("Default", 1))


def prices(result: dict[str, Any], rate: float) -> dict[str, float]:
    """$ per million jobs at `rate` sustained: the other services as make bench priced the mix
    (bench/results.json), plus DynamoDB's units as recorded here (passes included), on demand
    or provisioned at 70 % utilisation."""
    keys = [r for r in result["keys"] if "hottest" not in r["key"]]
    wcu = sum(r["total_wcu_per_second"] for r in keys) / rate
    rcu = sum(r["total_rcu_per_second"] for r in keys) / rate
    avg = weighted(json.loads((HERE / "results.json").read_text()), Workload())
    # make bench's bill of the mix less its DynamoDB units: what the other services cost a job
    others = avg["usd_per_million"] - 1e6 * (
        avg["wcu"] * PRICES["dynamodb_write_request_unit"]
        + avg["rcu"] * PRICES["dynamodb_read_request_unit"]
    )
    dynamo_on_demand = 1e6 * (
        wcu * PRICES["dynamodb_write_request_unit"] + rcu * PRICES["dynamodb_read_request_unit"]
    )
    per_hour = 3600 * rate / 1e6  # millions of jobs an hour
    provisioned = (
        (wcu * rate * PROVISIONED["wcu_hour"] + rcu * rate * PROVISIONED["rcu_hour"])
        / PROVISIONED["utilisation"]
        / per_hour
    )
    return {
        "on_demand_usd_per_million": round(others + dynamo_on_demand, 2),
        "dynamodb_on_demand_usd_per_million": round(dynamo_on_demand, 2),
        "dynamodb_provisioned_usd_per_million": round(provisioned, 2),
        "provisioned_usd_per_million": round(others + provisioned, 2),
        "other_services_usd_per_million": round(others, 2),
        "wcu_per_job": round(wcu, 3),
        "rcu_per_job": round(rcu, 4),
    }


SHARD_COUNTS = (1, 8, 16, 32, 64, 128, 256)
"""The shard counts docs/capacity.md prices the readers at."""


def build(
    recording: Recording,
    assumptions: Assumptions,
    rate: float,
    shards: int,
    recorded_shards: int = 1,
) -> dict[str, Any]:
    """bench/scale.json: the model at `rate` over `shards`, the ceiling before (1 shard) and
    after, and the quotas and prices at each of RATES."""
    result = model(recording, assumptions, rate, shards)
    ceiling = {}
    for label, n in (("before", 1), ("after", shards)):
        at, key = first_at(recording, assumptions, n)
        ceiling[label] = {"index_shards": n, "jobs_per_second_at_80_percent": at, "key": key}
    result["ceiling"] = ceiling
    result["at_rates"] = {}
    for r in RATES:
        at = model(recording, assumptions, r, shards)
        result["at_rates"][str(r)] = {
            "hottest": {k: at["keys"][0][k] for k in ("key", "index", "share")},
            "quotas": at["quotas"],
            "prices": prices(at, r),
        }
    result["readers"] = reader_costs(
        recording, recorded_shards, SHARD_COUNTS, PRICES["dynamodb_read_request_unit"],
        per_second={"summary": 1 / SUMMARY_SECONDS},  # one console tab
    )  # fmt: skip
    result["assumptions"] = {
        "mix": dict(assumptions.mix),
        "retry": list(assumptions.retry) if assumptions.retry else None,
        "job_seconds": assumptions.job_seconds,
        "jobs_per_user_per_second": assumptions.jobs_per_user_per_second,
        "users_per_tenant": assumptions.users_per_tenant,
        "hottest_user_jobs_per_second": round(assumptions.hottest_user_jobs_per_second, 2),
        "hottest_tenant_share": assumptions.hottest_tenant_share,
        "passes_per_second": {k: round(v[0], 4) for k, v in recording.passes.items()},
        "console_tabs": CONSOLE_TABS,
        "provisioned_prices_recalled": PROVISIONED,
        "measured_on": "moto (in-process), counts only — not an AWS measurement",
    }
    return result


FANOUT_CHILDREN = 10_000
FANOUT_ENDS_PER_SECOND = 1000.0
"""Issue 31, item 2: a 10,000-child fan-out whose children end at 1,000 a second."""


def fanout_heat(*, progress: Any = print) -> dict[str, Any]:
    """A fan-out's own keys at FANOUT_ENDS_PER_SECOND: one fan-out recorded on moto with its
    counters over 16 items (bench/fanout.record_heat), spread as a 10,000-child set's real ids
    fall on its ceil(10,000 / 640) = 16 counter items (`expected_per_shard`)."""
    from moto import mock_aws

    from bench.fanout import record_heat
    from bench.keyheat import fanout_rows
    from bench.stack import Stack, quiet_warnings, set_credentials
    from leasehold.domain.waits import expected_per_shard, fanin_shards
    from leasehold_dev.local.moto import transactions as moto_transactions

    set_credentials()
    quiet_warnings()
    moto_transactions.install()
    started = time.monotonic()
    with mock_aws():
        runner = Runner(Stack())
        rec, measured = record_heat(runner)
    shards = fanin_shards(FANOUT_CHILDREN)
    counts = expected_per_shard("j_" + "0" * 22, 0, FANOUT_CHILDREN, shards)
    rows = fanout_rows(
        rec, counts, ends_per_second=FANOUT_ENDS_PER_SECOND,
        spawned_per_second=FANOUT_ENDS_PER_SECOND,
    )  # fmt: skip
    progress(f"  one fan-out of {rec.children} over {rec.shards} counters "
             f"({time.monotonic() - started:.1f} s)")  # fmt: skip
    return {
        "children": FANOUT_CHILDREN,
        "ends_per_second": FANOUT_ENDS_PER_SECOND,
        "counter_items": shards,
        "children_per_counter": {"min": min(counts), "max": max(counts)},
        "recorded": {
            "children": rec.children,
            "counter_items": rec.shards,
            "per_end": {k: [round(w, 4), round(r, 4)] for k, (w, r) in rec.per_end.items()},
            "per_set": {k: [round(w, 4), round(r, 4)] for k, (w, r) in rec.per_set.items()},
            "spawn": {k: [round(w, 4), round(r, 4)] for k, (w, r) in rec.spawn.items()},
            "model_ok": measured["model_ok"],
        },
        "rows": rows,
        "measured_on": "moto (in-process), counts only — not an AWS measurement",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10_000, help="jobs a second")
    parser.add_argument("--shards", type=int, default=None, help="default: IndexShards'")
    parser.add_argument("--out", type=Path, default=HERE / "scale.json")
    args = parser.parse_args(argv)
    started = time.monotonic()
    print("bench-scale: recording the mix's scenarios on moto …", flush=True)
    recording, assumptions, template, recorded = record(progress=lambda s: print(s, flush=True))
    print(f"  the functions ran over {recorded} index shard(s)", flush=True)
    shards = args.shards if args.shards is not None else default_shards(template)
    result = build(recording, assumptions, args.rate, shards, recorded)
    result["fanout"] = fanout_heat(progress=lambda line: print(line, flush=True))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for label, c in result["ceiling"].items():
        print(
            f"first key at 80 % {label} ({c['index_shards']} shard(s)): "
            f"{c['jobs_per_second_at_80_percent']} jobs/s — {c['key']}"
        )
    top = result["keys"][0]
    print(
        f"at {args.rate:g} jobs/s over {shards} shard(s): hottest {top['index']} {top['key']} "
        f"at {top['share']:.3f} of its partition"
    )
    for q in result["quotas"]:
        print(f"  {q['name']}: needs {q['needed']:,} (default {q['default']}) — {q['increase']}")
    print(f"wrote {args.out} ({time.monotonic() - started:.0f} s)")
    over = [r for r in result["keys"] if r["share"] > 0.5]
    if over:
        print("keys above 0.5: " + ", ".join(f"{r['index']} {r['key']}" for r in over))
    return 0


if __name__ == "__main__":
    sys.exit(main())
