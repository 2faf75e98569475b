"""List prices and the assumptions the benchmark prices counts with, and the Step Functions
model it compares against. Prices are us-east-1 list prices written down by hand on the date
below — not fetched (this machine cannot reach AWS); change them here and re-run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

PRICES: dict[str, Any] = {
    "date": "2026-11-30",
    "region": "us-east-1",
    "source": "AWS public list prices for us-east-1 (on-demand, no free tier), recorded by hand "
    "on the date above; not fetched: this machine cannot reach AWS",
    "dynamodb_write_request_unit": 0.625 / 1e6,  # on-demand, after the Nov 2024 reduction
    "dynamodb_read_request_unit": 0.125 / 1e6,
    "dynamodb_storage_gb_month": 0.25,
    "sqs_standard_request": 0.40 / 1e6,  # per 64 KiB chunk of a request
    "s3_put_request": 0.005 / 1000,  # S3 Standard PUT, COPY, POST, LIST (us-east-1)
    "s3_get_request": 0.0004 / 1000,  # S3 Standard GET, SELECT and all other requests
    "lambda_request": 0.20 / 1e6,
    "lambda_arm64_gb_second": 0.0000133334,
    "http_api_request": 1.00 / 1e6,  # first 300 M a month
    "cloudwatch_logs_ingested_gb": 0.50,
    "cloudwatch_logs_stored_gb_month": 0.03,
    "step_functions_standard_transition": 0.025 / 1000,
    "step_functions_express_request": 1.00 / 1e6,
    "step_functions_express_gb_second": 0.00001667,  # $0.06 per GB-hour, first 1,000 GB-hours
    # Lambda durable functions: see DURABLE_PRICE_SOURCES — one price found, two not.
    "lambda_durable_operation": 8.00 / 1e6,
    "lambda_durable_data_written_gb": 0.25,
    "lambda_durable_data_retained_gb_month": 0.15,
}

LAMBDA_PRICING_PAGE = "https://aws.amazon.com/lambda/pricing/"

DURABLE_PRICE_SOURCES: dict[str, str] = {
    "lambda_durable_operation": (
        "$8.00 per million durable operations: AWS's own page (" + LAMBDA_PRICING_PAGE + ") was "
        "not readable here — the stored copies of it hold no durable-functions section (its rates "
        "are rendered client-side) — so this is a third party's transcription of that page, "
        "api-evangelist/aws-lambda plans/aws-lambda-plans-pricing.yml ('Durable Functions "
        "operations (example rate) $8.00/M', read from " + LAMBDA_PRICING_PAGE + " on "
        "2026-09-20), taken from the page's worked example: unverified against AWS"
    ),
    "lambda_durable_data_written_gb": (
        "$0.25 per GB of durable data written: write-ups of AWS's pricing page ("
        + LAMBDA_PRICING_PAGE
        + "), as issue 31 gives it (the page itself is not readable here); unverified against AWS"
    ),
    "lambda_durable_data_retained_gb_month": (
        "$0.15 per GB-month of durable data retained: write-ups of AWS's pricing page, as "
        "issue 31 gives it; unverified against AWS"
    ),
    "aws_example_490_46": (
        "not reproduced: the write-ups quote AWS's example of $490.46 a month for 1M claims, but "
        "no stored copy of the example's inputs (operations per claim, bytes, retention, memory, "
        "duration) was found, so the model cannot be checked against it"
    ),
    "lambda_request": LAMBDA_PRICING_PAGE + " ($0.20 per million requests, x86 and Arm)",
    "lambda_arm64_gb_second": LAMBDA_PRICING_PAGE + " (Arm, first tier)",
    "retention": (
        "https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/"
        "sam-property-function-durableconfig.html (RetentionPeriodInDays: 1 to 90, default 14)"
    ),
}
"""Where each price of the durable-functions rows comes from (or that it was not found)."""

GIB = 1024**3


@dataclass(frozen=True)
class LambdaAssumptions:
    """Billed duration is not measurable on moto: these are assumptions, stated with every
    figure. Memory is the template's (Globals MemorySize)."""

    memory_mb: int = 256
    api_ms: int = 40
    """One API request (validate, one transaction, answer)."""
    relay_ms_per_invocation: int = 25
    worker_ms_per_invocation: int = 10
    worker_ms_per_wakeup: int = 40
    """Claim, checkpoints and outcome of one wake-up, excluding the steps' own work (the same
    in every orchestrator, so left out on both sides of the comparison)."""
    sweeper_ms: int = 300
    step_lambda_ms: int = 20
    """A Step Functions Task's Lambda doing the same (empty) step: no store writes of its own."""
    express_overhead_ms_per_state: int = 30
    express_memory_mb: int = 64
    durable_checkpoint_ms_per_step: int = 10
    """A durable step's own checkpoint call (the SDK's CheckpointDurableExecution) inside the
    function's billed duration, beside the step's work (`step_lambda_ms`)."""
    durable_retention_days: int = 14
    """DurableConfig RetentionPeriodInDays, at its default."""

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


LAMBDA = LambdaAssumptions()

PLATFORM_LOG_BYTES = len(
    "START RequestId: 3f1b6b9e-1f6c-4a7e-9a1e-2b7c5e0a1d2f Version: $LATEST\n"
    "END RequestId: 3f1b6b9e-1f6c-4a7e-9a1e-2b7c5e0a1d2f\n"
    "REPORT RequestId: 3f1b6b9e-1f6c-4a7e-9a1e-2b7c5e0a1d2f\tDuration: 41.23 ms\t"
    "Billed Duration: 42 ms\tMemory Size: 256 MB\tMax Memory Used: 98 MB\t\n"
)
"""Lambda's own START/END/REPORT lines per invocation (text log format, as the template's
LoggingConfig leaves it): modelled from their documented shape, not captured."""


def access_log_bytes(template_format: str) -> int:
    """One API access-log line: the template's AccessLogSettings format with typical values."""
    typical = {
        "$context.requestId": "Hx3kYhVjoAMEbQw=",
        "$context.identity.sourceIp": "203.0.113.10",
        "$context.requestTime": "30/Nov/2026:12:00:00 +0000",
        "$context.routeKey": "POST /jobs",
        "$context.status": "202",
        "$context.responseLatency": "45",
        "$context.integrationLatency": "41",
        "$context.integrationStatus": "200",
        "$context.integrationErrorMessage": "-",
        "$context.authorizer.error": "-",
        "$context.error.message": "-",
        "$context.responseLength": "143",
        "$context.identity.userAgent": "python-requests/2.32.3",
    }
    line = " ".join(template_format.split())
    for name in sorted(typical, key=len, reverse=True):
        line = line.replace(name, typical[name])
    return len(line.encode()) + 1


@dataclass(frozen=True)
class JobProfile:
    """What one job used, per job (averaged over a scenario's jobs)."""

    wcu: float
    rcu: float
    sqs_requests: float
    lambda_invocations: dict[str, float]
    wakeups: float
    """Records handed to the worker (each costs `worker_ms_per_wakeup`)."""
    api_requests: float
    log_bytes: float
    """Captured handler output (log lines and EMF metric lines) + platform lines + access log."""
    s3_puts: float = 0.0
    """PutObject requests of values too large for the item (DESIGN §20)."""
    s3_gets: float = 0.0
    """GetObject (and HeadObject) requests reading them back."""


def usd_per_job(profile: JobProfile, lam: LambdaAssumptions = LAMBDA) -> dict[str, float]:
    gb = lam.memory_mb / 1024
    inv = profile.lambda_invocations
    milliseconds = (
        inv.get("api", 0) * lam.api_ms
        + inv.get("relay", 0) * lam.relay_ms_per_invocation
        + inv.get("worker", 0) * lam.worker_ms_per_invocation
        + profile.wakeups * lam.worker_ms_per_wakeup
        + inv.get("sweeper", 0) * lam.sweeper_ms
    )
    return {
        "dynamodb": profile.wcu * PRICES["dynamodb_write_request_unit"]
        + profile.rcu * PRICES["dynamodb_read_request_unit"],
        "sqs": profile.sqs_requests * PRICES["sqs_standard_request"],
        "lambda": sum(inv.values()) * PRICES["lambda_request"]
        + milliseconds / 1000 * gb * PRICES["lambda_arm64_gb_second"],
        "api_gateway": profile.api_requests * PRICES["http_api_request"],
        "logs": profile.log_bytes / GIB * PRICES["cloudwatch_logs_ingested_gb"],
    } | (
        {
            "s3": profile.s3_puts * PRICES["s3_put_request"]
            + profile.s3_gets * PRICES["s3_get_request"]
        }
        if profile.s3_puts or profile.s3_gets
        else {}
    )


def per_million(usd: dict[str, float]) -> dict[str, float]:
    out = {name: round(value * 1e6, 3) for name, value in usd.items()}
    out["total"] = round(sum(usd.values()) * 1e6, 3)
    return out


# ------------------------------------------------------------------------ Step Functions model


def step_functions(
    steps: int,
    *,
    express: bool,
    extra_transitions: int = 0,
    lam: LambdaAssumptions = LAMBDA,
) -> dict[str, Any]:
    """The same job as a state machine of `steps` Task states, each invoking a Lambda with the
    step's work (none here), started from the same HTTP API by a direct service integration
    (no Lambda in front), with execution logging off (the cheapest setting for Step Functions).

    Standard: one state transition per Task state executed (the pricing page: "a state
    transition each time a step of your workflow is executed"); `extra_transitions` adds
    start/end or Choice states for a sensitivity check. Express: one request, plus duration
    (the Task Lambdas' time + an orchestration overhead per state, rounded up to 100 ms) at
    64 MB."""
    gb = lam.memory_mb / 1024
    lambda_usd = steps * (
        PRICES["lambda_request"] + lam.step_lambda_ms / 1000 * gb * PRICES["lambda_arm64_gb_second"]
    )
    logs_usd = steps * PLATFORM_LOG_BYTES / GIB * PRICES["cloudwatch_logs_ingested_gb"]
    api_usd = PRICES["http_api_request"]
    model: dict[str, Any] = {"task_states": steps, "lambda_invocations": steps}
    if express:
        duration_ms = steps * (lam.step_lambda_ms + lam.express_overhead_ms_per_state)
        billed_ms = math.ceil(duration_ms / 100) * 100
        orchestration = PRICES["step_functions_express_request"] + (
            billed_ms
            / 1000
            * lam.express_memory_mb
            / 1024
            * PRICES["step_functions_express_gb_second"]
        )
        model |= {"billed_duration_ms": billed_ms, "memory_mb": lam.express_memory_mb}
    else:
        transitions = steps + extra_transitions
        orchestration = transitions * PRICES["step_functions_standard_transition"]
        model |= {"state_transitions": transitions}
    usd = {
        "step_functions": orchestration,
        "lambda": lambda_usd,
        "api_gateway": api_usd,
        "logs": logs_usd,
    }
    return {"model": model, "usd_per_million": per_million(usd)}


# ------------------------------------------------------------------ Lambda durable functions model


def durable_functions(
    steps: int,
    *,
    input_bytes: int,
    output_bytes: list[int],
    count_start: bool = False,
    lam: LambdaAssumptions = LAMBDA,
) -> dict[str, Any]:
    """The same job as one Lambda durable function whose handler runs `steps` durable steps
    (`context.step`), each doing the same (empty) work as a Step Functions Task's Lambda, with
    the same Lambda model as the Step Functions rows: 256 MB arm64, `step_lambda_ms` per step,
    plus `durable_checkpoint_ms_per_step` for each step's checkpoint. No wait and no callback,
    so one invocation runs it through: no suspension, no replay. Started from the same HTTP API
    (one request; its Lambda integration invokes synchronously, so unlike the Step Functions
    rows' direct integration the caller waits for the job).

    Durable operations: one per step; `count_start` adds the execution's start as one more (a
    sensitivity: how AWS counts it was not found). Data written: the checkpointed input and each
    step's result (`input_bytes`, `output_bytes`); retained for `durable_retention_days`;
    priced at the write-ups' $0.25 per GB written and $0.15 per GB-month retained
    (DURABLE_PRICE_SOURCES)."""
    gb = lam.memory_mb / 1024
    duration_ms = steps * (lam.step_lambda_ms + lam.durable_checkpoint_ms_per_step)
    operations = steps + (1 if count_start else 0)
    written_bytes = input_bytes + sum(output_bytes)
    written_gb = written_bytes / GIB
    retained_gb_month = written_gb * lam.durable_retention_days / 30
    usd = durable_usd(operations, duration_ms * gb, written_gb, retained_gb_month)
    unpriced = {
        "data_written_gb": PRICES["lambda_durable_data_written_gb"],
        "data_retained_gb_month": PRICES["lambda_durable_data_retained_gb_month"],
    }
    return {
        "model": {
            "durable_operations": operations,
            "lambda_invocations": 1,
            "billed_duration_ms": duration_ms,
            "data_written_bytes": written_bytes,
            "data_written_gb": written_gb,
            "data_retained_gb_month": retained_gb_month,
            "retention_days": lam.durable_retention_days,
        },
        "usd_per_million": per_million(usd),
        "not_priced": [name for name, price in unpriced.items() if price is None],
        "total_is": "a lower bound: data written and retained are not priced"
        if any(price is None for price in unpriced.values())
        else "all-in",
        "sources": DURABLE_PRICE_SOURCES,
    }


def durable_data_usd(written_gb: float, retained_gb_month: float) -> dict[str, float]:
    """Durable functions' data charges: GB written and GB-month retained (None: not priced)."""
    out = {}
    if PRICES["lambda_durable_data_written_gb"] is not None:
        out["durable_data_written"] = written_gb * PRICES["lambda_durable_data_written_gb"]
    if PRICES["lambda_durable_data_retained_gb_month"] is not None:
        out["durable_data_retained"] = (
            retained_gb_month * PRICES["lambda_durable_data_retained_gb_month"]
        )
    return out


def durable_usd(
    operations: int, gb_ms: float, written_gb: float, retained_gb_month: float
) -> dict[str, float]:
    """One durable execution started by one HTTP API request: its operations, its one
    invocation (`gb_ms` of arm64 compute), the platform's log lines and its data charges."""
    return {
        "durable_operations": operations * PRICES["lambda_durable_operation"],
        "lambda": PRICES["lambda_request"] + gb_ms / 1000 * PRICES["lambda_arm64_gb_second"],
        "api_gateway": PRICES["http_api_request"],
        "logs": PLATFORM_LOG_BYTES / GIB * PRICES["cloudwatch_logs_ingested_gb"],
        **durable_data_usd(written_gb, retained_gb_month),
    }


def durable_map(
    items: int,
    *,
    item_input_bytes: int,
    item_output_bytes: int,
    steps_per_item: int = 1,
    flat: bool = False,
    lam: LambdaAssumptions = LAMBDA,
) -> dict[str, Any]:
    """The same fan-out as one durable function calling `context.map(items, func)`, where
    `func` runs `steps_per_item` durable steps, per item. Operations, as counted from
    aws-durable-execution-sdk-python (operation/map.py, concurrency): the map is one CONTEXT
    operation (sub-type MAP); each item runs in its own child context (a CONTEXT operation,
    sub-type MAP_ITERATION) holding its steps (STEP operations) — 1 + items * (1 + steps).
    `flat` counts without the per-item context (the SDK's NestingType.FLAT): 1 + items * steps.
    Data written: the execution's input (the items), each step's result, each iteration's
    result (its context's checkpoint repeats it) and the map's result (every item's result);
    retained `durable_retention_days`. Lambda: one invocation runs the map through (no wait),
    `step_lambda_ms` + `durable_checkpoint_ms_per_step` per step, as the 3-step rows."""
    gb = lam.memory_mb / 1024
    operations = 1 + items * ((0 if flat else 1) + steps_per_item)
    written = (
        items * item_input_bytes
        + items * steps_per_item * item_output_bytes
        + (0 if flat else items * item_output_bytes)
        + items * item_output_bytes
    )
    written_gb = written / GIB
    retained_gb_month = written_gb * lam.durable_retention_days / 30
    duration_ms = items * steps_per_item * (lam.step_lambda_ms + lam.durable_checkpoint_ms_per_step)
    usd = durable_usd(operations, duration_ms * gb, written_gb, retained_gb_month)
    per_item = {name: value / items for name, value in usd.items()}
    return {
        "model": {
            "items": items,
            "durable_operations": operations,
            "operations_counted": "1 map context + per item (1 iteration context + "
            f"{steps_per_item} step)"
            if not flat
            else f"1 map context + {steps_per_item} step per item (flat nesting)",
            "data_written_bytes": written,
            "data_retained_gb_month": retained_gb_month,
            "billed_duration_ms": duration_ms,
            "retention_days": lam.durable_retention_days,
        },
        "usd_per_million_children": per_million(per_item),
        "sources": DURABLE_PRICE_SOURCES | {"operations": DURABLE_MAP_SOURCE},
    }


DURABLE_MAP_SOURCE = (
    "aws/aws-durable-execution-sdk-python: docs/core/map.md ('each item's processing is "
    "checkpointed independently'), src operation/map.py (MapExecutor: top_level_sub_type MAP, "
    "iteration_sub_type MAP_ITERATION) and its concurrency module (each item a CONTEXT "
    "operation, run_in_child_context, unless NestingType.FLAT); read through the code search, "
    "not run"
)
