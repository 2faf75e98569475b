"""The kinds the tests run: the applications loaded as the functions load them
(`LEASEHOLD_KINDS`), and test doubles of the synthetic kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leasehold.sdk.engine_kind import EngineKind
from leasehold.sdk.loading import load_kinds
from leasehold.service.kinds import JobKind
from leasehold_apps.synthetic import synthetic

APPLICATIONS = "leasehold_apps.synthetic,leasehold_apps.reading_list,leasehold_apps.doc_agent"


def registry() -> dict[str, JobKind]:
    """Every kind the deployed functions register, keyed by name."""
    return dict(load_kinds(APPLICATIONS, start_checks=False).kinds)


def synthetic_kind() -> EngineKind:
    return EngineKind(synthetic)


class ScriptedKind(EngineKind):
    """The synthetic kind with a test hook inside each step: lets a test act *while* a worker is
    in the middle of a step (advance time, crash, let another worker in)."""

    def __init__(self, hook: Callable[[int, int, Callable[[], bool]], None]) -> None:
        super().__init__(synthetic)
        self._hook = hook

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, ctx: Any) -> Any:
        self._hook(index, attempt, ctx)
        return super().run_step(payload, index, attempt, ctx)


__all__ = ["JobKind", "ScriptedKind", "registry", "synthetic_kind"]
