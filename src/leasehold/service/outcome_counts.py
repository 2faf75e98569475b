"""The outcome metrics, counted in the table too (decision OS1): the summary's per-minute
counts of every outcome come from the very `count` calls that emit JobsSucceeded, JobsFailed,
JobsDead, JobsCancelled, JobsUnknown, JobsRetried and BudgetExhausted — each made right after
its outcome was written — so the console and CloudWatch count the same events."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import LeaseholdError
from leasehold.service.telemetry import Telemetry
from leasehold.store.counters import OutcomeCounters

logger = Logger(service="leasehold", child=True)

OUTCOME_METRICS = {
    "JobsSucceeded": "succeeded",
    "JobsFailed": "failed",
    "JobsDead": "dead",
    "JobsCancelled": "cancelled",
    "JobsUnknown": "unknown",
    "JobsRetried": "retried",
    "BudgetExhausted": "budget_exhausted",
}
"""Which metric counts which outcome counter."""


class CountedOutcomes:
    """A Telemetry that passes every count on to `inner` and adds each outcome metric to the
    table's per-minute counters as well: one UpdateItem (one write unit) per outcome, after the
    outcome's own write. Best effort: a counter the store refuses or does not take is let go
    with a warning in the log (`outcome counter not written`) — the outcome itself is already
    written, and CloudWatch's metric has it."""

    def __init__(self, inner: Telemetry, counters: OutcomeCounters, clock: Clock) -> None:
        self.inner = inner
        self._counters = counters
        self._clock = clock

    def count(self, name: str, value: int = 1) -> None:
        self.inner.count(name, value)
        outcome = OUTCOME_METRICS.get(name)
        if outcome is None or value <= 0:
            return
        try:
            self._counters.add(outcome, self._clock.now_ms(), value)
        except LeaseholdError as lost:
            logger.warning(
                "outcome counter not written", extra={"outcome": outcome, "why": str(lost)}
            )
