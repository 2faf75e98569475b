"""A benchmark-only job kind: the synthetic kind with an opaque `pad` string in its payload, so
the benchmark can submit a 1-step job with a 1 KiB or 8 KiB payload (the synthetic kind's own
payload takes only its steps, whose names are at most 64 characters). It runs exactly as the
synthetic kind; only the stored payload is bigger. Registered in the runtime by the benchmark,
never by the functions."""

from __future__ import annotations

from typing import Any

from leasehold import Kind, Limit, Owner, Rate, StepContext, ValidationError
from leasehold_apps.synthetic import check_steps, plan_steps, synthetic_result

MAX_PAD_BYTES = 15 * 1024
"""Below the API's 16 KiB payload bound with the steps around it."""

padded = Kind("padded")
padded.planner(plan_steps)
padded.result(synthetic_result)


@padded.check
def _check_pad(payload: dict[str, Any], owner: Owner) -> None:
    pad = payload.get("pad", "")
    if not isinstance(pad, str) or len(pad.encode()) > MAX_PAD_BYTES:
        raise ValidationError(f"'payload.pad' must be a string of at most {MAX_PAD_BYTES} bytes")
    check_steps({"steps": payload.get("steps")}, owner)


keyed = Kind("keyed", concurrency=[Limit("tenant", max=50, shards=4)])
"""The synthetic kind with one concurrency key (decision F2): at most 50 running per tenant,
over four slot items, instead of the per-user limit."""
keyed.planner(plan_steps)
keyed.result(synthetic_result)
keyed.check(check_steps)


rated = Kind("rated", rate=[Rate("tenant", limit=1000, per_seconds=1)])
"""The synthetic kind with one rate (decision F3), high enough that the benchmark's burst is
never refused: the price of a start taken, not of waiting."""
rated.planner(plan_steps)
rated.result(synthetic_result)
rated.check(check_steps)


fanout = Kind("fanout")
"""A parent that starts `children` 1-step synthetic children in one step (`ctx.map`) and joins
them in the next (reads every child's view, as a step that gathers results would): the 100-child
fan-out the bench prices per child (issue 31, item 8)."""


@fanout.check
def _check_fanout(payload: dict[str, Any], owner: Owner) -> None:
    n = payload.get("children")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
        raise ValidationError("'payload.children' must be an integer from 1 to 10,000")


@fanout.step()
def spawn(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    child = {"steps": [{"name": "s0", "cost": 0, "duration_ms": 0}]}
    ids = ctx.map("synthetic", [child] * int(payload["children"]))
    return {"started": len(ids)}


@fanout.step()
def join(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    states = [view.state for view in ctx.children()]
    return {"succeeded": states.count("succeeded"), "children": len(states)}
