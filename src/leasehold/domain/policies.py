"""Policies: backoff, leases, limits. Pure functions over numbers."""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_PAYLOAD_BYTES = 16 * 1024
MAX_RESULT_BYTES = 16 * 1024
MAX_STEPS = 20
MAX_ATTEMPTS_LIMIT = 10
MAX_DEADLINE_SECONDS = 24 * 3600
DEFAULT_DEADLINE_SECONDS = 3600
DEFAULT_MAX_ATTEMPTS = 3
MAX_SQS_DELAY_SECONDS = 900
MAX_DELAY_SECONDS = 365 * 24 * 3600
"""`run_at` / `delay_seconds` at most this far ahead (decision F1)."""


def in_due_index(created_at: int, due_at: int) -> bool:
    """Whether a new job waits in the due index (decision F1): due further ahead than SQS can
    hold a wake-up, it comes due through the sweeper instead of an outbox item."""
    return due_at - created_at > MAX_SQS_DELAY_SECONDS * 1000


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, capped (AWS Architecture Blog, 'Exponential Backoff
    And Jitter'): spreads retries so a burst of failures does not return as a burst."""

    base_ms: int
    cap_ms: int

    def delay_ms(self, attempt: int, rng: random.Random | None = None) -> int:
        """Delay after try `attempt` (1-based) failed: uniform in [0, min(cap, base·2^(n-1))]."""
        ceiling = min(self.cap_ms, self.base_ms * (2 ** max(0, attempt - 1)))
        return int((rng or random).uniform(0, ceiling))


@dataclass(frozen=True)
class LeasePolicy:
    """A lease far longer than clock skew; no step starts inside the safety margin."""

    lease_ms: int
    safety_margin_ms: int

    def may_start_step(self, now_ms: int, lease_expires_at: int, step_duration_ms: int = 0) -> bool:
        return now_ms + step_duration_ms + self.safety_margin_ms < lease_expires_at


def sqs_delay_seconds(now_ms: int, deliver_at_ms: int) -> int:
    """DelaySeconds for a wake-up due at `deliver_at_ms`; SQS caps it at 900 s (a worker then
    re-delays the message)."""
    remaining = max(0, deliver_at_ms - now_ms)
    return min(MAX_SQS_DELAY_SECONDS, (remaining + 999) // 1000)
