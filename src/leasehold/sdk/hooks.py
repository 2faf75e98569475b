"""What a kind's hooks see and return (`Kind.result`, `Kind.outcome_writes`,
`Kind.when_related_changed`, migrations): read-only pictures of a job at one moment, made by the
engine. `leasehold.Kind` re-exports them; import them from `leasehold`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from leasehold.sdk.context import JobInfo


@dataclass(frozen=True)
class Finished:
    """What a kind's `result` hook sees once every step ran."""

    job: JobInfo
    outputs: Mapping[str, Any]
    """Each step's output by step name."""
    output_list: Sequence[Any]
    """Each step's output in step order (for kinds whose step names may repeat)."""
    cost_used: int
    steps_completed: int


@dataclass(frozen=True)
class Outcome:
    """What a kind's `outcome_writes` hook sees: the state the job is about to take, with its
    result (succeeded) or error (failed, dead)."""

    job: JobInfo
    state: str
    """`succeeded`, `failed`, `dead` or `cancelled`."""
    result: Any
    error: Mapping[str, str] | None
    now_ms: int


@dataclass(frozen=True)
class RelatedChange:
    """An outcome write's condition failed: the item it wrote had moved on."""

    job: JobInfo
    index: int
    """The write's position in the list `outcome_writes` returned."""
    old_item: Mapping[str, Any] | None
    """The item as it was (DynamoDB attribute-value form), None when it is gone."""


@dataclass(frozen=True)
class Checkpoint:
    """A job's place in its kind's steps, as a migration sees and returns it: the first
    `next_step` steps are finished, with `outputs` their outputs in step order.

    A migration (`Kind(..., migrations={old_fingerprint: fn})`) gets the checkpoint a job saved
    under the step list of `old_fingerprint` and returns where the job goes on in the kind's
    current list: `len(outputs) == next_step`, every output JSON."""

    next_step: int
    outputs: tuple[Any, ...] = ()


class Migration(Protocol):
    """A kind's migration: maps a job's checkpoint under an older step list onto the kind's
    current one (docs/sdk.md, "Changing a kind's steps"). Any function of this shape will do."""

    def __call__(self, old: Checkpoint, /) -> Checkpoint:
        """The checkpoint the job goes on from in the current list."""
        ...


__all__ = ["Checkpoint", "Finished", "Migration", "Outcome", "RelatedChange"]
