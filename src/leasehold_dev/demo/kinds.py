"""The demo's own job kinds, registered beside the applications by `leasehold demo`: a render
limited to two running per tenant over two slot items (decision F2, check D2), and a ping
limited to two starts a second per tenant (decision F3, check D3), and a busy kind without any
concurrency limit for the backlog of the priorities' check (decision F4, check D5); and the
workflow checks' kinds (W1-W4): a fan-out of `demo_leaf` children and its join, a wait for a
signal or its callback, a durable sleep."""

from __future__ import annotations

import time
from typing import Any

from leasehold import Kind, Limit, Rate, StepContext, StepInterruptedError

MAX_RENDER_MS = 5000

render = Kind(
    "demo_render",
    schema={
        "type": "object",
        "required": ["ms"],
        "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": MAX_RENDER_MS}},
        "additionalProperties": False,
    },
    concurrency=[Limit("tenant", max=2, shards=2)],
)


@render.step(timeout_seconds=10)
def draw(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Take `ms` milliseconds, heart-beating; stop early if asked to."""
    ms, waited = int(payload["ms"]), 0
    while waited < ms:
        if not ctx.heartbeat():
            raise StepInterruptedError("asked to stop")
        step = min(100, ms - waited)
        time.sleep(step / 1000)
        waited += step
    return {"drawn_ms": waited}


ping = Kind("demo_ping", schema={"type": "object"}, rate=[Rate("tenant", limit=2, per_seconds=1)])


@ping.step()
def stamp(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """When the job started (the engine's clock): the demo checks the spacing."""
    return {"started_ms": ctx.now_ms()}


busy = Kind(
    "demo_busy",
    schema={
        "type": "object",
        "required": ["ms"],
        "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": MAX_RENDER_MS}},
        "additionalProperties": False,
    },
    concurrency=[],  # no per-user limit: the backlog keeps every worker busy
)


@busy.step(timeout_seconds=10)
def work(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Take `ms` milliseconds (a backlog's job)."""
    time.sleep(int(payload["ms"]) / 1000)
    return {"worked_ms": int(payload["ms"])}


# ---------------------------------------------------------------- workflows (W1-W4, DESIGN §19)

fan = Kind(
    "demo_fan",
    schema={
        "type": "object",
        "required": ["children", "ms", "at_once"],
        "properties": {
            "children": {"type": "integer", "minimum": 1, "maximum": 50},
            "ms": {"type": "integer", "minimum": 0, "maximum": MAX_RENDER_MS},
            "at_once": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "additionalProperties": False,
    },
    concurrency=[],
)


@fan.step()
def spread(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """A `demo_leaf` child per item, at most `at_once` of them running at once."""
    started = ctx.map(
        "demo_leaf",
        [{"ms": payload["ms"]} for _ in range(payload["children"])],
        max_concurrency=payload["at_once"],
    )
    return {"children": len(started)}


@fan.step()
def join(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Runs once every child has ended: when, and how many succeeded."""
    states = [child.state for child in ctx.children("spread")]
    return {"joined_ms": ctx.now_ms(), "succeeded": states.count("succeeded")}


leaf = Kind(
    "demo_leaf",
    schema={
        "type": "object",
        "required": ["ms"],
        "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": MAX_RENDER_MS}},
        "additionalProperties": False,
    },
    submittable=False,
    concurrency=[],  # only the parent's max_concurrency bounds them
)


@leaf.step(timeout_seconds=10)
def rest(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    started = ctx.now_ms()
    time.sleep(int(payload["ms"]) / 1000)
    return {"started_ms": started, "ended_ms": ctx.now_ms()}


wait = Kind("demo_wait", schema={"type": "object", "additionalProperties": False})


@wait.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Wait up to a minute for the signal `go` — its owner's, or a third party's callback with
    the token (logged for the demo to find, as a review link would be sent)."""
    waiting = ctx.wait_for_signal("go", timeout_seconds=60)
    ctx.logger.info("callback token", token=waiting.token)
    return {"asked_ms": ctx.now_ms()}


@wait.step()
def proceed(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"go": ctx.signal("go"), "asked_ms": ctx.outputs["ask"]["asked_ms"]}


nap = Kind(
    "demo_nap",
    schema={
        "type": "object",
        "required": ["seconds"],
        "properties": {"seconds": {"type": "integer", "minimum": 0, "maximum": 30}},
        "additionalProperties": False,
    },
)


@nap.step()
def lie_down(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.continue_after(payload["seconds"])
    return {"slept_at_ms": ctx.now_ms()}


@nap.step()
def wake(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"slept_at_ms": ctx.outputs["lie_down"]["slept_at_ms"], "woke_ms": ctx.now_ms()}
