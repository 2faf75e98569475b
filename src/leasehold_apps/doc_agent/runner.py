"""Applying one allowed tool to the checkpoint, and the job's result: the pure calls the engine
makes between its fenced checkpoint writes.

One tool step, as the engine runs it (every save is a fenced worker write, docs/architecture.md
rule 3):

    proposal = next_proposal(planner, checkpoint)            # None: done → result_of(checkpoint)
    allowed = check_proposal(proposal, checkpoint, ...)      # or ToolRejected / BudgetStop /
                                                             #    NotEnoughTime
    checkpoint = checkpoint.begin(allowed.tool); save(checkpoint)      # the step is spent
    checkpoint = run_tool(allowed, checkpoint, job_input, load_text); save(checkpoint)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint, CheckpointError
from leasehold_apps.doc_agent.draft import draft
from leasehold_apps.doc_agent.extract import extract
from leasehold_apps.doc_agent.guard import AllowedTool
from leasehold_apps.doc_agent.planner import FixturePlanner, Planner, PlannerError, ScriptedPlanner
from leasehold_apps.doc_agent.spec import DocPrepInput, PlannerSpec
from leasehold_apps.doc_agent.validate import validate


def run_tool(
    allowed: AllowedTool,
    checkpoint: AgentCheckpoint,
    job_input: DocPrepInput,
    load_text: Callable[[], str],
) -> AgentCheckpoint:
    """Run `allowed.tool` and return the checkpoint after it. `checkpoint` must be the one saved
    by `begin(allowed.tool)` for this very step (else CheckpointError: a tool that was not
    counted never runs). `load_text` is called only by `extract` (the S3 read, if any, happens
    only then); the text is used and dropped, never stored."""
    if checkpoint.tool_in_flight != allowed.tool or checkpoint.steps_started != (
        allowed.step_index + 1
    ):
        raise CheckpointError(f"{allowed.tool} must be begun and saved before it runs")
    if allowed.tool == "extract":
        return checkpoint.finish("extract", fields=extract(load_text()))
    if allowed.tool == "validate":
        problems = validate(checkpoint.fields, job_input.required_fields)
        return checkpoint.finish("validate", problems=problems)
    if allowed.tool == "draft":
        return checkpoint.finish("draft", draft_note=draft(checkpoint.fields, checkpoint.problems))
    raise CheckpointError(f"no tool named {allowed.tool!r}")


def result_of(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """The job's result (docs/architecture.md "The document-preparation agent"): `fields`,
    `problems`, `draft_note` (None when draft did not
    run) and `tools_run`. Bounded by the checkpoint's bound (≤ 6 KiB, under the 16 KiB result
    limit)."""
    return {
        "fields": dict(checkpoint.fields),
        "problems": [problem.as_dict() for problem in checkpoint.problems],
        "draft_note": checkpoint.draft_note,
        "tools_run": list(checkpoint.tools_run),
    }


def build_planner(spec: PlannerSpec, *, hosted: Callable[[], Planner] | None = None) -> Planner:
    """The planner a job asked for. `hosted` builds the configured HostedPlanner; a hosted job
    with none configured was refused at accept, so reaching here without one is a bug."""
    if spec.kind == "fixture":
        return FixturePlanner()
    if spec.kind == "scripted":
        return ScriptedPlanner(spec.proposals)
    if spec.kind == "hosted" and hosted is not None:
        return hosted()
    raise PlannerError(f"no planner of kind {spec.kind!r} is configured")
