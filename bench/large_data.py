"""Issue 32's cost row: one job with a 1 MB input and a 1 MB result, priced from what it did on
moto (the testbed, every DynamoDB write priced by the capacity meter's rules, every S3 request
counted) beside Lambda durable functions' data prices ($0.25 per GB written, $0.15 per
GB-month retained: write-ups of AWS's pricing page, bench/pricing.py's DURABLE_PRICE_SOURCES).

    .venv/bin/python -m bench.large_data      # writes results.json's "large_data" key

Not `make bench`'s: it runs alone in a few seconds. moto figures, not AWS measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.capacity import TableSpec, price_write
from bench.meter import CapacityMeter, client_requery, moto_peek
from bench.pricing import PRICES

MB = 1_000_000
RESULTS = Path(__file__).with_name("results.json")
S3_PRICES = {
    "s3_put_request": PRICES["s3_put_request"],
    "s3_get_request": PRICES["s3_get_request"],
    "s3_standard_gb_month": 0.023,
    "source": "AWS S3 Standard list prices for us-east-1, recorded by hand on 2026-12-03 "
    "(PUT $0.005 per 1,000, GET $0.0004 per 1,000, $0.023 per GB-month); not fetched",
}


def measure() -> dict[str, Any]:
    """Run the job once and price it: DynamoDB write units (meter), S3 requests and bytes."""
    from leasehold import Kind, StepContext
    from leasehold.testing import LeaseholdTestbed
    from leasehold_dev.local.resources import template

    io = Kind("large_io", max_payload_bytes=2 * MB)

    @io.step()
    def transform(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {"out": payload["data"][::-1]}

    with LeaseholdTestbed([io]) as tb:
        definition = template()["Resources"]["JobsTable"]["Properties"]
        meter = CapacityMeter(
            TableSpec.from_definition(tb.table_name, definition),
            moto_peek(),
            client_requery(tb.client("dynamodb")),
        )
        meter.attach(tb._dynamodb)  # the functions' own clients
        meter.attach(tb._s3)
        with meter.during("accept"):
            job_id = tb.submit("large_io", {"data": "d" * (MB - 20)})
        with meter.during("run"):
            tb.run_until_idle()
        with meter.during("read"):
            result = tb.result(job_id)
        assert tb.view(job_id)["state"] == "succeeded" and len(result["out"]) == MB - 20
        listed = tb.client("s3").list_objects_v2(Bucket="leasehold-data")["Contents"]
        stored = sum(int(o["Size"]) for o in listed)
        cleanup = _cleanup(tb, meter, job_id)
    table = meter.table
    wcu = sum(  # the job's own writes (its blob mark's Put included), not its cleanup's
        price_write(table, event).total for event in meter.writes if event.phase != "cleanup"
    )
    s3 = {
        name: sum(
            counts.get(f"s3.{name}", 0)
            for phase, counts in meter.requests.items()
            if phase != "cleanup"
        )
        for name in ("PutObject", "GetObject")
    }
    usd = {
        "dynamodb_writes": wcu * PRICES["dynamodb_write_request_unit"],
        "s3_puts": s3["PutObject"] * S3_PRICES["s3_put_request"],
        "s3_gets": s3["GetObject"] * S3_PRICES["s3_get_request"],
    }
    storage_gb_month = stored / 1e9 * S3_PRICES["s3_standard_gb_month"]
    durable_written = 2 * MB / 1e9 * PRICES["lambda_durable_data_written_gb"]
    durable_retained = 2 * MB / 1e9 * PRICES["lambda_durable_data_retained_gb_month"]
    return {
        "note": "moto, one job of kind large_io (1 MB input, 1 MB result, one step); write "
        "units priced by bench/meter.py's rules, S3 requests counted at the client. Durable "
        "functions: 2 MB written (input + result) and retained, at the write-ups' prices.",
        "dynamodb_write_units": wcu,
        "s3_requests": s3,
        "s3_bytes_stored": stored,
        "usd_per_job": {name: round(value, 8) for name, value in usd.items()}
        | {"total": round(sum(usd.values()), 8)},
        "usd_per_month_stored": round(storage_gb_month, 8),
        "durable_functions": {
            "usd_data_written": round(durable_written, 8),
            "usd_per_month_retained": round(durable_retained, 8),
        },
        "per_million_jobs_usd": {
            "leasehold_requests_and_writes": round(sum(usd.values()) * 1e6, 2),
            "leasehold_storage_month": round(storage_gb_month * 1e6, 2),
            "durable_data_written": round(durable_written * 1e6, 2),
            "durable_retained_month": round(durable_retained * 1e6, 2),
        },
        "cleanup": cleanup,
        "prices": S3_PRICES,
    }


def _cleanup(tb: Any, meter: CapacityMeter, job_id: str) -> dict[str, Any]:
    """What removing the job's blobs with its item costs (decisions LD10-LD12): the sweeper's
    looks at its mark (an hour on: ended; at its TTL: the item still there, as DynamoDB deletes
    expired items late; then gone), the TTL's own delete being free. Only the mark's writes and
    the job's own reads are counted: the index pages and the pass's cursor are shared by every
    mark a run reads (a page holds up to 100)."""
    from leasehold.store.items import JOB_TTL_SECONDS

    hour = 3600
    with meter.during("cleanup"):
        tb.advance(hour)  # the first look: the job has ended, its orphans are looked for
        tb.advance(JOB_TTL_SECONDS)  # its TTL has passed, the item is still there
        key = {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
        tb.client("dynamodb").delete_item(TableName=tb.table_name, Key=key)  # the TTL's delete
        tb.advance(7 * hour)  # the next look: the item is gone, and so go its blobs
    left = tb.client("s3").list_objects_v2(Bucket="leasehold-data", Prefix=f"jobs/{job_id}/")
    assert left.get("KeyCount", 0) == 0, left
    table = meter.table
    wcu = sum(
        price_write(table, event).total
        for event in meter.writes
        if event.phase == "cleanup" and event.kind == "BLOBS"
    )
    rcu = sum(
        read.units
        for read in meter.reads
        if read.phase == "cleanup" and read.key in (f"JOB#{job_id}", f"BLOBS#{job_id}")
    )
    counts = meter.requests["cleanup"]
    s3 = {name: counts.get(f"s3.{name}", 0) for name in ("ListObjectsV2", "DeleteObjects")}
    usd = {
        "dynamodb_writes": wcu * PRICES["dynamodb_write_request_unit"],
        "dynamodb_reads": rcu * PRICES["dynamodb_read_request_unit"],
        # LIST is priced with PUT; DeleteObjects is a POST, priced so too (DELETE requests
        # are free; whether a multi-object delete is counted as one is not verified here)
        "s3_requests": sum(s3.values()) * S3_PRICES["s3_put_request"],
    }
    return {
        "note": "moto: the sweeper's blob pass on this job's mark, three looks (ended, past "
        "its TTL with the item still there, gone); the mark's writes and the job's reads",
        "dynamodb_write_units": wcu,
        "dynamodb_read_units": rcu,
        "s3_requests": s3,
        "usd_per_job": {name: round(value, 9) for name, value in usd.items()}
        | {"total": round(sum(usd.values()), 9)},
        "per_million_jobs_usd": round(sum(usd.values()) * 1e6, 2),
    }


def main() -> None:
    row = measure()
    results = json.loads(RESULTS.read_text())
    results["large_data"] = row
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
