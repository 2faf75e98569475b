"""Enqueue in your own transaction (`job_writes`) and alone over boto3 (`submit_direct`), on moto
with the table and queues of template.yaml: a user's own item and a job commit together or not
at all; the job then goes the way every job goes (the relay moves its outbox item to the queue,
a worker runs it); `POST /jobs`' checks and idempotency rules hold, and its store failures are
the same typed errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold import Kind, LeaseholdError, Owner, StepContext, ValidationError
from leasehold.apps import (
    ConflictError,
    StoreUnavailableError,
    Submitted,
    job_writes,
    submit_direct,
)
from leasehold.domain.errors import StoreRefusedError
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.options import Submission
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.store.queue import Wakeup
from tests.support.harness import ALICE, BOB, Harness

ROOT = Path(__file__).resolve().parents[2]

shout = Kind(
    "shout",
    schema={
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string", "maxLength": 100}},
    },
)


@shout.step()
def upper(ctx: StepContext, payload: dict[str, str]) -> dict[str, str]:
    return {"text": payload["text"].upper()}


internal = Kind("internal", submittable=False)


@internal.step()
def only(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


KINDS = {"shout": EngineKind(shout), "internal": EngineKind(internal)}


def _direct(
    harness: Harness, payload: dict[str, Any], owner: Owner = ALICE, **options: Any
) -> Submitted:
    """`submit_direct` of a `shout` job over the harness's boto3 client, at its manual clock."""
    options.setdefault("client", harness.dynamodb)
    table = options.pop("table", harness.table)
    return submit_direct(table, shout, payload, owner, now_ms=harness.clock.now_ms(), **options)


def _order(harness: Harness, order_id: str, *, condition: str = "attribute_not_exists(pk)"):
    """A user's own item, beside the jobs in the same table, conditional on not existing."""
    return {
        "Put": {
            "TableName": harness.table,
            "Item": {"pk": {"S": f"ORDER#{order_id}"}, "sk": {"S": "ORDER"}, "n": {"N": "1"}},
            "ConditionExpression": condition,
        }
    }


def _items(harness: Harness) -> dict[str, list[dict[str, Any]]]:
    """Every item in the table, grouped by the prefix of its partition key."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in harness.dynamodb.scan(TableName=harness.table)["Items"]:
        grouped.setdefault(item["pk"]["S"].split("#")[0], []).append(item)
    return grouped


def _run_through_relay_and_worker(harness: Harness) -> list[str]:
    """What the functions do after a commit: the relay turns the stream's outbox insert into a
    wake-up on the queue, and a worker runs each wake-up it receives. Returns the outcomes."""
    assert harness.relay_pump().poll_once() >= 1
    worker = harness.worker(kinds=KINDS)
    outcomes = []
    for message in harness.receive_all():
        result = worker.handle(Wakeup.parse(message["Body"]))
        outcomes.append(result.outcome)
    return outcomes


# ------------------------------------------------------------------ (a) one transaction


def test_a_users_item_and_a_job_commit_together_and_the_job_runs(harness: Harness) -> None:
    new = job_writes(harness.table, shout, {"text": "hi"}, ALICE, now_ms=harness.clock.now_ms())
    harness.dynamodb.transact_write_items(TransactItems=[_order(harness, "o-1"), *new.writes])
    items = _items(harness)
    assert sorted(items) == ["JOB", "ORDER", "OUTBOX"]
    assert harness.state(new.job_id) == "queued"
    assert _run_through_relay_and_worker(harness) == ["succeeded"]
    job = harness.store.get(new.job_id)
    assert job is not None and job.state.value == "succeeded" and job.result == {"text": "HI"}


def test_submit_direct_commits_a_job_that_the_relay_and_a_worker_run(harness: Harness) -> None:
    made = _direct(harness, {"text": "hi"})
    assert made == Submitted(made.job_id, "queued", True)
    assert sorted(_items(harness)) == ["JOB", "OUTBOX"]
    assert _run_through_relay_and_worker(harness) == ["succeeded"]
    assert harness.state(made.job_id) == "succeeded"
    view = harness.raw(made.job_id)
    assert (view["tenant"], view["user_id"]) == (ALICE.tenant, ALICE.user_id)


def test_submit_direct_takes_a_delay(harness: Harness) -> None:
    """A delay beyond 15 minutes: the job alone, in the due index, not started before due."""
    made = _direct(harness, {"text": "later"}, delay_seconds=3600)
    assert sorted(_items(harness)) == ["JOB"]  # no wake-up until the sweeper gives it one
    job = harness.store.get(made.job_id)
    assert job is not None and job.next_attempt_at == harness.clock.now_ms() + 3_600_000
    assert harness.raw(made.job_id)["gsi1pk"] == "STATE#due"
    near = _direct(harness, {"text": "soon"}, run_at="2000-01-01T00:00:00Z")  # past: now
    assert harness.store.get(near.job_id).next_attempt_at == harness.clock.now_ms()  # type: ignore[union-attr]


def test_submit_direct_takes_the_engines_table_door_too(harness: Harness) -> None:
    made = _direct(harness, {"text": "x"}, BOB, table=harness.stores.table)
    assert harness.raw(made.job_id)["user_id"] == "bob"


# ------------------------------------------------------------------ (b) neither


def test_a_failing_condition_on_the_users_item_leaves_neither_behind(harness: Harness) -> None:
    harness.dynamodb.transact_write_items(TransactItems=[_order(harness, "o-1")])
    new = job_writes(harness.table, shout, {"text": "hi"}, ALICE, idempotency_key="order-o-1")
    with pytest.raises(ClientError) as cancelled:
        harness.dynamodb.transact_write_items(
            TransactItems=[_order(harness, "o-1"), *new.writes], ClientRequestToken=new.token
        )
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["ConditionalCheckFailed", "None", "None"]
    # No job, no outbox item (so nothing for the relay to send), and no key item: only the order
    assert sorted(_items(harness)) == ["ORDER"]
    assert harness.store.get(new.job_id) is None
    assert harness.relay_pump().poll_once() == 0
    assert harness.receive_all() == []
    # The key was not used up: the same request commits once the order is new
    harness.dynamodb.transact_write_items(
        TransactItems=[_order(harness, "o-2"), *new.writes], ClientRequestToken=new.token
    )
    assert harness.state(new.job_id) == "queued"


def test_the_same_through_the_engines_door_names_the_failed_item(harness: Harness) -> None:
    from leasehold.apps import ConditionFailed

    harness.dynamodb.transact_write_items(TransactItems=[_order(harness, "o-1")])
    new = job_writes(harness.stores.table, shout, {"text": "hi"}, ALICE)
    with pytest.raises(ConditionFailed) as failed:
        harness.stores.table.transact([_order(harness, "o-1"), *new.writes])
    assert failed.value.failed_at(0) and not failed.value.failed_at(1)
    assert sorted(_items(harness)) == ["ORDER"]


# ------------------------------------------------------------------ (c) POST /jobs' checks


def _http(harness: Harness) -> JobService:
    """`POST /jobs`' own service over the same table, with the same kinds."""
    return JobService(
        harness.stores,
        dict(KINDS),
        harness.clock,
        time_ordered_ids(harness.clock),
        harness.telemetry,
    )


def _over_http(harness: Harness, kind: str, payload: Any, **extra: Any) -> LeaseholdError:
    """What `POST /jobs` (its service) raises for the same request."""
    key = extra.pop("idempotency_key", None)
    with pytest.raises(LeaseholdError) as refused:
        _http(harness).accept(
            ALICE, Submission.from_body({"kind": kind, "payload": payload, **extra}, key)
        )
    return refused.value


@pytest.mark.parametrize(
    ("kind", "payload", "extra", "code"),
    [
        ("nope", {"text": "a"}, {}, "unknown_kind"),  # not registered
        ("internal", {}, {}, "unknown_kind"),  # registered, not submittable
        ("shout", {}, {}, "invalid_request"),  # the kind's schema: required field
        ("shout", {"text": 5}, {}, "invalid_request"),  # the schema: a field's type
        ("shout", {"text": "a" * 101}, {}, "invalid_request"),  # the schema: maxLength
        ("shout", {"text": "a", "pad": "x" * 17_000}, {}, "payload_too_large"),  # too large
        ("shout", {"text": "a"}, {"max_attempts": 11}, "invalid_request"),
        ("shout", {"text": "a"}, {"deadline_seconds": 0}, "invalid_request"),
        ("shout", {"text": "a"}, {"budget": {"max_cost": -1}}, "invalid_request"),
        ("shout", {"text": "a"}, {"idempotency_key": "no spaces"}, "invalid_idempotency_key"),
    ],
)
def test_submit_direct_refuses_what_post_jobs_refuses(
    harness: Harness, kind: str, payload: Any, extra: dict[str, Any], code: str
) -> None:
    http = _over_http(harness, kind, payload, **dict(extra))
    as_kind = {"shout": shout, "internal": internal}.get(kind, kind)
    with pytest.raises(ValidationError) as refused:
        submit_direct(harness.table, as_kind, payload, ALICE, client=harness.dynamodb, **extra)
    assert (
        (type(refused.value), refused.value.code)
        == (type(http), http.code)
        == (
            ValidationError,
            code,
        )
    )
    if kind != "internal":  # the API names the kinds it knows; the direct path knows its own
        assert str(refused.value).split(";")[0] == str(http).split(";")[0]
    assert _items(harness) == {}


def test_direct_jobs_are_held_to_the_per_user_limit_as_http_ones_are(harness: Harness) -> None:
    made = [_direct(harness, {"text": str(n)}) for n in range(3)]
    for job in made[:2]:  # two running jobs take alice's two slots (SLOT_LIMIT)
        harness.claim(job.job_id, "x")
    result = harness.worker(kinds=KINDS).handle(harness.wakeup(made[2].job_id))
    assert result.outcome == "slots_full"
    assert harness.state(made[2].job_id) == "queued"
    other = _direct(harness, {"text": "b"}, BOB)
    assert harness.worker(kinds=KINDS).handle(harness.wakeup(other.job_id)).outcome == "succeeded"


# ------------------------------------------------------------------ (d) one key, one job


def test_the_same_key_twice_gives_one_job(harness: Harness) -> None:
    first = _direct(harness, {"text": "a"}, idempotency_key="k-1")
    harness.claim(first.job_id, "x")  # it runs meanwhile
    again = _direct(harness, {"text": "a"}, idempotency_key="k-1")
    assert again.job_id == first.job_id
    items = _items(harness)
    assert len(items["JOB"]) == 1 and len(items["OUTBOX"]) == 1
    # one wake-up for the relay to send, not two
    assert harness.relay_pump().poll_once() == 1 and len(harness.receive_all()) == 1
    # the key is the HTTP API's: POST /jobs with it answers with the same job
    assert (
        _http(harness).accept(ALICE, Submission.from_body(_http_body("a"), "k-1")).job_id
        == first.job_id
    )
    assert len(_items(harness)["JOB"]) == 1


def test_a_repeat_after_the_token_window_answers_with_the_job_as_it_is(harness: Harness) -> None:
    first = _direct(harness, {"text": "a"}, idempotency_key="k", table=harness.stores.table)
    harness.claim(first.job_id, "x")
    # Past DynamoDB's ten minutes for a ClientRequestToken: the job's own condition answers
    again = _direct(
        harness, {"text": "a"}, client=_TokenForgetting(harness.dynamodb), idempotency_key="k"
    )
    assert again == Submitted(first.job_id, "running", False)


@pytest.mark.parametrize("later_ms", [3_000, 4 * 60_000])
def test_a_keyed_retry_after_a_lost_answer_gets_the_same_job(
    harness: Harness, later_ms: int
) -> None:
    # The commit happened, its answer did not arrive; the retry's items carry a later time
    harness.faults("dynamodb.TransactWriteItems:ReadTimeout=1@1")
    with pytest.raises(StoreUnavailableError, match="same idempotency_key"):
        _direct(harness, {"text": "a"}, idempotency_key="k-lost")
    (made,) = _items(harness)["JOB"]
    harness.clock.advance(later_ms)
    again = _direct(harness, {"text": "a"}, idempotency_key="k-lost")
    assert again.job_id == made["job_id"]["S"]
    assert len(_items(harness)["JOB"]) == 1 and len(_items(harness)["OUTBOX"]) == 1


def test_the_same_key_with_another_request_is_a_conflict(harness: Harness) -> None:
    _direct(harness, {"text": "a"}, idempotency_key="k-1", table=harness.stores.table)
    with pytest.raises(ConflictError) as conflict:
        _direct(
            harness, {"text": "b"}, client=_TokenForgetting(harness.dynamodb), idempotency_key="k-1"
        )
    assert conflict.value.code == "idempotency_key_reused"
    assert len(_items(harness)["JOB"]) == 1
    # another user's same key is another job
    other = _direct(harness, {"text": "a"}, BOB, idempotency_key="k-1", table=harness.stores.table)
    assert len(_items(harness)["JOB"]) == 2 and other.created


def _http_body(text: str) -> dict[str, Any]:
    return {"kind": "shout", "payload": {"text": text}}


class _TokenForgetting:
    """A DynamoDB client that drops `ClientRequestToken` (as after DynamoDB's ten-minute
    window): the job's own condition must tell a repeat apart."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def transact_write_items(self, **params: Any) -> Any:
        params.pop("ClientRequestToken", None)
        return self._client.transact_write_items(**params)


# ------------------------------------------------------------------ store failures, typed


def test_store_failures_are_the_apis_typed_errors(harness: Harness) -> None:
    with pytest.raises(StoreUnavailableError, match="retry with the same idempotency_key"):
        _direct(harness, {"text": "a"}, table="no-such-table")
    harness.faults("dynamodb.TransactWriteItems:TransactionConflict=1")
    with pytest.raises(StoreUnavailableError, match="kept cancelling"):
        _direct(harness, {"text": "a"}, table=harness.stores.table)
    harness.faults("dynamodb.TransactWriteItems:ThrottlingException=1")
    with pytest.raises(StoreUnavailableError):
        _direct(harness, {"text": "a"})
    harness.faults("dynamodb.TransactWriteItems:ValidationException=1")
    with pytest.raises(StoreRefusedError):
        _direct(harness, {"text": "a"})
    harness.faults("")
    assert "JOB" not in _items(harness)


# ------------------------------------------------------------------ the IAM statements


def _guide_iam_statement() -> str:
    """The manual's SAM policy statement for `submit_direct` (docs/guide/enqueue-from-code.md)."""
    text = (ROOT / "docs" / "guide" / "enqueue-from-code.md").read_text()
    return text.split("<!-- iam:submit-direct -->")[1].split("<!-- /iam -->")[0]


_ACTION_OF = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def test_the_guide_grants_exactly_the_actions_the_writes_use(harness: Harness) -> None:
    keyed = job_writes(harness.table, shout, {"text": "a"}, ALICE, idempotency_key="k")
    plain = job_writes(harness.table, shout, {"text": "a"}, ALICE)
    used = {_ACTION_OF[next(iter(entry))] for new in (keyed, plain) for entry in new.writes}
    # DynamoDB authorises a transaction by its entries' own actions
    assert used == {"dynamodb:PutItem"}
    assert {next(iter(e.values()))["TableName"] for e in keyed.writes} == {harness.table}
    statement = _guide_iam_statement()
    assert set(re.findall(r"dynamodb:[A-Za-z]+\b(?!:)", statement)) == used
    # on the stack's table only, and only inside a transaction
    assert "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/" in statement
    assert "ForAnyValue:StringEquals:" in statement  # ForAllValues would pass a lone PutItem
    assert "dynamodb:EnclosingOperation: TransactWriteItems" in statement
