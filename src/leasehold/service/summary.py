"""`GET /ops/summary`, the operator's overview (OpsService.summary): what is in each state now,
and every outcome of the last hour, minute by minute — at a bounded cost whatever the table
holds, read concurrently (decisions SZ5, OS1–OS3; bench/ops_summary.py measures it).

- Jobs by state: one `Select=COUNT` Query per index shard of each `by_state` key (the keys-only
  index: no job item read to count), each count capped at COUNT_CAP; the due index's keys are
  read instead of counted (the same read units), each counted under the wait its sort key names
  (decision OS6).
- Outcomes: the per-minute outcome counters (store/counters.py), written with every outcome
  metric; one Query per shard. No job is read to count them.
- The oldest active jobs: a sample of ACTIVE_SAMPLE, read eventually consistent: the oldest
  queued job, what queued jobs wait for, and queued told apart from running while the sample
  holds every active job.

Every shard's Query runs on a pool of SUMMARY_THREADS threads, so the summary's latency is a few
round trips per shard in SUMMARY_THREADS, not one per request."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import NotRequired, TypedDict, TypeVar

from leasehold.domain.clock import Clock, iso
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.service.view import waiting_for
from leasehold.store import Stores
from leasehold.store.counters import MINUTE_MS, OUTCOMES, OutcomeCounters, minute_of, per_minute
from leasehold.store.items import DUE_PARTITION, due_wait_of
from leasehold.store.queue import QueueStats, WakeupQueue
from leasehold.store.sharded import Fan, tally_entries

COUNT_CAP = 1000
"""Each of the summary's state counts stops here (shown as "1,000+"): at most this many index
entries read (and one per shard more), ≈ 13 read units, whatever the table holds."""
ACTIVE_SAMPLE = 25
"""The oldest active jobs the summary reads (eventually consistent): the oldest queued job, the
oldest of each kind, what queued jobs wait for, and queued told apart from running while there
are no more than this."""
COUNTED_APART = (JobState.WAITING_APPROVAL, JobState.FAILED, JobState.DEAD, JobState.UNKNOWN)
"""The states the index holds each in a partition of its own: counted without reading a job."""
HOUR_MINUTES = 60
CHART_SERIES = ("succeeded", "failed", "dead", "cancelled", "unknown", "retried")
"""What the last hour's chart counts, per minute: every outcome an attempt, the sweeper or a
cancel ends a job in, and the attempts that ended in a retry (from the outcome counters)."""
SUMMARY_THREADS = 8
"""The summary's requests in flight at once: below botocore's 10 connections per client."""

_T = TypeVar("_T")


class OldestJob(TypedDict):
    """A queued job as the summary shows it: the oldest queued one, and the oldest of each kind."""

    job_id: str
    kind: str
    tenant: str
    age_seconds: float
    attempts: int
    last_error: dict[str, str] | None
    next_attempt_at: str | None
    waiting_for: dict[str, object] | None


class LastHour(TypedDict):
    """The last hour's chart: per minute (oldest first, the current minute last), its start and
    each series' count; `scope` says where the counts come from."""

    bucket_seconds: int
    series: list[str]
    buckets: list[dict[str, str | int]]
    scope: NotRequired[str]


class OpsSummary(TypedDict):
    """`GET /ops/summary`: the overview (OpsService.summary)."""

    counts: dict[str, int | None]
    counts_capped: list[str]
    counts_note: str
    queue_depth: int | None
    delayed: int
    queued_waiting: dict[str, int]
    queued_waiting_scope: str
    oldest_queued: OldestJob | None
    oldest_queued_by_kind: dict[str, OldestJob]
    oldest_scope: str
    sqs: dict[str, int]
    outcomes_last_hour: dict[str, int]
    totals: dict[str, int | str]
    last_hour: LastHour


def _oldest(job: Job, now: int) -> OldestJob:
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "tenant": job.owner.tenant,
        "age_seconds": round((now - job.created_at) / 1000, 1),
        "attempts": job.attempts,
        "last_error": job.error,
        "next_attempt_at": iso(job.next_attempt_at),
        "waiting_for": waiting_for(job, now),
    }


def last_hour(counters: OutcomeCounters, now: int, fan: Fan) -> LastHour:
    """The last hour's outcomes per minute (60 minutes, the current one last), summed over the
    counters' shards (one Query each, run by `fan`)."""
    first = minute_of(now) - (HOUR_MINUTES - 1) * MINUTE_MS
    shards = list(fan(lambda shard: counters.read_shard(shard, first), range(counters.shards)))
    minutes = per_minute((item for items in shards for item in items), first, HOUR_MINUTES)
    buckets: list[dict[str, str | int]] = [
        {"start": str(iso(minute)), **{s: counts[s] for s in (*CHART_SERIES, "budget_exhausted")}}
        for minute, counts in sorted(minutes.items())
    ]
    return {"bucket_seconds": MINUTE_MS // 1000, "series": list(CHART_SERIES), "buckets": buckets}


def summarize(stores: Stores, queue: WakeupQueue, clock: Clock) -> OpsSummary:
    """The overview (OpsService.summary): see the module's docstring."""
    now = clock.now_ms()
    jobs = stores.jobs
    with (
        ThreadPoolExecutor(SUMMARY_THREADS, thread_name_prefix="summary-shard") as shards,
        ThreadPoolExecutor(4, thread_name_prefix="summary") as parts,
    ):
        # `parts` runs the summary's parts side by side; each fans its shards out on `shards`
        # (a part waits on its shards' futures, never on a part: no pool waits on itself)
        def part(fn: Callable[[], _T]) -> Future[_T]:
            return parts.submit(fn)

        named = ("active", *(state.value for state in COUNTED_APART))
        counting = {
            name: part(partial(jobs.count_indexed, name, cap=COUNT_CAP, fan=shards.map))
            for name in named
        }
        due_part = part(
            lambda: tally_entries(
                stores.table,
                DUE_PARTITION,
                jobs.shard_count,
                cap=COUNT_CAP,
                fan=shards.map,
                classify=due_wait_of,
            )
        )
        sampling = part(lambda: jobs.sample("active", limit=ACTIVE_SAMPLE, fan=shards.map))
        hour_part = part(lambda: last_hour(OutcomeCounters(stores.table), now, shards.map))
        stats_part: Future[QueueStats] = part(queue.stats)
        counted = {name: future.result() for name, future in counting.items()}
        due_waits, due_capped = due_part.result()
        oldest_active, hour, stats = sampling.result(), hour_part.result(), stats_part.result()
    counts: dict[str, int | None] = {state.value: None for state in JobState}
    counted["delayed"] = (due_waits.pop("delayed", 0), due_capped)  # the rest: long waits
    capped = [name for name, (_, at_cap) in counted.items() if at_cap]
    for name, (count, _) in counted.items():
        counts[name] = count
    active, delayed = counts.pop("active") or 0, counts.pop("delayed") or 0
    parked = sum(due_waits.values())
    # queued and running share one index entry (C3): told apart here, whole when the sample
    # holds every active job
    queued = [job for job in oldest_active if job.state is JobState.QUEUED]
    ready: int | None = None
    whole = "active" not in capped and active <= len(oldest_active)
    if whole:
        ready = len(queued)
        counts[JobState.QUEUED.value] = ready + delayed + parked
        counts[JobState.RUNNING.value] = len(oldest_active) - ready
    waits: Counter[str] = Counter(due_waits)  # due past 15 minutes: in the due index (OS6)
    for job in queued:
        # the first key names the wait (`signal`); any other is a detail of it (`until`)
        waits.update(list(waiting_for(job, now) or {})[:1])
    oldest_by_kind: dict[str, OldestJob] = {}
    for job in queued:  # oldest first: the first of each kind is its oldest
        oldest_by_kind.setdefault(job.kind, _oldest(job, now))
    outcomes = {name: sum(int(b[name]) for b in hour["buckets"]) for name in OUTCOMES}
    for bucket in hour["buckets"]:
        bucket.pop("budget_exhausted", None)
    counts[JobState.SUCCEEDED.value] = outcomes["succeeded"]
    counts[JobState.CANCELLED.value] = outcomes["cancelled"]
    return {
        "counts": {**counts, "active": active},
        "counts_capped": capped,
        "counts_note": "jobs in each state now, from the state index (eventually consistent: a "
        f"second behind at most, as a rule), each counted up to {COUNT_CAP:,} (`counts_capped`:"
        " at least that many); `active` is queued + running (one index entry): they are told "
        f"apart only while there are at most {ACTIVE_SAMPLE} (else null); queued includes "
        "`delayed` (due more than 15 minutes ahead, in the due index) and the waits due that far "
        "ahead (counted in `queued_waiting`). succeeded and cancelled "
        "jobs leave the index: their counts are the last hour's, from the outcome counters",
        "queue_depth": ready,
        "delayed": delayed,
        "queued_waiting": dict(sorted(waits.items())),
        "queued_waiting_scope": (
            "every queued job not delayed"
            if whole
            else f"the queued among the {ACTIVE_SAMPLE} oldest active jobs, and every wait "
            "due more than 15 minutes ahead (the due index's keys)"
        ),
        "oldest_queued": _oldest(queued[0], now) if queued else None,
        "oldest_queued_by_kind": oldest_by_kind,
        "oldest_scope": f"the {ACTIVE_SAMPLE} oldest active (queued or running) jobs",
        "sqs": {
            "visible": stats.visible,
            "in_flight": stats.in_flight,
            "delayed": stats.delayed,
            "dead_letter": stats.dead_letter,
        },
        "outcomes_last_hour": outcomes,
        "totals": {
            "retries": outcomes["retried"],
            "budget_exhausted": outcomes["budget_exhausted"],
            "scope": "the last hour, from the outcome counters (every job, none read)",
        },
        "last_hour": {
            **hour,
            "scope": "every outcome of the last hour, per minute, from the outcome counters "
            "written with the metrics CloudWatch counts (JobsSucceeded, JobsFailed, JobsDead, "
            "JobsCancelled, JobsUnknown, JobsRetried); an increment is best effort, so a rare "
            "lost write may leave a minute one short",
        },
    }
