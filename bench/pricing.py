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
    "lambda_request": 0.20 / 1e6,
    "lambda_arm64_gb_second": 0.0000133334,
    "http_api_request": 1.00 / 1e6,  # first 300 M a month
    "cloudwatch_logs_ingested_gb": 0.50,
    "cloudwatch_logs_stored_gb_month": 0.03,
    "step_functions_standard_transition": 0.025 / 1000,
    "step_functions_express_request": 1.00 / 1e6,
    "step_functions_express_gb_second": 0.00001667,  # $0.06 per GB-hour, first 1,000 GB-hours
}

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
    }


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
