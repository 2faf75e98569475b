"""The sweeper: rescues expired leases, re-dispatches lost wake-ups, ends jobs past their
deadline. Bounded work per run; every write is conditional, so two sweepers never collide.

A pass has two parts, each fed by one read of the state index: the active jobs (expired leases,
lost wake-ups, queued jobs past their deadline) and the due index (delayed jobs coming within
SQS's reach). An index read that fails (throttled past botocore's retries) skips its part only,
counted as `unavailable`; a write that fails ends the pass. The next run goes on either way."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import StaleEpochError, StoreUnavailableError
from leasehold.domain.job import Job
from leasehold.domain.policies import MAX_SQS_DELAY_SECONDS, RetryPolicy
from leasehold.domain.states import JobState
from leasehold.service.kinds import JobKind
from leasehold.service.outcomes import Outcomes
from leasehold.service.telemetry import Telemetry
from leasehold.store import Stores
from leasehold.store.history import entry
from leasehold.store.leases import ClaimRejection, reconcilable

logger = Logger(service="leasehold", child=True)

SWEEPER = "sweeper"
REPORT_METRICS = {"due": "redispatched"}
"""Report keys counted under another key's metric (the dashboard's 50 metrics are full)."""
DUE_WINDOW_MS = MAX_SQS_DELAY_SECONDS * 1000
"""A delayed job gets its wake-up once it is due within this (SQS holds a message 15 min)."""


@dataclass(frozen=True)
class SweepSettings:
    batch_limit: int
    lost_wakeup_grace_ms: int


def sweep(
    stores: Stores,
    clock: Clock,
    settings: SweepSettings,
    telemetry: Telemetry,
    kinds: dict[str, JobKind] | None = None,
) -> dict[str, int]:
    """One pass. A store that fails mid-pass ends the pass (counted); the next run goes on."""
    report: Counter[str] = Counter()
    try:
        _sweep(stores, clock, settings, telemetry, report, kinds or {})
    except StoreUnavailableError as unavailable:
        report["unavailable"] += 1
        logger.warning("sweep cut short: store unavailable", extra={"detail": str(unavailable)})
    for name, value in report.items():
        # A delayed job's first wake-up is a wake-up the sweeper sent, as a re-sent lost one
        # is: one dashboard metric for both (its 50 metrics are full); the log line tells them
        # apart.
        metric = REPORT_METRICS.get(name, name)
        telemetry.count(f"Sweeper{metric.capitalize()}", value)
    if report:
        logger.info("sweep", extra=dict(report))
    return dict(report)


def _index_read(report: Counter[str], part: str, read: Callable[[], list[Job]]) -> list[Job]:
    """One part's jobs from the state index; none when the store does not answer (the part is
    skipped, counted, and the other part still runs)."""
    try:
        return read()
    except StoreUnavailableError as unavailable:
        report["unavailable"] += 1
        logger.warning(
            "sweep skipped a part: store unavailable",
            extra={"part": part, "detail": str(unavailable)},
        )
        return []


def _sweep(
    stores: Stores,
    clock: Clock,
    settings: SweepSettings,
    telemetry: Telemetry,
    report: Counter[str],
    kinds: dict[str, JobKind],
) -> None:
    now = clock.now_ms()
    outcomes = Outcomes(stores, clock, telemetry, RetryPolicy(0, 0), random.Random(), kinds)
    active = _index_read(
        report, "active", lambda: stores.jobs.list_active(limit=settings.batch_limit)
    )
    for job in (j for j in active if j.state is JobState.RUNNING):
        if (job.lease_expires_at or 0) >= now:
            continue
        if job.effect_intent and not reconcilable(job):
            reason, counted = ClaimRejection.EFFECT_OPEN, "unknown"
        elif job.deadline_at <= now:
            reason, counted = ClaimRejection.DEADLINE, "dead"
        elif job.attempts >= job.max_attempts:
            reason, counted = ClaimRejection.EXHAUSTED, "dead"
        else:
            reason, counted = "rescue", "rescued"
        if job.effect_intent and reason != "rescue":
            counted = "unknown"  # an operation still open never ends `dead` (outcomes.py)
        try:
            outcomes.settle_abandoned(job, reason, now, by=SWEEPER)
            report[counted] += 1
        except StaleEpochError:
            report["raced"] += 1
    # Delayed jobs that come within SQS's reach get their wake-up (decision F1): each is moved
    # out of the due index with a wake-up delivered at its due time, never before.
    due = _index_read(
        report,
        "due",
        lambda: stores.jobs.list_due(until=now + DUE_WINDOW_MS, limit=settings.batch_limit),
    )
    for job in due:
        if job.state is not JobState.QUEUED:
            continue  # a claim moves a job it runs out of the index itself
        try:
            stores.upkeep.bring_due(job, now=now)
            report["due"] += 1
        except StaleEpochError:
            report["raced"] += 1
    grace = settings.lost_wakeup_grace_ms
    for job in (j for j in active if j.state is JobState.QUEUED):
        try:
            if job.deadline_at <= now:
                stores.upkeep.expire_queued(
                    job,
                    now=now,
                    history=entry(
                        "deadline",
                        at=now,
                        state=JobState.DEAD.value,
                        reason="deadline_exceeded",
                        by=SWEEPER,
                    ),
                )
                telemetry.count("JobsDead")
                report["dead"] += 1
            elif (job.next_attempt_at or 0) <= now - grace and (
                job.last_dispatch_at or 0
            ) <= now - grace:
                stores.upkeep.redispatch(job, now=now)
                report["redispatched"] += 1
        except StaleEpochError:
            report["raced"] += 1
