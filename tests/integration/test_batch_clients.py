"""Every way of submitting many (issue 33 item 3): `Client.submit_many` (against the real Api
handler), `job_writes_many`, `submit_direct_many` and the testbed's `submit_many` — each a
`Submission` a job, handed to the one accept path, answered in order, one answer a job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import JobOptions, Kind, StepContext, Submission, ValidationError
from leasehold.apps import (
    ConditionFailed,
    Submitted,
    job_writes_many,
    submit_direct_many,
)
from leasehold.client import ApiError, Client, JobHandle
from leasehold.testing import LeaseholdTestbed
from tests.support.api import Call
from tests.support.harness import ALICE, Harness
from tests.support.scripted_api import ScriptedApi, Seen, envelope

shout = Kind(
    "shout",
    schema={"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
)


@shout.step()
def upper(ctx: StepContext, payload: dict[str, str]) -> dict[str, str]:
    return {"text": payload["text"].upper()}


internal = Kind("internal", submittable=False)


@internal.step()
def only(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def _synthetic(index: int, **options: Any) -> Submission:
    payload = {"steps": [{"name": f"s{index}", "cost": 1}]}
    return Submission("synthetic", payload, JobOptions.of(**options))


# ------------------------------------------------------------------ Client.submit_many


@pytest.fixture
def api_over_handler(call: Call) -> Iterator[ScriptedApi]:
    """A local HTTP server whose every request goes to the real Api handler (`call`)."""
    server = ScriptedApi()

    def forward(seen: Seen) -> tuple[int, dict[str, str], Any]:
        status, body, headers = call("api-submit-batch.json", body=seen.body)
        return status, headers, body

    server.script = forward
    yield server
    server.close()


def test_submit_many_answers_each_job_in_order_over_as_many_requests_as_needed(
    api_over_handler: ScriptedApi, call: Call
) -> None:
    client = Client(api_over_handler.url, user="alice", timeout=10)
    first = client.submit_many([_synthetic(0, idempotency_key="k-0")])
    assert isinstance(first[0], JobHandle)
    jobs = [_synthetic(i) for i in range(150)]
    jobs[3] = _synthetic(3, idempotency_key="k-0")  # k-0 with another request
    jobs[120] = _synthetic(120, max_attempts=2, priority="low", budget={"max_cost": 5})
    jobs[121] = Submission("no-such-kind", {})
    answers = client.submit_many(jobs)
    assert len(answers) == 150
    assert len(api_over_handler.seen) == 3  # one request for the first call, 100 + 50 after
    assert [len(s.body["jobs"]) for s in api_over_handler.seen[1:]] == [100, 50]
    assert api_over_handler.seen[2].body["jobs"][20] == {
        "kind": "synthetic",
        "payload": {"steps": [{"name": "s120", "cost": 1}]},
        "budget": {"max_cost": 5},
        "max_attempts": 2,
        "priority": "low",
    }
    assert api_over_handler.seen[0].body["jobs"][0]["idempotency_key"] == "k-0"
    conflict, unknown = answers[3], answers[121]
    assert isinstance(conflict, ApiError.Conflict) and conflict.code == "idempotency_key_reused"
    assert isinstance(unknown, ApiError.InvalidInput) and unknown.code == "unknown_kind"
    handles = [a for i, a in enumerate(answers) if i not in (3, 121)]
    assert all(isinstance(h, JobHandle) and h.state == "queued" for h in handles)
    _, view, _ = call("api-get-job.json", path_id=handles[119].job_id)
    assert (view["priority"], view["max_attempts"]) == ("low", 2)


def test_submit_many_repeats_a_request_after_a_503_only_when_every_job_has_a_key(
    api_over_handler: ScriptedApi,
) -> None:
    unavailable = (503, {"Retry-After": "1"}, envelope("store_unavailable", "x"))
    client = Client(api_over_handler.url, user="alice", timeout=10, retries=2)
    client._sleep = lambda _: None
    forward = api_over_handler.script
    assert forward is not None
    calls: list[int] = []

    def flaky(seen: Seen) -> Any:
        calls.append(1)
        return unavailable if len(calls) == 1 else forward(seen)

    api_over_handler.script = flaky
    keyed = client.submit_many([_synthetic(i, idempotency_key=f"r-{i}") for i in range(3)])
    assert all(isinstance(a, JobHandle) for a in keyed)
    assert len(calls) == 2  # the 503, then the same request again
    calls.clear()
    with pytest.raises(ApiError.Unavailable):
        client.submit_many([_synthetic(0, idempotency_key="r-9"), _synthetic(1)])
    assert len(calls) == 1  # one job without a key: not repeated


def test_a_request_refused_after_others_went_in_answers_its_jobs_and_the_rest(
    api_over_handler: ScriptedApi,
) -> None:
    forward = api_over_handler.script
    assert forward is not None

    def second_throttled(seen: Seen) -> Any:
        if len(api_over_handler.seen) == 2:
            return (429, {"Retry-After": "1"}, envelope("submit_rate_exceeded", "slow down"))
        return forward(seen)

    api_over_handler.script = second_throttled
    client = Client(api_over_handler.url, user="alice", timeout=10, retries=0)
    answers = client.submit_many([_synthetic(i) for i in range(250)])
    assert all(isinstance(a, JobHandle) for a in answers[:100])
    assert all(isinstance(a, ApiError) and a.status == 429 for a in answers[100:])
    assert len(api_over_handler.seen) == 2  # nothing more sent after the refusal


# ------------------------------------------------------------------ job_writes_many


def test_job_writes_many_packs_the_jobs_beside_the_callers_own_item(harness: Harness) -> None:
    jobs = [Submission("shout", {"text": f"t{i}"}) for i in range(60)]
    made = job_writes_many(harness.table, jobs, ALICE, kinds=[shout], now_ms=harness.clock.now_ms())
    assert len(made.jobs) == 60 and len(made.writes()) == 120
    transactions = made.transactions(reserve=1)
    assert [len(t) for t in transactions] == [98, 22]  # 49 jobs and 11, one action left each
    for number, transaction in enumerate(transactions):
        own = {
            "Put": {
                "TableName": harness.table,
                "Item": {"pk": {"S": f"ORDER#{number}"}, "sk": {"S": "ORDER"}},
            }
        }
        harness.dynamodb.transact_write_items(TransactItems=[own, *transaction])
    assert all(harness.state(job.job_id) == "queued" for job in made.jobs)


def test_job_writes_many_refuses_the_whole_when_one_job_cannot_be_accepted(
    harness: Harness,
) -> None:
    jobs = [Submission("shout", {"text": "a"}), Submission("shout", {"text": 5})]
    with pytest.raises(ValidationError, match="^job 1: ") as refused:
        job_writes_many(harness.table, jobs, ALICE, kinds=[shout])
    assert refused.value.code == "invalid_request"


def test_job_writes_many_keeps_each_jobs_key_and_its_repeat_answer(harness: Harness) -> None:
    jobs = [Submission("shout", {"text": "a"}, JobOptions(idempotency_key="o-1"))]
    made = job_writes_many(harness.stores.table, jobs, ALICE, kinds=[shout])
    harness.stores.table.transact(made.transactions()[0], token=made.jobs[0].token)
    again = job_writes_many(harness.stores.table, jobs, ALICE, kinds=[shout])
    assert again.jobs[0].job_id == made.jobs[0].job_id
    with pytest.raises(ConditionFailed) as failed:
        harness.stores.table.transact(again.writes())
    assert again.jobs[0].repeated(failed.value, 0) is True


# ------------------------------------------------------------------ submit_direct_many


def test_submit_direct_many_answers_each_job_in_order(harness: Harness) -> None:
    jobs = [
        Submission("shout", {"text": "a"}, JobOptions(idempotency_key="d-1")),
        Submission("internal", {}),
        Submission("shout", {"text": 5}),
        Submission("shout", {"text": "b"}, JobOptions(delay_seconds=3600)),
    ]
    answers = submit_direct_many(
        harness.table,
        jobs,
        ALICE,
        kinds=[shout, internal],
        client=harness.dynamodb,
        now_ms=harness.clock.now_ms(),
    )
    first, not_submittable, invalid, delayed = answers
    assert isinstance(first, Submitted) and first.created and first.state == "queued"
    assert isinstance(not_submittable, ValidationError) and not_submittable.code == "unknown_kind"
    assert isinstance(invalid, ValidationError) and invalid.code == "invalid_request"
    assert isinstance(delayed, Submitted) and harness.raw(delayed.job_id)["gsi1pk"] == "STATE#due"
    again = submit_direct_many(
        harness.table, jobs[:1], ALICE, kinds=[shout], client=harness.dynamodb
    )
    assert again == [Submitted(first.job_id, "queued", False)]


# ------------------------------------------------------------------ the testbed


def test_the_testbeds_submit_many_runs_the_accepted_jobs() -> None:
    with LeaseholdTestbed([shout]) as tb:
        answers = tb.submit_many(
            [
                Submission("shout", {"text": "a"}),
                Submission("shout", {}),
                Submission("shout", {"text": "b"}, JobOptions(idempotency_key="t-1")),
            ]
        )
        first, refused, keyed = answers
        assert isinstance(refused, ValidationError)
        assert isinstance(first, str) and isinstance(keyed, str)
        assert tb.submit_many(
            [Submission("shout", {"text": "b"}, JobOptions(idempotency_key="t-1"))]
        ) == [keyed]
        tb.run_until_idle()
        assert tb.view(first)["result"] == {"text": "A"}
        assert tb.view(keyed)["result"] == {"text": "B"}
