"""The operator's view and actions: summary, jobs by state, replay, resolve, cancel, DLQ
redrive — everything the `/ops` API (and so the console) can see or do."""

from __future__ import annotations

import re
from typing import Any, TypedDict

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject
from leasehold.service.fanin import children_done
from leasehold.service.jobs import parse_limit, parse_state_filter
from leasehold.service.pausing import KindPauses
from leasehold.service.redrive import DeadLetterService
from leasehold.service.summary import OpsSummary, summarize
from leasehold.service.telemetry import Telemetry
from leasehold.service.trace_links import TraceLinks
from leasehold.service.tracing import current_traceparent, job_attributes, span_under, trace_id_of
from leasehold.service.view import Kinds, job_view, operator_view, ops_row
from leasehold.store import Stores
from leasehold.store.queue import WakeupQueue
from leasehold.store.set_aside import SetAside, SetAsideStore

logger = Logger(service="leasehold", child=True)

MAX_NOTE = 500
MAX_REDRIVE = 100
"""The most dead letters one `POST /ops/dlq/redrive` handles: a request must end well inside
API Gateway's 30 s; the answer says how many are left, and the operator asks again."""
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


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


def _note_only(body: Any) -> str:
    if not isinstance(body, dict) or set(body) - {"note"}:
        raise ValidationError('the body must be {"note": ...}')
    return _note(body, required=True)


def _kind(kind: str) -> str:
    if not _NAME.fullmatch(kind):
        raise ValidationError("'kind' must be 1 to 100 of A-Za-z0-9_.:-")
    return kind


def _filter(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not _NAME.fullmatch(value):
        raise ValidationError(f"'{name}' must be 1 to 100 of A-Za-z0-9_.:-")
    return value


class OpsService:
    def __init__(
        self,
        stores: Stores,
        queue: WakeupQueue,
        clock: Clock,
        telemetry: Telemetry,
        kinds: Kinds = None,
        *,
        trace_links: TraceLinks | None = None,
    ) -> None:
        self._kinds = kinds
        self._trace_links = trace_links or TraceLinks()
        self._stores = stores
        self._store = stores.jobs
        self._queue = queue
        self._clock = clock
        self._telemetry = telemetry
        self._pauses = KindPauses(stores, clock, None if kinds is None else list(kinds))

    def summary(self) -> OpsSummary:
        """The overview: jobs by state now, every outcome of the last hour per minute, the
        oldest queued job and what queued jobs wait for, at a bounded cost read concurrently
        (service/summary.py; bench/ops_summary.py measures it)."""
        return summarize(self._stores, self._queue, self._clock)

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
        done = children_done(self._stores, job)  # a parent's fan-in count, as its owner sees
        now = self._clock.now_ms()
        view = operator_view(job, now, self._kinds, done)
        # where its trace can be seen: X-Ray deployed, the trace file locally (decision TR7)
        link = self._trace_links.link(
            trace_id_of(job.traceparent),
            created_at=job.created_at,
            updated_at=job.updated_at,
            now=now,
        )
        if link is not None:
            view.update(link)
        return view

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

    def kinds(self) -> JsonObject:
        """`GET /ops/kinds`: every registered kind, running, paused or resuming (PA1)."""
        return self._pauses.list()

    def pause_kind(self, kind: str, operator: Owner, body: Any) -> JsonObject:
        """Body `{"note"}`: the kind's queued jobs are parked at their claim (PA2)."""
        return self._pauses.pause(_kind(kind), operator.user_id, _note_only(body))

    def resume_kind(self, kind: str, operator: Owner, body: Any) -> JsonObject:
        """Body `{"note"}`: the kind's parked jobs are woken (PA4)."""
        return self._pauses.resume(_kind(kind), operator.user_id, _note_only(body))

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
