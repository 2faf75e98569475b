"""Configuration is parsed once, at cold start, into one typed object per function. Nothing below
the handlers reads `os.environ`; a missing variable is an error, never a silent default name."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from leasehold.domain.errors import ValidationError
from leasehold.domain.tenancy import TenantPolicy, parse_tenant_list
from leasehold.store.queue import MAX_QUEUE_SHARDS
from leasehold.store.shards import MAX_SHARDS


class SettingsError(RuntimeError):
    pass


def _required(env: Mapping[str, object], name: str) -> str:
    value = env.get(name)
    if value is None or str(value) == "":
        raise SettingsError(f"environment variable {name} is not set")
    return str(value)  # moto may hand numbers back; Lambda always gives strings


def _optional(env: Mapping[str, object], name: str) -> str:
    """A variable that is off when unset (LEASEHOLD_FAULTS and LEASEHOLD_TRACES: test and local
    switches)."""
    value = env.get(name)
    return "" if value is None else str(value)


def _present(env: Mapping[str, object], name: str) -> str:
    """A variable that must be set but may be empty (an empty list is a choice)."""
    value = env.get(name)
    if value is None:
        raise SettingsError(f"environment variable {name} is not set")
    return str(value)


def _int(env: Mapping[str, object], name: str) -> int:
    raw = _required(env, name)
    try:
        return int(float(raw))
    except ValueError as exc:
        raise SettingsError(f"environment variable {name}={raw!r} is not a number") from exc


@dataclass(frozen=True)
class Tunings:
    """The numbers a deployment tunes (template.yaml's parameters), the same for the functions'
    `Settings` and a testbed's `TestbedSettings`: one list, so a new one is added once."""

    lease_seconds: int
    """How long a claim lasts before it must be renewed (a dead worker's job waits this long)."""
    backoff_base_ms: int
    """The retry backoff's base: attempt n waits up to min(cap, base·2^(n-1)) ms."""
    backoff_cap_ms: int
    """The retry backoff's cap."""
    user_concurrency_limit: int
    """Running jobs at once per tenant and user (0: no limit)."""
    slot_wait_seconds: int
    """How long a job held back by the per-user limit waits before it looks again."""
    sweep_active_rate: int
    """Active jobs a second the sweeper's active pass reads (rescues, lost wake-ups)."""
    sweep_due_rate: int
    """Delayed jobs a second the sweeper's due pass reads (brought within SQS's reach)."""
    sweep_schedule_rate: int
    """Due schedules a second the sweeper's schedule pass reads (each fired)."""
    sweep_segments: int
    """Concurrent sweeps over disjoint index shards (decision SP3)."""
    sweep_interval_seconds: int
    """The sweep schedule's period (`SweepSchedule`): a run's budget is each rate × this."""
    lost_wakeup_grace_seconds: int
    """A due queued job with no dispatch for this long gets a new wake-up from the sweeper."""
    worker_timeout_seconds: int
    """The worker invocation's length (on a testbed, on the testbed's clock)."""
    max_step_seconds: int
    """The longest `timeout_seconds` a step may declare (a longer one is refused at load)."""
    visibility_timeout_seconds: int
    """The work queue's visibility timeout: when a crashed invocation's messages show again."""


@dataclass(frozen=True)
class Settings(Tunings):
    """Everything the engine reads. Each handler builds it once (an application reads its own
    settings with `leasehold.setting`)."""

    table_name: str
    queue_url: str
    dlq_url: str
    default_max_attempts: int
    metrics_namespace: str
    kinds: str = ""
    """LEASEHOLD_KINDS: the modules whose kinds (and routes) this function loads."""
    faults: str = ""
    """LEASEHOLD_FAULTS: fault injection at the client boundary (store/faults.py); empty = off."""
    traces: str = ""
    """LEASEHOLD_TRACES: a file every span of this function is appended to, as OTLP JSON lines
    (`local up --traces FILE`, handlers/trace_file.py); empty = off."""
    xray_region: str = ""
    """AWS_REGION where X-Ray records this function (`xray_tracing`), else empty: the operator
    view links a job's trace to X-Ray's console there (service/trace_links.py, decision TR7)."""
    data_bucket: str = ""
    """DATA_BUCKET: where values too large for the job item live (store/blobs.py, DESIGN §20);
    empty (an engine built for a unit test): values stay inline, within the item's budget."""
    local_uploads: str = ""
    """LEASEHOLD_LOCAL_UPLOADS: the key the local stack's upload route checks its tokens with;
    when set, `POST /uploads` answers that route instead of an S3 presigned URL (LD7)."""
    high_queue_url: str = ""
    """HIGH_QUEUE_URL: the high-priority work queue (decision F4); empty: high jobs go to
    QUEUE_URL."""
    low_queue_url: str = ""
    """LOW_QUEUE_URL: the low-priority work queue; empty: low jobs go to QUEUE_URL."""
    queue_shard_urls: tuple[str, ...] = ()
    """QUEUE_SHARD_URLS: the normal queue's other shards, comma-separated (template
    `QueueShards`, decision QS1); empty: QUEUE_URL alone."""
    tenancy: TenantPolicy = TenantPolicy()
    """HIGH_PRIORITY_TENANTS, SCHEDULES_PER_OWNER, TENANT_SUBMIT_RATE: what one tenant may take
    from the others (decisions Q1–Q3)."""
    index_shards: int = 1
    """INDEX_SHARDS (`IndexShards`): how many partition keys each `by_state` key is spread over
    (decision SH1); 1 is the unsharded table. Raise it with a deploy; never lower it (SH3)."""

    def priority_urls(self) -> dict[str, str]:
        """The queues of the priorities other than normal that this deployment has."""
        urls = {"high": self.high_queue_url, "low": self.low_queue_url}
        return {priority: url for priority, url in urls.items() if url}

    def check(self) -> Settings:
        """The arithmetic that keeps a Lambda invocation, a lease and the queue consistent
        (docs/architecture.md rule 7): a worker claims only when a lease's worth of work fits in
        what remains of
        its invocation, so the timeout must exceed the lease; a step must fit in an invocation;
        SQS must not redeliver while an invocation may still be working (6 × timeout)."""
        margin = safety_margin_seconds(self.lease_seconds)
        problems = []
        if self.worker_timeout_seconds < self.lease_seconds + margin:
            problems.append(
                f"WORKER_TIMEOUT_SECONDS={self.worker_timeout_seconds} must be at least "
                f"LEASE_SECONDS + {margin} ({self.lease_seconds + margin})"
            )
        if self.worker_timeout_seconds < self.max_step_seconds + margin:
            problems.append(
                f"WORKER_TIMEOUT_SECONDS={self.worker_timeout_seconds} must be at least "
                f"MAX_STEP_SECONDS + {margin} ({self.max_step_seconds + margin})"
            )
        if self.visibility_timeout_seconds < 6 * self.worker_timeout_seconds:
            problems.append(
                f"VISIBILITY_TIMEOUT_SECONDS={self.visibility_timeout_seconds} must be at least "
                f"6 x WORKER_TIMEOUT_SECONDS ({6 * self.worker_timeout_seconds})"
            )
        shards = (self.queue_url, *self.queue_shard_urls)
        if len(shards) > MAX_QUEUE_SHARDS or len(set(shards)) != len(shards):
            problems.append(
                f"QUEUE_SHARD_URLS: {len(shards)} normal queues with QUEUE_URL; at most "
                f"{MAX_QUEUE_SHARDS}, each a different queue"
            )
        if not 1 <= self.index_shards <= MAX_SHARDS:
            problems.append(f"INDEX_SHARDS={self.index_shards} must be 1 to {MAX_SHARDS}")
        problems.extend(self._sweep_problems())
        if problems:
            raise SettingsError("; ".join(problems))
        return self

    def _sweep_problems(self) -> list[str]:
        """The sweeper's passes: rates of at least one item a second (a pass that reads nothing
        never rescues), at most MAX_SWEEP_RATE; 1 to MAX_SWEEP_SEGMENTS segments."""
        problems = [
            f"{variable}={rate} must be between 1 and {MAX_SWEEP_RATE} (items a second)"
            for variable, rate in (
                ("SWEEP_ACTIVE_RATE", self.sweep_active_rate),
                ("SWEEP_DUE_RATE", self.sweep_due_rate),
                ("SWEEP_SCHEDULE_RATE", self.sweep_schedule_rate),
            )
            if not 1 <= rate <= MAX_SWEEP_RATE
        ]
        if not 1 <= self.sweep_segments <= MAX_SWEEP_SEGMENTS:
            problems.append(
                f"SWEEP_SEGMENTS={self.sweep_segments} must be between 1 and {MAX_SWEEP_SEGMENTS}"
            )
        if self.sweep_interval_seconds < 60:
            problems.append(
                f"the sweep interval ({self.sweep_interval_seconds} s) must be at least 60 s"
            )
        return problems

    @staticmethod
    def from_env(env: Mapping[str, object] | None = None) -> Settings:
        env = os.environ if env is None else env
        return Settings(
            table_name=_required(env, "TABLE_NAME"),
            queue_url=_required(env, "QUEUE_URL"),
            dlq_url=_required(env, "DLQ_URL"),
            **asdict(_tunings(env)),
            default_max_attempts=_int(env, "MAX_ATTEMPTS"),
            metrics_namespace=_required(env, "POWERTOOLS_METRICS_NAMESPACE"),
            kinds=_required(env, "LEASEHOLD_KINDS"),
            faults=_optional(env, "LEASEHOLD_FAULTS"),
            traces=_optional(env, "LEASEHOLD_TRACES"),
            xray_region=_optional(env, "AWS_REGION") if xray_tracing(env) else "",
            data_bucket=_required(env, "DATA_BUCKET"),
            local_uploads=_optional(env, "LEASEHOLD_LOCAL_UPLOADS"),
            high_queue_url=_required(env, "HIGH_QUEUE_URL"),
            low_queue_url=_required(env, "LOW_QUEUE_URL"),
            queue_shard_urls=_url_list(_present(env, "QUEUE_SHARD_URLS")),
            tenancy=_tenancy(env),
            index_shards=_int(env, "INDEX_SHARDS"),
        ).check()


def _tunings(env: Mapping[str, object]) -> Tunings:
    """The `Tunings`, each from the variable of its name in capitals (`lease_seconds`:
    LEASE_SECONDS), but the sweep interval, which is SWEEP_SCHEDULE's rate."""
    return Tunings(**{field.name: _tuning(env, field.name) for field in fields(Tunings)})


def _tuning(env: Mapping[str, object], name: str) -> int:
    if name == "sweep_interval_seconds":
        return sweep_interval_seconds(_required(env, "SWEEP_SCHEDULE"))
    return _int(env, name.upper())


def _url_list(raw: str) -> tuple[str, ...]:
    return tuple(url.strip() for url in raw.split(",") if url.strip())


def _tenancy(env: Mapping[str, object]) -> TenantPolicy:
    raw = _present(env, "HIGH_PRIORITY_TENANTS")
    try:
        return TenantPolicy(
            high_priority_tenants=parse_tenant_list(raw),
            schedules_per_owner=_int(env, "SCHEDULES_PER_OWNER"),
            submit_rate=_int(env, "TENANT_SUBMIT_RATE"),
        )
    except ValidationError as invalid:
        raise SettingsError(f"tenant limits: {invalid}") from invalid


MAX_SWEEP_RATE = 100_000
"""The highest rate a pass may be given (the template's MaxValue)."""
MAX_SWEEP_SEGMENTS = 64
"""The most concurrent sweeps (threads of one invocation; the template's MaxValue)."""
_RATE_UNITS = {
    "minute": 60,
    "minutes": 60,
    "hour": 3600,
    "hours": 3600,
    "day": 86400,
    "days": 86400,
}


def sweep_interval_seconds(schedule: str) -> int:
    """The period of the sweeper's schedule, `rate(N unit)` as EventBridge writes it; a cron
    expression has no one period to budget a run by, and is refused."""
    match = re.fullmatch(r"rate\((\d+) (minutes?|hours?|days?)\)", schedule.strip())
    if match is None:
        raise SettingsError(
            f"SWEEP_SCHEDULE={schedule!r} must be rate(N minute[s]|hour[s]|day[s]): a run's "
            "budget is each pass's rate times its period"
        )
    return int(match.group(1)) * _RATE_UNITS[match.group(2)]


def xray_tracing(env: Mapping[str, object] | None = None) -> bool:
    """Whether Powertools' Tracer records this function on X-Ray: in Lambda (which sets
    LAMBDA_TASK_ROOT) with POWERTOOLS_TRACE_DISABLED false (template `Tracing: Active`, decision
    TR6). Elsewhere the Tracer would disable itself, after ~150 ms of the X-Ray SDK's import."""
    env = os.environ if env is None else env
    disabled = _optional(env, "POWERTOOLS_TRACE_DISABLED").lower() in ("1", "true", "yes", "on")
    return bool(_optional(env, "LAMBDA_TASK_ROOT")) and not disabled


def safety_margin_seconds(lease_seconds: int) -> int:
    """How much of a lease (or an invocation) is kept back: no step starts inside it."""
    return max(1, lease_seconds // 10)


ENV_VARIABLES = (
    "LEASEHOLD_KINDS",
    "TABLE_NAME",
    "QUEUE_URL",
    "HIGH_QUEUE_URL",
    "LOW_QUEUE_URL",
    "QUEUE_SHARD_URLS",
    "DLQ_URL",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "BACKOFF_BASE_MS",
    "BACKOFF_CAP_MS",
    "USER_CONCURRENCY_LIMIT",
    "SLOT_WAIT_SECONDS",
    "SWEEP_ACTIVE_RATE",
    "SWEEP_DUE_RATE",
    "SWEEP_SCHEDULE_RATE",
    "SWEEP_SEGMENTS",
    "SWEEP_SCHEDULE",
    "LOST_WAKEUP_GRACE_SECONDS",
    "WORKER_TIMEOUT_SECONDS",
    "MAX_STEP_SECONDS",
    "VISIBILITY_TIMEOUT_SECONDS",
    "POWERTOOLS_METRICS_NAMESPACE",
    "HIGH_PRIORITY_TENANTS",
    "SCHEDULES_PER_OWNER",
    "TENANT_SUBMIT_RATE",
    "INDEX_SHARDS",
    "DATA_BUCKET",
    "POWERTOOLS_TRACE_DISABLED",
)
"""What `Settings.from_env` requires (and `xray_tracing` reads): a test checks the template sets
each for every function
(and every variable a module of `LEASEHOLD_KINDS` reads: the reading list's are in
`leasehold_apps/reading_list/settings.py`, the document agent's in
`leasehold_apps/doc_agent/settings.py`)."""

OPTIONAL_ENV_VARIABLES = ("LEASEHOLD_FAULTS", "LEASEHOLD_TRACES", "LEASEHOLD_LOCAL_UPLOADS")
"""Read when set, never set by the template: switches for tests and the local stack."""
