"""Job kinds not yet moved onto the public SDK (`leasehold.Kind`, applications in
`leasehold_apps`): one module per kind. A kind validates its payload, plans its steps and runs
one step at a time; the engine (service/worker.py) does everything else — claims, leases,
checkpoints, retries, budgets, outcomes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leasehold.service.kinds import JobKind, StepPlan

if TYPE_CHECKING:
    from leasehold.agent.planner import Planner
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job, Owner
    from leasehold.domain.states import JobState
    from leasehold.store.documents import DocumentReader


class KindBase:
    """The defaults: submittable, the step outputs as the result, no writes of its own."""

    name = "base"
    submittable = True
    max_payload_bytes = 16 * 1024
    default_max_attempts: int | None = None
    operators_see_payload = False

    def view_fields(self, job: Job) -> dict[str, Any]:
        return {}

    def related(self, job: Job) -> dict[str, Any]:
        return {}

    def validate(self, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        self.validate(payload)

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        return {
            "steps_completed": checkpoint.steps_used,
            "cost_used": checkpoint.cost_used,
            "outputs": checkpoint.outputs,
        }

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        return []

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[str, dict[str, str]]:
        raise changed  # a kind with no outcome writes never meets one


@dataclass(frozen=True)
class KindConfig:
    """What the kinds need from a function's settings (built once per cold start)."""

    max_step_ms: int = 60_000
    documents: Callable[[], DocumentReader] | None = None
    """doc_prep: builds the reader of the documents bucket (on first use); None = no bucket, and
    a job naming an `s3_key` fails when its extract runs."""
    hosted_planner: Callable[[], Planner] | None = None
    """doc_prep: builds the configured hosted planner; None = `planner.kind: hosted` is a 400."""
    agent_safety_margin_ms: int = 2_000
    """doc_prep: time kept back before the lease and the deadline beyond a tool's bound (the
    worker's lease safety margin, capped at the agent guard's 2 s)."""


def registry(config: KindConfig | None = None) -> dict[str, JobKind]:
    from leasehold.kinds.doc_prep import DocPrepKind

    config = config or KindConfig()
    kinds: list[JobKind] = [
        DocPrepKind(
            documents=config.documents,
            hosted_planner=config.hosted_planner,
            safety_margin_ms=config.agent_safety_margin_ms,
        ),
    ]
    return {kind.name: kind for kind in kinds}


__all__ = ["JobKind", "KindBase", "KindConfig", "StepPlan", "registry"]
