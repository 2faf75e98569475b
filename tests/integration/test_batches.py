"""Batches (issue 33 item 3, DESIGN §21, decisions BA1–BA6) on moto: `POST /jobs/batch` answers a
result per item in order, each job accepted or refused on its own; `JobStore.accept_many`
commits the accepted jobs in as few TransactWriteItems as DynamoDB's limits allow, answers a
failed condition on its own item and sends the others again, fails the whole call when its guard
fails, and after a store failure reports what it committed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from moto.dynamodb.models.dynamo_type import DynamoType

from leasehold import Kind, StepContext
from leasehold.domain.errors import (
    IdempotencyConflictError,
    LeaseholdError,
    StoreUnavailableError,
)
from leasehold.domain.options import JobOptions, Submission
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import Accepted, Intake
from leasehold.store.batch import MAX_TRANSACTION_BYTES, GuardFailedError
from leasehold.store.items import job_from_item
from leasehold.store.table import Table
from tests.support.api import Call
from tests.support.harness import ALICE, Harness, make_job


def _body(index: int, **fields: Any) -> dict[str, Any]:
    """A synthetic job request whose payload names its place in the batch."""
    return make_job(payload={"steps": [{"name": f"s{index}", "cost": 1}]}, **fields)


def _job_items(call_or_harness: Any) -> list[dict[str, Any]]:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    (table,) = client.list_tables()["TableNames"]
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**params)
        items += [i for i in page["Items"] if i["pk"]["S"].startswith("JOB#")]
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class Recorded:
    """Every TransactWriteItems (and lone PutItem) the table sends, as sent."""

    def __init__(self, table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
        self.transactions: list[list[dict[str, Any]]] = []
        self.puts = 0
        self.after: Any = None
        transact, put = table.transact, table.put

        def recording_transact(items: list[dict[str, Any]], *, token: str | None = None) -> None:
            self.transactions.append(list(items))
            try:
                transact(items, token=token)
            finally:
                if self.after is not None:
                    self.after(len(self.transactions))

        def recording_put(params: dict[str, Any]) -> None:
            self.puts += 1
            put(params)

        monkeypatch.setattr(table, "transact", recording_transact)
        monkeypatch.setattr(table, "put", recording_put)


@pytest.fixture
def recorded(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    yield Recorded(harness.stores.table, monkeypatch)


def _submissions(count: int, *, keyed: bool = False, **fields: Any) -> list[Submission]:
    return [
        Submission.from_body(_body(i, **fields), f"key-{i}" if keyed else None)
        for i in range(count)
    ]


def _accept_many(harness: Harness, items: list[Any], **kw: Any) -> list[Any]:
    return harness.jobs().intake.accept_many(harness.stores.table, ALICE, items, **kw)


# ------------------------------------------------------------------ POST /jobs/batch


def test_a_100_job_batch_with_one_bad_item_accepts_99_and_answers_the_bad_one_in_its_place(
    call: Call,
) -> None:
    jobs = [_body(i) for i in range(100)]
    jobs[37]["max_attempts"] = 99
    status, answer, _ = call("api-submit-batch.json", body={"jobs": jobs})
    assert status == 200
    results = answer["results"]
    assert len(results) == 100
    assert results[37] == {
        "error": {"code": "invalid_request", "message": "'max_attempts' must be between 1 and 10"}
    }
    accepted = [r for i, r in enumerate(results) if i != 37]
    assert all(r["state"] == "queued" for r in accepted)
    assert all(r["status_url"] == f"/jobs/{r['job_id']}" for r in accepted)
    assert len({r["job_id"] for r in accepted}) == 99
    assert len(_job_items(call)) == 99


def test_the_results_are_in_the_request_order(call: Call) -> None:
    jobs = [_body(i) for i in range(30)]
    _, answer, _ = call("api-submit-batch.json", body={"jobs": jobs})
    by_id = {job.job_id: job for job in map(job_from_item, _job_items(call))}
    for index, result in enumerate(answer["results"]):
        assert by_id[result["job_id"]].payload["steps"][0]["name"] == f"s{index}"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"jobs": [_body(i) for i in range(101)]}, "too_large"),
        ({"jobs": []}, "invalid_request"),
        ({"jobs": {"kind": "synthetic"}}, "invalid_request"),
        ([_body(0)], "invalid_request"),
        ({"jobs": [_body(0)], "extra": 1}, "invalid_request"),
    ],
    ids=["101", "empty", "not-a-list", "not-an-object", "extra-field"],
)
def test_a_batch_that_is_not_1_to_100_job_requests_is_a_400_and_writes_nothing(
    call: Call, body: Any, code: str
) -> None:
    status, answer, _ = call("api-submit-batch.json", body=body)
    assert status == 400
    assert answer["error"]["code"] == code
    assert _job_items(call) == []


def test_the_idempotency_key_header_is_refused_on_a_batch(call: Call) -> None:
    status, answer, _ = call(
        "api-submit-batch.json", body={"jobs": [_body(0)]}, headers={"idempotency-key": "k"}
    )
    assert (status, answer["error"]["code"]) == (400, "invalid_idempotency_key")
    assert _job_items(call) == []


def test_each_item_has_its_own_idempotency_key(call: Call) -> None:
    first = [_body(0, idempotency_key="k-0"), _body(1, idempotency_key="k-1"), _body(2)]
    _, one, _ = call("api-submit-batch.json", body={"jobs": first})
    # The same batch again: the keyed items answer the same jobs, the unkeyed one is new.
    _, two, _ = call("api-submit-batch.json", body={"jobs": first})
    assert [r["job_id"] for r in two["results"][:2]] == [r["job_id"] for r in one["results"][:2]]
    assert two["results"][2]["job_id"] != one["results"][2]["job_id"]
    # k-1 with another body is that item's 409-equivalent; the others go in.
    other = [_body(5, idempotency_key="k-1"), _body(6, idempotency_key="k-6")]
    _, three, _ = call("api-submit-batch.json", body={"jobs": other})
    assert three["results"][0]["error"]["code"] == "idempotency_key_reused"
    assert "job_id" in three["results"][1]
    assert len(_job_items(call)) == 5  # k-0, k-1, two unkeyed, k-6
    # A bad key is that item's own error too.
    _, four, _ = call("api-submit-batch.json", body={"jobs": [_body(7, idempotency_key="a b")]})
    assert four["results"][0]["error"]["code"] == "invalid_idempotency_key"


def test_a_key_means_the_same_job_in_post_jobs_and_in_a_batch(call: Call) -> None:
    status, single, _ = call("api-submit-job.json", body=_body(0), headers={"idempotency-key": "k"})
    assert status == 202
    _, batch, _ = call("api-submit-batch.json", body={"jobs": [_body(0, idempotency_key="k")]})
    assert batch["results"][0]["job_id"] == single["job_id"]
    assert len(_job_items(call)) == 1


def test_one_key_twice_in_a_batch_is_one_job_with_one_body_and_a_conflict_with_two(
    call: Call,
) -> None:
    jobs = [
        _body(0, idempotency_key="dup"),
        _body(0, idempotency_key="dup"),
        _body(1, idempotency_key="dup"),
    ]
    status, answer, _ = call("api-submit-batch.json", body={"jobs": jobs})
    assert status == 200
    first, same, other = answer["results"]
    assert same["job_id"] == first["job_id"]
    assert other["error"]["code"] == "idempotency_key_reused"
    assert len(_job_items(call)) == 1


# ------------------------------------------------------------------ the one accept path for many


def test_100_keyed_jobs_take_two_transactions_of_at_most_100_actions(
    harness: Harness, recorded: Recorded
) -> None:
    outcomes = _accept_many(harness, _submissions(100, keyed=True))
    assert all(isinstance(o, Accepted) and o.created for o in outcomes)
    # A keyed job is its item + its outbox item: the key is the job's id (decision C4).
    assert [len(t) for t in recorded.transactions] == [100, 100]
    assert len(_job_items(harness)) == 100


def test_a_guard_rides_in_every_transaction_so_100_jobs_take_three(
    harness: Harness, recorded: Recorded
) -> None:
    harness.dynamodb.put_item(
        TableName=harness.table,
        Item={"pk": {"S": "PARENT#p"}, "sk": {"S": "P"}, "epoch": {"N": "1"}},
    )
    guard = _guard(harness, epoch=1)
    outcomes = _accept_many(harness, _submissions(100, keyed=True), guard=guard)
    assert all(isinstance(o, Accepted) and o.created for o in outcomes)
    assert [len(t) for t in recorded.transactions] == [99, 99, 5]
    assert all("ConditionCheck" in t[-1] for t in recorded.transactions)


def _guard(harness: Harness, *, epoch: int) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": harness.table,
            "Key": {"pk": {"S": "PARENT#p"}, "sk": {"S": "P"}},
            "ConditionExpression": "epoch = :e",
            "ExpressionAttributeValues": {":e": {"N": str(epoch)}},
        }
    }


def test_a_failed_guard_fails_the_whole_call_and_writes_nothing(
    harness: Harness, recorded: Recorded
) -> None:
    harness.dynamodb.put_item(
        TableName=harness.table,
        Item={"pk": {"S": "PARENT#p"}, "sk": {"S": "P"}, "epoch": {"N": "2"}},
    )
    with pytest.raises(GuardFailedError) as failed:
        _accept_many(harness, _submissions(10, keyed=True), guard=_guard(harness, epoch=1))
    assert failed.value.code == "guard_failed"
    assert failed.value.outcomes == [None] * 10
    assert len(recorded.transactions) == 1  # not sent again without the guard, nor per job
    assert _job_items(harness) == []


def test_a_guard_that_fails_between_transactions_names_what_was_committed(
    harness: Harness, recorded: Recorded
) -> None:
    parent = {"pk": {"S": "PARENT#p"}, "sk": {"S": "P"}}
    harness.dynamodb.put_item(TableName=harness.table, Item={**parent, "epoch": {"N": "1"}})

    def new_epoch(sent: int) -> None:
        if sent == 1:
            harness.dynamodb.put_item(TableName=harness.table, Item={**parent, "epoch": {"N": "2"}})

    recorded.after = new_epoch
    with pytest.raises(GuardFailedError) as failed:
        _accept_many(harness, _submissions(60, keyed=True), guard=_guard(harness, epoch=1))
    committed = failed.value.outcomes
    assert all(isinstance(o, Accepted) for o in committed[:49])
    assert committed[49:] == [None] * 11
    assert len(_job_items(harness)) == 49


def test_a_failed_condition_on_one_item_fails_only_that_item(
    harness: Harness, recorded: Recorded
) -> None:
    harness.submit(key="key-20", payload={"steps": [{"name": "else", "cost": 1}]})
    recorded.transactions.clear()
    outcomes = _accept_many(harness, _submissions(50, keyed=True))
    assert isinstance(outcomes[20], IdempotencyConflictError)
    assert all(isinstance(o, Accepted) and o.created for i, o in enumerate(outcomes) if i != 20)
    # the whole chunk once, then again without the job whose condition failed
    assert [len(t) for t in recorded.transactions] == [100, 98]
    assert len(_job_items(harness)) == 50  # the earlier job and 49 new ones


def test_a_repeat_in_a_batch_answers_the_job_as_it_is(harness: Harness) -> None:
    earlier = harness.submit(key="key-3", payload={"steps": [{"name": "s3", "cost": 1}]})
    outcomes = _accept_many(harness, _submissions(5, keyed=True))
    assert outcomes[3] == Accepted(earlier, created=False, state="queued")
    assert sum(1 for o in outcomes if isinstance(o, Accepted) and o.created) == 4


def test_items_refused_before_the_store_keep_their_place(harness: Harness) -> None:
    items: list[Any] = _submissions(4)
    items[1] = Submission("no-such-kind", {})
    items[2] = LeaseholdError("refused at the edge")
    outcomes = _accept_many(harness, items)
    assert [type(o).__name__ for o in outcomes] == [
        "Accepted",
        "ValidationError",
        "LeaseholdError",
        "Accepted",
    ]
    assert outcomes[1].code == "unknown_kind"


big = Kind("big", max_payload_bytes=48 * 1024)


@big.step()
def _noop(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def test_a_batch_of_large_jobs_is_split_under_4_mb(harness: Harness, recorded: Recorded) -> None:
    intake = Intake({"big": EngineKind(big)}, harness.clock, harness.new_id)
    # delayed beyond 15 minutes: one write a job, so 100 jobs are 100 actions - one transaction
    # by count, but ~4.7 MB of items
    items = [
        Submission("big", {"blob": "x" * (46 * 1024), "n": i}, JobOptions(delay_seconds=3600))
        for i in range(100)
    ]
    outcomes = intake.accept_many(harness.stores.table, ALICE, items)
    assert all(isinstance(o, Accepted) and o.created for o in outcomes)
    assert len(recorded.transactions) == 2
    for transaction in recorded.transactions:
        size = sum(
            sum(len(name) + DynamoType(value).size() for name, value in w["Put"]["Item"].items())
            for w in transaction
        )
        assert size <= MAX_TRANSACTION_BYTES
    assert len(_job_items(harness)) == 100


def test_a_store_failure_after_a_commit_reports_the_committed_and_fails_the_rest(
    harness: Harness, recorded: Recorded
) -> None:
    def outage(sent: int) -> None:
        if sent == 1:
            harness.faults("dynamodb.TransactWriteItems:ThrottlingError=1")

    recorded.after = outage
    outcomes = _accept_many(harness, _submissions(80, keyed=True))
    assert all(isinstance(o, Accepted) and o.created for o in outcomes[:50])
    assert all(isinstance(o, StoreUnavailableError) for o in outcomes[50:])
    assert "same idempotency key" in str(outcomes[50])
    assert len(_job_items(harness)) == 50


def test_a_store_failure_before_any_commit_is_a_503_for_the_whole_batch(
    harness: Harness,
) -> None:
    harness.faults("dynamodb.TransactWriteItems:ThrottlingError=1")
    with pytest.raises(StoreUnavailableError, match="no job of the batch was accepted"):
        _accept_many(harness, _submissions(10, keyed=True))
    assert _job_items(harness) == []


@pytest.mark.parametrize("later_ms", [0, 60_000], ids=["same-items", "a-minute-later"])
def test_a_batch_whose_answer_was_lost_sent_again_gives_the_same_jobs(
    harness: Harness, later_ms: int
) -> None:
    harness.faults("dynamodb.TransactWriteItems:ReadTimeout=1@1")
    with pytest.raises(StoreUnavailableError):  # committed, but the answer never came
        _accept_many(harness, _submissions(10, keyed=True))
    assert len(_job_items(harness)) == 10
    harness.clock.advance(later_ms)
    # the same items: the chunk's ClientRequestToken makes it a no-op that succeeds; a minute
    # later (other created_at) the token mismatches, and each job's condition finds it there
    again = _accept_many(harness, _submissions(10, keyed=True))
    assert all(isinstance(o, Accepted) for o in again)
    assert {o.job_id for o in again} == {i["pk"]["S"][4:] for i in _job_items(harness)}
    assert len(_job_items(harness)) == 10


def test_a_batch_counts_each_of_its_jobs_against_the_tenants_submit_rate(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leasehold.domain.clock import SystemClock
    from tests.support.api import call_fixture

    now = [1_800_000_000_123]
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: now[0])
    # the fixture's generator driven here, and closed: its engine (built with this rate) must
    # not outlive the test — a later test's submit_direct found it, with this test's table
    with closing(call_fixture(monkeypatch, TENANT_SUBMIT_RATE="5")) as fixture:
        _submit_rate_batches(next(fixture), now)


def _submit_rate_batches(call: Any, now: list[int]) -> None:
    batch = {"jobs": [_body(i) for i in range(3)]}
    assert call("api-submit-batch.json", body=batch)[0] == 200
    # 3 of 5 taken this second: 3 more do not fit, and none of them is written
    status, answer, headers = call("api-submit-batch.json", body=batch)
    assert (status, answer["error"]["code"]) == (429, "submit_rate_exceeded")
    assert "a batch of 3 does not fit" in answer["error"]["message"]
    assert headers.get("Retry-After") == "1"
    assert len(_job_items(call)) == 3
    two = {"jobs": [_body(i) for i in range(2)]}
    assert call("api-submit-batch.json", body=two)[0] == 200  # exactly the 5
    now[0] += 1000
    status, _, _ = call("api-submit-batch.json", body={"jobs": [_body(i) for i in range(6)]})
    assert status == 429  # more than the rate: never in one second
    assert len(_job_items(call)) == 5
