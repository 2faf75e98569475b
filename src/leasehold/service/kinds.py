"""The shape of a kind as the engine runs it. A kind validates its payload, plans its steps and
runs one step at a time; the engine (service/worker.py) does everything else — claims, leases,
checkpoints, retries, budgets, outcomes. A kind may also name writes that must commit with the
job's outcome (the bookmark a title job fills in) and say how the job ends when one of them
finds its item changed.

Users never implement this protocol: `leasehold.Kind` (sdk/kind.py) does, from the steps and
hooks a user declares. It is the engine's side of that contract and may change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job, Owner
    from leasehold.domain.states import JobState
    from leasehold.service.steps import StepRuntime


@dataclass(frozen=True)
class StepPlan:
    """What the worker must know about a step before it starts it."""

    name: str
    cost: int
    duration_ms: int
    needs_approval: bool
    has_effect: bool


class JobKind(Protocol):
    name: str
    max_payload_bytes: int
    """The largest payload (UTF-8 JSON) this kind accepts (arch §3.8: 16 KiB by default)."""
    submittable: bool
    """Whether callers may submit it with POST /jobs (the reading list's kinds are made by the
    bookmarks API, never submitted directly)."""
    default_max_attempts: int | None
    """The kind's own default for `max_attempts` (None: the function's setting)."""
    operators_see_payload: bool
    """Whether the operator view shows the payload (only for kinds whose payload is not the
    caller's content, such as the reading list's: a bookmark id and a URL)."""

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        """What the API calls at accept: raise ValidationError for a payload that can never run
        (including rules that depend on who submits)."""

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        """The steps of a job, known up front (≤ 20, arch §3.8)."""

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, ctx: StepRuntime) -> Any:
        """Run step `index` on try `attempt`; `ctx()` heartbeats and says whether to stop."""

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        """The job's visible result once every step ran."""

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        """Transaction items that must commit with this outcome, or not at all."""

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[str, dict[str, str]]:
        """How the job ends (`cancelled`, with this stop reason and error) when an outcome
        write's item moved."""

    def view_fields(self, job: Job) -> dict[str, Any]:
        """Fields the kind adds to the job view (an agent's progress); {} for most kinds."""

    def related(self, job: Job) -> dict[str, Any]:
        """What the job belongs to, for operators (the reading list: `bookmark_id`)."""
