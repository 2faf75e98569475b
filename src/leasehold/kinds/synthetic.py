"""The `synthetic` kind (arch §4): steps with cost, duration, failures and effects, for demos,
tests and benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from leasehold.domain.errors import (
    FatalStepError,
    StepInterruptedError,
    TransientStepError,
    ValidationError,
)
from leasehold.domain.policies import MAX_STEPS
from leasehold.kinds import KindBase, StepPlan

_STEP_FIELDS = {"name", "cost", "duration_ms", "approval", "fail_times", "fatal", "effect"}


class SyntheticKind(KindBase):
    name = "synthetic"

    def __init__(self, max_step_ms: int = 60_000) -> None:
        self.max_step_ms = max_step_ms

    def validate(self, payload: dict[str, Any]) -> None:
        if set(payload) - {"steps"}:
            raise ValidationError("synthetic payload takes only 'steps'")
        steps = payload.get("steps")
        if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
            raise ValidationError(f"'payload.steps' must be a list of 1 to {MAX_STEPS} steps")
        for index, step in enumerate(steps):
            where = f"payload.steps[{index}]"
            if not isinstance(step, dict):
                raise ValidationError(f"'{where}' must be an object")
            extra = sorted(set(step) - _STEP_FIELDS)
            if extra:
                raise ValidationError(f"'{where}' has unknown field(s): {', '.join(extra)}")
            name = step.get("name")
            if not isinstance(name, str) or not 1 <= len(name) <= 64:
                raise ValidationError(f"'{where}.name' must be a string of 1 to 64 characters")
            limits = (("cost", 10**9), ("duration_ms", self.max_step_ms), ("fail_times", 10))
            for int_field, high in limits:
                value = step.get(int_field, 0)
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                    raise ValidationError(f"'{where}.{int_field}' must be an integer 0–{high}")
            for bool_field in ("approval", "fatal", "effect"):
                if not isinstance(step.get(bool_field, False), bool):
                    raise ValidationError(f"'{where}.{bool_field}' must be true or false")

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        return [
            StepPlan(
                name=step["name"],
                cost=int(step.get("cost", 0)),
                duration_ms=int(step.get("duration_ms", 0)),
                needs_approval=bool(step.get("approval", False)),
                has_effect=bool(step.get("effect", False)),
            )
            for step in payload["steps"]
        ]

    def run_step(
        self,
        payload: dict[str, Any],
        index: int,
        attempt: int,
        tick: Callable[[], bool],
    ) -> Any:
        """Sleep `duration_ms` in short slices, calling `tick()` (heartbeat) between them;
        `tick()` returning False means the lease is gone or a cancel came, and the step stops."""
        step = payload["steps"][index]
        remaining = int(step.get("duration_ms", 0)) / 1000
        while remaining > 0:
            slice_s = min(0.25, remaining)
            time.sleep(slice_s)
            remaining -= slice_s
            if not tick():
                raise StepInterruptedError(f"step '{step['name']}' was interrupted")
        if step.get("fatal"):
            raise FatalStepError(f"step '{step['name']}' failed for good")
        if attempt <= int(step.get("fail_times", 0)):
            raise TransientStepError(f"step '{step['name']}' failed on try {attempt}")
        return {"step": step["name"], "cost": int(step.get("cost", 0))}
