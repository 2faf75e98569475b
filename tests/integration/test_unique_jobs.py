"""Unique jobs (issue 33 item 1, DESIGN §21, decisions UQ1–UQ6) on moto: a second job with one
unique key within the window is not created — `POST /jobs` answers 200 with the first job and
`"duplicate": true`; a `UNIQUE#<key>` item Put on a condition in the accept transaction is the
rule, and a kind that declares nothing writes nothing more. Races are run with threads against
moto in-process (DynamoDB requests serialised as the service does per item,
tests/support/atomic.py)."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from bench.meter import CapacityMeter, TableSpec, client_requery, moto_peek

from leasehold import Kind, StepContext, Unique
from leasehold.apps import ConditionFailed, job_writes, submit_direct
from leasehold.client import Client
from leasehold.domain.errors import StoreUnavailableError, ValidationError
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.job import Owner
from leasehold.domain.options import JobOptions, Submission
from leasehold.domain.states import JobState
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import Accepted, Intake
from leasehold.store.items import job_key
from tests.support.api import Call
from tests.support.atomic import serialise_dynamodb
from tests.support.harness import ALICE, BOB, CAROL, Harness, make_job
from tests.support.resources import REGION, template
from tests.support.scripted_api import ScriptedApi

HOUR = 3600

sync = Kind("sync_account", unique=Unique(by=["payload.account"], period_seconds=HOUR))
plain = Kind("plain_job")


@sync.step()
def run_sync(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"synced": payload["account"]}


@plain.step()
def run_plain(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def intake(harness: Harness, *kinds: Kind) -> Intake:
    return Intake(
        {kind.name: EngineKind(kind) for kind in (kinds or (sync, plain))},
        harness.clock,
        time_ordered_ids(harness.clock),
        harness.telemetry,
    )


def accept(harness: Harness, payload: dict[str, Any], owner: Owner = ALICE, **kw: Any) -> Accepted:
    kind = kw.pop("kind", "sync_account")
    options = JobOptions(**kw)
    return intake(harness).accept(harness.stores.table, owner, Submission(kind, payload, options))


def items_with(prefix: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name=REGION)
    (table,) = client.list_tables()["TableNames"]
    found = client.scan(TableName=table)["Items"]
    return [i for i in found if i["pk"]["S"].startswith(prefix)]


def set_state(harness: Harness, job_id: str, state: JobState) -> None:
    harness.stores.table.client.update_item(
        TableName=harness.stores.table.name,
        Key=job_key(job_id),
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"S": state.value}},
    )


# ------------------------------------------------------------------ the rule


def test_a_second_job_with_the_key_in_the_window_is_the_first_one(harness: Harness) -> None:
    first = accept(harness, {"account": "a1"})
    again = accept(harness, {"account": "a1", "note": "other fields do not count"})
    other = accept(harness, {"account": "a2"})
    assert first.created and not first.duplicate
    assert (again.job_id, again.created, again.duplicate) == (first.job_id, False, True)
    assert again.state == "queued"
    assert other.created and other.job_id != first.job_id
    assert len(items_with("JOB#")) == 2
    assert len(items_with("UNIQUE#")) == 2
    assert harness.telemetry.counts["UniqueDuplicates"] == 1


def test_the_window_ends_after_period_seconds(harness: Harness) -> None:
    first = accept(harness, {"account": "a1"})
    harness.clock.advance(HOUR * 1000 - 1)
    assert accept(harness, {"account": "a1"}).job_id == first.job_id
    harness.clock.advance(1)  # the window has passed, though the TTL has not removed the item
    later = accept(harness, {"account": "a1"})
    assert later.created and later.job_id != first.job_id
    assert accept(harness, {"account": "a1"}).job_id == later.job_id


def test_the_key_is_per_tenant_and_per_user_only_when_by_names_owner(harness: Harness) -> None:
    first = accept(harness, {"account": "a1"}, ALICE)
    assert accept(harness, {"account": "a1"}, BOB).job_id == first.job_id  # same tenant
    assert accept(harness, {"account": "a1"}, CAROL).created  # never across tenants
    per_user = Unique(by=["owner", "payload.account"], period_seconds=HOUR)
    mine = accept(harness, {"account": "a1"}, ALICE, kind="plain_job", unique=per_user)
    assert accept(harness, {"account": "a1"}, BOB, kind="plain_job", unique=per_user).created
    repeat = accept(harness, {"account": "a1"}, ALICE, kind="plain_job", unique=per_user)
    assert repeat.duplicate and repeat.job_id == mine.job_id


def test_a_job_that_ended_in_a_state_that_does_not_count_is_replaced(harness: Harness) -> None:
    """River's default: a cancelled, failed or dead job does not make the next one a duplicate,
    a succeeded one does (within the window)."""
    first = accept(harness, {"account": "a1"})
    set_state(harness, first.job_id, JobState.SUCCEEDED)
    done = accept(harness, {"account": "a1"})
    assert (done.job_id, done.duplicate, done.state) == (first.job_id, True, "succeeded")
    set_state(harness, first.job_id, JobState.CANCELLED)
    second = accept(harness, {"account": "a1"})
    assert second.created and second.job_id != first.job_id
    (item,) = items_with("UNIQUE#")
    assert item["job_id"]["S"] == second.job_id
    assert accept(harness, {"account": "a1"}).job_id == second.job_id


def test_a_holder_that_left_the_table_no_longer_counts(harness: Harness) -> None:
    first = accept(harness, {"account": "a1"})
    harness.stores.table.client.delete_item(
        TableName=harness.stores.table.name, Key=job_key(first.job_id)
    )
    second = accept(harness, {"account": "a1"})
    assert second.created and second.job_id != first.job_id


def test_a_keyed_repeat_is_a_repeat_and_another_key_a_duplicate(harness: Harness) -> None:
    first = accept(harness, {"account": "a1"}, idempotency_key="k-1")
    repeat = accept(harness, {"account": "a1"}, idempotency_key="k-1")
    other = accept(harness, {"account": "a1"}, idempotency_key="k-2")
    assert (repeat.job_id, repeat.created, repeat.duplicate) == (first.job_id, False, False)
    assert (other.job_id, other.created, other.duplicate) == (first.job_id, False, True)
    assert harness.telemetry.counts["IdempotentReplays"] == 1
    assert harness.telemetry.counts["UniqueDuplicates"] == 1


def test_states_chooses_which_states_count(harness: Harness) -> None:
    only_waiting = Unique(by=["payload.account"], period_seconds=HOUR, states=["queued"])
    first = accept(harness, {"account": "a1"}, kind="plain_job", unique=only_waiting)
    set_state(harness, first.job_id, JobState.RUNNING)
    second = accept(harness, {"account": "a1"}, kind="plain_job", unique=only_waiting)
    assert second.created and second.job_id != first.job_id


def test_a_replay_between_the_read_and_the_replacement_makes_a_duplicate(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replacement is conditional on the old job still not counting: an operator's replay
    landing after the read is met by the ConditionCheck, not by a second job."""
    first = accept(harness, {"account": "a1"})
    set_state(harness, first.job_id, JobState.DEAD)
    table = harness.stores.table
    original = table.get

    def get_then_replay(key: dict[str, Any]) -> Any:
        item = original(key)
        if key == job_key(first.job_id):
            set_state(harness, first.job_id, JobState.QUEUED)
        return item

    monkeypatch.setattr(table, "get", get_then_replay)
    again = accept(harness, {"account": "a1"})
    assert (again.job_id, again.duplicate) == (first.job_id, True)
    assert len(items_with("JOB#")) == 1


def test_a_kind_that_declares_nothing_writes_nothing_more(harness: Harness) -> None:
    """The accept transaction of a job without a unique rule is its two items (job + outbox),
    priced by the capacity meter (moto returns no ConsumedCapacity); a unique job adds one."""
    definition = template()["Resources"]["JobsTable"]["Properties"]
    table = harness.stores.table
    meter = CapacityMeter(
        TableSpec.from_definition(table.name, definition),
        moto_peek(),
        client_requery(boto3.client("dynamodb", region_name=REGION)),
        ask_moto=True,
    )
    meter.attach(table.client)
    sent: list[int] = []
    transact = table.transact

    def counting(items: list[dict[str, Any]], *, token: str | None = None) -> None:
        sent.append(len(items))
        transact(items, token=token)

    table.transact = counting  # type: ignore[method-assign]
    accept(harness, {"n": 1}, kind="plain_job")
    plain_units = sum(cost.total for _, cost in meter.priced_writes())
    meter.reset()
    accept(harness, {"account": "a1"})
    unique_units = sum(cost.total for _, cost in meter.priced_writes())
    assert sent == [2, 3]
    print(f"write units on moto's meter: plain {plain_units}, unique {unique_units}")
    assert unique_units - plain_units == 2  # one small item more, in a transaction
    meter.reset()
    accept(harness, {"account": "a1"})  # a duplicate: the failed transaction, then two reads
    assert sent == [2, 3, 3]


# ------------------------------------------------------------------ races


def race(harness: Harness, payload: dict[str, Any], count: int = 2) -> list[Accepted]:
    """`count` threads submit `payload` at once (released together by a barrier)."""
    barrier = threading.Barrier(count)
    answers: list[Accepted] = []

    def submit() -> None:
        barrier.wait()
        answers.append(accept(harness, payload))

    threads = [threading.Thread(target=submit) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_two_racing_submissions_with_one_key_give_one_job(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    serialise_dynamodb(monkeypatch)
    for round_ in range(5):
        answers = race(harness, {"account": f"race-{round_}"})
        assert len(answers) == 2
        assert len({a.job_id for a in answers}) == 1, answers
        assert sorted(a.created for a in answers) == [False, True]
        assert [a.duplicate for a in answers if not a.created] == [True]
    assert len(items_with("JOB#")) == 5


def test_a_transaction_conflict_past_the_retries_is_the_duplicate_not_a_503(
    harness: Harness,
) -> None:
    first = accept(harness, {"account": "a1"})
    harness.faults("dynamodb.TransactWriteItems:TransactionConflict=1")
    again = accept(harness, {"account": "a1"})
    assert (again.job_id, again.duplicate) == (first.job_id, True)
    # With no job holding the key the 503 stands: nothing was promised.
    with pytest.raises(StoreUnavailableError):
        accept(harness, {"account": "a2"})
    harness.faults("")
    assert harness.injected("TransactWriteItems:TransactionConflict") > 0
    assert len(items_with("JOB#")) == 1


# ------------------------------------------------------------------ input


@pytest.mark.parametrize(
    ("unique", "message"),
    [
        ({"by": ["account"], "period_seconds": 60}, 'must be "payload.<path>"'),
        ({"by": ["payload.a..b"], "period_seconds": 60}, "must be payload.<field>"),
        ({"by": [], "period_seconds": 60}, "list of 1 to 8 names"),
        ({"by": ["kind"], "period_seconds": 0}, "between 1 and 31536000"),
        ({"by": ["kind"], "period_seconds": 31536001}, "between 1 and 31536000"),
        ({"by": ["kind"], "period_seconds": "60"}, "must be an integer"),
        ({"by": ["kind"], "period_seconds": 60, "states": ["done"]}, "unknown state 'done'"),
        ({"by": ["kind"]}, "needs 'by' and 'period_seconds'"),
        ({"by": ["kind"], "period_seconds": 60, "extra": 1}, "'unique' must be an object"),
    ],
)
def test_a_bad_unique_is_a_400_naming_what_is_wrong(
    call: Call, unique: dict[str, Any], message: str
) -> None:
    status, answer, _ = call("api-submit-job.json", body=make_job(unique=unique))
    assert status == 400
    assert message in answer["error"]["message"]
    assert items_with("JOB#") == []


def test_a_payload_without_a_path_by_names_is_a_400(harness: Harness) -> None:
    with pytest.raises(ValidationError, match="'payload.account' is required"):
        accept(harness, {"other": 1})


def test_a_request_may_repeat_its_kinds_unique_but_not_change_it(harness: Harness) -> None:
    same = Unique(by=["payload.account"], period_seconds=HOUR)
    assert accept(harness, {"account": "a1"}, unique=same).created
    with pytest.raises(ValidationError, match="declares its jobs unique") as refused:
        accept(harness, {"account": "a1"}, unique=Unique(by=["kind"], period_seconds=60))
    assert refused.value.code == "unique_conflict"


# ------------------------------------------------------------------ POST /jobs, batches


def test_post_jobs_answers_a_duplicate_with_200_and_the_first_job(call: Call) -> None:
    unique = {"by": ["payload.steps"], "period_seconds": 600}  # any JSON value may be a key's
    body = make_job(unique=unique)
    status, first, _ = call("api-submit-job.json", body=body)
    assert status == 202 and "duplicate" not in first
    status, again, headers = call("api-submit-job.json", body=body)
    assert status == 200
    assert again == {
        "job_id": first["job_id"],
        "state": "queued",
        "status_url": f"/jobs/{first['job_id']}",
        "duplicate": True,
    }
    assert headers["Location"] == again["status_url"]


def test_a_batch_answers_duplicates_in_their_places(call: Call) -> None:
    unique = {"by": ["payload.steps"], "period_seconds": 600}

    def job(account: str) -> dict[str, Any]:
        return make_job(payload={"steps": [{"name": account}]}, unique=unique)

    status, answer, _ = call(
        "api-submit-batch.json", body={"jobs": [job("a"), make_job(), job("a"), job("b")]}
    )
    assert status == 200
    first, other, same, second = answer["results"]
    assert "duplicate" not in first and "duplicate" not in other
    assert same == {**first, "duplicate": True}
    assert second["job_id"] not in (first["job_id"], other["job_id"])
    _, again, _ = call("api-submit-batch.json", body={"jobs": [job("b")]})
    assert again["results"][0] == {**second, "duplicate": True}
    assert len(items_with("JOB#")) == 3


# ------------------------------------------------------------------ the other ways in


@pytest.fixture
def api() -> Any:
    server = ScriptedApi()
    yield server
    server.close()


def test_the_client_sends_unique_and_reads_a_duplicate(api: Any) -> None:
    first = {"job_id": "j_1", "state": "queued", "status_url": "/jobs/j_1"}
    api.answers = [(202, {}, first), (200, {}, {**first, "duplicate": True})]
    client = Client(api.url, user="alice", timeout=5)
    unique = Unique(by=["payload.account", "owner"], period_seconds=60, states=["queued"])
    made = client.submit("sync_account", {"account": "a1"}, unique=unique)
    again = client.submit("sync_account", {"account": "a1"}, options=JobOptions(unique=unique))
    assert (made.job_id, made.duplicate) == ("j_1", False)
    assert (again.job_id, again.duplicate) == ("j_1", True)
    assert api.seen[0].body["unique"] == {
        "by": ["payload.account", "owner"],
        "period_seconds": 60,
        "states": ["queued"],
    }
    assert Submission.from_body(api.seen[1].body).options.unique == unique  # as the API reads it


def test_submit_direct_answers_a_duplicate(harness: Harness) -> None:
    def direct(payload: dict[str, Any]) -> Any:
        return submit_direct(
            harness.stores.table, sync, payload, ALICE, now_ms=harness.clock.now_ms()
        )

    first = direct({"account": "a1"})
    again = direct({"account": "a1"})
    assert first.created and not first.duplicate
    assert (again.job_id, again.created, again.duplicate) == (first.job_id, False, True)


def test_job_writes_takes_the_key_and_names_its_holder(harness: Harness) -> None:
    now = harness.clock.now_ms()
    first = job_writes(harness.stores.table, sync, {"account": "a1"}, ALICE, now_ms=now)
    assert [next(iter(w)) for w in first.writes] == ["Put", "Put", "Put"]
    harness.stores.table.transact(first.writes)
    second = job_writes(harness.stores.table, sync, {"account": "a1"}, ALICE, now_ms=now)
    with pytest.raises(ConditionFailed) as failed:
        harness.stores.table.transact(second.writes)
    assert second.held_by(failed.value) == first.job_id
    assert harness.stores.jobs.get(second.job_id) is None
    plain_writes = job_writes(harness.stores.table, plain, {}, ALICE, now_ms=now)
    assert len(plain_writes.writes) == 2 and plain_writes.unique_at is None


def test_a_store_failure_in_a_batch_of_unique_jobs_reports_what_was_committed(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision BA4 for the claimed jobs too: nothing committed, the whole call is the 503;
    after a commit, each job not committed has its own error and nothing more is sent."""
    table = harness.stores.table
    transact = table.transact
    sent: list[int] = []

    def failing_after_first(items: list[dict[str, Any]], *, token: str | None = None) -> None:
        sent.append(len(items))
        if len(sent) > 1:
            raise StoreUnavailableError("the store did not answer")
        transact(items, token=token)

    monkeypatch.setattr(table, "transact", failing_after_first)
    batch = [
        Submission("plain_job", {}),
        Submission("sync_account", {"account": "a1"}),
        Submission("sync_account", {"account": "a2"}),
    ]
    outcomes = intake(harness).accept_many(table, ALICE, batch)
    assert isinstance(outcomes[0], Accepted) and outcomes[0].created
    assert all(isinstance(o, StoreUnavailableError) for o in outcomes[1:])
    assert sent == [2, 3]  # the plain job, then one claimed job: not the third
    with pytest.raises(StoreUnavailableError):
        intake(harness).accept_many(table, ALICE, batch[1:])
