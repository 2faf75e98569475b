"""The caller's use cases: accept a job, read it, list them, cancel, decide an approval."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    StoreUnavailableError,
    SubmitRateExceededError,
    ValidationError,
)
from leasehold.domain.ids import IdFactory
from leasehold.domain.job import (
    DEFAULT_PRIORITY,
    Job,
    JobSpec,
    Owner,
    new_job,
    parse_job_request,
)
from leasehold.domain.policies import MAX_STEPS
from leasehold.domain.states import JobState
from leasehold.domain.tenancy import TenantPolicy
from leasehold.service.kinds import JobKind, step_list_of
from leasehold.service.telemetry import Telemetry
from leasehold.service.view import job_view
from leasehold.store import Stores
from leasehold.store.jobs import derived_id
from leasehold.store.rates import SubmitCounter

_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_LIMIT = re.compile(r"^[0-9]{1,3}$")
MAX_LIST_LIMIT = 100
MAX_VERSION = 2**53
"""Versions are counters; anything larger than a JSON-safe integer is not one of ours."""


@dataclass(frozen=True)
class Accepted:
    job_id: str
    created: bool
    state: str


class JobService:
    def __init__(
        self,
        stores: Stores,
        kinds: dict[str, JobKind],
        clock: Clock,
        new_id: IdFactory,
        telemetry: Telemetry,
        default_max_attempts: int = 3,
        tenancy: TenantPolicy | None = None,
    ) -> None:
        self._default_max_attempts = default_max_attempts
        self._tenancy = tenancy or TenantPolicy()
        self._stores = stores
        self._kinds = kinds
        self._clock = clock
        self._new_id = new_id
        self._telemetry = telemetry

    def accept(self, owner: Owner, body: Any, idempotency_key: str | None) -> Accepted:
        """Validate, then commit job + outbox (+ key) together; only a commit returns."""
        check_idempotency_key(idempotency_key)
        submittable = {name: kind for name, kind in self._kinds.items() if kind.submittable}
        spec, kind = job_spec(body, submittable, self._default_max_attempts)
        self._tenancy.check_priority(
            owner, body.get("priority"), getattr(kind, "default_priority", None)
        )
        job_id = derived_id("j", owner, idempotency_key) if idempotency_key else self._new_id()
        now = self._clock.now_ms()
        job = new_job_for(kind, spec, owner, job_id, now)
        self._take_submission(owner, now)
        try:
            outcome = self._stores.jobs.accept(
                job, idempotency=idempotency_key, fingerprint=spec.fingerprint()
            )
        except StoreUnavailableError as unavailable:
            # The commit may have happened with its answer lost: say so, and how to find out.
            raise StoreUnavailableError(
                f"{unavailable} — the job may or may not have been accepted; retry with the "
                "same Idempotency-Key to get the same job (without a key a retry may create "
                "a second one)"
            ) from unavailable
        if outcome.created:
            self._telemetry.count("JobsAccepted")
            return Accepted(job_id=outcome.job_id, created=True, state=JobState.QUEUED.value)
        self._telemetry.count("IdempotentReplays")
        # A repeat answers with what the job is now (it may have run, or been cancelled).
        existing = self._stores.jobs.get(outcome.job_id)
        state = existing.state.value if existing else JobState.QUEUED.value
        return Accepted(job_id=outcome.job_id, created=False, state=state)

    def _take_submission(self, owner: Owner, now: int) -> None:
        """Count the submission against its tenant's rate (decision Q3), when the deployment
        sets one: a tenant past it is refused (429) before anything is written for the job."""
        rate = self._tenancy.submit_rate
        if rate and not SubmitCounter(self._stores.table).take(owner.tenant, rate, now):
            raise SubmitRateExceededError(
                f"tenant {owner.tenant[:80]!r} has submitted {rate} jobs this second, the most "
                "this deployment allows a tenant (TenantSubmitRate); nothing was accepted - "
                "retry after a second",
                retry_after_seconds=1,
            )

    def view(self, owner: Owner, job_id: str) -> dict[str, Any]:
        job = self._stores.jobs.get_owned(owner, job_id)
        return job_view(job, self._kinds, self._clock.now_ms())

    def list(
        self, owner: Owner, *, state: str | None, limit: str | None, cursor: str | None
    ) -> dict[str, Any]:
        parsed_state = parse_state_filter(state)
        parsed_limit = parse_limit(limit)
        jobs, next_cursor = self._stores.jobs.list_for_owner(
            owner, state=parsed_state, limit=parsed_limit, cursor=cursor
        )
        now = self._clock.now_ms()
        return {
            "jobs": [job_view(job, self._kinds, now) for job in jobs],
            "next_cursor": next_cursor,
        }

    def cancel(self, owner: Owner, job_id: str) -> dict[str, Any]:
        job = self._stores.controls.cancel(owner, job_id, now=self._clock.now_ms())
        self._telemetry.count(
            "JobsCancelled" if job.state is JobState.CANCELLED else "CancelRequested"
        )
        return job_view(job, self._kinds, self._clock.now_ms())

    def decide_approval(self, owner: Owner, job_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) - {"decision", "version"}:
            raise ValidationError('the body must be {"decision": ..., "version": ...}')
        decision = body.get("decision")
        if decision not in ("approve", "reject"):
            raise ValidationError('\'decision\' must be "approve" or "reject"')
        version = body.get("version")
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not 1 <= version <= MAX_VERSION
        ):
            raise ValidationError("'version' must be the job's current version (an integer ≥ 1)")
        job = self._stores.controls.decide_approval(
            owner, job_id, version=version, approve=decision == "approve", now=self._clock.now_ms()
        )
        self._telemetry.count("ApprovalsGranted" if decision == "approve" else "ApprovalsRejected")
        return job_view(job, self._kinds)


def job_request(
    kind: str,
    payload: Mapping[str, Any],
    *,
    budget: Mapping[str, int] | None = None,
    deadline_seconds: int | None = None,
    max_attempts: int | None = None,
    run_at: str | None = None,
    delay_seconds: int | None = None,
    priority: str | None = None,
) -> dict[str, Any]:
    """The `POST /jobs` body of these arguments (the fields left out take their defaults), for
    the callers that submit in code rather than over HTTP."""
    body: dict[str, Any] = {"kind": kind, "payload": dict(payload)}
    if budget is not None:
        body["budget"] = dict(budget)
    if deadline_seconds is not None:
        body["deadline_seconds"] = deadline_seconds
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    if run_at is not None:
        body["run_at"] = run_at
    if delay_seconds is not None:
        body["delay_seconds"] = delay_seconds
    if priority is not None:
        body["priority"] = priority
    return body


def job_spec(
    body: Any, kinds: Mapping[str, JobKind], default_max_attempts: int
) -> tuple[JobSpec, JobKind]:
    """A job request for one of `kinds` (POST /jobs: the submittable ones), its generic fields
    validated (arch §4: the payload's size for its kind, budget, deadline, attempts); the kind's
    own default attempts apply when the request names none."""
    limits = {name: kind.max_payload_bytes for name, kind in kinds.items()}
    spec = parse_job_request(body, set(kinds), default_max_attempts, limits)
    kind = kinds[spec.kind]
    if kind.default_max_attempts and "max_attempts" not in body:
        spec = replace(spec, max_attempts=kind.default_max_attempts)
    if spec.priority is None:  # the kind's own default, else normal (decision F4)
        spec = replace(spec, priority=getattr(kind, "default_priority", None) or DEFAULT_PRIORITY)
    return spec, kind


def new_job_for(kind: JobKind, spec: JobSpec, owner: Owner, job_id: str, now: int) -> Job:
    """The job a validated request makes, once its kind accepts the payload (its schema and
    checks, for this owner) and plans 1 to 20 steps for it; a delayed request's job is due
    at its `run_at` / `delay_seconds` (decision F1)."""
    due_at = spec.due_at(now)
    kind.validate_for(spec.payload, owner)
    plan = kind.plan(spec.payload)
    if not 1 <= len(plan) <= MAX_STEPS:
        raise ValidationError(f"kind '{spec.kind}' planned {len(plan)} steps (1–{MAX_STEPS})")
    return new_job(
        job_id,
        spec.kind,
        owner,
        spec.payload,
        now=now,
        steps_total=len(plan),
        max_attempts=spec.max_attempts,
        deadline_seconds=spec.deadline_seconds,
        budget=spec.budget,
        due_at=due_at,
        priority=spec.priority or DEFAULT_PRIORITY,
        step_list=step_list_of(plan).encode(),
    )


def check_idempotency_key(key: str | None) -> None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise ValidationError(
            "Idempotency-Key must be 1–128 characters of A-Z a-z 0-9 . _ : -",
            code="invalid_idempotency_key",
        )


def parse_state_filter(state: str | None) -> JobState | None:
    if state is None or state == "":
        return None
    try:
        return JobState(state)
    except ValueError as exc:
        known = ", ".join(s.value for s in JobState)
        raise ValidationError(f"unknown state '{state[:32]}'; one of: {known}") from exc


def parse_limit(limit: str | None, default: int = 20) -> int:
    if limit is None or limit == "":
        return default
    # Only ASCII digits: str.isdigit() also accepts '²', which int() refuses.
    if not _LIMIT.fullmatch(limit) or not 1 <= int(limit) <= MAX_LIST_LIMIT:
        raise ValidationError(f"'limit' must be an integer from 1 to {MAX_LIST_LIMIT}")
    return int(limit)
