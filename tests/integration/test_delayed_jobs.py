"""Delayed jobs (arch §15, decision F1): `run_at` / `delay_seconds` on `POST /jobs`. A job due
within 15 minutes rides on its wake-up's SQS delay; a later one waits in the due index until the
sweeper gives it a wake-up. Either way it is `queued` with `next_attempt_at`, can be cancelled
before it is due, and never starts early — checked on the testbed's controlled clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from leasehold import Kind, StepContext, ValidationError
from leasehold.domain.clock import iso
from leasehold.store.items import DUE_PARTITION, job_key
from leasehold.store.queue import Wakeup
from leasehold.store.shards import base_of
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import TABLE_NAME
from tests.support.index_lag import lagging_index

pytestmark = pytest.mark.integration

started: list[tuple[str, int]] = []  # (job id, clock at the step's start)

later = Kind("later", schema={"type": "object"})


@later.step()
def go(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    started.append((ctx.job_id, ctx.now_ms()))
    return {"ran": True}


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    """The testbed with its indexes lagging 500 ms (a GSI is eventually consistent): a delayed
    job must not start early, nor be lost, because the due index is behind."""
    started.clear()
    with LeaseholdTestbed([later]) as testbed, lagging_index(testbed.clock):
        yield testbed


def raw(tb: LeaseholdTestbed, job_id: str) -> dict[str, Any]:
    item = tb.client("dynamodb").get_item(TableName=TABLE_NAME, Key=job_key(job_id))
    return item["Item"]


def step_through(tb: LeaseholdTestbed, seconds: int, every: int) -> None:
    """Move the clock `seconds` forward in `every`-second ticks, sweeping and running at each,
    as the sweeper's schedule and the worker's queue would."""
    for _ in range(seconds // every):
        tb.advance(every)
        tb.run_until_idle()


def test_a_job_delayed_20_minutes_starts_no_earlier_than_due(tb: LeaseholdTestbed) -> None:
    accepted = tb.clock.now_ms()
    job_id = tb.submit("later", {}, delay_seconds=20 * 60)
    due = accepted + 20 * 60 * 1000
    view = tb.view(job_id)
    assert view["state"] == "queued"
    assert view["next_attempt_at"] == iso(due)
    assert view["waiting_for"] == {"time": iso(due)}
    assert base_of(raw(tb, job_id)["gsi1pk"]["S"]) == DUE_PARTITION  # beyond SQS's 15 minutes
    tb.run_until_idle()
    # Every 30 s up to one tick before due: swept, relayed, delivered — never started.
    step_through(tb, 20 * 60 - 30, every=30)
    assert started == [] and tb.state(job_id) == "queued"
    step_through(tb, 60, every=30)
    assert tb.state(job_id) == "succeeded"
    assert [job for job, _ in started] == [job_id]
    assert started[0][1] >= due
    assert started[0][1] - due <= 30_000  # and not much later than due: the next tick


def test_a_short_delay_rides_on_the_wakeup_and_never_starts_early(tb: LeaseholdTestbed) -> None:
    accepted = tb.clock.now_ms()
    job_id = tb.submit("later", {}, delay_seconds=300)
    assert base_of(raw(tb, job_id)["gsi1pk"]["S"]) != DUE_PARTITION
    tb.run_until_idle()
    step_through(tb, 290, every=10)
    assert started == []
    step_through(tb, 20, every=10)
    assert tb.state(job_id) == "succeeded"
    assert started[0][1] >= accepted + 300_000


def test_an_early_wakeup_is_refused_before_due(tb: LeaseholdTestbed) -> None:
    """Even a wake-up delivered long before the job is due (a redriven or stray message) does
    not start it: the claim's condition is `next_attempt_at <= now`."""
    job_id = tb.submit("later", {}, delay_seconds=3600)
    tb.client("sqs").send_message(
        QueueUrl=tb.queue_urls["work"], MessageBody=Wakeup(job_id, tb.owner, "stray").body()
    )
    report = tb.run_until_idle()
    assert [d.outcome for d in report.deliveries] == ["not_due"]
    assert started == [] and tb.state(job_id) == "queued"


def test_cancel_before_due_ends_it_and_it_never_runs(tb: LeaseholdTestbed) -> None:
    job_id = tb.submit("later", {}, delay_seconds=2 * 3600)
    near = tb.submit("later", {"near": 1}, delay_seconds=120)
    assert tb.cancel(job_id)["state"] == "cancelled"
    assert tb.cancel(near)["state"] == "cancelled"
    tb.drain()
    assert tb.state(job_id) == "cancelled" and tb.state(near) == "cancelled"
    assert started == []
    assert "gsi1pk" not in raw(tb, job_id)  # it left the due index with its cancel


def test_run_at_with_an_offset_and_in_the_past(tb: LeaseholdTestbed) -> None:
    now = datetime.fromtimestamp(tb.clock.now_ms() / 1000, tz=UTC)
    ahead = (now + timedelta(hours=3)).astimezone(timezone(timedelta(hours=2)))
    job_id = tb.submit("later", {}, run_at=ahead.isoformat())
    assert tb.view(job_id)["next_attempt_at"] == iso(int(ahead.timestamp() * 1000))
    past = tb.submit("later", {"p": 1}, run_at=(now - timedelta(days=2)).isoformat())
    tb.run_until_idle()
    assert tb.state(past) == "succeeded"  # in the past: it runs now
    tb.drain()
    assert tb.state(job_id) == "succeeded"
    assert dict(started)[job_id] >= int(ahead.timestamp() * 1000)


def test_a_delayed_jobs_deadline_counts_from_when_it_is_due(tb: LeaseholdTestbed) -> None:
    job_id = tb.submit("later", {}, delay_seconds=3 * 86400, deadline_seconds=60)
    view = tb.view(job_id)
    assert view["deadline_at"] == iso(tb.clock.now_ms() + 3 * 86400_000 + 60_000)
    tb.drain(max_seconds=4 * 86400)
    assert tb.state(job_id) == "succeeded"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"delay_seconds": 10, "run_at": "2030-01-01T00:00:00Z"}, "not both"),
        ({"delay_seconds": 365 * 86400 + 1}, "between 0 and 31536000"),
        ({"delay_seconds": -1}, "between 0 and"),
        ({"delay_seconds": 1.5}, "must be an integer"),
        ({"delay_seconds": True}, "must be an integer"),
        ({"run_at": "2030-01-01T00:00:00"}, "needs a UTC offset"),
        ({"run_at": "tomorrow at 9"}, "ISO 8601"),
        ({"run_at": 1767225600}, "ISO 8601"),
        ({"run_at": "2099-01-01T00:00:00+00:00"}, "more than 365 days ahead"),
    ],
)
def test_bad_delays_are_a_400(tb: LeaseholdTestbed, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        tb.submit("later", {}, **fields)


def test_the_longest_delay_is_365_days(tb: LeaseholdTestbed) -> None:
    job_id = tb.submit("later", {}, delay_seconds=365 * 86400)
    assert tb.view(job_id)["next_attempt_at"] == iso(tb.clock.now_ms() + 365 * 86400_000)


@pytest.mark.parametrize(
    "fault",
    [
        "dynamodb.PutItem:ThrottlingException=1@10",  # no wake-up written, no move
        "dynamodb.PutItem:ReadTimeout=1@1",  # the wake-up written, its answer lost
        "dynamodb.UpdateItem:ThrottlingException=1@10",  # the wake-up written, the move not
        "dynamodb.UpdateItem:ReadTimeout=1@1",  # both written, the move's answer lost
        "dynamodb.Query:ThrottlingException=1@10",  # the sweep cut short before either
    ],
)
def test_a_failed_move_out_of_the_due_index_is_taken_up_by_the_next_sweep(
    tb: LeaseholdTestbed, fault: str
) -> None:
    due = tb.clock.now_ms() + 30 * 60_000
    job_id = tb.submit("later", {}, delay_seconds=30 * 60)
    tb.advance(15 * 60 + 1, sweep=False)
    tb.faults(fault)
    tb.sweep()  # the move fails, or succeeds with its answer lost
    assert sum(tb.injected().values()) >= 1
    tb.faults("")
    tb.advance(60)  # the next sweep
    tb.run_until_idle()
    assert started == [] and tb.state(job_id) == "queued"
    tb.drain()
    assert [job for job, _ in started] == [job_id]  # once, and not before it was due
    assert started[0][1] >= due and tb.state(job_id) == "succeeded"
    assert "gsi1pk" not in raw(tb, job_id)  # a succeeded job leaves the state index
    wakeups = tb.client("dynamodb").query(
        TableName=TABLE_NAME,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"OUTBOX#{job_id}"}},
    )["Items"]
    assert len(wakeups) == 1  # one wake-up, however the move was tried


def test_a_keyed_repeat_of_a_long_delay_is_the_same_job_another_body_409(
    tb: LeaseholdTestbed,
) -> None:
    """The due-index accept is a lone conditional Put: a repeat still finds the first job."""
    from leasehold.apps import ConflictError

    first = tb.submit("later", {}, delay_seconds=7200, idempotency_key="k-1")
    assert tb.submit("later", {}, delay_seconds=7200, idempotency_key="k-1") == first
    with pytest.raises(ConflictError):
        tb.submit("later", {}, delay_seconds=60, idempotency_key="k-1")


def test_job_writes_takes_the_same_delays() -> None:
    from leasehold import Owner
    from leasehold.apps import job_writes

    owner = Owner("t", "u")
    far = job_writes("jobs", later, {}, owner, delay_seconds=3600, now_ms=1_000_000)
    assert len(far.writes) == 1  # no wake-up until the sweeper gives it one
    assert far.writes[0]["Put"]["Item"]["gsi1pk"]["S"] == DUE_PARTITION
    near = job_writes("jobs", later, {}, owner, run_at="1970-01-01T00:21:40Z", now_ms=1_000_000)
    job, wakeup = near.writes
    assert job["Put"]["Item"]["next_attempt_at"]["N"] == "1300000"
    assert wakeup["Put"]["Item"]["deliver_at"]["N"] == "1300000"
    with pytest.raises(ValidationError):
        job_writes("jobs", later, {}, owner, delay_seconds=5, run_at="1970-01-01T00:21:40Z")


def test_the_operators_queued_list_has_the_delayed_jobs_after_the_others(
    tb: LeaseholdTestbed,
) -> None:
    """`/ops/jobs?state=queued` goes on from the active jobs into the due index (soonest due
    first), page after page, whatever the page size: nothing skipped, nothing twice."""
    ready = [tb.submit("later", {"n": n}) for n in range(3)]
    delayed = [tb.submit("later", {"d": n}, delay_seconds=7200 - n * 600) for n in range(3)]
    soonest_first = list(reversed(delayed))
    tb.clock.advance(1_000)  # past the index's lag: it lists every job submitted
    for size in (1, 2, 3, 4, 6, 50):
        seen: list[str] = []
        cursor = None
        for _ in range(20):
            page = tb._ops.jobs("queued", str(size), cursor)
            seen += [row["job_id"] for row in page["jobs"]]
            assert all(row["state"] == "queued" for row in page["jobs"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        # the ready ones were accepted in the same millisecond: their order is their ids'
        assert len(seen) == 6 and set(seen[:3]) == set(ready), size
        assert seen[3:] == soonest_first, size
    only_later = tb._ops.jobs("queued", "50", None, kind="later")["jobs"]
    assert len(only_later) == 6
    summary = tb._ops.summary()
    assert summary["counts"]["queued"] == 6 and summary["delayed"] == 3
    assert summary["oldest_queued"]["job_id"] in ready  # a delayed job is not late


@pytest.mark.xfail(
    strict=True,
    reason="a job moved from the due index to the active jobs after the list passed the "
    "active jobs is in neither page: still queued, listed nowhere (a paging skip)",
)
def test_a_delayed_job_brought_due_between_pages_of_the_queued_list(
    tb: LeaseholdTestbed,
) -> None:
    """Probe: the list is at the due index when a delayed job moves to the active jobs (the
    sweeper brings it within 15 minutes). What the next page says of it."""
    ready = tb.submit("later", {"n": 0})
    soon = tb.submit("later", {"d": 0}, delay_seconds=1800)
    late = tb.submit("later", {"d": 1}, delay_seconds=7200)
    tb.clock.advance(1_000)  # past the index's lag: it lists every job submitted
    page = tb._ops.jobs("queued", "1", None)
    assert [row["job_id"] for row in page["jobs"]] == [ready]
    tb.advance(1000, sweep=True)  # `soon` is due within 15 minutes now: out of the due index
    seen = [ready]
    cursor = page["next_cursor"]
    for _ in range(10):
        if cursor is None:
            break
        page = tb._ops.jobs("queued", "1", cursor)
        seen += [row["job_id"] for row in page["jobs"]]
        cursor = page["next_cursor"]
    assert late in seen
    assert tb.state(soon) == "queued"
    assert soon in seen
