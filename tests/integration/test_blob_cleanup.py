"""A job's blobs live exactly as long as its item (decisions LD10–LD12): only a job with blobs
is marked; the sweeper's blob pass removes a gone job's prefix, a page a visit, and an ended
job's orphans, and never a blob an item references (moto, in-process, the sweeper's calls judged
by its role in template.yaml). DynamoDB's TTL deletion is played by the test deleting the item
once the clock is past its `expires_at` (moto does not expire items)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from leasehold import FatalError, Kind, StepContext
from leasehold.domain import sizes
from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.job import Owner
from leasehold.service.sweeper import SweepResult, sweep_passes
from leasehold.store.blob_marks import CLAIM_MS, FIRST_LOOK_MS, BlobMarks, mark_key, mark_of
from leasehold.store.blobs import REF
from leasehold.store.items import JOB_TTL_SECONDS
from leasehold.store.shards import shard_of
from leasehold.testing import LeaseholdTestbed, iam
from leasehold.testing.testbed import DATA_BUCKET
from tests.support.blob_crash import crash_after_first_blob

pytestmark = pytest.mark.integration

HOUR = 3600
DAY = 24 * HOUR
OPERATOR = Owner(tenant="ops-tenant", user_id="olga", is_operator=True)

big = Kind("gc_big", max_payload_bytes=sizes.BLOB_LIMIT)


@big.step()
def halve(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"half": payload["text"][: len(payload["text"]) // 2]}


@big.step()
def answer(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"half": ctx.outputs["halve"]["half"], "sha": _sha(payload["text"])}


twice = Kind("gc_twice")
tries: list[int] = []


@twice.step()
def first(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    tries.append(1)
    return {"run": len(tries), "data": "y" * 8_000 + str(len(tries))}


@twice.step()
def second(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"from_first": ctx.outputs["first"], "more": "z" * 8_000}


fragile = Kind("gc_fragile", max_payload_bytes=sizes.BLOB_LIMIT)
fail_next: list[bool] = []


@fragile.step()
def check(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    if fail_next:
        fail_next.pop()
        raise FatalError("asked to fail once")
    return {"sha": _sha(payload["text"]), "size": len(payload["text"])}


small = Kind("gc_small")


@small.step()
def tiny(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "n": payload.get("n", 0)}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _text(size: int) -> str:
    unit = "".join(chr(0x61 + (i * 7) % 26) for i in range(1024))
    return (unit * (size // len(unit) + 1))[:size]


@pytest.fixture
def tb() -> Iterator[Any]:
    tries.clear()
    fail_next.clear()
    with LeaseholdTestbed([big, twice, fragile, small]) as testbed:
        yield testbed


def _keys(tb: Any, job_id: str) -> list[str]:
    listed = tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET, Prefix=f"jobs/{job_id}/")
    return sorted(o["Key"].removeprefix(f"jobs/{job_id}/") for o in listed.get("Contents", []))


def _item(tb: Any, key: dict[str, Any]) -> dict[str, Any] | None:
    got = tb.client("dynamodb").get_item(TableName=tb.table_name, Key=key, ConsistentRead=True)
    return got.get("Item")


def _job_key(job_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}


def _expire(tb: Any, job_id: str) -> None:
    """DynamoDB's TTL process: the item goes once the clock is past its `expires_at`."""
    item = _item(tb, _job_key(job_id))
    assert item is not None
    assert int(item["expires_at"]["N"]) * 1000 <= tb.clock.now_ms(), "not expired yet"
    tb.client("dynamodb").delete_item(TableName=tb.table_name, Key=_job_key(job_id))


def _sweep(tb: Any, time_left: Any = None, **settings: Any) -> SweepResult:
    """One sweeper run as its role, with `settings` changed (a smaller page)."""
    with iam.acting_as(tb.roles["SweeperFunction"]):
        return sweep_passes(
            tb.runtime.stores,
            tb.clock,
            replace(tb.runtime.sweep_settings(), **settings),
            tb.telemetry,
            tb.kinds,
            time_left=time_left,
        )


def _marks(tb: Any) -> list[dict[str, Any]]:
    ddb = tb.client("dynamodb")
    items: list[dict[str, Any]] = []
    for page in ddb.get_paginator("scan").paginate(TableName=tb.table_name):
        items.extend(i for i in page["Items"] if i["pk"]["S"].startswith("BLOBS#"))
    return items


def _shard(tb: Any, job_id: str) -> int:
    return shard_of(job_id, tb.runtime.stores.table.index_shards)


def _indexed_marks(tb: Any) -> list[str]:
    return sorted(i["job_id"]["S"] for i in _marks(tb) if "gsi1pk" in i)


# ------------------------------------------------------------------ (a) gone with its item


def test_a_jobs_blobs_go_when_its_item_goes_and_not_before(tb: Any) -> None:
    text = _text(600_000)
    job_id = tb.submit("gc_big", {"text": text})
    tb.run_until_idle()
    assert tb.state(job_id) == "succeeded"
    names = _keys(tb, job_id)
    assert names[:2] == ["e1/out/0", "e1/result"] and names[2].startswith("payload/"), names
    assert _indexed_marks(tb) == [job_id]  # one mark, written with the payload
    # past its TTL, the item is still there (DynamoDB deletes expired items days late): the
    # sweeps in between removed no blob the item names, and an operator still reads the result
    tb.advance(JOB_TTL_SECONDS + DAY)
    tb.advance(HOUR)
    assert _keys(tb, job_id) == [n for n in names if n != "e1/out/0"]  # the dropped output only
    assert tb.result(job_id, owner=OPERATOR)["sha"] == _sha(text)
    assert tb.result(job_id)["half"] == text[:300_000]
    _expire(tb, job_id)
    tb.advance(7 * HOUR)  # the mark's next look (RECHECK_MS) has come
    assert _keys(tb, job_id) == []
    assert _indexed_marks(tb) == []  # finished: out of the index, left to the table's TTL
    (mark,) = _marks(tb)
    assert int(mark["expires_at"]["N"]) <= tb.clock.now_ms() // 1000


# ------------------------------------------------------------------ (b) orphans of an ended job


def test_an_ended_jobs_orphans_go_and_what_it_references_stays(
    tb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed = crash_after_first_blob(tb, monkeypatch, "out/0")
    job_id = tb.submit("gc_twice", {})
    tb.run_until_idle()
    assert crashed == [f"jobs/{job_id}/e1/out/0"]
    tb.advance(tb.settings.lease_seconds + 1)
    tb.run_until_idle()
    assert tb.state(job_id) == "succeeded"
    assert _keys(tb, job_id) == ["e1/out/0", "e2/out/0", "e2/result"]
    tb.advance(FIRST_LOOK_MS / 1000)  # the mark's first look: the job has ended
    # the crash's orphan and the output a succeeded job no longer names are gone
    assert _keys(tb, job_id) == ["e2/result"]
    result = tb.result(job_id)
    assert result["from_first"] == {"run": 2, "data": "y" * 8_000 + "2"}
    assert result["more"] == "z" * 8_000
    (mark,) = [mark_of(i) for i in _marks(tb)]
    assert mark.swept == 2 and mark.due_at > tb.clock.now_ms() + 29 * DAY * 1000


# ------------------------------------------------------------------ (c) replay keeps the payload


def test_a_replayed_job_still_reads_its_payload(tb: Any) -> None:
    text = _text(50_000)
    fail_next.append(True)
    job_id = tb.submit("gc_fragile", {"text": text})
    tb.run_until_idle()
    assert tb.state(job_id) == "failed"
    (payload,) = _keys(tb, job_id)
    assert payload.startswith("payload/")
    tb.advance(2 * HOUR)  # the ended job's orphans are looked for: its payload is referenced
    assert _keys(tb, job_id) == [payload]
    assert tb.replay(job_id, note="try again")["state"] == "queued"
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert view["result"] == {"sha": _sha(text), "size": len(text)}
    # the mark comes due when the first end's TTL passes: the item is alive, ended at the
    # replay's epoch, whose orphans are looked for — the payload it references stays
    tb.advance(JOB_TTL_SECONDS + DAY)
    (mark,) = [mark_of(i) for i in _marks(tb)]
    assert mark.swept == 2
    assert _keys(tb, job_id) == [payload]
    assert tb.view(job_id)["result"] == {"sha": _sha(text), "size": len(text)}


# ------------------------------------------------------------------ (d) no blobs, no mark


def test_a_job_without_blobs_has_no_mark_and_costs_the_pass_nothing(tb: Any) -> None:
    marks = tb.runtime.stores.table.blobs.marks
    plain = [tb.submit("gc_small", {"n": n}) for n in range(3)]
    tb.run_until_idle()
    assert {tb.state(j) for j in plain} == {"succeeded"}
    tb.advance(2 * HOUR, sweep=False)
    result = _sweep(tb)
    assert (marks.writes, _marks(tb)) == (0, [])
    assert result.progress["blobs_examined"] == 0
    # a job with a large payload: exactly one mark, however many blobs it writes
    job_id = tb.submit("gc_big", {"text": _text(20_000)})
    tb.run_until_idle()
    assert len(_keys(tb, job_id)) == 3
    assert marks.writes == 1 and [i["job_id"]["S"] for i in _marks(tb)] == [job_id]


# ------------------------------------------------------------------ (e) bounded per run


def test_a_long_prefix_is_removed_over_several_runs_without_holding_up_others(tb: Any) -> None:
    many = tb.submit("gc_big", {"text": _text(20_000)})
    few = tb.submit("gc_big", {"text": _text(30_000)})
    tb.run_until_idle()
    s3 = tb.client("s3")
    for n in range(1, 6):  # orphans of crashed epochs
        s3.put_object(Bucket=DATA_BUCKET, Key=f"jobs/{many}/e{n + 1}/out/0", Body=b"{}")
    assert (len(_keys(tb, many)), len(_keys(tb, few))) == (8, 3)
    tb.advance(JOB_TTL_SECONDS + DAY, sweep=False)
    _expire(tb, many)
    _expire(tb, few)
    left = []
    for _ in range(4):
        tb.clock.advance(1)
        _sweep(tb, blob_page=3)
        left.append((len(_keys(tb, many)), len(_keys(tb, few))))
    # three objects a job a run: the short prefix is done in the first run, the long in three
    assert left == [(5, 0), (2, 0), (0, 0), (0, 0)]
    assert _indexed_marks(tb) == []


def test_the_blob_pass_leaves_the_end_of_the_invocation_to_the_schedules(tb: Any) -> None:
    job_id = tb.submit("gc_big", {"text": _text(20_000)})
    tb.run_until_idle()
    tb.advance(FIRST_LOOK_MS / 1000, sweep=False)
    # 25 s left: the other passes read (10 s is their margin), the blob pass does not (30 s)
    result = _sweep(tb, time_left=lambda: 25_000)
    assert result.progress["blobs_examined"] == 0 and result.progress["active_laps"] == 1
    assert _keys(tb, job_id)[0] == "e1/out/0"
    result = _sweep(tb, time_left=lambda: 31_000)
    assert result.progress["blobs_examined"] == 1
    assert "e1/out/0" not in _keys(tb, job_id)


# ------------------------------------------------------------------ races and failures


def test_a_mark_held_for_removal_keeps_a_new_blob_of_the_job_out(tb: Any) -> None:
    table = tb.runtime.stores.table
    sweeper_marks = BlobMarks(table, tb.clock)
    writer = BlobMarks(table, tb.clock)
    writer.ensure("j_reused")
    tb.clock.advance(FIRST_LOOK_MS)
    (mark,), _ = sweeper_marks.page(
        _shard(tb, "j_reused"), until=tb.clock.now_ms(), after=None, limit=10
    )
    held = sweeper_marks.claim(mark, tb.clock.now_ms())
    assert held is not None and held.deleting == tb.clock.now_ms()
    with pytest.raises(StoreUnavailableError, match="being removed"):
        BlobMarks(table, tb.clock).ensure("j_reused")  # a new accept of the id: a 503
    tb.clock.advance(CLAIM_MS + 1)  # the sweeper died holding it: taken over
    BlobMarks(table, tb.clock).ensure("j_reused")
    assert not sweeper_marks.finish(held, tb.clock.now_ms())  # its hold is stale: no effect
    assert mark_of(_item(tb, mark_key("j_reused")) or {}).deleting is None


def test_a_blob_marked_after_the_mark_was_read_is_not_removed(tb: Any) -> None:
    # The sweeper read the mark and found no item; a writer marks the job (a reused id) and
    # writes its blob before the sweeper's claim: the claim fails, the blob stays
    marks = tb.runtime.stores.table.blobs.marks
    marks.ensure("j_late")
    tb.clock.advance(FIRST_LOOK_MS)
    (seen,), _ = marks.page(_shard(tb, "j_late"), until=tb.clock.now_ms(), after=None, limit=10)
    BlobMarks(tb.runtime.stores.table, tb.clock).ensure("j_late")
    tb.client("s3").put_object(Bucket=DATA_BUCKET, Key="jobs/j_late/payload/0", Body=b"{}")
    assert marks.claim(seen, tb.clock.now_ms()) is None
    tb.clock.advance(1)
    result = _sweep(tb)
    assert result.progress["blobs_examined"] == 0  # not due: the writer's mark is an hour on
    assert _keys(tb, "j_late") == ["payload/0"]


def test_a_bucket_that_fails_ends_the_pass_and_the_next_run_finishes(
    tb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    job_id = tb.submit("gc_big", {"text": _text(20_000)})
    tb.run_until_idle()
    tb.advance(JOB_TTL_SECONDS + DAY)
    _expire(tb, job_id)
    s3 = tb.runtime.stores.table.blobs.s3
    real = s3.delete_objects

    def down(**params: Any) -> Any:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, "Delete")

    monkeypatch.setattr(s3, "delete_objects", down)
    tb.clock.advance(7 * HOUR * 1000)
    result = _sweep(tb)
    assert result.report["unavailable"] == 1
    assert len(_keys(tb, job_id)) == 2 and _indexed_marks(tb) == [job_id]  # held, not lost
    monkeypatch.setattr(s3, "delete_objects", real)
    tb.clock.advance(CLAIM_MS + 1)  # the hold runs out: the mark is due again
    result = _sweep(tb)
    assert result.progress["blob_jobs_cleared"] == 1
    assert _keys(tb, job_id) == [] and _indexed_marks(tb) == []


# ------------------------------------------------------------------ IAM (LD12)


def test_the_sweeper_lists_and_deletes_under_jobs_only(tb: Any) -> None:
    sweeper = tb.roles["SweeperFunction"]
    bucket = f"arn:aws:s3:::{DATA_BUCKET}"
    listing = {"Bucket": DATA_BUCKET, "Prefix": "jobs/j_1/"}
    assert iam.judge("s3", "ListObjectsV2", listing, sweeper) is None
    for params in ({"Bucket": DATA_BUCKET}, {"Bucket": DATA_BUCKET, "Prefix": "uploads/"}):
        refused = iam.judge("s3", "ListObjectsV2", params, sweeper)
        assert refused is not None and refused.resource == bucket
    delete = {"Delete": {"Objects": [{"Key": "jobs/j_1/e1/out/0"}, {"Key": "other/x"}]}}
    refused = iam.judge("s3", "DeleteObjects", {"Bucket": DATA_BUCKET, **delete}, sweeper)
    assert refused == iam.Request("s3:DeleteObject", f"{bucket}/other/x")
    assert not sweeper.allows("s3:GetObject", f"{bucket}/jobs/j_1/e1/result")
    for role in ("ApiFunction", "WorkerFunction", "RelayFunction"):  # nobody else lists or deletes
        assert iam.judge("s3", "ListObjectsV2", listing, tb.roles[role]) is not None
        assert not tb.roles[role].allows("s3:DeleteObject", f"{bucket}/jobs/j_1/e1/result")


def test_mark_items_are_small_and_name_only_the_job(tb: Any) -> None:
    job_id = tb.submit("gc_big", {"text": _text(20_000)})
    (mark,) = _marks(tb)
    assert mark["pk"]["S"] == f"BLOBS#{job_id}" and len(json.dumps(mark)) < 400


def test_while_the_item_lives_only_its_own_epochs_orphans_go(tb: Any) -> None:
    # An ended job at epoch 1: a later epoch's blob (a replay's, whose reference is not written
    # yet) and a key of another shape (a signal's body, its item not written yet) stay until
    # the item goes; an epoch-1 orphan and a refused second payload go
    job_id = tb.submit("gc_big", {"text": _text(20_000)})
    tb.run_until_idle()
    s3 = tb.client("s3")
    for name in ("e2/out/0", "signals/go/0123456789abcdef", "e1/out/7", "payload/00000000ffffffff"):
        s3.put_object(Bucket=DATA_BUCKET, Key=f"jobs/{job_id}/{name}", Body=b"{}")
    tb.advance(FIRST_LOOK_MS / 1000)
    kept = _keys(tb, job_id)
    assert kept[:3] == ["e1/result", "e2/out/0", "payload/" + kept[2].removeprefix("payload/")]
    assert kept[2] != "payload/00000000ffffffff" and kept[3:] == ["signals/go/0123456789abcdef"]
    tb.advance(JOB_TTL_SECONDS + DAY)
    _expire(tb, job_id)
    tb.advance(7 * HOUR)
    assert _keys(tb, job_id) == []


def test_a_condition_the_evaluator_cannot_judge_is_still_refused() -> None:
    def role(condition: dict[str, Any]) -> iam.Role:
        statement = {
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": "arn:aws:s3:::b",
            "Condition": condition,
        }
        return iam.Role.of("r", "1", "us-east-1", [{"Statement": [statement]}])

    listing = {"Bucket": "b", "Prefix": "jobs/x/"}
    assert (
        iam.judge("s3", "ListObjectsV2", listing, role({"StringLike": {"s3:prefix": "jobs/*"}}))
        is None
    )
    equals = role({"StringEquals": {"s3:prefix": "jobs/"}})
    assert iam.judge("s3", "ListObjectsV2", listing, equals) is not None
    for unjudged in (
        {"StringNotLike": {"s3:prefix": "x*"}},  # an operator not evaluated here
        {"StringLike": {"s3:delimiter": "/"}},  # a key this request does not carry here
    ):
        with pytest.raises(iam.UnjudgedCallError):
            iam.judge("s3", "ListObjectsV2", listing, role(unjudged))


def test_a_new_attempt_never_reuses_a_blob_an_earlier_attempt_read(tb: Any) -> None:
    # LD4 matches a value by content against the references this process read, so a
    # checkpoint rewrites only references; a reference read in an earlier attempt may name a
    # blob the pass deleted since (the item stopped naming it: a replay from the start, run in
    # another process). A new attempt matches only what it read itself.
    from leasehold.domain.job import Checkpoint

    blobs = tb.runtime.stores.table.blobs
    job_id = tb.submit("gc_small", {"n": 1})
    tb.run_until_idle()
    job = tb.runtime.stores.jobs.get(job_id)
    value = {"data": "m" * 6_000}
    (ref,) = blobs.keep_outputs(job_id, 1, [value])
    first = replace(job, epoch=1, checkpoint=replace(job.checkpoint, outputs=[ref]))
    assert blobs.resolved(first).checkpoint.outputs == [value]  # read: known by its hash
    s3 = tb.client("s3")
    s3.delete_object(Bucket=DATA_BUCKET, Key=ref[REF]["key"])  # the pass, once unnamed
    later = replace(job, epoch=3, checkpoint=Checkpoint())
    blobs.resolved(later)  # the new attempt's start
    (again,) = blobs.keep_outputs(job_id, 3, [value])
    assert again[REF]["key"] == f"jobs/{job_id}/e3/out/0"
    assert blobs.load(job_id, again) == value
