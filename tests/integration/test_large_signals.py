"""Signal bodies through the claim-check (issue 32, decision LD13): a body over the inline limit
is written to the data bucket under its job's prefix before the signal item that names it, the
step reads it whole (hash checked), the owner's and the callback's routes take 5 MiB bodies and
answer 413 past them — and the rules around a signal (404 for another tenant, 409 for a second
one of a name) hold for large bodies too (moto, each function's calls judged by its role)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.domain import sizes
from leasehold.domain.errors import ConflictError, JobNotFoundError, ValidationError
from leasehold.domain.job import Owner
from leasehold.store.blobs import REF
from leasehold.store.queue import Wakeup
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import DATA_BUCKET
from tests.support.api import Call, call_fixture

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
ITEM_CAP = 64_000
tokens: dict[str, str] = {}

listens = Kind("big_listen")


@listens.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> str:
    tokens[ctx.job_id] = ctx.wait_for_signal("doc", timeout_seconds=3600).token
    return "asked"


@listens.step()
def hear(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    body = ctx.signal("doc")
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return {"sha": hashlib.sha256(data).hexdigest(), "size": len(data), "text": body["text"]}


def _body(mib: float = 1.0, seed: int = 7) -> dict[str, Any]:
    # not one repeated character (a compressor could hide a bug), non-ASCII included
    unit = "".join(chr(0x61 + (i * seed) % 26) for i in range(1023)) + "é"
    return {"text": (unit * int(mib * MIB // len(unit.encode())))}


def _sha(body: Any) -> str:
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    tokens.clear()
    with LeaseholdTestbed([listens]) as testbed:
        yield testbed


def _signal_item(tb: LeaseholdTestbed, job_id: str, name: str) -> dict[str, Any]:
    item = tb.client("dynamodb").get_item(
        TableName=tb.table_name, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": f"SIGNAL#{name}"}}
    )["Item"]
    return dict(item)


def _keys(tb: LeaseholdTestbed) -> list[str]:
    listed = tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET)
    return [o["Key"] for o in listed.get("Contents", [])]


def _waiting(tb: LeaseholdTestbed) -> str:
    job_id = tb.submit("big_listen", {})
    tb.run_until_idle()
    assert tb.state(job_id) == "queued"  # parked on the signal
    return job_id


@pytest.mark.parametrize("via", ["owner", "callback"])
def test_a_1_mib_signal_reaches_the_step_whole_and_its_item_stays_small(
    tb: LeaseholdTestbed, via: str
) -> None:
    job_id = _waiting(tb)
    body = _body()
    if via == "owner":
        tb.signal(job_id, "doc", body)
    else:
        tb.callback(tokens[job_id], body)
    # the item names the blob, written first under the job's prefix, content-named
    item = _signal_item(tb, job_id, "doc")
    assert len(json.dumps(item).encode()) <= ITEM_CAP
    ref = json.loads(item["body"]["S"])[REF]
    assert ref["key"] == f"jobs/{job_id}/signals/doc/{_sha(body)[:16]}"
    assert ref["sha256"] == _sha(body) and ref["size"] > MIB * 0.99
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    result = tb.result(job_id)
    assert result["sha"] == _sha(body) and result["text"] == body["text"]


def test_a_second_signal_is_still_409_and_cannot_clobber_the_first(tb: LeaseholdTestbed) -> None:
    job_id = _waiting(tb)
    first, second = _body(seed=7), _body(seed=11)
    tb.signal(job_id, "doc", first)
    with pytest.raises(ConflictError) as refused:
        tb.signal(job_id, "doc", second)
    assert refused.value.code == "signal_exists"
    tb.run_until_idle()
    assert tb.result(job_id)["sha"] == _sha(first)  # the first body, as the item names it


def test_another_tenants_signal_is_404_and_writes_nothing(tb: LeaseholdTestbed) -> None:
    job_id = _waiting(tb)
    before = _keys(tb)
    with pytest.raises(JobNotFoundError):
        tb.signal(job_id, "doc", _body(), owner=Owner("other-group", "carol"))
    assert _keys(tb) == before


def test_a_forged_reference_as_a_body_is_refused(tb: LeaseholdTestbed) -> None:
    job_id = _waiting(tb)
    forged = {REF: {"key": f"jobs/{job_id}/payload/x", "size": 1, "sha256": "0" * 64}}
    with pytest.raises(ValidationError, match=r"\$blob"):
        tb.signal(job_id, "doc", forged)


def test_without_a_data_bucket_the_16_kib_limit_stays(
    tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = _waiting(tb)
    monkeypatch.setattr(tb.runtime.stores.table, "blobs", None)
    with pytest.raises(ValidationError) as refused:
        tb.signal(job_id, "doc", {"text": "x" * (16 * 1024)})
    assert refused.value.code == "too_large"
    tb.signal(job_id, "doc", {"text": "x" * 4_000})  # small: on the item, as before


# ------------------------------------------------------------------ through the Api handler

KINDS = "leasehold_apps.synthetic,tests.support.workflow_kinds"


@pytest.fixture
def api(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    yield from call_fixture(monkeypatch, LEASEHOLD_KINDS=KINDS)


def _run_worker(job_id: str) -> None:
    from leasehold.handlers.worker import worker

    worker.cache_clear()
    worker().handle(Wakeup(job_id, Owner("study-group", "alice"), "test"))
    worker.cache_clear()


def test_the_owners_route_takes_5_mib_and_answers_413_past_it(api: Call) -> None:
    job_id = api("api-submit-job.json", body={"kind": "ops_wait", "payload": {}})[1]["job_id"]
    _run_worker(job_id)
    # past the API's body limit: 413 with a code, nothing kept
    huge = {"text": "x" * sizes.API_BODY_LIMIT}
    status, answer, _ = api("api-signal-job.json", path_id=job_id, body=huge)
    assert (status, answer["error"]["code"]) == (413, "payload_too_large"), answer
    status, answer, _ = api("api-ops-signal.json", path_id=job_id, user="ops", body={
        "note": "too big", "body": huge,
    })  # fmt: skip
    assert (status, answer["error"]["code"]) == (413, "payload_too_large"), answer
    # another tenant's large signal: 404
    body = _body()
    assert api("api-signal-job.json", path_id=job_id, body=body, user="carol")[0] == 404
    # a 1 MiB body: 202, and the step reads it whole (the job's result quotes it)
    status, answer, _ = api("api-signal-job.json", path_id=job_id, body=body)
    assert status == 202, answer
    _run_worker(job_id)
    status, answer, _ = api("api-get-result.json", path_id=job_id)
    assert status == 200 and answer["result"] == {"reviewed": body}
    # a second one of the name: still 409
    status, answer, _ = api("api-signal-job.json", path_id=job_id, body=body)
    assert (status, answer["error"]["code"]) == (409, "not_waiting"), answer
