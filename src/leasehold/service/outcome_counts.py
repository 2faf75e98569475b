"""The outcome metrics, counted in the table too (decision OS1): the summary's per-minute
counts of every outcome come from the very `count` calls that emit JobsSucceeded, JobsFailed,
JobsDead, JobsCancelled, JobsUnknown, JobsRetried and BudgetExhausted — each made right after
its outcome was written — so the console and CloudWatch count the same events."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import LeaseholdError
from leasehold.service.telemetry import Telemetry
from leasehold.store.counters import OutcomeCounters, minute_of

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
    outcome's own write — or, inside `batched()` (a worker batch), one at the block's end. Best
    effort: a counter the store refuses or does not take is let go with a warning in the log
    (`outcome counter not written`) — the outcome itself is already written, and CloudWatch's
    metric has it."""

    def __init__(self, inner: Telemetry, counters: OutcomeCounters, clock: Clock) -> None:
        self.inner = inner
        self._counters = counters
        self._clock = clock
        self._batch = threading.local()  # a worker batch's counts, per thread (decision OS1)

    def count(self, name: str, value: int = 1) -> None:
        self.inner.count(name, value)
        outcome = OUTCOME_METRICS.get(name)
        if outcome is None or value <= 0:
            return
        now = self._clock.now_ms()
        pending: Counter[tuple[int, str]] | None = getattr(self._batch, "pending", None)
        if pending is not None:
            pending[(minute_of(now), outcome)] += value
            return
        self._write(now, {outcome: value})

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Hold this thread's outcome counts until the block ends, then write them: one
        UpdateItem per minute the block's outcomes fell in (a worker batch of 10 wake-ups: one
        write unit, not ten). Lost with the process if it dies inside the block — a chart a few
        short, never a job."""
        if getattr(self._batch, "pending", None) is not None:
            yield  # already inside a batch
            return
        self._batch.pending = Counter()
        try:
            yield
        finally:
            pending: Counter[tuple[int, str]] = self._batch.pending
            self._batch.pending = None
            by_minute: dict[int, dict[str, int]] = {}
            for (minute, outcome), n in pending.items():
                by_minute.setdefault(minute, {})[outcome] = n
            for minute, counts in sorted(by_minute.items()):
                self._write(minute, counts)

    def _write(self, at_ms: int, counts: dict[str, int]) -> None:
        try:
            self._counters.add_many(at_ms, counts)
        except LeaseholdError as lost:
            logger.warning(
                "outcome counter not written", extra={"outcomes": counts, "why": str(lost)}
            )


def batched(telemetry: Telemetry) -> AbstractContextManager[None]:
    """`telemetry`'s outcome counts held to the end of the block (CountedOutcomes.batched), or
    nothing held (any other Telemetry)."""
    if isinstance(telemetry, CountedOutcomes):
        return telemetry.batched()
    return nullcontext()
