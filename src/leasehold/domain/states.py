"""The job state machine: every state, who moves a job out of it, and the allowed transitions."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """A job's state. The job item in the table is the only authority for it. Each member's
    docstring (`JobState.QUEUED.__doc__`) says who moves a job out of that state."""

    def __new__(cls, value: str, doc: str = "") -> JobState:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member

    QUEUED = (
        "queued",
        "Accepted and waiting for a worker (or for `next_attempt_at`, or a free per-user slot). "
        "Moved out by: a worker claim, a cancel (API), the sweeper (deadline).",
    )
    RUNNING = (
        "running",
        "Leased by one worker (`epoch`, `lease_owner`, `lease_expires_at`). Moved out by: that "
        "worker (outcome, pause); any worker or the sweeper once the lease expired.",
    )
    WAITING_APPROVAL = (
        "waiting_approval",
        "Paused before a step that needs a human decision; checkpoint saved, no lease or slot "
        "held. Moved out by: approve / reject (API), cancel (API).",
    )
    SUCCEEDED = (
        "succeeded",
        "Terminal, `result` saved. Moved out by: nobody (no replay is offered for it).",
    )
    FAILED = (
        "failed",
        "Terminal, not retryable; `stop_reason` says why. Moved out by: operator replay.",
    )
    CANCELLED = (
        "cancelled",
        "Terminal: `cancelled_by_user`, `approval_rejected`, or a kind's own reason (an item it "
        "writes with its outcome moved on). Moved out by: nobody.",
    )
    DEAD = (
        "dead",
        "Attempts exhausted or deadline passed: the dead-letter state, in the table. "
        "Moved out by: operator replay.",
    )
    UNKNOWN = (
        "unknown",
        "A lease expired while an external effect was open: the outcome is uncertain, so no "
        "automatic retry. Moved out by: operator resolve or replay.",
    )


class StopReason(StrEnum):
    """Why a job stopped in a terminal (or uncertain) state: the engine's own reasons. A kind
    may end a job with reasons of its own (plain strings: `on_related_changed`, `StopJobError`,
    `transact_closing_job`)."""

    BUDGET_EXHAUSTED = "budget_exhausted"
    HANDLER_ERROR = "handler_error"
    CANCELLED_BY_USER = "cancelled_by_user"
    CANCELLED_BY_OPERATOR = "cancelled_by_operator"
    APPROVAL_REJECTED = "approval_rejected"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    EFFECT_UNCERTAIN = "effect_uncertain"
    RESOLVED_BY_OPERATOR = "resolved_by_operator"
    KIND_CHANGED = "kind_changed"
    """A deploy changed the kind's steps inside the part the job had done (decision KV2)."""


TERMINAL_STATES: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.DEAD}
)
"""States nothing automatic ever leaves. `unknown` is not terminal: an operator settles it."""

REPLAYABLE_STATES: frozenset[JobState] = frozenset(
    {JobState.DEAD, JobState.FAILED, JobState.UNKNOWN}
)

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.DEAD}),
    JobState.RUNNING: frozenset(
        {
            JobState.RUNNING,  # a reclaim after an expired lease (new epoch)
            JobState.QUEUED,  # retry with backoff, or rescue of an expired lease
            JobState.WAITING_APPROVAL,
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.DEAD,
            JobState.UNKNOWN,
        }
    ),
    JobState.WAITING_APPROVAL: frozenset({JobState.QUEUED, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset({JobState.QUEUED}),  # operator replay
    JobState.CANCELLED: frozenset(),
    JobState.DEAD: frozenset({JobState.QUEUED}),  # operator replay
    JobState.UNKNOWN: frozenset({JobState.QUEUED, JobState.SUCCEEDED, JobState.FAILED}),
}


def can_transition(source: JobState, target: JobState) -> bool:
    """Whether the state machine allows `source` → `target`."""
    return target in TRANSITIONS[source]


def is_terminal(state: JobState) -> bool:
    return state in TERMINAL_STATES
