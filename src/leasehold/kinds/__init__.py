"""Job kinds: one module per kind. A kind validates its payload and runs one step at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


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

    def validate(self, payload: dict[str, Any]) -> None:
        """Raise ValidationError for a payload that can never run."""

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        """The steps of a job, known up front (≤ 20, DESIGN §3.8)."""

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        """Run step `index` on try `attempt`; `tick()` heartbeats and says whether to stop."""


@dataclass(frozen=True)
class KindConfig:
    """What the kinds need from a function's settings (built once per cold start)."""

    max_step_ms: int = 60_000


def registry(config: KindConfig | None = None) -> dict[str, JobKind]:
    from leasehold.kinds.synthetic import SyntheticKind

    config = config or KindConfig()
    kinds: list[JobKind] = [SyntheticKind(max_step_ms=config.max_step_ms)]
    return {kind.name: kind for kind in kinds}
