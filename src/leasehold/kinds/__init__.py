"""Job kinds: one module per kind. A kind validates its payload, plans its steps and runs one
step at a time; the engine (service/worker.py) does everything else — claims, leases,
checkpoints, retries, budgets, outcomes. A kind may also name writes that must commit with the
job's outcome (the bookmark a title job fills in) and say how the job ends when one of them
finds its item changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leasehold.domain.errors import ValidationError
from leasehold.service.kinds import JobKind, StepPlan

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job, Owner
    from leasehold.domain.states import JobState


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


class BookmarkKindBase(KindBase):
    """A kind whose job works on one bookmark's source (`title`, `enrich`): its payload names
    the bookmark, its URL and the `source_version` its outcome is fenced by."""

    submittable = False
    noun = "a bookmark job"
    operators_see_payload = True

    def related(self, job: Job) -> dict[str, Any]:
        return {"bookmark_id": job.payload.get("bookmark_id")}

    def validate(self, payload: dict[str, Any]) -> None:
        if not isinstance(payload.get("bookmark_id"), str) or not isinstance(
            payload.get("url"), str
        ):
            raise ValidationError(f"{self.noun} needs 'bookmark_id' and 'url'")
        if not isinstance(payload.get("source_version"), int):
            raise ValidationError(f"{self.noun} needs 'source_version'")


@dataclass(frozen=True)
class KindConfig:
    """What the kinds need from a function's settings (built once per cold start)."""

    max_step_ms: int = 60_000
    title_fetcher: str = "fixture"
    fixture_slow_seconds: float = 3.0
    enrichment_provider_url: str = ""
    enrichment_provider_capability: str = "none"
    local_providers: dict[str, str] | None = None
    """The local stack's own providers by mode (idempotent, lookup, none): a request may pick one
    and ask it for a fault. Never set when deployed."""


def registry(config: KindConfig | None = None) -> dict[str, JobKind]:
    from leasehold.kinds.enrich import EnrichKind
    from leasehold.kinds.title import TitleKind

    config = config or KindConfig()
    kinds: list[JobKind] = [
        TitleKind(config.title_fetcher, slow_seconds=config.fixture_slow_seconds),
        EnrichKind(
            config.enrichment_provider_url,
            config.enrichment_provider_capability,
            local_providers=config.local_providers,
        ),
    ]
    return {kind.name: kind for kind in kinds}


__all__ = ["JobKind", "KindBase", "KindConfig", "StepPlan", "registry"]
