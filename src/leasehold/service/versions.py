"""Kind versions at resume (decisions KV1–KV4): before a claimed job runs a step, the
step list its checkpoint refers to is compared with the one its kind plans now.

- the same list: nothing to do (no write);
- a list changed only after the checkpoint (steps appended, or changed from the step the job
  holds nothing of on): the job runs on, recording the new list (one fenced write, only for
  a job that crossed such a deploy);
- a list changed inside the part the job did (a finished step, or the step whose approval,
  effect or operation it holds): the job stops `failed` / `kind_changed`, naming both
  fingerprints and the first step that differs — `unknown` if an effect is open — unless the
  kind declares a migration from the recorded fingerprint, which maps the old checkpoint onto
  the new list.

A job with no list recorded (accepted before kind versions, or replayed from its start) takes
the one its kind plans now."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from leasehold.domain.job import Checkpoint, Job
from leasehold.domain.versions import StepList
from leasehold.service.kinds import Migrate, StepPlan, step_list_of


@dataclass(frozen=True)
class RunOn:
    """Go on from `checkpoint`, recording `step_list` (`write` False: nothing changed)."""

    checkpoint: Checkpoint
    step_list: str
    write: bool
    migrated_from: str | None = None


@dataclass(frozen=True)
class Changed:
    """The job must not run on: its error, and whether an open effect makes it `unknown`."""

    error: dict[str, str]
    effect_open: bool
    why: str = ""
    """What changed, without the advice (the `unknown` error's reason when an effect is open)."""


def held_step(job: Job) -> bool:
    """Whether the job holds something of its next step that belongs to that step of the list
    it recorded: its approval, its open effect, or an operation of its ledger."""
    index = job.checkpoint.next_step
    if job.checkpoint.approved_step == index:
        return True
    if job.effect_intent and job.effect_intent.get("step") == index:
        return True
    return f"{job.job_id}:{index}" in job.operations


def on_resume(
    job: Job, kind_name: str, plan: list[StepPlan], migrate: Migrate | None
) -> RunOn | Changed:
    """How a claimed job goes on under the step list its kind plans now (`plan`)."""
    current = step_list_of(plan)
    encoded = current.encode()
    checkpoint = job.checkpoint
    if job.step_list == encoded:
        return RunOn(checkpoint, encoded, write=False)
    recorded = StepList.decode(job.step_list) if job.step_list else None
    if recorded is None:
        # Nothing recorded (or nothing readable): the job takes the list it runs now.
        return RunOn(checkpoint, encoded, write=True)
    mapped = _migrated(job, recorded, current, plan, migrate)
    if mapped is not None:
        return mapped
    done = checkpoint.next_step
    upto = done + 1 if held_step(job) else done
    differs = recorded.first_difference(current, upto)
    if differs is None:
        step_changed = recorded.first_difference(current, done + 1) is not None
        if step_changed:
            # the next step is a new one: its predecessor's failed tries are not its own
            checkpoint = replace(checkpoint, step_failures=0)
        return RunOn(checkpoint, encoded, write=True)
    now = f"'{plan[differs].name}'" if differs < len(plan) else "no step"
    why = (
        f"kind '{kind_name}' changed under this job: its checkpoint (step {done} of "
        f"{len(recorded.digests)}) belongs to steps {recorded.fingerprint}, the kind now has "
        f"steps {current.fingerprint}; step {differs} differs (now {now})"
    )
    message = (
        f"{why}. Declare a migration from {recorded.fingerprint}, or replay the job from its start"
    )
    return Changed(
        {
            "code": "kind_changed",
            "message": message[:500],
            "recorded": recorded.fingerprint,
            "current": current.fingerprint,
            "step": str(differs),
        },
        effect_open=bool(job.effect_intent),
        why=why[:300],
    )


def _migrated(
    job: Job, recorded: StepList, current: StepList, plan: list[StepPlan], migrate: Migrate | None
) -> RunOn | Changed | None:
    """The checkpoint a declared migration maps the job onto; None with none declared."""
    if migrate is None:
        return None
    failed = {
        "code": "migration_failed",
        "recorded": recorded.fingerprint,
        "current": current.fingerprint,
    }
    try:
        mapped = migrate(recorded.fingerprint, job.checkpoint, job.payload)
    except ValueError as refused:
        message = f"{refused} (to steps {current.fingerprint})"[:500]
        return Changed({**failed, "message": message}, bool(job.effect_intent), message[:300])
    if mapped is None:
        return None
    why = _refused(job, mapped, len(plan))
    if why is None and job.effect_intent:
        why = "an effect is open: its step cannot be mapped"
    if why is not None:
        message = (
            f"the migration from steps {recorded.fingerprint} to {current.fingerprint} of kind "
            f"'{job.kind}' cannot be used: {why}"
        )
        return Changed({**failed, "message": message[:500]}, bool(job.effect_intent), message[:300])
    checkpoint = Checkpoint(
        next_step=mapped.next_step,
        cost_used=job.checkpoint.cost_used,
        steps_used=job.checkpoint.steps_used,
        outputs=list(mapped.outputs),
        approved_step=None,  # an approval was given to a step of the old list
        step_failures=0,
    )
    return RunOn(checkpoint, current.encode(), write=True, migrated_from=recorded.fingerprint)


def _refused(job: Job, mapped: Checkpoint, steps: int) -> str | None:
    """What is wrong with a mapped checkpoint, or None."""
    if not 0 <= mapped.next_step <= steps:
        return f"next_step {mapped.next_step} is not between 0 and {steps}"
    if len(mapped.outputs) != mapped.next_step:
        return f"{len(mapped.outputs)} outputs for next_step {mapped.next_step}"
    try:
        json.dumps(mapped.outputs, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"its outputs are not JSON ({exc})"
    for operation_id in job.operations:
        index = operation_id.rpartition(":")[2]
        if index.isdigit() and int(index) >= mapped.next_step:
            # that step would find the old list's operation as its own
            return f"operation {operation_id} of the old list lies at or after next_step"
    return None


__all__ = ["Changed", "Migrate", "RunOn", "held_step", "on_resume"]
