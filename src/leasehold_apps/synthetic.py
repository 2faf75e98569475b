"""The `synthetic` kind: steps with cost, duration, failures and effects, all described by the
payload — for demos, tests and benchmarks. Built on leasehold's public API alone.

`payload = {"steps": [{"name", "cost", "duration_ms", "approval", "fail_times", "fatal",
"effect"}, …]}` (1–20 steps, every field but `name` optional). The result is
`{"steps_completed", "cost_used", "outputs": [...]}`."""

from __future__ import annotations

import time
from typing import Any

from leasehold import (
    FatalError,
    Finished,
    Kind,
    Owner,
    RetryableError,
    Step,
    StepContext,
    StepInterruptedError,
    ValidationError,
    int_setting,
)

MAX_STEPS = 20
STEP_FIELDS = {"name", "cost", "duration_ms", "approval", "fail_times", "fatal", "effect"}
MAX_STEP_MS = int_setting("MAX_STEP_SECONDS", 60) * 1000
"""The deployment's longest step: a longer `duration_ms` could never start."""

synthetic = Kind("synthetic")


@synthetic.check
def check_steps(payload: dict[str, Any], owner: Owner) -> None:
    if set(payload) - {"steps"}:
        raise ValidationError("synthetic payload takes only 'steps'")
    steps = payload.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise ValidationError(f"'payload.steps' must be a list of 1 to {MAX_STEPS} steps")
    for index, step in enumerate(steps):
        where = f"payload.steps[{index}]"
        if not isinstance(step, dict):
            raise ValidationError(f"'{where}' must be an object")
        extra = sorted(set(step) - STEP_FIELDS)
        if extra:
            raise ValidationError(f"'{where}' has unknown field(s): {', '.join(extra)}")
        name = step.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 64:
            raise ValidationError(f"'{where}.name' must be a string of 1 to 64 characters")
        limits = (("cost", 10**9), ("duration_ms", MAX_STEP_MS), ("fail_times", 10))
        for int_field, high in limits:
            value = step.get(int_field, 0)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ValidationError(f"'{where}.{int_field}' must be an integer 0–{high}")
        for bool_field in ("approval", "fatal", "effect"):
            if not isinstance(step.get(bool_field, False), bool):
                raise ValidationError(f"'{where}.{bool_field}' must be true or false")


@synthetic.planner
def plan_steps(payload: dict[str, Any]) -> list[Step]:
    return [
        Step(
            step["name"],
            run_step,
            cost=int(step.get("cost", 0)),
            approval=bool(step.get("approval", False)),
            timeout_seconds=int(step.get("duration_ms", 0)) / 1000,
            effect=bool(step.get("effect", False)),
        )
        for step in payload["steps"]
    ]


def run_step(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Sleep `duration_ms` in short slices, heartbeating between them (False: the lease is gone
    or a cancel came, and the step stops); then fail as the step says, or succeed."""
    step = payload["steps"][ctx.step_index]
    remaining = int(step.get("duration_ms", 0)) / 1000
    while remaining > 0:
        slice_s = min(0.25, remaining)
        time.sleep(slice_s)
        remaining -= slice_s
        if not ctx.heartbeat():
            raise StepInterruptedError(f"step '{step['name']}' was interrupted")
    if step.get("fatal"):
        raise FatalError(f"step '{step['name']}' failed for good")
    if ctx.step_try <= int(step.get("fail_times", 0)):
        raise RetryableError(f"step '{step['name']}' failed on try {ctx.step_try}")
    return {"step": step["name"], "cost": int(step.get("cost", 0))}


@synthetic.result
def synthetic_result(finished: Finished) -> dict[str, Any]:
    return {
        "steps_completed": finished.steps_completed,
        "cost_used": finished.cost_used,
        "outputs": list(finished.output_list),
    }
