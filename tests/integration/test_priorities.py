"""Priorities (arch §15, decision F4): `priority` high | normal | low on a job. Each priority has
its own queue and its own event source on the worker, so a high job does not wait behind a
normal backlog and a low job is never starved: while any low job is queued, the low queue's own
pollers run it, whatever the other backlogs. On the testbed each round of `run_until_idle`
delivers one batch from each queue, high first, as three event sources would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, KindDefinitionError, RetryableError, StepContext, ValidationError
from leasehold.apps import ConflictError
from leasehold.domain.options import Submission
from leasehold.store.items import job_key
from leasehold.store.queue import Wakeup, WakeupQueue
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import TABLE_NAME

pytestmark = pytest.mark.integration

started: list[str] = []  # job ids, in the order their step started
failures_left: dict[str, int] = {}

work = Kind("work", schema={"type": "object"})
urgent = Kind("urgent", schema={"type": "object"}, priority="high")
gated = Kind("gated", schema={"type": "object"})


@work.step()
def run(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    started.append(ctx.job_id)
    if failures_left.get(ctx.job_id, 0) > 0:
        failures_left[ctx.job_id] -= 1
        raise RetryableError("not yet")
    return {"ran": True}


@urgent.step()
def run_urgent(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    started.append(ctx.job_id)
    return {"ran": True}


@gated.step(approval=True)
def run_gated(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    started.append(ctx.job_id)
    return {"ran": True}


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    started.clear()
    failures_left.clear()
    with LeaseholdTestbed([work, urgent, gated], settings={"user_concurrency_limit": 0}) as testbed:
        yield testbed


def queue_depths(tb: LeaseholdTestbed) -> dict[str, int]:
    """Messages on each priority's queue (visible + delayed + in flight)."""
    sqs = tb.client("sqs")
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    depths = {}
    for priority, key in (("high", "high"), ("normal", "work"), ("low", "low")):
        attrs = sqs.get_queue_attributes(QueueUrl=tb.queue_urls[key], AttributeNames=names)
        depths[priority] = sum(int(attrs["Attributes"][name]) for name in names)
    return depths


def test_a_high_job_runs_before_a_normal_backlog_submitted_ahead_of_it(
    tb: LeaseholdTestbed,
) -> None:
    backlog = [tb.submit("work", {"n": n}) for n in range(30)]
    high = tb.submit("work", {"n": "high"}, priority="high")
    tb.run_until_idle()
    assert set(started) == {*backlog, high}
    assert started[0] == high  # not 31st: its wake-up was never behind the backlog's


def test_a_low_job_is_not_starved_by_high_and_normal_backlogs(tb: LeaseholdTestbed) -> None:
    """The rule: a low job waits only for the low jobs ahead of it. Behind 30 high and 30 normal
    jobs, the low queue's own event source delivers it in the first round."""
    for n in range(30):
        tb.submit("work", {"n": n}, priority="high")
        tb.submit("work", {"n": n})
    low = tb.submit("work", {"n": "low"}, priority="low")
    tb.run_until_idle()
    batch = tb.settings.worker_batch_size
    assert low in started
    # round 1: a batch of high, a batch of normal, then the low queue's batch (the low job)
    assert started.index(low) == 2 * batch
    assert tb.view(low)["state"] == "succeeded"


def test_priority_is_kept_on_the_job_shown_in_its_views_and_defaults_to_the_kinds(
    tb: LeaseholdTestbed,
) -> None:
    plain = tb.submit("work", {})
    low = tb.submit("work", {}, priority="low")
    kinds_own = tb.submit("urgent", {})  # Kind(priority="high")
    asked = tb.submit("urgent", {}, priority="normal")  # a request overrides its kind
    assert [tb.view(j)["priority"] for j in (plain, low, kinds_own, asked)] == [
        "normal",
        "low",
        "high",
        "normal",
    ]
    assert tb.operator_view(low)["priority"] == "low"
    items = tb.client("dynamodb")
    # a normal job's item is as it was before priorities: no attribute
    assert "priority" not in items.get_item(TableName=TABLE_NAME, Key=job_key(plain))["Item"]
    assert items.get_item(TableName=TABLE_NAME, Key=job_key(low))["Item"]["priority"] == {
        "S": "low"
    }


def test_each_wakeup_goes_to_its_priority_queue_and_a_retry_stays_there(
    tb: LeaseholdTestbed,
) -> None:
    high = tb.submit("work", {"n": 1}, priority="high")
    failures_left[high] = 1
    tb.submit("work", {"n": 2})
    tb.submit("work", {"n": 3}, priority="low")
    tb._relay.poll()  # the relay only: the three wake-ups, each on its own queue
    assert queue_depths(tb) == {"high": 1, "normal": 1, "low": 1}
    tb.run_until_idle()
    assert tb.view(high)["state"] == "queued"  # its retry waits for its backoff...
    assert queue_depths(tb) == {"high": 1, "normal": 0, "low": 0}  # ...on the high queue
    tb.drain()
    assert tb.view(high)["state"] == "succeeded"
    assert started.count(high) == 2


def test_an_approved_job_resumes_on_its_priority_queue(tb: LeaseholdTestbed) -> None:
    job = tb.submit("gated", {}, priority="high")
    tb.run_until_idle()
    assert tb.view(job)["state"] == "waiting_approval"
    assert queue_depths(tb) == {"high": 0, "normal": 0, "low": 0}
    tb.approve(job)
    tb._relay.poll()
    assert queue_depths(tb) == {"high": 1, "normal": 0, "low": 0}
    tb.run_until_idle()
    assert tb.view(job)["state"] == "succeeded"


def test_a_priority_outside_the_three_is_a_400_naming_them(tb: LeaseholdTestbed) -> None:
    for bad in ("urgent", "HIGH", 1, True, ["high"], ""):
        body: dict[str, Any] = {"priority": bad}
        with pytest.raises(ValidationError, match="'priority' must be one of: high, normal, low"):
            tb._api.accept(tb.owner, Submission.from_body({"kind": "work", "payload": {}, **body}))
    with pytest.raises(KindDefinitionError, match="priority must be one of high, normal, low"):
        Kind("odd", priority="urgent")  # type: ignore[arg-type]


def test_normal_and_no_priority_are_the_same_request_under_one_key(tb: LeaseholdTestbed) -> None:
    first = tb.submit("work", {}, idempotency_key="k-1")
    assert tb.submit("work", {}, idempotency_key="k-1", priority="normal") == first
    with pytest.raises(ConflictError):
        tb.submit("work", {}, idempotency_key="k-1", priority="high")


def test_a_dead_letter_returns_to_the_queue_of_its_priority(tb: LeaseholdTestbed) -> None:
    sqs = tb.client("sqs")
    queue = WakeupQueue(
        sqs,
        tb.queue_urls["work"],
        tb.queue_urls["dlq"],
        priority_urls={"high": tb.queue_urls["high"], "low": tb.queue_urls["low"]},
    )
    for priority in ("high", "low", "normal"):
        queue.send_to_dead_letters(Wakeup("j_x", tb.owner, "d", priority=priority).body())
    queue.send_to_dead_letters("not a wake-up")
    assert queue.redrive_dead_letters() == 4
    assert queue_depths(tb) == {"high": 1, "normal": 2, "low": 1}


def test_an_early_high_wakeup_on_the_normal_queue_is_not_stuck(tb: LeaseholdTestbed) -> None:
    """A high job's wake-up can be on the normal queue: `ops redrive --queue-url --dlq-url`
    without `--high-queue-url` moves the DLQ to the work queue (StartMessageMoveTask with that
    destination). Arriving before its job is due, it is hidden with ChangeMessageVisibility on
    the queue its body names (high) with a receipt handle of the normal queue: SQS refuses
    (ReceiptHandleIsInvalid). That must not escape the worker (the message kept, received
    again and again until the DLQ): the wake-up is handed off to the job's own queue."""
    job_id = tb.submit("urgent", {}, delay_seconds=60)
    tb.run_until_idle()  # the relay sends it to the high queue, 60 s delayed
    body = Wakeup(job_id, tb.owner, "by-hand", priority="high").body()
    tb.client("sqs").send_message(QueueUrl=tb.queue_urls["work"], MessageBody=body)
    report = tb.run_until_idle()
    outcomes = [d.outcome for d in report.deliveries if d.job_id == job_id]
    assert outcomes == ["not_due"], report
    assert queue_depths(tb)["normal"] == 0  # the normal queue's copy went: handed off
    tb.drain()
    assert tb.state(job_id) == "succeeded"


def test_the_sweepers_wakeups_keep_the_priority(tb: LeaseholdTestbed) -> None:
    """Probe: a lost high wake-up re-dispatched by the sweeper, and a low job delayed beyond
    15 minutes brought due by it, each go to their own queue."""
    sqs = tb.client("sqs")
    lost = tb.submit("work", {"n": 1}, priority="high")
    tb._relay.poll()
    sqs.purge_queue(QueueUrl=tb.queue_urls["high"])  # the wake-up is lost
    assert queue_depths(tb)["high"] == 0
    later = tb.submit("work", {"n": 2}, priority="low", delay_seconds=3600)
    tb.advance(tb.settings.lost_wakeup_grace_seconds + 5)  # the sweeper re-dispatches `lost`
    tb._relay.poll()
    assert queue_depths(tb) == {"high": 1, "normal": 0, "low": 0}
    tb.run_until_idle()
    assert tb.view(lost)["state"] == "succeeded"
    tb.advance(3600 - 600)  # `later` comes within 15 minutes: brought due
    tb._relay.poll()
    assert queue_depths(tb) == {"high": 0, "normal": 0, "low": 1}
    tb.drain()
    assert tb.view(later)["state"] == "succeeded"


def test_a_hand_off_stays_on_the_high_queue(tb: LeaseholdTestbed) -> None:
    """Probe: the worker's hand-off (slot wait, rate wait, no time left, store unavailable)
    re-sends the wake-up it holds: to that wake-up's priority queue."""
    job = tb.submit("work", {}, priority="high")
    tb._relay.poll()
    [message] = tb._sources[0].receive()
    result = tb._worker._claiming.hand_off(Wakeup.parse(message.body), "slots_full", delay_s=1)
    tb._sources[0].delete(message)
    assert result.outcome == "slots_full"
    assert queue_depths(tb) == {"high": 1, "normal": 0, "low": 0}
    tb.drain()
    assert tb.view(job)["state"] == "succeeded"


def test_no_priority_and_normal_under_one_key_for_a_kind_that_defaults_to_high(
    tb: LeaseholdTestbed,
) -> None:
    """Probe of docs/openapi.yaml ("`normal` and no priority are the same request"): for a
    kind that declares priority="high", no priority means high, so the two are different
    requests — a 409, rightly; the document's sentence holds only for a kind without one."""
    first = tb.submit("urgent", {}, idempotency_key="k")
    assert tb.view(first)["priority"] == "high"
    with pytest.raises(ConflictError):
        tb.submit("urgent", {}, idempotency_key="k", priority="normal")
    assert tb.submit("urgent", {}, idempotency_key="k", priority="high") == first
