"""Large data without a large item (DESIGN §20, decisions LD1–LD6): payloads, step outputs and
results over the inline limit go to the data bucket, the job item keeps a reference, a step sees
every value whole, and no item of the job passes 64 KB (moto, in-process, each function's calls
judged by its role in template.yaml)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.domain import sizes
from leasehold.store.blobs import REF
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import DATA_BUCKET

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
ITEM_CAP = 64_000
"""No item of a job over 64 KB (the smaller reading of 64 KB)."""

big = Kind("big", max_payload_bytes=sizes.BLOB_LIMIT)


@big.step()
def digest(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    # a 1 MB output built from the 2 MiB payload: the next step must see both whole
    text: str = payload["blob"]
    return {"head": text[:1_000_000], "payload_sha": _sha(text)}


@big.step()
def combine(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    earlier = ctx.outputs["digest"]
    return {
        "payload": payload["blob"],
        "head": earlier["head"],
        "payload_sha": earlier["payload_sha"],
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _payload() -> dict[str, Any]:
    # 2 MiB of text that is not one repeated character (a compressor could hide a bug)
    unit = "".join(chr(0x61 + (i * 7) % 26) for i in range(1024))
    return {"blob": (unit * (2 * MIB // len(unit)))}


@pytest.fixture
def tb() -> Iterator[Any]:
    with LeaseholdTestbed([big]) as testbed:
        yield testbed


def _job_items(tb: Any, job_id: str) -> list[dict[str, Any]]:
    """Every item of the table that names the job (its own, its outbox, its key …)."""
    ddb = tb.client("dynamodb")
    items: list[dict[str, Any]] = []
    for page in ddb.get_paginator("scan").paginate(TableName=tb.table_name):
        items.extend(item for item in page["Items"] if job_id in json.dumps(item, default=str))
    return items


def _item_bytes(item: dict[str, Any]) -> int:
    return len(json.dumps(item, default=str).encode())


def test_a_2_mib_payload_and_a_1_mb_output_pass_whole_and_the_items_stay_small(tb: Any) -> None:
    payload = _payload()
    job_id = tb.submit("big", payload)
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert "result" not in view  # too large to inline: a URL and its size instead
    assert view["result_url"] == f"/jobs/{job_id}/result"
    result = tb.result(job_id)
    assert result["payload"] == payload["blob"]
    assert result["head"] == payload["blob"][:1_000_000]
    assert result["payload_sha"] == _sha(payload["blob"])
    assert view["result_size"] == len(json.dumps(result, separators=(",", ":")).encode())
    items = _job_items(tb, job_id)
    assert items, "the job's items were found"
    assert max(_item_bytes(item) for item in items) <= ITEM_CAP
    keys = [o["Key"] for o in tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET)["Contents"]]
    assert all(key.startswith(f"jobs/{job_id}/") for key in keys)
    # one blob each: the payload, the first output (checkpointed), the result (the last
    # output, which a succeeded job keeps only as its result) — nothing written twice (LD2)
    names = sorted(key.removeprefix(f"jobs/{job_id}/") for key in keys)
    assert names[:2] == ["e1/out/0", "e1/result"], names
    assert len(names) == 3 and names[2].startswith("payload/"), names


def test_a_reference_is_what_the_item_holds(tb: Any) -> None:
    job_id = tb.submit("big", _payload())
    item = tb.client("dynamodb").get_item(
        TableName=tb.table_name, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
    )["Item"]
    stored = json.loads(item["payload"]["S"])
    assert set(stored) == {REF} and set(stored[REF]) == {"key", "size", "sha256"}
    assert stored[REF]["size"] > 2 * MIB
