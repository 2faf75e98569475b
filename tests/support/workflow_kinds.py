"""Workflow kinds for the operator's workflow routes and the console's browser test (named in
`LEASEHOLD_KINDS`): `ops_fan` starts `payload["n"]` `ops_leaf` children and joins them; a leaf
with `"wait": true` (and `ops_wait`) waits for the signal `reviewed`, so a test can see a parent
whose children are still running, signal one, or cancel the parent under them. The parent's
`"gate": path` goes to its first child, which fails (`gate_shut`) while no file is at `path`, so
a test can see a branch fail and, the file made, replay it; `"tolerate"` is the set's
`tolerate_failures`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leasehold import FatalError, Kind, StepContext

fan = Kind("ops_fan", schema={"type": "object"})
leaf = Kind("ops_leaf", schema={"type": "object"})
waiter = Kind("ops_wait", schema={"type": "object"})


@fan.step()
def start(ctx: StepContext, payload: dict[str, Any]) -> int:
    wait, gate = bool(payload.get("wait")), payload.get("gate")
    leaves = [{"i": i, "wait": wait} for i in range(int(payload["n"]))]
    if gate:
        leaves[0]["gate"] = gate
    return len(ctx.map("ops_leaf", leaves, tolerate_failures=int(payload.get("tolerate", 0))))


@fan.step()
def join(ctx: StepContext, payload: dict[str, Any]) -> int:
    return sum(1 for child in ctx.children() if child.state == "succeeded")


@leaf.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> int:
    if payload.get("gate") and not Path(payload["gate"]).exists():
        raise FatalError("the gate is shut", code="gate_shut")
    if payload.get("wait"):
        ctx.wait_for_signal("reviewed", timeout_seconds=3600)
    return int(payload.get("i", 0))


@leaf.step()
def answer(ctx: StepContext, payload: dict[str, Any]) -> Any:
    return ctx.signal("reviewed") if payload.get("wait") else None


@waiter.step()
def park(ctx: StepContext, payload: dict[str, Any]) -> str:
    ctx.wait_for_signal("reviewed", timeout_seconds=3600)
    return "asked"


@waiter.step()
def resume(ctx: StepContext, payload: dict[str, Any]) -> Any:
    return {"reviewed": ctx.signal("reviewed")}


KINDS = [fan, leaf, waiter]
