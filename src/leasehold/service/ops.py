"""The operator's view and actions: summary, jobs by state, replay, resolve, DLQ redrive."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.states import JobState, StopReason
from leasehold.service.jobs import parse_limit, parse_state_filter
from leasehold.service.telemetry import Telemetry
from leasehold.service.view import Kinds, job_view, operator_view, ops_row
from leasehold.store import Stores
from leasehold.store.queue import WakeupQueue

logger = Logger(service="leasehold", child=True)

MAX_NOTE = 500


def _note(body: dict[str, Any], *, required: bool) -> str:
    note = body.get("note")
    if note is None and not required:
        return ""
    if not isinstance(note, str) or not 1 <= len(note) <= MAX_NOTE:
        raise ValidationError(f"'note' must be a string of 1 to {MAX_NOTE} characters")
    return note


def _oldest(job: Any, now: int) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "tenant": job.owner.tenant,
        "age_seconds": round((now - job.created_at) / 1000, 1),
        "attempts": job.attempts,
        "last_error": job.error,
        "next_attempt_at": iso(job.next_attempt_at),
    }


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

    def summary(self) -> dict[str, Any]:
        now = self._clock.now_ms()
        counts = {state.value: self._store.count_by_state(state) for state in JobState}
        # Jobs delayed beyond SQS's reach wait in the due index (decision F1): queued, not
        # yet dispatched; the queue depth is what could run now or within 15 minutes.
        delayed = self._store.count_due()
        ready = counts[JobState.QUEUED.value] or 0
        counts[JobState.QUEUED.value] = ready + delayed
        queued, _ = self._store.list_by_state(JobState.QUEUED, limit=100)
        oldest = _oldest(queued[0], now) if queued else None
        oldest_by_kind: dict[str, Any] = {}
        for job in queued:  # oldest first: the first of each kind is its oldest
            oldest_by_kind.setdefault(job.kind, _oldest(job, now))
        failed, _ = self._store.list_by_state(JobState.FAILED, limit=100)
        recent: list[Any] = []
        for state in (JobState.QUEUED, JobState.RUNNING, JobState.DEAD, JobState.UNKNOWN):
            jobs, _ = self._store.list_by_state(state, limit=100)
            recent.extend(jobs)
        stats = self._queue.stats()
        return {
            "counts": counts,
            "counts_note": "succeeded and cancelled jobs leave the state index: not counted "
            "(null); queued and running are told apart over the first 1,000 active jobs; "
            "queued includes `delayed` (due more than 15 minutes ahead, not in queue_depth)",
            "queue_depth": ready,
            "delayed": delayed,
            "oldest_queued": oldest,
            "oldest_queued_by_kind": oldest_by_kind,
            "sqs": {
                "visible": stats.visible,
                "in_flight": stats.in_flight,
                "delayed": stats.delayed,
                "dead_letter": stats.dead_letter,
            },
            "totals": {
                "retries": sum(
                    1
                    for job in recent + failed
                    for entry in job.history
                    if entry.get("outcome") == JobState.QUEUED.value
                ),
                "budget_exhausted": sum(
                    1 for job in failed if job.stop_reason == StopReason.BUDGET_EXHAUSTED.value
                ),
                "scope": "retries over the first 100 jobs of each non-succeeded state; "
                "budget exhaustion over the first 100 failed jobs",
            },
        }

    def jobs(self, state: str | None, limit: str | None, cursor: str | None) -> dict[str, Any]:
        parsed = parse_state_filter(state)
        if parsed is None:
            raise ValidationError("'state' is required: /ops/jobs?state=dead")
        jobs, next_cursor = self._store.list_by_state(
            parsed, limit=parse_limit(limit, 50), cursor=cursor
        )
        now = self._clock.now_ms()
        return {
            "jobs": [ops_row(job, now, self._kinds) for job in jobs],
            "next_cursor": next_cursor,
        }

    def show(self, job_id: str) -> dict[str, Any]:
        """One job, whole (operators see every tenant's)."""
        job = self._store.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return operator_view(job, self._clock.now_ms(), self._kinds)

    def replay(self, job_id: str, operator: Owner, body: Any) -> dict[str, Any]:
        """Body optional: `{"note"?, "checked_provider"?}`; an `unknown` job needs both."""
        body = {} if body is None else body
        if not isinstance(body, dict) or set(body) - {"note", "checked_provider"}:
            raise ValidationError('the body must be {"note"?: ..., "checked_provider"?: true}')
        checked = body.get("checked_provider", False)
        if not isinstance(checked, bool):
            raise ValidationError("'checked_provider' must be true or false")
        note = _note(body, required=checked)
        job = self._stores.operator.replay(
            job_id,
            operator=operator.user_id,
            note=note,
            checked_provider=checked,
            now=self._clock.now_ms(),
        )
        self._telemetry.count("JobsReplayed")
        logger.info(
            "operator replay",
            extra={
                "job_id": job_id,
                "operator": operator.user_id,
                "note": note,
                "checked_provider": checked,
            },
        )
        return job_view(job, self._kinds)

    def resolve(self, job_id: str, operator: Owner, body: Any) -> dict[str, Any]:
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
        logger.info(
            "operator resolve",
            extra={
                "job_id": job_id,
                "operator": operator.user_id,
                "outcome": outcome,
                "note": note,
                "receipt": receipt,
            },
        )
        return job_view(job, self._kinds)
