"""The job as the domain sees it: what a caller submits and what the table holds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from leasehold.domain.errors import ValidationError
from leasehold.domain.policies import (
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    MAX_DELAY_SECONDS,
)
from leasehold.domain.records import (
    ApprovalRequest,
    EffectIntent,
    HistoryEntry,
    LedgerEntry,
    Resolution,
    WaitingFor,
)
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject
from leasehold.domain.waits import ParentLink, WaitRecord

Priority = Literal["high", "normal", "low"]
PRIORITIES: tuple[Priority, ...] = ("high", "normal", "low")
"""A job's priority (decision F4): each has its own queue and event-source mapping (decision F4)."""
DEFAULT_PRIORITY = "normal"


def check_priority(value: Any, name: str = "priority") -> str:
    """`value` if it is one of PRIORITIES; ValidationError naming the choices otherwise."""
    if not isinstance(value, str) or value not in PRIORITIES:
        raise ValidationError(f"'{name}' must be one of: high, normal, low")
    return value


@dataclass(frozen=True)
class Owner:
    """Who a job belongs to: identity comes only from the authorizer's claims."""

    tenant: str
    user_id: str
    is_operator: bool = False


@dataclass(frozen=True)
class Budget:
    max_cost: int | None = None
    max_steps: int | None = None


@dataclass(frozen=True)
class JobSpec:
    """A validated submission with its kind's defaults resolved (`service.jobs.resolve_spec`),
    ready to be accepted."""

    kind: str
    payload: JsonObject
    budget: Budget
    deadline_seconds: int
    max_attempts: int
    run_at_ms: int | None = None
    """`run_at`, as epoch milliseconds: the job is not started before it (decision F1)."""
    delay_seconds: int | None = None
    """`delay_seconds`: the job is not started before accept time + this."""
    priority: str | None = None
    """`priority` as asked; None: the kind's default (normal unless the kind declares one)."""

    def fingerprint(self) -> str:
        """Canonical text of the request: the same key with another body is a conflict."""
        doc: JsonObject = {
            "kind": self.kind,
            "payload": self.payload,
            "budget": [self.budget.max_cost, self.budget.max_steps],
            "deadline_seconds": self.deadline_seconds,
            "max_attempts": self.max_attempts,
        }
        # Only a delayed request carries these: an undelayed one keeps the fingerprint it had
        # before delays existed (a job accepted then and repeated now is still a repeat).
        if self.run_at_ms is not None:
            doc["run_at_ms"] = self.run_at_ms
        if self.delay_seconds is not None:
            doc["delay_seconds"] = self.delay_seconds
        # Likewise only a priority other than normal: asking for "normal" is asking for nothing.
        if self.priority not in (None, DEFAULT_PRIORITY):
            doc["priority"] = self.priority
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def due_at(self, now: int) -> int:
        """When a job of this request accepted at `now` may first start (never before `now`;
        a `run_at` in the past means now). ValidationError past MAX_DELAY_SECONDS from now."""
        due = now
        if self.delay_seconds is not None:
            due = now + self.delay_seconds * 1000
        elif self.run_at_ms is not None:
            due = max(now, self.run_at_ms)
        if due - now > MAX_DELAY_SECONDS * 1000:
            raise ValidationError(f"'run_at' is more than {MAX_DELAY_SECONDS // 86400} days ahead")
        return due


@dataclass
class Checkpoint:
    """Progress saved under the lease after each step: a retry never repeats a finished step."""

    next_step: int = 0
    cost_used: int = 0
    steps_used: int = 0
    outputs: list[Any] = field(default_factory=list)
    approved_step: int | None = None
    step_failures: int = 0
    """Transient failures of `next_step` so far: its next try is number step_failures + 1."""


@dataclass
class Job:
    """The job item, decoded. Times are epoch milliseconds."""

    job_id: str
    kind: str
    owner: Owner
    state: JobState
    payload: JsonObject
    attempts: int
    max_attempts: int
    epoch: int
    version: int
    created_at: int
    updated_at: int
    deadline_at: int
    next_attempt_at: int | None
    budget: Budget
    checkpoint: Checkpoint
    steps_total: int
    cancel_requested: bool = False
    lease_owner: str | None = None
    slot_token: str | None = None
    """The per-user slot entry this job's claim holds (store/slots.py), while running."""
    slots: dict[str, str] | None = None
    """The declared limits' slot entries this job's claim holds: item name → token (F2)."""
    waiting_for: WaitingFor | None = None
    """What the job last waited for at a claim (`{"concurrency": "tenant:acme"}`), while queued."""
    lease_expires_at: int | None = None
    approval: ApprovalRequest | None = None
    result: Any = None
    error: dict[str, str] | None = None
    stop_reason: str | None = None
    effect_intent: EffectIntent | None = None
    """The external effect in flight, if any (docs/architecture.md rule 6): its operation id, key,
    provider and
    capability. While it is set the job cannot be retried blindly."""
    operations: dict[str, LedgerEntry] = field(default_factory=dict)
    """The operation ledger (docs/architecture.md "External effects"): operation id → {provider,
    key, fingerprint, state
    submitted | confirmed | failed | released, submitted_at, settled_at?, receipt?, error?}."""
    kind_state: JsonObject | None = None
    """A kind's own progress within a step (StepContext.save_progress), bounded by the kind."""
    replays: int = 0
    history: list[HistoryEntry] = field(default_factory=list)
    """The last few attempt ends and operator acts, as stored (store/history.py)."""
    history_dropped: int = 0
    resolution: Resolution | None = None
    """How an operator settled an `unknown` job: outcome, by, at, note, receipt?, operation_id?"""
    last_dispatch_at: int | None = None
    claimed_at: int | None = None
    """When the current (or last) attempt was claimed: its start on the operator's timeline."""
    priority: str = DEFAULT_PRIORITY
    """high | normal | low: which queue its wake-ups go to (decision F4). Never changes."""
    step_list: str | None = None
    """The digests of the steps its checkpoint refers to (`d1.d2.…`, domain/versions.py),
    recorded at accept; None for a job accepted before kind versions or replayed from its
    start (its next claim records the kind's list then, decision KV1)."""
    traceparent: str | None = None
    """The W3C traceparent its spans belong to (service/tracing.py): set at accept, new at a
    replay; None for a job accepted before traces (decision TR2)."""
    wait: WaitRecord | None = None
    """What the job waits for before its next step (domain/waits.py), while it is parked."""
    parent: ParentLink | None = None
    """The parent that started this job (a child), its step and the child's index."""
    spawned: list[list[int]] | None = None
    """The children sets this job started: `[step, how many]` each, in order."""
    cap: dict[str, Any] | None = None
    """A child's share of its set's `max_concurrency`: `{"base": slot item, "max": n}`."""
    key_fields: dict[str, str] | None = None
    """The payload fields its kind's limits and rates are keyed by (`{"account": "acme"}`),
    kept on the item when the payload is in the data bucket, so a claim never reads the blob
    (decision LD15)."""


def new_job(
    job_id: str,
    kind: str,
    owner: Owner,
    payload: JsonObject,
    *,
    now: int,
    steps_total: int,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
    budget: Budget | None = None,
    due_at: int | None = None,
    priority: str = DEFAULT_PRIORITY,
    step_list: str | None = None,
    traceparent: str | None = None,
) -> Job:
    """A job as accepted: queued, due now (or at `due_at`, a delayed job), no attempt made yet.
    A delayed job's deadline counts from when it is due, not from when it was accepted."""
    due = now if due_at is None else max(now, due_at)
    return Job(
        job_id=job_id,
        kind=kind,
        owner=owner,
        state=JobState.QUEUED,
        payload=payload,
        attempts=0,
        max_attempts=max_attempts,
        epoch=0,
        version=1,
        created_at=now,
        updated_at=now,
        deadline_at=due + deadline_seconds * 1000,
        next_attempt_at=due,
        budget=budget or Budget(),
        checkpoint=Checkpoint(),
        steps_total=steps_total,
        last_dispatch_at=now,
        priority=priority,
        step_list=step_list,
        traceparent=traceparent,
    )
