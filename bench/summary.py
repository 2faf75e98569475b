"""From what a scenario measured to the per-job figures of bench/results.json (arch §8)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.meter import CapacityMeter, TableSpec, price_write
from bench.pricing import (
    LAMBDA,
    PLATFORM_LOG_BYTES,
    PRICES,
    JobProfile,
    durable_functions,
    per_million,
    step_functions,
    usd_per_job,
)
from bench.scenarios import (
    BATCHED,
    DIRECT,
    HEADLINE,
    KEYED,
    NO_LIMIT,
    SCENARIOS,
    THREE_STEP,
    Measured,
    job_body,
)

THREE_STEP_WCU_TARGET = 13
JOB_PHASES = [
    "accept", "approve", "due", "relay", "delivery", "worker", "claim", "steps", "outcome"
]  # fmt: skip
"""Phases a job pays for; `worker` holds anything the worker did outside claim/steps/outcome;
`due` is the sweep that moves a long-delayed job out of the due index with its wake-up."""
FUNCTIONS = ["api", "relay", "worker"]


def _per(value: float, n: int, digits: int = 3) -> float:
    return round(value / n, digits)


def phase_table(measured: Measured, table: TableSpec) -> dict[str, Any]:
    n = measured.jobs
    out: dict[str, Any] = {}
    for phase in JOB_PHASES:
        wcu, rcu = 0.0, 0.0
        parts: Counter[str] = Counter()
        for event in measured.writes:
            if event.phase != phase:
                continue
            cost = price_write(table, event)
            wcu += cost.total
            tags = (" (tx)" if event.transactional else "") + (" (failed)" if event.failed else "")
            parts[f"base:{event.kind}{tags}"] += cost.base
            for index, units in cost.indexes.items():
                parts[f"index:{index}"] += units
        rcu = sum(r.units for r in measured.reads if r.phase == phase)
        requests = {
            op: _per(c, n) for op, c in sorted(measured.requests.get(phase, {}).items()) if c
        }
        if not (wcu or rcu or requests):
            continue
        out[phase] = {
            "wcu": _per(wcu, n),
            "rcu": _per(rcu, n),
            "requests": requests,
            "wcu_by_part": {k: _per(v, n) for k, v in sorted(parts.items())},
        }
    return out


def profile(
    measured: Measured, table: TableSpec, access_log: int
) -> tuple[JobProfile, dict[str, Any]]:
    """Per-job figures; `access_log` is the bytes of one API access-log line."""
    n = measured.jobs
    phases = phase_table(measured, table)
    requests: Counter[str] = Counter()
    for phase in JOB_PHASES:
        requests.update({k: v for k, v in measured.requests.get(phase, {}).items() if v})
    inv = measured.invocations
    invocations = {fn: _per(inv["count"].get(fn, 0), n) for fn in FUNCTIONS}
    captured = sum(inv["log_bytes"].get(fn, 0) for fn in FUNCTIONS)
    metric_lines = sum(inv["metric_bytes"].get(fn, 0) for fn in FUNCTIONS)
    platform = sum(inv["count"].get(fn, 0) for fn in FUNCTIONS) * PLATFORM_LOG_BYTES
    access = inv["api_requests"] * access_log
    log_bytes = (captured + platform + access) / n
    wcu = sum(p["wcu"] for p in phases.values())
    rcu = sum(p["rcu"] for p in phases.values())
    sqs = sum(v for k, v in requests.items() if k.startswith("sqs.")) / n
    job = JobProfile(
        wcu=wcu,
        rcu=rcu,
        sqs_requests=sqs,
        lambda_invocations=invocations,
        wakeups=inv["wakeups"] / n,
        api_requests=inv["api_requests"] / n,
        log_bytes=log_bytes,
        s3_puts=requests.get("s3.PutObject", 0) / n,
        s3_gets=(requests.get("s3.GetObject", 0) + requests.get("s3.HeadObject", 0)) / n,
    )
    per_job = {
        "wcu": round(wcu, 3),
        "rcu": round(rcu, 3),
        "dynamodb_requests": _per(
            sum(v for k, v in requests.items() if k.startswith("dynamodb.")), n
        ),
        "sqs_requests": round(sqs, 3),
        "lambda_invocations": invocations,
        "api_requests": _per(inv["api_requests"], n),
        "worker_wakeups": _per(inv["wakeups"], n),
        "log_bytes": round(log_bytes, 1),
        "log_bytes_split": {
            "handler log lines (captured)": _per(captured - metric_lines, n, 1),
            "EMF metric lines (captured)": _per(metric_lines, n, 1),
            "lambda platform lines (modelled)": _per(platform, n, 1),
            "api access log (modelled)": _per(access, n, 1),
        },
        "requests": {k: _per(v, n) for k, v in sorted(requests.items())},
    }
    return job, {"per_job": per_job, "phases": phases}


def summarise(measured: Measured, table: TableSpec, access_log: int) -> dict[str, Any]:
    job, figures = profile(measured, table, access_log)
    sc = measured.scenario
    usd = per_million(usd_per_job(job))
    result: dict[str, Any] = {
        "jobs": measured.jobs,
        "traffic": sc.traffic,
        "steps": sc.steps,
        "payload": sc.payload,
        "payload_bytes": measured.payload_bytes,
        "job_item_bytes_at_end": measured.job_item_bytes,
        "idempotency_key": sc.key,
        "per_user_limit": measured.limit,
        "final_states": measured.final_states,
        **figures,
        "usd_per_million_jobs": usd,
    }
    result.update(measured.extra)
    return result


def targets(scenarios: dict[str, Any], comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 12, item 3 (1-step, key sent, limit on, payload ≤ 1 KiB, burst)."""
    head, free, three = scenarios[HEADLINE], scenarios[NO_LIMIT], scenarios[THREE_STEP]
    rows = [
        ("1-step write units, limit on", head["per_job"]["wcu"], "<=", 11),
        ("1-step read units, limit on", head["per_job"]["rcu"], "<=", 1),
        ("1-step write units, limit off", free["per_job"]["wcu"], "<=", 9),
        ("3-step write units, limit on", three["per_job"]["wcu"], "<=", THREE_STEP_WCU_TARGET),
        (
            "3-step: Step Functions Standard / leasehold, all-in",
            comparison["standard_over_leasehold"],
            ">=",
            8,
        ),
    ]
    if KEYED in scenarios:  # issue 21, item 6
        rows.append(
            (
                "1-step write units, one concurrency key",
                scenarios[KEYED]["per_job"]["wcu"],
                "<=",
                11,
            )
        )
    out = []
    for name, value, op, limit in rows:
        met = value <= limit if op == "<=" else value >= limit
        out.append({"target": name, "value": value, "op": op, "limit": limit, "met": met})
    return out


def comparison(scenarios: dict[str, Any]) -> dict[str, Any]:
    three = scenarios[THREE_STEP]
    leasehold = three["usd_per_million_jobs"]["total"]
    steps = three["steps"]
    standard = step_functions(steps, express=False)
    express = step_functions(steps, express=True)
    with_ends = step_functions(steps, express=False, extra_transitions=2)
    durable = durable_functions(steps, **_checkpointed(three))
    durable_with_start = durable_functions(steps, count_start=True, **_checkpointed(three))
    # What the 3-step job would cost at its write-unit target, all else as measured.
    at_target = leasehold - max(0.0, three["per_job"]["wcu"] - THREE_STEP_WCU_TARGET) * (
        PRICES["dynamodb_write_request_unit"] * 1e6
    )
    return {
        "scenario": THREE_STEP,
        "leasehold_usd_per_million": leasehold,
        "step_functions_standard_usd_per_million": standard["usd_per_million"]["total"],
        "step_functions_express_usd_per_million": express["usd_per_million"]["total"],
        "standard_over_leasehold": round(standard["usd_per_million"]["total"] / leasehold, 2),
        "express_over_leasehold": round(express["usd_per_million"]["total"] / leasehold, 2),
        "standard": standard,
        "express": express,
        "standard_counting_start_and_end": with_ends,
        "durable_functions_usd_per_million": durable["usd_per_million"]["total"],
        "durable_over_leasehold": round(durable["usd_per_million"]["total"] / leasehold, 2),
        "durable": durable,
        "durable_counting_the_start": durable_with_start,
        "leasehold_at_wcu_target": {
            "wcu": THREE_STEP_WCU_TARGET,
            "usd_per_million": round(at_target, 3),
            "standard_over_leasehold": round(standard["usd_per_million"]["total"] / at_target, 2),
            "standard_with_start_and_end_over_leasehold": round(
                with_ends["usd_per_million"]["total"] / at_target, 2
            ),
        },
        "note": "all-in = orchestration + Lambda (requests and assumed duration) + API Gateway "
        "+ CloudWatch Logs; status reads excluded on both sides; the steps' own work excluded "
        "on both sides",
    }


def _checkpointed(three: dict[str, Any]) -> dict[str, Any]:
    """What a durable function of the 3-step job would checkpoint: its input (the measured
    payload) and each step's result (the synthetic step's output for these steps)."""
    import json

    scenario = next(s for s in SCENARIOS if s.name == THREE_STEP)
    outputs = [
        len(json.dumps({"step": step["name"], "cost": step["cost"]}, separators=(",", ":")))
        for step in job_body(scenario)["payload"]["steps"]
    ]
    return {"input_bytes": int(three["payload_bytes"]), "output_bytes": outputs}


def enqueue_paths(scenarios: dict[str, Any]) -> dict[str, Any]:
    """The same 1-step job enqueued over HTTP (POST /jobs: API Gateway + the API function) and
    directly (`submit_direct` from code already running in AWS), both measured by the meter."""
    http, direct = scenarios[HEADLINE], scenarios[DIRECT]
    a, b = http["usd_per_million_jobs"], direct["usd_per_million_jobs"]
    batched = scenarios.get(BATCHED)
    batch: dict[str, Any] = {}
    if batched is not None:
        c = batched["usd_per_million_jobs"]
        batch = {
            "batch": BATCHED,
            "batch_usd_per_million": c["total"],
            "batch_saved_usd_per_million": {name: round(a[name] - c[name], 3) for name in a},
        }
    return {
        "http": HEADLINE,
        "direct": DIRECT,
        "http_usd_per_million": a["total"],
        "direct_usd_per_million": b["total"],
        "saved_usd_per_million": {name: round(a[name] - b[name], 3) for name in a},
        **batch,
        "accept_phase": {
            "http": http["phases"].get("accept", {}),
            "direct": direct["phases"].get("accept", {}),
            **({"batch": batched["phases"].get("accept", {})} if batched else {}),
        },
        "note": "direct = the user's code calls submit_direct inside AWS: no API Gateway request "
        "and no API function invocation (the caller's own invocation is not the job's); the same "
        "transaction, relay, queue and worker as over HTTP",
    }


def moto_comparison(meter: CapacityMeter) -> dict[str, Any]:
    """What moto returned for ReturnConsumedCapacity=TOTAL against the computed units."""
    out = {}
    for operation, check in sorted(meter.moto_check.items()):
        out[operation] = {
            "requests": check.requests,
            "computed_units": round(check.computed, 2),
            "moto_reported_units": round(check.reported, 2),
            "requests_without_a_moto_figure": check.missing,
        }
    return out


def lambda_assumptions() -> dict[str, Any]:
    return LAMBDA.as_dict() | {"platform_log_bytes_per_invocation": PLATFORM_LOG_BYTES}
