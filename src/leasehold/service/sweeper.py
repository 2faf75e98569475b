"""The sweeper: rescues expired leases, re-dispatches lost wake-ups, ends jobs past their
deadline, and moves delayed jobs into SQS's reach. Every write is conditional, so two sweepers
never collide.

Two passes, each with a rate (decisions SP1–SP4, service/passes.py): the **active** pass walks
the active jobs' shards (expired leases, lost wake-ups, queued jobs past their deadline) and the
**due** pass the due index's (delayed jobs coming within SQS's reach). Each reads at most its
rate × the sweep interval a run, goes on next run from where it stopped (a cursor item per pass
and segment), and can run as several segments over disjoint shards at once. An index read that
fails (throttled past botocore's retries) ends its pass only, counted as `unavailable`; a write
that fails ends the pass too. The next run goes on either way.

A third, the **blob** pass (service/blob_sweep.py, decisions LD10–LD12), walks the due marks of
jobs that have blobs in the data bucket: a gone job's prefix is deleted, an ended job's orphans."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import StaleEpochError, StoreUnavailableError
from leasehold.domain.job import Job
from leasehold.domain.policies import MAX_SQS_DELAY_SECONDS, RetryPolicy
from leasehold.domain.states import JobState
from leasehold.service.blob_sweep import BLOB_PASS, settle_mark
from leasehold.service.kinds import JobKind
from leasehold.service.outcomes import Outcomes
from leasehold.service.passes import Budget, Segment, Walk, run_budget
from leasehold.service.pausing import wake_resuming
from leasehold.service.telemetry import Telemetry
from leasehold.store import Stores
from leasehold.store.blob_marks import LIST_LIMIT, BlobMarks
from leasehold.store.history import entry
from leasehold.store.leases import ClaimRejection, reconcilable
from leasehold.store.passes import PassCursorStore

logger = Logger(service="leasehold", child=True)

SWEEPER = "sweeper"
REPORT_METRICS = {"due": "redispatched", "woken": "redispatched"}
"""Report keys counted under another key's metric (the dashboard's 50 metrics are full)."""
DUE_WINDOW_MS = MAX_SQS_DELAY_SECONDS * 1000
"""A delayed job gets its wake-up once it is due within this (SQS holds a message 15 min)."""
BLOB_RESERVE_MS = 20_000
"""The blob pass stops reading this much earlier than the others: the schedules' pass runs after
it in the same invocation, and a tick is due now while a blob can wait a run (LD11)."""
ACTIVE_PASS = "active"
DUE_PASS = "due"


@dataclass(frozen=True)
class SweepSettings:
    lost_wakeup_grace_ms: int
    active_rate: int = 10
    """Active jobs the active pass reads a second (rescues and lost wake-ups), all segments."""
    due_rate: int = 10
    """Delayed jobs the due pass reads a second, all segments."""
    schedule_rate: int = 10
    """Due schedules the schedule pass reads a second, all segments."""
    interval_seconds: int = 60
    """The sweep schedule's period: a run's budget is rate × this."""
    segments: int = 1
    """Concurrent sweeps over disjoint shards (decision SP3)."""
    blob_rate: int = 5
    """Due blob marks the blob pass reads a second, all segments (decision LD11)."""
    blob_page: int = LIST_LIMIT
    """Objects of one job one visit lists and deletes at most (one page a mark a run)."""

    def budget(self, rate: int) -> int:
        """Items one segment's run of a pass with this rate may read."""
        return run_budget(rate, self.interval_seconds, self.segments)


@dataclass
class SweepResult:
    report: Counter[str]
    """What was done: the metric-counted keys (`rescued`, `due`, `raced`, …)."""
    progress: Counter[str]
    """How far the passes went: items examined, laps finished, cursor saves lost (logged and
    returned by the handler, not metrics)."""


TimeLeft = Callable[[], int]


def sweep_passes(
    stores: Stores,
    clock: Clock,
    settings: SweepSettings,
    telemetry: Telemetry,
    kinds: dict[str, JobKind] | None = None,
    *,
    segment: Segment | None = None,
    time_left: TimeLeft | None = None,
) -> SweepResult:
    """One run: one segment's passes, or every segment's at once (`segment` None). A store that
    fails mid-pass ends that pass (counted); the next run goes on. Several segments run in
    threads (boto3's clients are thread-safe), each with its own cursors and report, merged at
    the end: the result holds the report and the passes' progress."""
    segments = (
        [segment] if segment else [Segment(k, settings.segments) for k in range(settings.segments)]
    )

    def one(part: Segment) -> SweepResult:
        return _sweep_segment(stores, clock, settings, telemetry, kinds or {}, part, time_left)

    if len(segments) == 1:
        results = [one(segments[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(segments)) as pool:
            results = list(pool.map(one, segments))
    report: Counter[str] = Counter()
    progress: Counter[str] = Counter()
    if segment is None or segment.index == 0:
        # a resumed kind's parked jobs the resume left to wake (PA4): one GetItem when none
        try:
            woken = wake_resuming(stores, clock)
            if woken:
                report["woken"] += woken
        except StoreUnavailableError as unavailable:
            _unavailable(report, "resume", unavailable)
    for result in results:
        report.update(result.report)
        progress.update(result.progress)
    for name, value in report.items():
        # A delayed job's first wake-up is a wake-up the sweeper sent, as a re-sent lost one
        # is: one dashboard metric for both (its 50 metrics are full); the log line tells them
        # apart.
        metric = REPORT_METRICS.get(name, name)
        telemetry.count(f"Sweeper{metric.capitalize()}", value)
    if report or progress:
        logger.info("sweep", extra={**report, **progress})
    return SweepResult(+report, +progress)


def _sweep_segment(
    stores: Stores,
    clock: Clock,
    settings: SweepSettings,
    telemetry: Telemetry,
    kinds: dict[str, JobKind],
    segment: Segment,
    time_left: TimeLeft | None,
) -> SweepResult:
    report: Counter[str] = Counter()
    progress: Counter[str] = Counter()
    now = clock.now_ms()
    outcomes = Outcomes(stores, clock, telemetry, RetryPolicy(0, 0), random.Random(), kinds)
    cursors = PassCursorStore(stores.table)
    shards = segment.shards(stores.jobs.shard_count)

    def walk(
        name: str, rate: int, reserve_ms: int = 0
    ) -> tuple[Walk[Any], Callable[[], None]] | None:
        """The pass's walk from its saved place, and how to save where it stopped; it reads no
        page with less than `reserve_ms` more than the usual margin left."""
        try:
            cursor = cursors.load(name, segment.index, segment.count)
        except StoreUnavailableError as unavailable:
            _unavailable(report, name, unavailable)
            return None
        run = Walk[Any](
            cursor, shards, Budget(settings.budget(rate), _reserved(time_left, reserve_ms))
        )

        def save() -> None:
            progress[f"{name}_examined"] += run.examined
            progress[f"{name}_laps"] += int(run.lap_finished)
            if not run.moved:
                return  # an idle pass: no write
            try:
                if not cursors.save(name, segment.index, cursor, now=clock.now_ms()):
                    progress["cursor_races"] += 1  # another sweep moved it: its place stands
            except StoreUnavailableError as unavailable:
                _unavailable(report, name, unavailable)

        return run, save

    active = walk(ACTIVE_PASS, settings.active_rate)
    if active is not None:
        run, save = active
        try:
            for job in run.items(
                lambda shard, after, limit: stores.jobs.active_page(shard, after=after, limit=limit)
            ):
                _settle_active(stores, outcomes, telemetry, settings, job, now, report)
        except StoreUnavailableError as unavailable:
            _unavailable(report, ACTIVE_PASS, unavailable)
        save()
    # Delayed jobs that come within SQS's reach get their wake-up (decision F1): each is moved
    # out of the due index with a wake-up delivered at its due time, never before.
    due = walk(DUE_PASS, settings.due_rate)
    if due is not None:
        run, save = due
        until = now + DUE_WINDOW_MS
        try:
            for job in run.items(
                lambda shard, after, limit: stores.jobs.due_page(
                    shard, until=until, after=after, limit=limit
                )
            ):
                if job.state is not JobState.QUEUED:
                    continue  # a claim moves a job it runs out of the index itself
                try:
                    stores.upkeep.bring_due(job, now=now)
                    report["due"] += 1
                except StaleEpochError:
                    report["raced"] += 1
        except StoreUnavailableError as unavailable:
            _unavailable(report, DUE_PASS, unavailable)
        save()
    # A job's blobs go with its item (decisions LD10-LD12): only marked jobs are read
    blobs = stores.table.blobs
    marks = blobs.marks if blobs is not None else None
    marked = (
        walk(BLOB_PASS, settings.blob_rate, BLOB_RESERVE_MS)
        if isinstance(marks, BlobMarks)
        else None
    )
    if blobs is not None and isinstance(marks, BlobMarks) and marked is not None:
        run, save = marked
        try:
            for mark in run.items(
                lambda shard, after, limit: marks.page(shard, until=now, after=after, limit=limit)
            ):
                settle_mark(blobs, marks, mark, now, settings.blob_page, report, progress)
        except StoreUnavailableError as unavailable:
            _unavailable(report, BLOB_PASS, unavailable)
        save()
    return SweepResult(report, progress)


def _reserved(time_left: TimeLeft | None, reserve_ms: int) -> TimeLeft | None:
    """The invocation's time left as a pass that must stop `reserve_ms` earlier sees it."""
    if time_left is None or not reserve_ms:
        return time_left
    clock = time_left
    return lambda: clock() - reserve_ms


def _unavailable(report: Counter[str], part: str, unavailable: StoreUnavailableError) -> None:
    """A pass the store cut short: counted; the other pass and the next run go on."""
    report["unavailable"] += 1
    logger.warning(
        "sweep cut a pass short: store unavailable",
        extra={"part": part, "detail": str(unavailable)},
    )


def _settle_active(
    stores: Stores,
    outcomes: Outcomes,
    telemetry: Telemetry,
    settings: SweepSettings,
    job: Job,
    now: int,
    report: Counter[str],
) -> None:
    """One active job: an expired lease rescued or ended, a queued job past its deadline ended,
    a lost wake-up sent again; anything else is left as it is."""
    if job.state is JobState.RUNNING:
        if (job.lease_expires_at or 0) >= now:
            return
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
        return
    if job.state is not JobState.QUEUED:
        return
    grace = settings.lost_wakeup_grace_ms
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
