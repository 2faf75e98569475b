"""The stand-in for a kind this function does not register (a deployment whose LEASEHOLD_KINDS
lost a module): it plans nothing and writes nothing beside the job's end, so the worker can end
such a job `failed` / `unknown_kind` with the reason named (service/worker.py `_plan`)."""

from __future__ import annotations

from typing import Any

from leasehold.domain.debounce import Debounce
from leasehold.domain.job import Checkpoint, Job, Priority
from leasehold.domain.limits import Limit, Rate
from leasehold.domain.types import JsonObject, RawItem
from leasehold.domain.unique import Unique
from leasehold.service.kinds import DeclaredSchedule, StepPlan


class Unregistered:
    """Stands in for a kind this function does not register, only to end its job: it plans
    nothing and writes nothing beside the outcome."""

    name = ""
    max_payload_bytes = 0
    submittable = False
    default_max_attempts: int | None = None
    operators_see_payload = False
    default_priority: Priority = "normal"
    concurrency: tuple[Limit, ...] | None = None
    rate: tuple[Rate, ...] = ()
    unique: Unique | None = None
    debounce: Debounce | None = None
    declared_schedules: tuple[DeclaredSchedule, ...] = ()

    def validate_for(self, payload: JsonObject, owner: Any) -> None:
        raise AssertionError("an unregistered kind accepts nothing")

    def plan(self, payload: JsonObject) -> list[StepPlan]:
        return []

    def run_step(self, payload: JsonObject, index: int, attempt: int, ctx: Any) -> Any:
        raise AssertionError("an unregistered kind runs nothing")

    def result(self, job: Job, checkpoint: Any) -> Any:
        return None

    def outcome_writes(self, *args: Any) -> list[RawItem]:
        return []

    def when_related_changed(self, job: Job, changed: Any) -> tuple[str, dict[str, str]]:
        raise changed

    def view_fields(self, job: Job) -> JsonObject:
        return {}

    def related(self, job: Job) -> JsonObject:
        return {}

    def migrate(self, fingerprint: str, checkpoint: Checkpoint, payload: Any) -> None:
        return None


__all__ = ["Unregistered"]
