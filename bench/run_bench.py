"""`make bench`: every scenario through the real functions on moto (in-process), metered at the
client boundary (bench/meter.py), priced at list prices (bench/pricing.py), compared with Step
Functions, written to bench/results.json, bench/README.md and bench/cost.svg.

What is measured is counts — requests, capacity units computed from the items each request
read or wrote, invocations, log bytes — the quantities AWS bills. Nothing here is an AWS
measurement; Lambda durations are assumptions. Run: `python -m bench.run_bench [--quick]`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import fanout
from bench.pricing import PRICES, access_log_bytes
from bench.scenarios import HEADLINE, NO_LIMIT, SCENARIOS, THREE_STEP, Runner
from bench.schedules import schedule_ticks
from bench.stack import Stack, quiet_warnings, set_credentials
from bench.summary import (
    JOB_PHASES,
    comparison,
    enqueue_paths,
    lambda_assumptions,
    moto_comparison,
    summarise,
    targets,
)
from bench.whatif import OPTIONS, smallest_sets, what_if

HERE = Path(__file__).resolve().parent

__all__ = ["PRICES", "main", "run"]


def run(*, quick: bool = False, progress: Any = print) -> dict[str, Any]:
    """All scenarios; `quick` runs a fifth of the jobs (for a smoke check, not for figures)."""
    from moto import mock_aws

    from leasehold_dev.local.moto import transactions as moto_transactions

    set_credentials()
    quiet_warnings()
    results: dict[str, Any] = {}
    moto_transactions.install()  # moto's own transactions copy the whole table each time
    with mock_aws():
        stack = Stack()
        runner = Runner(stack)
        access = access_log_bytes(
            stack.template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]
        )
        scenarios: dict[str, Any] = {}
        measured_by_name = {}
        for scenario in SCENARIOS:
            chosen = replace(scenario, jobs=max(5, scenario.jobs // 5)) if quick else scenario
            started = time.monotonic()
            measured = runner.run(chosen)
            measured_by_name[scenario.name] = measured
            scenarios[scenario.name] = summarise(measured, stack.spec, access)
            progress(
                f"  {scenario.name}: {measured.jobs} jobs, "
                f"{scenarios[scenario.name]['per_job']['wcu']} WCU/job "
                f"({time.monotonic() - started:.1f} s)"
            )
        started = time.monotonic()
        in_flight = (250, 20, 230) if not quick else (50, 5, 50)
        sweeper = runner.sweeper(running=in_flight[0], expired=in_flight[1], queued=in_flight[2])
        progress(
            f"  sweeper, {sweeper['in_flight']} in flight ({time.monotonic() - started:.1f} s)"
        )
        started = time.monotonic()
        scheduled = schedule_ticks(runner, ticks=20 if not quick else 5)
        progress(
            f"  schedule, {scheduled['ticks']} ticks: {scheduled['fire_wcu_per_tick']:g} WCU "
            f"per tick fired ({time.monotonic() - started:.1f} s)"
        )
        started = time.monotonic()
        fan = fanout.measure(runner, fanout.CHILDREN)
        fan_compared = fanout.compare(fan)
        progress(
            f"  fan-out of {fan['children']}: {fan['per_child']['wcu']} WCU/child, "
            f"model check {'ok' if fan['model_ok'] else 'FAILED'} "
            f"({time.monotonic() - started:.1f} s)"
        )
        compared = comparison(scenarios)
        started = time.monotonic()
        results = {
            "measured_on": "moto (in-process), through the real Api, Relay, Worker and Sweeper "
            "handlers; counts only — not an AWS measurement",
            "scenarios": scenarios,
            "sweeper": sweeper,
            "schedule": scheduled,
            "comparison": compared,
            "enqueue_paths": enqueue_paths(scenarios),
            "targets": [*targets(scenarios, compared), fan_compared["target"]],
            "fanout": {"measured": fan, "comparison": fan_compared},
            "what_if": {
                name: what_if(
                    measured_by_name[name].writes,
                    stack.spec,
                    measured_by_name[name].jobs,
                    JOB_PHASES,
                )
                for name in (HEADLINE, NO_LIMIT, THREE_STEP)
            },
            "option_sets_meeting_targets": {
                name: smallest_sets(
                    measured_by_name[name].writes,
                    stack.spec,
                    measured_by_name[name].jobs,
                    JOB_PHASES,
                    target,
                )
                for name, target in ((HEADLINE, 11), (NO_LIMIT, 9), (THREE_STEP, 13))
            },
            "options": [
                {"number": i + 1, "name": o.name, "change": o.change, "caveat": o.caveat}
                for i, o in enumerate(OPTIONS)
            ],
            "moto_consumed_capacity": moto_comparison(stack.meter),
            "prices": PRICES,
            "assumptions": {
                "lambda": lambda_assumptions(),
                "api_access_log_bytes_per_request": access,
            },
        }
        progress(f"  what-if pricing ({time.monotonic() - started:.1f} s)")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the jobs (smoke check)")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="where results.json, README.md, cost.svg go"
    )
    args = parser.parse_args(argv)
    from bench.report import print_report, write_chart, write_readme

    started = time.monotonic()
    print("bench: running scenarios on moto …", flush=True)
    results = run(quick=args.quick, progress=lambda line: print(line, flush=True))
    results["elapsed_seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    chart = write_chart(results, args.out / "cost.svg")
    write_readme(results, args.out / "README.md", chart_name=chart.name if chart else None)
    print_report(results, args.out)
    bad = {
        name: s["final_states"]
        for name, s in results["scenarios"].items()
        if set(s["final_states"]) != {"succeeded"}
    }
    if bad:
        print(f"bench: not every job succeeded: {bad}", file=sys.stderr)
        return 1
    fan = results["fanout"]["measured"]
    if not fan["model_ok"] or fan["children_succeeded"] != fan["children"]:
        wrong = [row for row in fan["model_check"] if not row["ok"]]
        print(
            f"bench: the fan-out's writes differ from its model: {wrong}; "
            f"parent {fan['parent_state']}, {fan['children_succeeded']} children succeeded",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
