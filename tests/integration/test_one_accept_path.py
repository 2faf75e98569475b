"""One accept path (decision OW2): the same request makes the same job, and gets the same answer,
through `POST /jobs` (the API function's handler), `submit_direct`, `job_writes` and the
testbed's `submit` — on one testbed's moto, the kind's defaults resolved once."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Budget, JobOptions, Kind, Owner, StepContext, ValidationError
from leasehold.apps import Engine, job_writes, submit_direct
from leasehold.domain.errors import SubmitRateExceededError
from leasehold.handlers import api, wiring
from leasehold.handlers import worker as worker_function
from leasehold.testing import LeaseholdTestbed
from leasehold_dev.local.invoke import LocalContext
from leasehold_dev.local.resources import template_environment
from tests.support.api import load_event

pytestmark = pytest.mark.integration

ALICE = Owner("study-group", "alice")
"""The caller the API's sample event's claims name."""

chores = Kind("chores", max_attempts=2, priority="low")
"""A kind with defaults of its own: each path must resolve them alike."""


@chores.step()
def tidy(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"done": payload["room"]}


OPTIONS = {"budget": {"max_cost": 5}, "deadline_seconds": 120, "delay_seconds": 30}
"""One request's options, as a `POST /jobs` body's fields."""


@pytest.fixture
def testbed() -> Iterator[LeaseholdTestbed]:
    with LeaseholdTestbed([chores], owner=ALICE) as tb:
        yield tb
    for cached in (wiring.runtime, worker_function.worker, api.jobs, api.mounted):
        cached.cache_clear()


def _options(key: str) -> JobOptions:
    return JobOptions(idempotency_key=key, budget=Budget(max_cost=5), deadline_seconds=120,
                      delay_seconds=30)  # fmt: skip


def _post_jobs(tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch, body: Any, key: str) -> Any:
    """`POST /jobs` through the API function's handler, built as a cold start builds it over the
    testbed's table and queues (template.yaml's environment, this module's kind)."""
    environment = template_environment(tb.table_name, tb.queue_urls, LEASEHOLD_KINDS=__name__)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for cached in (wiring.runtime, api.jobs, api.mounted):
        cached.cache_clear()
    event = copy.deepcopy(load_event("api-submit-job.json"))
    event["headers"]["idempotency-key"] = key
    event["body"] = json.dumps(body)
    answer = api.handler(event, LocalContext("api"))
    return answer["statusCode"], json.loads(answer["body"])


def _shape(tb: LeaseholdTestbed, job_id: str) -> dict[str, Any]:
    """The job as made, its times relative to its acceptance (the API runs on the wall clock)."""
    job = tb._reads.jobs.get(job_id)
    assert job is not None
    start = job.created_at
    return {
        "kind": job.kind,
        "owner": job.owner,
        "state": job.state,
        "payload": job.payload,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "budget": job.budget,
        "steps_total": job.steps_total,
        "step_list": job.step_list,
        "due_after_ms": (job.next_attempt_at or 0) - start,
        "deadline_after_ms": job.deadline_at - start,
    }


def test_the_same_request_makes_the_same_job_through_every_way_in(
    testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = testbed
    payload = {"room": "attic"}
    now = tb.clock.now_ms()
    # Given one request, submitted through the testbed, submit_direct and job_writes...
    by_testbed = tb.submit("chores", payload, options=_options("k-testbed"))
    direct = submit_direct(
        tb.runtime.stores.table, "chores", payload, ALICE, options=_options("k-direct"),
        now_ms=now,
    )  # fmt: skip
    new = job_writes(tb.table_name, "chores", payload, ALICE, options=_options("k-writes"),
                     now_ms=now)  # fmt: skip
    tb.client("dynamodb").transact_write_items(TransactItems=new.writes)
    # ...and over HTTP, as a POST /jobs body (last: the handler's cold start replaces the
    # running engine)
    status, answer = _post_jobs(tb, monkeypatch, {"kind": "chores", "payload": payload,
                                                  **OPTIONS}, "k-http")  # fmt: skip
    # Then each made the same job: the kind's defaults (2 attempts, low) and the options alike
    made = [by_testbed, direct.job_id, new.job_id, answer["job_id"]]
    shapes = [_shape(tb, job_id) for job_id in made]
    assert shapes[0]["max_attempts"] == 2 and shapes[0]["priority"] == "low"
    assert shapes[0]["due_after_ms"] == 30_000 and shapes[0]["deadline_after_ms"] == 150_000
    assert all(shape == shapes[0] for shape in shapes), shapes
    # ...and the answers agree: a new job, queued
    assert status == 202 and answer["state"] == "queued"
    assert (direct.state, direct.created) == ("queued", True)


def test_a_repeat_is_answered_alike(testbed: LeaseholdTestbed) -> None:
    tb = testbed
    first = tb.submit("chores", {"room": "hall"}, options=_options("k-1"))
    # The same key and request through submit_direct is the testbed's job again, not a new one
    # (each request has a trace of its own, so even within the request token's ten minutes
    # the repeat's items differ — as a real clock's times always made them: DynamoDB answers
    # the token's mismatch, the transaction goes again without it and meets the job's
    # condition, decision TR2)
    again = submit_direct(
        tb.runtime.stores.table, "chores", {"room": "hall"}, ALICE, options=_options("k-1"),
        now_ms=tb.clock.now_ms(),
    )  # fmt: skip
    assert (again.job_id, again.created, again.state) == (first, False, "queued")
    tb.advance(11 * 60, sweep=False)
    later = submit_direct(
        tb.runtime.stores.table, "chores", {"room": "hall"}, ALICE, options=_options("k-1"),
        now_ms=tb.clock.now_ms(),
    )  # fmt: skip
    assert (later.job_id, later.created, later.state) == (first, False, "queued")
    assert tb.telemetry.counts["IdempotentReplays"] == 2  # counted as the API counts it


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_attempts": 11}, "'max_attempts' must be between 1 and 10"),
        ({"deadline_seconds": 0}, "'deadline_seconds' must be between 1 and 86400"),
        ({"priority": "urgent"}, "'priority' must be one of: high, normal, low"),
        ({"delay_seconds": 1, "run_at": "2026-01-01T00:00:00Z"}, "not both"),
        ({"budget": {"max_cost": -1}}, "'budget.max_cost' must be between"),
        ({"unique": {"by": ["room"], "period_seconds": 60}}, 'must be "payload.<path>"'),
        ({"unique": {"by": ["kind"], "period_seconds": 0}}, "'unique.period_seconds' must be"),
    ],
)
def test_a_bad_option_is_refused_alike_everywhere(
    testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch, fields: Any, message: str
) -> None:
    tb = testbed
    payload = {"room": "attic"}
    refusals = []
    for submit in (
        lambda: tb.submit("chores", payload, **fields),
        lambda: submit_direct(tb.runtime.stores.table, "chores", payload, ALICE, **fields),
        lambda: job_writes(tb.table_name, "chores", payload, ALICE, **fields),
    ):
        with pytest.raises(ValidationError) as refused:
            submit()
        refusals.append(str(refused.value))
    status, answer = _post_jobs(
        tb, monkeypatch, {"kind": "chores", "payload": payload, **fields}, "k-bad"
    )
    assert status == 400
    refusals.append(answer["error"]["message"])
    assert message in refusals[0]
    assert all(refusal == refusals[0] for refusal in refusals), refusals


def test_submit_direct_keeps_the_running_engines_tenant_limits_and_counts() -> None:
    # Given a testbed whose deployment lets a tenant submit one job a second
    with LeaseholdTestbed([chores], owner=ALICE, settings={"tenant_submit_rate": 1}) as tb:
        table = Engine.current().table
        # When code of the application's own submits directly twice in one second
        submit_direct(table, "chores", {"room": "a"}, ALICE, now_ms=tb.clock.now_ms())
        # Then the second is refused as POST /jobs refuses it, nothing written...
        with pytest.raises(SubmitRateExceededError):
            submit_direct(table, "chores", {"room": "b"}, ALICE, now_ms=tb.clock.now_ms())
        # ...and the accepted one is counted in the engine's metrics, as the API counts it
        assert tb.telemetry.counts["JobsAccepted"] == 1
