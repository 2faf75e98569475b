"""Issue 32's "outputs are no longer rewritten on every checkpoint": the write units of one
20-step job whose steps each return 16 KB, on moto (the testbed, every DynamoDB write priced by
the capacity meter's rules: the larger of the item before and after, per 1 KiB), with the S3
requests counted; and the same job saving 24 KB of progress in every step, its first four steps
effect steps whose 16 KB outputs are receipts. Measured before and after decision LD16 (kind
state and receipts to the bucket): 67 and 67 units for the first (its outputs went to S3
already, LD1), 3,408 and 205 for the second (decisions LD16, docs/capacity.md).

    .venv/bin/python -m bench.checkpoint_writes      # prints the row (decision LD16)

Not `make bench`'s: it runs alone in a few seconds. moto figures, not AWS measurements."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from bench.capacity import TableSpec, price_write
from bench.meter import CapacityMeter, client_requery, moto_peek

STEPS = 20
OUTPUT_CHARS = 16_000
PROGRESS_CHARS = 24_000
"""The second job also saves this much progress in every step (under the 32 KiB share an
engine without a bucket allows) and its first four steps are effect steps (receipts 16 KB)."""


def _output(index: int) -> dict[str, Any]:
    block = hashlib.sha256(f"out{index}".encode()).hexdigest()
    return {"step": index, "data": (block * (OUTPUT_CHARS // 64 + 1))[:OUTPUT_CHARS]}


def _kinds() -> list[Any]:
    from leasehold import Effect, Kind, Step, StepContext

    def step(index: int, progress: bool) -> Any:
        def run(ctx: StepContext, payload: dict[str, Any]) -> Any:
            if progress:
                ctx.save_progress({"at": index, "seen": _output(index)["data"][:PROGRESS_CHARS]})
            return _output(index)

        return run

    twenty = Kind("twenty_16k")
    twenty.planner(lambda payload: [Step(f"s{i}", step(i, False)) for i in range(STEPS)])
    busy = Kind("twenty_16k_progress_receipts")

    @busy.planner
    def _plan(payload: dict[str, Any]) -> list[Any]:
        bank = Effect("bank", "idempotent_key")
        return [Step(f"s{i}", step(i, True), effect=bank if i < 4 else None) for i in range(STEPS)]

    return [twenty, busy]


def measure(kind: str = "twenty_16k") -> dict[str, Any]:
    """Run one job of `kind` once; write units, S3 requests, the finished item's size."""
    from leasehold.testing import LeaseholdTestbed
    from leasehold_dev.local.resources import template

    with LeaseholdTestbed(_kinds()) as tb:
        definition = template()["Resources"]["JobsTable"]["Properties"]
        meter = CapacityMeter(
            TableSpec.from_definition(tb.table_name, definition),
            moto_peek(),
            client_requery(tb.client("dynamodb")),
        )
        meter.attach(tb._dynamodb)  # the functions' own clients
        meter.attach(tb._s3)
        with meter.during("accept"):
            job_id = tb.submit(kind, {})
        with meter.during("run"):
            tb.run_until_idle()
        assert tb.view(job_id)["state"] == "succeeded"
        job_item = tb.client("dynamodb").get_item(
            TableName=tb.table_name, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
        )["Item"]
    table = meter.table
    costs = [price_write(table, event) for event in meter.writes]
    s3 = {
        name: sum(counts.get(f"s3.{name}", 0) for counts in meter.requests.values())
        for name in ("PutObject", "GetObject")
    }
    return {
        "kind": kind,
        "note": f"moto, one job of {STEPS} steps each returning {OUTPUT_CHARS:,} characters of "
        "JSON"
        + (
            f", each saving {PROGRESS_CHARS:,} characters of progress, the first four effect "
            "steps (their outputs are receipts)"
            if kind != "twenty_16k"
            else ""
        )
        + "; write units priced by bench/meter.py's rules (table and index writes)",
        "dynamodb_write_units": sum(cost.total for cost in costs),
        "dynamodb_writes": len(costs),
        "largest_write_units": max(cost.total for cost in costs),
        "s3_requests": s3,
        "final_item_bytes": len(json.dumps(job_item, default=str).encode()),
    }


def main() -> None:
    rows = [measure(kind) for kind in ("twenty_16k", "twenty_16k_progress_receipts")]
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
