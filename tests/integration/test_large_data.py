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
from tests.support.blob_crash import crash_after_first_blob

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


# ------------------------------------------------------------------ fencing (LD4)

tries: list[int] = []
"""How many times `twice`'s first step ran: each run's output differs, so a result shows which."""

twice = Kind("twice")


@twice.step()
def first(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    tries.append(1)
    return {"run": len(tries), "data": "y" * 8_000 + str(len(tries))}


@twice.step()
def second(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"from_first": ctx.outputs["first"], "more": "z" * 8_000}


@pytest.fixture
def tb2() -> Iterator[Any]:
    tries.clear()
    with LeaseholdTestbed([twice]) as testbed:
        yield testbed


def _refs(tb: Any, job_id: str) -> list[str]:
    """Every blob key the job's item references (payload, outputs, result)."""
    item = tb.client("dynamodb").get_item(
        TableName=tb.table_name,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        ConsistentRead=True,
    )["Item"]
    text = json.dumps({k: v.get("S") for k, v in item.items()})
    return sorted(set(__import__("re").findall(r"jobs/[^\"\\\\]+", text)))


def _keys(tb: Any, job_id: str) -> list[str]:
    listed = tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET, Prefix=f"jobs/{job_id}/")
    return sorted(o["Key"] for o in listed.get("Contents", []))


def test_a_crash_between_the_blob_and_its_reference_loses_nothing_and_reuses_nothing(
    tb2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed = crash_after_first_blob(tb2, monkeypatch, "out/0")
    job_id = tb2.submit("twice", {})
    tb2.run_until_idle()
    assert crashed == [f"jobs/{job_id}/e1/out/0"]
    assert tb2.state(job_id) == "running"  # the lease holds until it runs out
    tb2.advance(tb2.settings.lease_seconds + 1)
    tb2.run_until_idle()
    view = tb2.view(job_id)
    assert view["state"] == "succeeded", view
    result = tb2.result(job_id)
    assert result["from_first"]["run"] == 2  # the retry's own output, whole
    assert result["from_first"]["data"] == "y" * 8_000 + "2"
    refs = _refs(tb2, job_id)
    assert refs == [f"jobs/{job_id}/e2/result"], refs  # the orphan is not referenced
    # the orphan stays for the lifecycle rule; nothing else was written twice
    assert _keys(tb2, job_id) == [
        f"jobs/{job_id}/e1/out/0",
        f"jobs/{job_id}/e2/out/0",
        f"jobs/{job_id}/e2/result",
    ]


def test_a_stale_workers_blob_is_never_referenced(
    tb2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = tb2.runtime.stores.table.blobs
    real_spill = blobs.spill
    ddb = tb2.client("dynamodb")

    def spill_then_lose_the_lease(
        job_id: str, name: str, data: bytes, *, epoch: int | None = None
    ) -> Any:
        ref = real_spill(job_id, name, data, epoch=epoch)
        if name == "out/0" and epoch == 1:
            # another worker claims the job meanwhile (its claim bumps the epoch): this one's
            # checkpoint is fenced out
            ddb.update_item(
                TableName=tb2.table_name,
                Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
                UpdateExpression="SET epoch = epoch + :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
        return ref

    monkeypatch.setattr(blobs, "spill", spill_then_lose_the_lease)
    job_id = tb2.submit("twice", {})
    report = tb2.run_until_idle()
    assert "stale" in [d.outcome for d in report.deliveries]
    tb2.advance(tb2.settings.lease_seconds + 1)
    tb2.run_until_idle()
    assert tb2.view(job_id)["state"] == "succeeded"
    result = tb2.result(job_id)
    assert result["from_first"]["run"] == 2  # not the stale worker's output
    assert f"jobs/{job_id}/e1/out/0" in _keys(tb2, job_id)  # written, and left unreferenced
    assert not [key for key in _refs(tb2, job_id) if "/e1/" in key]


def test_another_tenant_cannot_read_a_large_result(tb: Any) -> None:
    from leasehold.domain.errors import JobNotFoundError
    from leasehold.domain.job import Owner

    job_id = tb.submit("big", _payload())
    tb.run_until_idle()
    assert tb.view(job_id)["result_url"] == f"/jobs/{job_id}/result"
    with pytest.raises(JobNotFoundError):  # the API's 404
        tb.result(job_id, owner=Owner(tenant="other-group", user_id="carol"))
    with pytest.raises(JobNotFoundError):  # the same tenant, another user: 404 too
        tb.result(job_id, owner=Owner(tenant=tb.owner.tenant, user_id="mallory"))


def test_a_payload_naming_another_jobs_blob_cannot_read_it(tb: Any) -> None:
    # a forged reference in a payload is only ever followed inside its own job's prefix
    victim = tb.submit("big", _payload())
    item = tb.client("dynamodb").get_item(
        TableName=tb.table_name, Key={"pk": {"S": f"JOB#{victim}"}, "sk": {"S": "JOB"}}
    )["Item"]
    forged = json.loads(item["payload"]["S"])
    blobs = tb.runtime.stores.table.blobs
    from leasehold.domain.errors import ValidationError

    with pytest.raises(ValidationError, match="outside job"):
        blobs.load("j_someone_else", forged)


# ------------------------------------------------------------------ limits at the API (LD2)


def test_a_12_mib_body_is_a_413_naming_the_limit(call: Any) -> None:
    big = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "blob": "x" * (12 * MIB)}}
    status, answer, _ = call("api-submit-job.json", body=big)
    assert status == 413 and answer["error"]["code"] == "payload_too_large"
    assert str(sizes.API_BODY_LIMIT) in answer["error"]["message"]
    # just over the API's limit too; a body within it but past the kind's limit is a 413 also
    over = {"kind": "synthetic", "payload": {"blob": "x" * sizes.API_BODY_LIMIT}}
    assert call("api-submit-job.json", body=over)[0] == 413
    within = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "blob": "x" * MIB}}
    status, answer, _ = call("api-submit-job.json", body=within)
    assert (status, answer["error"]["code"]) == (413, "payload_too_large")
    assert "kind 'synthetic'" in answer["error"]["message"]


def test_the_result_route_is_the_owners_only(call: Any) -> None:
    status, body, _ = call(
        "api-submit-job.json", body={"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    )
    assert status == 202
    # not succeeded yet: no result, the same 404 another tenant gets for any job
    status, answer, _ = call("api-get-result.json", path_id=body["job_id"])
    assert (status, answer["error"]["code"]) == (404, "not_found")
    status, answer, _ = call("api-get-result.json", path_id=body["job_id"], user="carol")
    assert (status, answer["error"]["code"]) == (404, "not_found")


forges = Kind("forges")


@forges.step()
def forge(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {REF: {"key": "jobs/j_other/payload/x", "size": 1, "sha256": "0" * 64}}


def test_the_reference_shape_is_refused_as_a_payload_and_as_an_output() -> None:
    from leasehold.domain.errors import ValidationError

    with LeaseholdTestbed([big, forges]) as testbed:
        with pytest.raises(ValidationError, match=r"\$blob"):
            testbed.submit("big", {REF: {"key": "jobs/j_other/payload/x"}})
        job_id = testbed.submit("forges", {})
        testbed.run_until_idle()
        view = testbed.view(job_id)
        assert (view["state"], view["error"]["code"]) == ("failed", "output_not_json")


def test_the_operators_result_route_is_operators_only(call: Any) -> None:
    status, body, _ = call(
        "api-submit-job.json", body={"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    )
    assert status == 202
    status, answer, _ = call("api-ops-result.json", path_id=body["job_id"])
    assert (status, answer["error"]["code"]) == (403, "forbidden")
    status, answer, _ = call("api-ops-result.json", path_id=body["job_id"], user="ops")
    assert (status, answer["error"]["code"]) == (404, "not_found")  # no result yet


def test_an_operator_reads_any_tenants_large_result(tb: Any) -> None:
    from leasehold.domain.job import Owner

    job_id = tb.submit("big", _payload())
    tb.run_until_idle()
    operator = Owner(tenant="ops-tenant", user_id="olga", is_operator=True)
    assert tb.result(job_id, owner=operator)["payload_sha"] == _sha(_payload()["blob"])


def test_the_result_route_reads_a_large_result_whole_for_its_owner_only(call: Any) -> None:
    # The real Api handler under its role: a job made succeeded with a 1 MB result in the data
    # bucket (as a worker leaves it), read back through GET /jobs/{id}/result byte for byte
    import boto3

    from leasehold.store.blobs import BlobStore, encoded

    status, body, _ = call(
        "api-submit-job.json", body={"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    )
    job_id = body["job_id"]
    result = {"text": "é" + "r" * 1_000_000}
    session = boto3.session.Session(region_name="us-east-1")
    ref = BlobStore(session.client("s3"), DATA_BUCKET).spill(
        job_id, "result", encoded(result), epoch=1
    )
    table = session.client("dynamodb").list_tables()["TableNames"][0]
    session.client("dynamodb").update_item(
        TableName=table,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET #s = :s, #r = :r REMOVE gsi1pk, gsi1sk",
        ExpressionAttributeNames={"#s": "state", "#r": "result"},
        ExpressionAttributeValues={":s": {"S": "succeeded"}, ":r": {"S": json.dumps(ref)}},
    )
    status, view, _ = call("api-get-job.json", path_id=job_id)
    assert status == 200 and "result" not in view
    assert (view["result_url"], view["result_size"]) == (
        f"/jobs/{job_id}/result",
        len(encoded(result)),
    )
    status, answer, _ = call("api-get-result.json", path_id=job_id)
    assert status == 200 and answer == {"job_id": job_id, "result": result}
    status, answer, _ = call("api-get-result.json", path_id=job_id, user="carol")
    assert (status, answer["error"]["code"]) == (404, "not_found")
    status, answer, _ = call("api-ops-result.json", path_id=job_id, user="ops")
    assert status == 200 and answer["result"] == result
