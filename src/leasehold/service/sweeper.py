"""The sweeper: rescues expired leases, re-dispatches lost wake-ups, ends jobs past their
deadline. Bounded work per run; every write is conditional, so two sweepers never collide."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import StaleEpochError
from leasehold.domain.states import JobState, StopReason
from leasehold.service.telemetry import Telemetry
from leasehold.service.worker import effect_uncertain_error
from leasehold.store.jobs import JobStore

logger = Logger(service="leasehold", child=True)


@dataclass(frozen=True)
class SweepSettings:
    batch_limit: int
    lost_wakeup_grace_ms: int


def sweep(
    store: JobStore, clock: Clock, settings: SweepSettings, telemetry: Telemetry
) -> dict[str, int]:
    now = clock.now_ms()
    report: Counter[str] = Counter()
    running, _ = store.list_by_state(JobState.RUNNING, limit=settings.batch_limit)
    for job in running:
        if (job.lease_expires_at or 0) >= now:
            continue
        try:
            if job.effect_intent:
                store.settle_expired_lease(
                    job,
                    JobState.UNKNOWN,
                    now=now,
                    stop_reason=StopReason.EFFECT_UNCERTAIN,
                    error=effect_uncertain_error(job),
                )
                report["unknown"] += 1
            elif job.deadline_at <= now or job.attempts >= job.max_attempts:
                deadline = job.deadline_at <= now
                reason = StopReason.DEADLINE_EXCEEDED if deadline else StopReason.ATTEMPTS_EXHAUSTED
                store.settle_expired_lease(
                    job,
                    JobState.DEAD,
                    now=now,
                    stop_reason=reason,
                    error={"code": reason.value, "message": "lease expired on the last chance"},
                )
                report["dead"] += 1
            else:
                store.settle_expired_lease(job, JobState.QUEUED, now=now)
                report["rescued"] += 1
        except StaleEpochError:
            report["raced"] += 1
    queued, _ = store.list_by_state(JobState.QUEUED, limit=settings.batch_limit)
    grace = settings.lost_wakeup_grace_ms
    for job in queued:
        try:
            if job.deadline_at <= now:
                store.expire_queued(job, now=now)
                report["dead"] += 1
            elif (job.next_attempt_at or 0) <= now - grace and (
                job.last_dispatch_at or 0
            ) <= now - grace:
                store.redispatch(job, now=now)
                report["redispatched"] += 1
        except StaleEpochError:
            report["raced"] += 1
    for name, value in report.items():
        telemetry.count(f"Sweeper{name.capitalize()}", value)
    # The outcome metrics count a job however it got there (worker or sweeper).
    if report["unknown"]:
        telemetry.count("JobsUnknown", report["unknown"])
    if report["dead"]:
        telemetry.count("JobsDead", report["dead"])
    if report:
        logger.info("sweep", extra=dict(report))
    return dict(report)
