"""The demo's own job kinds, registered beside the applications by `leasehold demo`: a render
limited to two running per tenant over two slot items (decision F2, check D2), and a ping
limited to two starts a second per tenant (decision F3, check D3), and a busy kind without any
concurrency limit for the backlog of the priorities' check (decision F4, check D5)."""

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
