"""The parts of an accept that are pure functions of the request: a kind's defaults resolved
(`resolve_spec`), the job a request makes (`new_job_for`), a batch's answer, and the list
routes' query parameters. (Moved out of service/jobs.py, which re-exports them.)"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from leasehold.domain.errors import LeaseholdError, ValidationError
from leasehold.domain.job import DEFAULT_PRIORITY, Budget, Job, JobSpec, Owner, new_job
from leasehold.domain.options import Submission
from leasehold.domain.policies import DEFAULT_DEADLINE_SECONDS, MAX_STEPS
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject
from leasehold.service.kinds import JobKind, step_list_of
from leasehold.store.batch import Accepted

_LIMIT = re.compile(r"^[0-9]{1,3}$")
MAX_LIST_LIMIT = 100


def batch_results(outcomes: Sequence[Accepted | LeaseholdError]) -> JsonObject:
    """`POST /jobs/batch`'s answer: a result for each item, in order — the job as `POST /jobs`
    answers it, or the error envelope's `error` as `POST /jobs` would have refused it."""
    results: list[JsonObject] = []
    for outcome in outcomes:
        if isinstance(outcome, LeaseholdError):
            results.append({"error": {"code": outcome.code, "message": str(outcome)}})
        else:
            results.append(
                {
                    "job_id": outcome.job_id,
                    "state": outcome.state,
                    "status_url": f"/jobs/{outcome.job_id}",
                }
                | ({"duplicate": True} if outcome.duplicate else {})
            )
    return {"results": results}


def resolve_spec(kind: JobKind, submission: Submission, default_max_attempts: int) -> JobSpec:
    """The one place a job's defaults are resolved (decision OW2): what the request left out
    takes the kind's own default, else the deployment's (`default_max_attempts`), else the
    engine's (a deadline of an hour, normal priority, no budget); and the payload's size is
    checked against its kind's limit (a kind may allow more than 16 KiB)."""
    limit = kind.max_payload_bytes
    size = len(json.dumps(submission.payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise ValidationError(
            f"'payload' is larger than {limit} bytes (kind '{kind.name}')",
            code="payload_too_large",
        )
    options = submission.options
    attempts = options.max_attempts or kind.default_max_attempts or default_max_attempts
    return JobSpec(
        kind=submission.kind,
        payload=submission.payload,
        budget=options.budget or Budget(),
        deadline_seconds=options.deadline_seconds or DEFAULT_DEADLINE_SECONDS,
        max_attempts=attempts,
        run_at_ms=options.run_at_ms,
        delay_seconds=options.delay_seconds,
        priority=options.priority or _default_priority(kind) or DEFAULT_PRIORITY,
    )


def _default_priority(kind: JobKind) -> str | None:
    return kind.default_priority


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
