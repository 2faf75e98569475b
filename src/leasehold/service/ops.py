"""The operator's view and actions: summary, jobs by state, replay, resolve, cancel, DLQ
redrive — everything the `/ops` API (and so the console) can see or do."""

from __future__ import annotations

import re
from typing import Any, NotRequired, TypedDict

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.domain.job import Job, Owner
from leasehold.domain.records import HistoryEntry
from leasehold.domain.states import JobState, StopReason
from leasehold.domain.types import JsonObject
from leasehold.service.jobs import parse_limit, parse_state_filter
from leasehold.service.redrive import DeadLetterService
from leasehold.service.telemetry import Telemetry
from leasehold.service.tracing import current_traceparent, job_attributes, span_under
from leasehold.service.view import Kinds, job_view, operator_view, ops_row
from leasehold.store import Stores
from leasehold.store.queue import WakeupQueue
from leasehold.store.set_aside import SetAside, SetAsideStore

logger = Logger(service="leasehold", child=True)

MAX_NOTE = 500
MAX_REDRIVE = 100
"""The most dead letters one `POST /ops/dlq/redrive` handles: a request must end well inside
API Gateway's 30 s; the answer says how many are left, and the operator asks again."""
COUNT_CAP = 1000
"""Each of the summary's counts stops here (shown as "1,000+"): one COUNT query of at most this
many index entries, ≈ 13 read units, whatever the table holds."""
ACTIVE_SAMPLE = 25
"""The oldest active jobs the summary reads (eventually consistent): the oldest queued job, the
oldest of each kind, and queued told apart from running while there are no more than this."""
RECENT_SAMPLE = 10
"""The newest jobs of each other indexed state the summary reads, for the last hour's chart."""
COUNTED_APART = (JobState.WAITING_APPROVAL, JobState.FAILED, JobState.DEAD, JobState.UNKNOWN)
"""The states the index holds each in a partition of its own: counted without reading a job."""
HOUR_MS = 3_600_000
BUCKET_MS = 300_000
CHART_SERIES = ("retries", "dead", "failed", "unknown", "succeeded", "cancelled", "operator")
"""What the last hour's chart counts, from history entries: `retries` (an attempt that ended in a
retry), the states attempts ended in, and `operator` (replays, resolves, cancels, redrives)."""
_OPERATOR_EVENTS = frozenset({"replayed", "resolved", "cancel_requested", "redriven"})
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


class OldestJob(TypedDict):
    """A queued job as the summary shows it: the oldest queued one, and the oldest of each kind."""

    job_id: str
    kind: str
    tenant: str
    age_seconds: float
    attempts: int
    last_error: dict[str, str] | None
    next_attempt_at: str | None


class LastHour(TypedDict):
    """The last hour's chart: per 5-minute bucket (oldest first), its start and each series' count;
    `scope` (in the summary) says which jobs' history it counts."""

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
    oldest_queued: OldestJob | None
    oldest_queued_by_kind: dict[str, OldestJob]
    oldest_scope: str
    sqs: dict[str, int]
    totals: dict[str, int | str]
    last_hour: LastHour


class OpsJobsPage(TypedDict):
    """`GET /ops/jobs`: one page of operator rows and the cursor to the next."""

    jobs: list[JsonObject]
    next_cursor: str | None


def _note(body: JsonObject, *, required: bool) -> str:
    note = body.get("note")
    if note is None and not required:
        return ""
    if not isinstance(note, str) or not 1 <= len(note) <= MAX_NOTE:
        raise ValidationError(f"'note' must be a string of 1 to {MAX_NOTE} characters")
    return note


def _oldest(job: Job, now: int) -> OldestJob:
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "tenant": job.owner.tenant,
        "age_seconds": round((now - job.created_at) / 1000, 1),
        "attempts": job.attempts,
        "last_error": job.error,
        "next_attempt_at": iso(job.next_attempt_at),
    }


def _filter(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not _NAME.fullmatch(value):
        raise ValidationError(f"'{name}' must be 1 to 100 of A-Za-z0-9_.:-")
    return value


def _series_of(entry: HistoryEntry) -> str | None:
    """The chart series a stored history entry counts in (None: one the chart does not show)."""
    event = entry.get("ev")
    if event in _OPERATOR_EVENTS or entry.get("r") == StopReason.CANCELLED_BY_OPERATOR.value:
        return "operator"
    if event == "retry":
        return "retries"
    state = entry.get("s")
    if state in ("dead", "failed", "unknown", "succeeded", "cancelled"):
        return str(state)
    return None


def last_hour(jobs: list[Job], now: int) -> LastHour:
    """Twelve 5-minute buckets of what happened in the last hour, counted from the history of
    `jobs` (each job once): oldest bucket first."""
    start = now - HOUR_MS
    counts = [dict.fromkeys(CHART_SERIES, 0) for _ in range(HOUR_MS // BUCKET_MS)]
    seen: set[str] = set()
    for job in jobs:
        if job.job_id in seen:
            continue
        seen.add(job.job_id)
        for entry in job.history:
            at = entry.get("t")
            series = _series_of(entry)
            if series is None or not isinstance(at, int) or not start <= at < now:
                continue
            counts[(at - start) // BUCKET_MS][series] += 1
    buckets: list[dict[str, str | int]] = [
        {"start": str(iso(start + index * BUCKET_MS)), **bucket}
        for index, bucket in enumerate(counts)
    ]
    return {"bucket_seconds": BUCKET_MS // 1000, "series": list(CHART_SERIES), "buckets": buckets}


class OpsService:
    def __init__(
        self,
        stores: Stores,
        queue: WakeupQueue,
        clock: Clock,
        telemetry: Telemetry,
        kinds: Kinds = None,
    ) -> None:
        self._kinds = kinds
        self._stores = stores
        self._store = stores.jobs
        self._queue = queue
        self._clock = clock
        self._telemetry = telemetry

    def summary(self) -> OpsSummary:
        """The overview, at a bounded cost whatever the table holds (decision SZ5): every count is
        one COUNT query per index shard on the keys-only state index (no job item read to count,
        each capped at COUNT_CAP), and the jobs it shows — the oldest queued, the chart's
        outcomes — are a bounded sample read eventually consistent: at most 11 Queries per shard
        (decision SH2; 16 requests in all unsharded) and 65 job items a call
        (bench/ops_summary.py measures it)."""
        now = self._clock.now_ms()
        counts: dict[str, int | None] = {state.value: None for state in JobState}
        capped: list[str] = []
        for name in ("active", "delayed", *(state.value for state in COUNTED_APART)):
            counts[name], at_cap = self._store.count_indexed(name, cap=COUNT_CAP)
            if at_cap:
                capped.append(name)
        active, delayed = counts.pop("active") or 0, counts.pop("delayed") or 0
        # The oldest active jobs, read: queued and running share one index entry (C3), so
        # they are told apart here — whole when the sample holds every active job.
        oldest_active = self._store.sample("active", limit=ACTIVE_SAMPLE)
        queued = [job for job in oldest_active if job.state is JobState.QUEUED]
        ready: int | None = None
        if "active" not in capped and active <= len(oldest_active):
            ready = len(queued)
            counts[JobState.QUEUED.value] = ready + delayed
            counts[JobState.RUNNING.value] = len(oldest_active) - ready
        oldest = _oldest(queued[0], now) if queued else None
        oldest_by_kind: dict[str, OldestJob] = {}
        for job in queued:  # oldest first: the first of each kind is its oldest
            oldest_by_kind.setdefault(job.kind, _oldest(job, now))
        recent = {
            state: self._store.sample(state.value, limit=RECENT_SAMPLE, newest=True)
            for state in COUNTED_APART
        }
        shown = oldest_active + [job for jobs in recent.values() for job in jobs]
        stats = self._queue.stats()
        return {
            "counts": {**counts, "active": active},
            "counts_capped": capped,
            "counts_note": "from the state index, eventually consistent (a second behind at "
            f"most, as a rule), each counted up to {COUNT_CAP:,} (`counts_capped`: at least "
            "that many); `active` is queued + running (one index entry): they are told apart "
            f"only while there are at most {ACTIVE_SAMPLE} (else null); queued includes "
            "`delayed` (due more than 15 minutes ahead); succeeded and cancelled jobs leave "
            "the index (null)",
            "queue_depth": ready,
            "delayed": delayed,
            "oldest_queued": oldest,
            "oldest_queued_by_kind": oldest_by_kind,
            "oldest_scope": f"the {ACTIVE_SAMPLE} oldest active (queued or running) jobs",
            "sqs": {
                "visible": stats.visible,
                "in_flight": stats.in_flight,
                "delayed": stats.delayed,
                "dead_letter": stats.dead_letter,
            },
            "totals": {
                "retries": sum(
                    1
                    for job in shown
                    for entry in job.history
                    if entry.get("outcome") == JobState.QUEUED.value
                ),
                "budget_exhausted": sum(
                    1
                    for job in recent[JobState.FAILED]
                    if job.stop_reason == StopReason.BUDGET_EXHAUSTED.value
                ),
                "scope": f"retries over the {ACTIVE_SAMPLE} oldest active jobs and the "
                f"{RECENT_SAMPLE} newest of each other indexed state; budget exhaustion over the "
                f"{RECENT_SAMPLE} newest failed jobs",
            },
            "last_hour": {
                **last_hour(shown, now),
                "scope": f"history entries of the {ACTIVE_SAMPLE} oldest active jobs and the "
                f"{RECENT_SAMPLE} newest waiting_approval, failed, dead and unknown jobs (a "
                "bounded sample, so that a refresh costs the same whatever the table holds); "
                "succeeded and cancelled jobs leave the index; CloudWatch's JobsSucceeded, "
                "JobsFailed, JobsDead and JobsRetried count every job",
            },
        }

    def jobs(
        self,
        state: str | None,
        limit: str | None,
        cursor: str | None,
        *,
        kind: str | None = None,
        tenant: str | None = None,
    ) -> OpsJobsPage:
        """Jobs in one state, oldest first, optionally of one kind and/or one tenant."""
        parsed = parse_state_filter(state)
        if parsed is None:
            raise ValidationError("'state' is required: /ops/jobs?state=dead")
        jobs, next_cursor = self._store.list_by_state(
            parsed,
            limit=parse_limit(limit, 50),
            cursor=cursor,
            kind=_filter(kind, "kind"),
            tenant=_filter(tenant, "tenant"),
        )
        now = self._clock.now_ms()
        return {
            "jobs": [ops_row(job, now, self._kinds) for job in jobs],
            "next_cursor": next_cursor,
        }

    def show(self, job_id: str) -> JsonObject:
        """One job, whole (operators see every tenant's)."""
        job = self._store.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return operator_view(job, self._clock.now_ms(), self._kinds)

    def replay(self, job_id: str, operator: Owner, body: Any) -> JsonObject:
        """Body optional: `{"note"?, "checked_provider"?, "from"?}`; an `unknown` job needs the
        first two. `from`: `checkpoint` (the default: finished steps are not run again) or
        `start` (every step again under the kind's current list, decision KV4)."""
        body = {} if body is None else body
        if not isinstance(body, dict) or set(body) - {"note", "checked_provider", "from"}:
            raise ValidationError(
                'the body must be {"note"?: ..., "checked_provider"?: true, '
                '"from"?: "checkpoint" | "start"}'
            )
        checked = body.get("checked_provider", False)
        if not isinstance(checked, bool):
            raise ValidationError("'checked_provider' must be true or false")
        start = body.get("from", "checkpoint")
        if start not in ("checkpoint", "start"):
            raise ValidationError('\'from\' must be "checkpoint" or "start"')
        note = _note(body, required=checked)
        # A replay runs in a trace of its own (the operator's request's), its span linked to
        # the job's old trace: one read for that link (decision TR4).
        previous = self._stores.jobs.get(job_id)
        with span_under(
            "leasehold.replay",
            None,
            attributes=job_attributes(job_id),
            links=[previous.traceparent if previous else None],
        ):
            job = self._stores.operator.replay(
                job_id,
                operator=operator.user_id,
                note=note,
                checked_provider=checked,
                now=self._clock.now_ms(),
                from_start=start == "start",
                traceparent=current_traceparent(),
            )
        self._telemetry.count("JobsReplayed")
        return self._acted(
            "replay",
            job,
            operator,
            note=note,
            checked_provider=checked,
            **{"from": start},
        )

    def resolve(self, job_id: str, operator: Owner, body: Any) -> JsonObject:
        """Body `{"outcome": "succeeded"|"failed", "note", "receipt"?}`."""
        if not isinstance(body, dict) or set(body) - {"outcome", "note", "receipt"}:
            raise ValidationError('the body must be {"outcome": ..., "note": ..., "receipt"?: ...}')
        outcome = body.get("outcome")
        if outcome not in ("succeeded", "failed"):
            raise ValidationError('\'outcome\' must be "succeeded" or "failed"')
        note = _note(body, required=True)
        receipt = body.get("receipt")
        if receipt is not None and (not isinstance(receipt, str) or not 1 <= len(receipt) <= 200):
            raise ValidationError("'receipt' must be a string of 1 to 200 characters")
        job = self._stores.operator.resolve(
            job_id,
            operator=operator.user_id,
            succeeded=outcome == "succeeded",
            note=note,
            receipt=receipt,
            now=self._clock.now_ms(),
        )
        self._telemetry.count("JobsResolved")
        return self._acted("resolve", job, operator, outcome=outcome, note=note, receipt=receipt)

    def cancel(self, job_id: str, operator: Owner, body: Any) -> JsonObject:
        """Body `{"note"}`: an operator's cancel of any tenant's job, recorded with who and why."""
        if not isinstance(body, dict) or set(body) - {"note"}:
            raise ValidationError('the body must be {"note": ...}')
        note = _note(body, required=True)
        job = self._stores.operator.cancel(
            job_id, operator=operator.user_id, note=note, now=self._clock.now_ms()
        )
        self._telemetry.count(
            "JobsCancelled" if job.state is JobState.CANCELLED else "CancelRequested"
        )
        return self._acted("cancel", job, operator, note=note)

    def _acted(self, action: str, job: Job, operator: Owner, **logged: object) -> JsonObject:
        """An operator action on one job, done and counted: its log line (the job, who, and
        what they said) and the job's view as the answer. (Each caller counts its own metric
        with a literal name: the dashboard test reads them from the code.)"""
        logger.info(
            f"operator {action}",
            extra={"job_id": job.job_id, "operator": operator.user_id, **logged},
        )
        return job_view(job, self._kinds)

    def redrive(self, operator: Owner, body: Any) -> JsonObject:
        """Body `{"note", "max"?}`: move up to `max` (≤ MAX_REDRIVE) dead letters back to the work
        queue, one by one, each moved job's history naming the operator; a poison message is
        kept in the table (SetAsideStore) before it leaves the DLQ. The answer is the redrive's
        report and the DLQ's depth after it."""
        if not isinstance(body, dict) or set(body) - {"note", "max"}:
            raise ValidationError('the body must be {"note": ..., "max"?: ...}')
        note = _note(body, required=True)
        most = body.get("max", MAX_REDRIVE)
        if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MAX_REDRIVE:
            raise ValidationError(f"'max' must be an integer from 1 to {MAX_REDRIVE}")
        kept = SetAsideStore(self._stores.table)

        def set_aside(poison: SetAside) -> None:
            kept.keep(poison, by=operator.user_id, note=note, now=self._clock.now_ms())

        service = DeadLetterService(self._queue, self._clock, self._stores)
        report = service.redrive(
            operator=operator.user_id, note=note, max_messages=most, set_aside=set_aside
        ).as_dict()
        logger.info("operator redrive", extra={**report, "operator": operator.user_id})
        report["dead_letter_after"] = self._queue.stats().dead_letter
        return report
