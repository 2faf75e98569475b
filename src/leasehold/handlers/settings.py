"""Configuration is parsed once, at cold start, into one typed object per function. Nothing below
the handlers reads `os.environ`; a missing variable is an error, never a silent default name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from leasehold.domain.errors import ValidationError
from leasehold.domain.tenancy import TenantPolicy, parse_tenant_list
from leasehold.store.shards import MAX_SHARDS


class SettingsError(RuntimeError):
    pass


def _required(env: Mapping[str, object], name: str) -> str:
    value = env.get(name)
    if value is None or str(value) == "":
        raise SettingsError(f"environment variable {name} is not set")
    return str(value)  # moto may hand numbers back; Lambda always gives strings


def _optional(env: Mapping[str, object], name: str) -> str:
    """A variable that is off when unset (only LEASEHOLD_FAULTS, a test and local switch)."""
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
    sweep_batch: int
    """Jobs the sweeper examines in one pass."""
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
    high_queue_url: str = ""
    """HIGH_QUEUE_URL: the high-priority work queue (decision F4); empty: high jobs go to
    QUEUE_URL."""
    low_queue_url: str = ""
    """LOW_QUEUE_URL: the low-priority work queue; empty: low jobs go to QUEUE_URL."""
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
        if not 1 <= self.index_shards <= MAX_SHARDS:
            problems.append(f"INDEX_SHARDS={self.index_shards} must be 1 to {MAX_SHARDS}")
        if problems:
            raise SettingsError("; ".join(problems))
        return self

    @staticmethod
    def from_env(env: Mapping[str, object] | None = None) -> Settings:
        env = os.environ if env is None else env
        return Settings(
            table_name=_required(env, "TABLE_NAME"),
            queue_url=_required(env, "QUEUE_URL"),
            dlq_url=_required(env, "DLQ_URL"),
            lease_seconds=_int(env, "LEASE_SECONDS"),
            default_max_attempts=_int(env, "MAX_ATTEMPTS"),
            backoff_base_ms=_int(env, "BACKOFF_BASE_MS"),
            backoff_cap_ms=_int(env, "BACKOFF_CAP_MS"),
            user_concurrency_limit=_int(env, "USER_CONCURRENCY_LIMIT"),
            slot_wait_seconds=_int(env, "SLOT_WAIT_SECONDS"),
            sweep_batch=_int(env, "SWEEP_BATCH"),
            lost_wakeup_grace_seconds=_int(env, "LOST_WAKEUP_GRACE_SECONDS"),
            worker_timeout_seconds=_int(env, "WORKER_TIMEOUT_SECONDS"),
            max_step_seconds=_int(env, "MAX_STEP_SECONDS"),
            visibility_timeout_seconds=_int(env, "VISIBILITY_TIMEOUT_SECONDS"),
            metrics_namespace=_required(env, "POWERTOOLS_METRICS_NAMESPACE"),
            kinds=_required(env, "LEASEHOLD_KINDS"),
            faults=_optional(env, "LEASEHOLD_FAULTS"),
            high_queue_url=_required(env, "HIGH_QUEUE_URL"),
            low_queue_url=_required(env, "LOW_QUEUE_URL"),
            tenancy=_tenancy(env),
            index_shards=_int(env, "INDEX_SHARDS"),
        ).check()


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


def safety_margin_seconds(lease_seconds: int) -> int:
    """How much of a lease (or an invocation) is kept back: no step starts inside it."""
    return max(1, lease_seconds // 10)


ENV_VARIABLES = (
    "LEASEHOLD_KINDS",
    "TABLE_NAME",
    "QUEUE_URL",
    "HIGH_QUEUE_URL",
    "LOW_QUEUE_URL",
    "DLQ_URL",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "BACKOFF_BASE_MS",
    "BACKOFF_CAP_MS",
    "USER_CONCURRENCY_LIMIT",
    "SLOT_WAIT_SECONDS",
    "SWEEP_BATCH",
    "LOST_WAKEUP_GRACE_SECONDS",
    "WORKER_TIMEOUT_SECONDS",
    "MAX_STEP_SECONDS",
    "VISIBILITY_TIMEOUT_SECONDS",
    "POWERTOOLS_METRICS_NAMESPACE",
    "HIGH_PRIORITY_TENANTS",
    "SCHEDULES_PER_OWNER",
    "TENANT_SUBMIT_RATE",
    "INDEX_SHARDS",
)
"""What `Settings.from_env` requires: a test checks the template sets each for every function
(and every variable a module of `LEASEHOLD_KINDS` reads: the reading list's are in
`leasehold_apps/reading_list/settings.py`, the document agent's in
`leasehold_apps/doc_agent/settings.py`)."""

OPTIONAL_ENV_VARIABLES = ("LEASEHOLD_FAULTS",)
"""Read when set, never set by the template: switches for tests and the local stack."""
