"""Job kinds: one module per kind. A kind validates its payload, plans its steps and runs one
step at a time; the engine (service/worker.py) does everything else — claims, leases,
checkpoints, retries, budgets, outcomes. A kind may also name writes that must commit with the
job's outcome (the bookmark a title job fills in) and say how the job ends when one of them
finds its item changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from leasehold.domain.errors import ValidationError

if TYPE_CHECKING:
    from leasehold.agent.planner import Planner
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job, Owner
    from leasehold.domain.states import JobState, StopReason
    from leasehold.store.documents import DocumentReader


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

    def validate(self, payload: dict[str, Any]) -> None:
        """Raise ValidationError for a payload that can never run."""

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        """What the API calls at accept: `validate`, plus any rule that depends on who submits
        (doc_prep: a document key must be in the caller's tenant)."""

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        """The steps of a job, known up front (≤ 20, arch §3.8)."""

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        """Run step `index` on try `attempt`; `tick()` heartbeats and says whether to stop."""

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        """The job's visible result once every step ran."""

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        """Transaction items that must commit with this outcome, or not at all."""

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[StopReason, dict[str, str]]:
        """How the job ends (`cancelled` with this reason) when an outcome write's item moved."""


class KindBase:
    """The defaults: submittable, the step outputs as the result, no writes of its own."""

    name = "base"
    submittable = True
    max_payload_bytes = 16 * 1024

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
    ) -> tuple[StopReason, dict[str, str]]:
        raise changed  # a kind with no outcome writes never meets one


class BookmarkKindBase(KindBase):
    """A kind whose job works on one bookmark's source (`title`, `enrich`): its payload names
    the bookmark, its URL and the `source_version` its outcome is fenced by."""

    submittable = False
    noun = "a bookmark job"

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
    from leasehold.kinds.enrich import EnrichKind
    from leasehold.kinds.synthetic import SyntheticKind
    from leasehold.kinds.title import TitleKind

    config = config or KindConfig()
    kinds: list[JobKind] = [
        SyntheticKind(max_step_ms=config.max_step_ms),
        TitleKind(config.title_fetcher, slow_seconds=config.fixture_slow_seconds),
        EnrichKind(
            config.enrichment_provider_url,
            config.enrichment_provider_capability,
            local_providers=config.local_providers,
        ),
        DocPrepKind(
            documents=config.documents,
            hosted_planner=config.hosted_planner,
            safety_margin_ms=config.agent_safety_margin_ms,
        ),
    ]
    return {kind.name: kind for kind in kinds}
