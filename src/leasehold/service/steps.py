"""What running one step comes to, as a value (River's `JobSnooze`, STYLE item 19): the worker's
second room (service/worker.py) returns exactly one `StepOutcome` for each step it starts or
declines to start, and the third (service/outcomes.py, `Outcomes.settle`) turns every outcome but
`Completed` into the job's one fenced write. A step's output is never confused with a decision
about the job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from leasehold.domain.errors import StepError
from leasehold.domain.states import JobState, StopReason
from leasehold.service.kinds import StepPlan


@dataclass(frozen=True)
class Completed:
    """The step ran to its end and returned `output` (checkpointed by the worker)."""

    output: Any


@dataclass(frozen=True)
class Failed:
    """The step raised `error` (a kind's StepError, or a bug wrapped as a transient one): a retry,
    `dead`, `failed`, or `unknown` with an effect open — `Outcomes.settle` decides."""

    error: StepError


@dataclass(frozen=True)
class Stopped:
    """The job ends in `state` (cancelled, failed, dead) for `reason`, with `error`."""

    state: JobState
    reason: str
    error: dict[str, str] | None = None
    note: str | None = None
    """A short line for the history entry (a kind's stop record)."""


@dataclass(frozen=True)
class BudgetExhausted:
    """The next step would pass the job's budget (`max_steps`, `max_cost`): `failed`."""

    message: str


@dataclass(frozen=True)
class Uncertain:
    """The step that opened an external effect ended some other way than by finishing:
    `unknown`, the intent kept for an operator."""

    why: str


@dataclass(frozen=True)
class HandedBack:
    """The invocation has no time for (or ended under) the step: `queued` again at once, the
    checkpoint kept, the attempt not spent."""

    why: str


@dataclass(frozen=True)
class AwaitingApproval:
    """The step needs an approval the job does not hold: `waiting_approval` before it runs."""

    step: StepPlan
    index: int


@dataclass(frozen=True)
class LeaseLost:
    """The lease went to another worker during the step: nothing more is written."""


StepOutcome: TypeAlias = (
    Completed
    | Failed
    | Stopped
    | BudgetExhausted
    | Uncertain
    | HandedBack
    | AwaitingApproval
    | LeaseLost
)
"""Everything one step can come to."""

Settled: TypeAlias = (
    Failed | Stopped | BudgetExhausted | Uncertain | HandedBack | AwaitingApproval | LeaseLost
)
"""A step outcome that ends the attempt (every one but `Completed`)."""


def cancelled() -> Stopped:
    """The caller's cancel, seen before or during a step."""
    return Stopped(JobState.CANCELLED, StopReason.CANCELLED_BY_USER)


__all__ = [
    "AwaitingApproval",
    "BudgetExhausted",
    "Completed",
    "Failed",
    "HandedBack",
    "LeaseLost",
    "Settled",
    "StepOutcome",
    "Stopped",
    "Uncertain",
    "cancelled",
]
