"""Configuration is parsed once, at cold start, into one typed object per function. Nothing below
the handlers reads `os.environ`; a missing variable is an error, never a silent default name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class SettingsError(RuntimeError):
    pass


def _required(env: Mapping[str, object], name: str) -> str:
    value = env.get(name)
    if value is None or str(value) == "":
        raise SettingsError(f"environment variable {name} is not set")
    return str(value)  # moto may hand numbers back; Lambda always gives strings


def _int(env: Mapping[str, object], name: str) -> int:
    raw = _required(env, name)
    try:
        return int(float(raw))
    except ValueError as exc:
        raise SettingsError(f"environment variable {name}={raw!r} is not a number") from exc


@dataclass(frozen=True)
class Settings:
    """Everything any leasehold function reads. Each handler builds it once."""

    table_name: str
    queue_url: str
    dlq_url: str
    lease_seconds: int
    default_max_attempts: int
    backoff_base_ms: int
    backoff_cap_ms: int
    user_concurrency_limit: int
    slot_wait_seconds: int
    sweep_batch: int
    lost_wakeup_grace_seconds: int
    metrics_namespace: str

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
            metrics_namespace=_required(env, "POWERTOOLS_METRICS_NAMESPACE"),
        )


ENV_VARIABLES = (
    "TABLE_NAME",
    "QUEUE_URL",
    "DLQ_URL",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "BACKOFF_BASE_MS",
    "BACKOFF_CAP_MS",
    "USER_CONCURRENCY_LIMIT",
    "SLOT_WAIT_SECONDS",
    "SWEEP_BATCH",
    "LOST_WAKEUP_GRACE_SECONDS",
    "POWERTOOLS_METRICS_NAMESPACE",
)
"""What `Settings.from_env` reads: a test checks the template sets each for every function."""
