"""A benchmark-only job kind: the synthetic kind with an opaque `pad` string in its payload, so
the benchmark can submit a 1-step job with a 1 KiB or 8 KiB payload (the synthetic kind's own
payload takes only its steps, whose names are at most 64 characters). It runs exactly as the
synthetic kind; only the stored payload is bigger. Registered in the runtime by the benchmark,
never by the functions."""

from __future__ import annotations

from typing import Any

from leasehold import Kind, Limit, Owner, Rate, ValidationError
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
