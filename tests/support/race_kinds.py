"""The child kind the workflow race and cancel tests share (tests/integration/
test_workflow_races.py, test_workflow_cancel.py): two steps that count their runs in `runs`
("<step>:<job id>") and call a test's `hooks["work:<i>"]` inside the first, once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from leasehold import Kind, StepContext

runs: Counter[str] = Counter()  # "<step>:<job id>" → runs
hooks: dict[str, Any] = {}

child = Kind("race_child")


@child.step()
def work(ctx: StepContext, payload: dict[str, Any]) -> int:
    runs[f"work:{ctx.job_id}"] += 1
    hook = hooks.pop(f"work:{payload['i']}", None)
    if hook is not None:
        hook(ctx)
    return int(payload["i"])


@child.step()
def finish(ctx: StepContext, payload: dict[str, Any]) -> int:
    runs[f"finish:{ctx.job_id}"] += 1
    return int(ctx.outputs["work"])
