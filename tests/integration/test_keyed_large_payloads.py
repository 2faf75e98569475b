"""Debounce and unique keys over payloads in the data bucket (decisions LD15, LD19–LD20) on the
testbed (moto): a key is read from the whole payload, never from the `{"$blob": …}` reference
the item keeps, whether the payload was posted or uploaded; a payload handed from one job to
another (a `keep="last"` collapse) is copied under the receiving job's prefix before the write
that names it, so the job runs with it whole."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold import Debounce, Kind, StepContext, Unique
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.options import Submission
from leasehold.store.items import job_key
from leasehold.store.uploads import META_SHA, META_USE_BY, upload_key
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import DATA_BUCKET

pytestmark = pytest.mark.integration

ran: dict[str, list[dict[str, Any]]] = {}  # job id → the payloads its step saw, whole
MOST = 64 * 1024


def _kind(name: str, **declared: Any) -> Kind:
    kind = Kind(name, schema={"type": "object"}, max_payload_bytes=MOST, **declared)

    @kind.step()
    def go(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        ran.setdefault(ctx.job_id, []).append(payload)
        return {"n": payload.get("n")}

    return kind


last = _kind("big_last", debounce=Debounce(by=["payload.account"], seconds=10, keep="last"))
once = _kind("big_once", unique=Unique(by=["payload.account"], period_seconds=3600))


def _payload(account: str, n: int) -> dict[str, Any]:
    """≈50 KiB, different for each `n` (so the wrong blob cannot pass for the right one)."""
    pad = "".join(chr(0x61 + (i * (n + 1)) % 26) for i in range(50 * 1024))
    return {"account": account, "n": n, "pad": pad}


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    ran.clear()
    with LeaseholdTestbed([last, once]) as testbed:
        yield testbed


def _item_payload(tb: LeaseholdTestbed, job_id: str) -> Any:
    item = tb.client("dynamodb").get_item(TableName=tb.table_name, Key=job_key(job_id))["Item"]
    return json.loads(item["payload"]["S"])


def _blobs(tb: LeaseholdTestbed, prefix: str) -> list[str]:
    listed = tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def _run(tb: LeaseholdTestbed) -> None:
    for _ in range(11):
        tb.advance(1)
    tb.run_until_idle()


def _uploaded(tb: LeaseholdTestbed, upload_id: str, payload: dict[str, Any]) -> str:
    """An upload as `POST /uploads` and its PUT leave it (the bytes, the declared hash)."""
    body = json.dumps(payload).encode()
    tb.client("s3").put_object(
        Bucket=DATA_BUCKET,
        Key=upload_key(tb.owner, upload_id),
        Body=body,
        Metadata={META_SHA: hashlib.sha256(body).hexdigest(), META_USE_BY: str(2**52)},
    )
    return upload_id


def _submit_upload(tb: LeaseholdTestbed, kind: str, upload_id: str) -> str:
    submission = Submission(kind, {}, payload_upload=upload_id)
    return tb._api.accept(tb.owner, submission).job_id


# ------------------------------------------------------------------ debounce, keep="last"


def test_three_large_submissions_run_once_with_the_last_payload_whole(
    tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = tb.runtime.stores.table.blobs.s3
    read: list[str] = []
    get_object = s3.get_object

    def counted(**params: Any) -> Any:
        read.append(params["Key"])
        return get_object(**params)

    monkeypatch.setattr(s3, "get_object", counted)
    sent = [_payload("a", n) for n in range(3)]
    ids = {tb.submit("big_last", payload) for payload in sent}
    assert read == []  # the collapse copies inside the bucket: no payload passes through the API
    monkeypatch.undo()
    assert len(ids) == 1
    (job_id,) = ids
    ref = _item_payload(tb, job_id)["$blob"]  # the last payload, copied under its own prefix
    assert ref["key"].startswith(f"jobs/{job_id}/payload/")
    assert (
        ref["sha256"]
        == hashlib.sha256(json.dumps(sent[2], separators=(",", ":")).encode()).hexdigest()
    )
    _run(tb)
    assert tb.state(job_id) == "succeeded", tb.view(job_id)
    assert ran == {job_id: [sent[2]]}


def test_uploaded_payloads_are_keyed_by_their_field_and_the_last_is_copied_over(
    tb: LeaseholdTestbed,
) -> None:
    sent = [_payload("a", n) for n in range(3)] + [_payload("b", 9)]
    ids = [_submit_upload(tb, "big_last", _uploaded(tb, f"u_{n}", p)) for n, p in enumerate(sent)]
    assert ids[0] == ids[1] == ids[2] != ids[3]
    assert _item_payload(tb, ids[0])["$blob"]["key"].startswith(f"jobs/{ids[0]}/payload/")
    _run(tb)
    assert ran == {ids[0]: [sent[2]], ids[3]: [sent[3]]}
    assert _blobs(tb, "uploads/") == []  # each upload went once its job (or collapse) committed


# ------------------------------------------------------------------ unique


def test_a_duplicate_of_a_large_payload_is_answered_with_the_first_job(
    tb: LeaseholdTestbed,
) -> None:
    first = tb.submit("big_once", _payload("a", 1))
    again = tb.submit("big_once", _payload("a", 2))
    other = tb.submit("big_once", _payload("b", 3))
    assert again == first != other
    assert "$blob" in _item_payload(tb, first)  # the payload is in the bucket, the key is not
    tb.run_until_idle()
    assert ran == {first: [_payload("a", 1)], other: [_payload("b", 3)]}


def test_an_uploaded_duplicate_is_answered_with_the_first_job(tb: LeaseholdTestbed) -> None:
    first = _submit_upload(tb, "big_once", _uploaded(tb, "u_1", _payload("a", 1)))
    again = _submit_upload(tb, "big_once", _uploaded(tb, "u_2", _payload("a", 2)))
    other = _submit_upload(tb, "big_once", _uploaded(tb, "u_3", _payload("b", 3)))
    assert again == first != other
    tb.run_until_idle()
    assert ran == {first: [_payload("a", 1)], other: [_payload("b", 3)]}


def test_a_copy_that_fails_is_a_503_and_the_pending_job_keeps_its_payload(
    tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = tb.submit("big_last", _payload("a", 0))
    before = _item_payload(tb, job_id)
    s3 = tb.runtime.stores.table.blobs.s3

    def refused(**params: Any) -> Any:
        raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"}}, "CopyObject")

    monkeypatch.setattr(s3, "copy_object", refused)
    with pytest.raises(StoreUnavailableError, match="did not copy"):
        tb.submit("big_last", _payload("a", 1))
    assert _item_payload(tb, job_id) == before  # nothing was acknowledged, nothing changed
    monkeypatch.undo()
    assert tb.submit("big_last", _payload("a", 2)) == job_id  # the retry collapses as usual
    _run(tb)
    assert ran == {job_id: [_payload("a", 2)]}
