"""Faults moto never raises, injected and handled (issue 27, items 4a and 4b):

- `TransactionConflictException` on a single write (UpdateItem / PutItem meeting an item inside
  a transaction), which botocore does not retry: the store retries it with jitter, bounded, so a
  cancel racing a worker's outcome answers 200/202/409, never 503, and a checkpoint goes on;
- throttling on one index (`Query[by_state]`, `Query[by_owner]`) past botocore's retries: every
  index reader answers honestly — the API and the operator's listings 503, the sweeper skips
  that part of its pass and does the rest, the schedule trigger stops and the next run fires."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.domain.errors import ConflictError, StoreUnavailableError
from leasehold.domain.states import JobState
from leasehold.store.faults import FaultPlan, FaultRule, FaultSpecError
from leasehold.store.table import CLIENT_CONFIG
from tests.support.api import CACHED, Call
from tests.support.harness import ALICE, OPS, Harness, make_job, steps

SUBMIT = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "cost": 1}]}}
ATTEMPTS = 4  # TransactionRetry's default: the bound on one write's tries
SDK_TRIES = CLIENT_CONFIG.retries["max_attempts"] + 1  # botocore's retries and the first try


# ------------------------------------------------------------------ the spec


def test_the_spec_takes_single_write_conflicts_and_index_rules() -> None:
    plan = FaultPlan.parse(
        "dynamodb.UpdateItem:TransactionConflictException=0.2,"
        "dynamodb.Query[by_state]:ThrottlingException=0.5"
    )
    conflict, throttle = plan.rules
    assert conflict == FaultRule("dynamodb", "UpdateItem", "TransactionConflictException", 0.2)
    assert throttle.index == "by_state" and throttle.operation == "Query"
    assert throttle.applies_to("dynamodb", "Query", "by_state")
    assert not throttle.applies_to("dynamodb", "Query", "by_owner")
    assert not throttle.applies_to("dynamodb", "Query", None)  # the table itself


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("dynamodb.TransactWriteItems:TransactionConflictException=1", "single write"),
        ("dynamodb.GetItem:TransactionConflictException=1", "single write"),
        ("dynamodb.UpdateItem[by_state]:ThrottlingException=1", "only Query and Scan"),
        ("dynamodb.Query[]:ThrottlingException=1", "is not service.Operation"),
    ],
)
def test_the_spec_refuses_what_dynamodb_never_answers(spec: str, says: str) -> None:
    with pytest.raises(FaultSpecError, match=says):
        FaultPlan.parse(spec)


# ------------------------------------------------------------------ 4a: single-write conflicts


def test_an_injected_conflict_has_the_services_shape_and_applies_nothing(
    harness: Harness,
) -> None:
    job_id = harness.submit()
    before = harness.raw(job_id)
    harness.faults("dynamodb.UpdateItem:TransactionConflictException=1@1")
    with pytest.raises(ClientError) as refused:
        harness.dynamodb.update_item(
            TableName=harness.table,
            Key=_key(job_id),
            UpdateExpression="SET note = :n",
            ExpressionAttributeValues={":n": {"S": "x"}},
        )
    error = refused.value.response
    assert error["Error"]["Code"] == "TransactionConflictException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Transaction is ongoing for the item" in error["Error"]["Message"]
    assert harness.raw(job_id) == before
    assert harness.injected("UpdateItem:TransactionConflictException") == 1


def test_a_cancel_racing_an_outcome_under_conflicts_is_never_503(harness: Harness) -> None:
    queued = harness.submit()
    running = harness.submit()
    claimed = harness.claim(running, "w1")
    jobs = harness.jobs()
    # the job item is inside the worker's transactions: the next three writes meet one
    harness.faults(f"dynamodb.UpdateItem:TransactionConflictException=1@{ATTEMPTS - 1}")
    view = jobs.cancel(ALICE, queued)
    assert view["state"] == "cancelled"
    harness.faults(f"dynamodb.UpdateItem:TransactionConflictException=1@{ATTEMPTS - 1}")
    view = jobs.cancel(ALICE, running)
    assert view["state"] == "running" and view["cancel_requested"] is True
    assert harness.stores.table.stats.single_write_retries == 2 * (ATTEMPTS - 1)
    # the worker's outcome lands; the cancel that comes after it is a 409, not a 503
    harness.faults("")
    harness.complete(claimed, {"ok": True})
    harness.faults(f"dynamodb.UpdateItem:TransactionConflictException=1@{ATTEMPTS - 1}")
    with pytest.raises(ConflictError) as late:
        jobs.cancel(ALICE, running)
    assert late.value.code == "not_cancellable"


def test_a_write_that_keeps_conflicting_is_a_bounded_503(harness: Harness) -> None:
    job_id = harness.submit()
    harness.faults("dynamodb.UpdateItem:TransactionConflictException=1")
    with pytest.raises(StoreUnavailableError, match="TransactionConflict"):
        harness.jobs().cancel(ALICE, job_id)
    assert harness.injected("UpdateItem:TransactionConflictException") == ATTEMPTS
    assert harness.stores.table.stats.single_writes_given_up == 1
    harness.faults("")
    assert harness.state(job_id) == "queued"  # nothing applied


def test_checkpoints_under_conflicts_go_on(harness: Harness) -> None:
    job_id = harness.submit(payload=steps({"cost": 1}, {"cost": 1}, {"cost": 1}, {"cost": 1}))
    harness.faults("dynamodb.UpdateItem:TransactionConflictException=0.25")
    result = harness.deliver(job_id)
    harness.faults("")
    assert result.outcome == "succeeded", result
    assert harness.state(job_id) == "succeeded"
    assert harness.injected("UpdateItem:TransactionConflictException") > 0


def test_a_cancel_through_the_api_under_conflicts_is_202(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, accepted, _ = call("api-submit-job.json", body=SUBMIT)
    assert status == 202
    _cold_start_with_faults(
        monkeypatch, f"dynamodb.UpdateItem:TransactionConflictException=1@{ATTEMPTS - 1}"
    )
    status, cancelled, _ = call("api-cancel-job.json", path_id=accepted["job_id"])
    assert status == 202 and cancelled["state"] == "cancelled", cancelled


# ------------------------------------------------------------------ 4b: index throttling

THROTTLED = "dynamodb.Query[{index}]:ThrottlingException=1"


def _cold_start_with_faults(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv("LEASEHOLD_FAULTS", spec)
    for cached in CACHED:
        cached.cache_clear()


@pytest.fixture
def api(call: Call, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    yield call
    _cold_start_with_faults(monkeypatch, "")


def test_the_callers_listing_is_503_while_its_index_is_throttled(
    api: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api("api-submit-job.json", body=SUBMIT)[0] == 202
    _cold_start_with_faults(monkeypatch, THROTTLED.format(index="by_owner"))
    status, body, headers = api("api-list-jobs.json")
    assert status == 503 and body["error"]["code"] == "store_unavailable"
    assert headers.get("Retry-After")
    # the other index, and the table itself, still answer
    assert api("api-ops-jobs.json", user="ops", query={"state": "queued"})[0] == 200
    _cold_start_with_faults(monkeypatch, "")
    status, body, _ = api("api-list-jobs.json")
    assert status == 200 and len(body["jobs"]) == 1


@pytest.mark.parametrize(
    ("event", "query"),
    [("api-ops-jobs.json", {"state": "queued"}), ("api-ops-summary.json", None)],
)
def test_the_operators_reads_are_503_while_the_state_index_is_throttled(
    api: Call, monkeypatch: pytest.MonkeyPatch, event: str, query: dict[str, str] | None
) -> None:
    assert api("api-submit-job.json", body=SUBMIT)[0] == 202
    _cold_start_with_faults(monkeypatch, THROTTLED.format(index="by_state"))
    status, body, _ = api(event, user="ops", query=query)
    assert status == 503 and body["error"]["code"] == "store_unavailable"
    assert api("api-list-jobs.json")[0] == 200  # the caller's own index still answers


def test_the_sweeper_skips_the_throttled_part_and_does_the_rest(harness: Harness) -> None:
    # A job delayed past SQS's reach waits in the due index; another's wake-up was lost
    delayed = harness.submit(**_delayed(20 * 60))
    lost = harness.submit()
    harness.clock.advance(6 * 60_000)  # the delayed job now comes within 15 minutes
    # The first index read of the pass (the active jobs) is throttled past botocore's retries
    harness.faults(f"dynamodb.Query[by_state]:ThrottlingException=1@{SDK_TRIES}")
    report = harness.sweep()
    assert report.get("unavailable") == 1
    assert report.get("due") == 1, report  # the due part still ran
    assert harness.raw(delayed).get("gsi1pk") != "due"
    # The next pass finds the active jobs again
    harness.faults("")
    assert harness.sweep().get("redispatched") == 1
    assert harness.state(lost) == "queued"


def test_the_sweeper_does_the_active_part_when_the_due_read_is_throttled(
    harness: Harness,
) -> None:
    delayed = harness.submit(**_delayed(20 * 60))
    lost = harness.submit()
    harness.clock.advance(6 * 60_000)
    harness.faults("")
    # Let the active read through, then throttle the due read past botocore's retries
    calls = {"n": 0}
    table = harness.stores.table
    original = table.query

    def query(**params: Any) -> dict[str, Any]:
        calls["n"] += 1
        if ":u" in params.get("ExpressionAttributeValues", {}):  # the due index's read
            harness.faults(f"dynamodb.Query[by_state]:ThrottlingException=1@{SDK_TRIES}")
        try:
            return original(**params)
        finally:
            harness.faults("")

    table.query = query  # type: ignore[method-assign]
    report = harness.sweep()
    assert report.get("unavailable") == 1 and report.get("redispatched") == 1, report
    assert "due" not in report
    assert harness.state(lost) == "queued" and harness.state(delayed) == "queued"


def test_the_schedule_trigger_stops_while_throttled_and_the_next_run_fires(
    harness: Harness,
) -> None:
    from leasehold.domain.ids import time_ordered_ids
    from leasehold.service.schedules import ScheduleService
    from tests.support.kinds import registry

    schedules = ScheduleService(
        harness.stores.table,
        registry(),
        harness.clock,
        time_ordered_ids(harness.clock, "s"),
        harness.telemetry,
    )
    made = schedules.create(ALICE, {**make_job(), "expression": "rate(5 minutes)"})
    harness.clock.advance(5 * 60_000 + 1)
    harness.faults(THROTTLED.format(index="by_state"))
    report = schedules.fire_due()
    assert report == {"schedules_unavailable": 1}
    harness.faults("")
    assert schedules.fire_due().get("schedule_jobs") == 1, made


def test_the_operator_summary_is_a_503_from_the_service(harness: Harness) -> None:
    harness.submit()
    harness.faults(THROTTLED.format(index="by_state"))
    with pytest.raises(StoreUnavailableError):
        harness.ops().summary()
    harness.faults("")
    assert harness.ops().summary()["counts"][JobState.QUEUED.value] == 1
    assert OPS.is_operator


# ------------------------------------------------------------------ helpers


def _key(job_id: str) -> dict[str, Any]:
    from leasehold.store.items import job_key

    return job_key(job_id)


def _delayed(seconds: int) -> dict[str, Any]:
    return {"delay_seconds": seconds}
