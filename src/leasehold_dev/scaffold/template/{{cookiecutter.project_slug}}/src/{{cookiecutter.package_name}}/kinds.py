"""The project's job kinds. The engine registers every `Kind` at module level of the modules
named by LEASEHOLD_KINDS (template.yaml's `Kinds` parameter: this module by default).

Each step's output is saved before the next step starts, so a retry, or a worker that died
mid-job, never runs a finished step again: the next step reads it from `ctx.outputs`."""

from __future__ import annotations

from typing import Any

from leasehold import FatalError, Kind, RetryableError, StepContext

greet = Kind(
    "greet",
    schema={
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 100},
            "fail": {"enum": ["fatal"]},
            "succeed_on_attempt": {"type": "integer", "minimum": 1, "maximum": 3},
        },
        "additionalProperties": False,
    },
)


@greet.step()
def compose(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """The greeting's text (and the attempt that wrote it: a later attempt reads it back)."""
    return {"text": f"Hello, {payload['name']}", "attempt": ctx.attempt}


@greet.step()
def sign(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """The greeting, signed: the job's result (the last step's output)."""
    if payload.get("fail") == "fatal":
        raise FatalError("asked to fail")  # the job ends failed / handler_error, no retry
    if ctx.attempt < payload.get("succeed_on_attempt", 1):
        raise RetryableError("not yet")  # retried with backoff, then dead
    composed = ctx.outputs["compose"]  # the first step's saved output: it does not run again
    return {
        "greeting": composed["text"] + "!",
        "attempts": {"compose": composed["attempt"], "sign": ctx.attempt},
    }
