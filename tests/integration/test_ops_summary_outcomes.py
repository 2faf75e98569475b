"""The operator summary counts every outcome (issue 34 item 4, decision OS1): jobs run on the
testbed (moto, 8 index shards) — some succeed, some after a retry, some fail, some die, some are
cancelled, one is delayed — and the summary's counts, its last hour per minute and its totals
are exactly what ran: from the outcome counters written with the metrics, not from a sample of
the state index, and with no job item read to count them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import FatalError, Kind, RetryableError, StepContext
from leasehold.service.outcome_counts import CountedOutcomes
from leasehold.service.telemetry import CountingTelemetry
from leasehold.store.counters import COUNTER_BASE, OutcomeCounters
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import TABLE_NAME
from tests.integration.test_ops_summary_cost import ReadCounter

pytestmark = pytest.mark.integration

tried: dict[str, int] = {}
flaky = Kind("flaky", schema={"type": "object"})


@flaky.step()
def work(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    tried[ctx.job_id] = tried.get(ctx.job_id, 0) + 1
    if payload.get("fatal"):
        raise FatalError("no such thing")
    if tried[ctx.job_id] <= payload.get("fail_times", 0):
        raise RetryableError("try again")
    return {"ok": True}


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    tried.clear()
    with LeaseholdTestbed([flaky]) as testbed:
        yield testbed


def test_the_summary_counts_every_outcome_of_the_jobs_run(tb: LeaseholdTestbed) -> None:
    # Given 7 jobs that succeed, 3 that succeed after one retry, 2 that fail (fatal), 2 that
    # die after 2 attempts (one retry each), 2 cancelled while queued and 1 delayed an hour
    for _ in range(7):
        tb.submit("flaky", {})
    for _ in range(3):
        tb.submit("flaky", {"fail_times": 1})
    for _ in range(2):
        tb.submit("flaky", {"fatal": True})
    for _ in range(2):
        tb.submit("flaky", {"fail_times": 9}, max_attempts=2)
    cancelled = [tb.submit("flaky", {}, delay_seconds=60) for _ in range(2)]
    delayed = tb.submit("flaky", {}, delay_seconds=3600)
    for job_id in cancelled:
        tb.cancel(job_id)
    # When they run (retries' backoffs waited out), and the operator reads the summary
    tb.run_until_idle()
    for _ in range(20):  # ten minutes, as the sweeper's schedule and the queues would
        tb.advance(30)
        tb.run_until_idle()
    assert tb.state(delayed) == "queued"
    reads = ReadCounter(tb.client("dynamodb"))
    summary = tb.runtime.ops().summary()
    # Then every outcome is counted exactly, the counts as the metrics counted them
    expected = {"succeeded": 10, "failed": 2, "dead": 2, "cancelled": 2, "unknown": 0}
    assert summary["outcomes_last_hour"] == {**expected, "retried": 5, "budget_exhausted": 0}
    metrics = tb.telemetry.counts
    assert (metrics["JobsSucceeded"], metrics["JobsRetried"], metrics["JobsDead"]) == (10, 5, 2)
    counts = summary["counts"]
    assert {state: counts[state] for state in expected} == expected
    assert (counts["queued"], counts["running"], counts["active"]) == (1, 0, 0)
    assert (summary["delayed"], summary["queue_depth"]) == (1, 0)
    assert summary["totals"]["retries"] == 5
    # And the chart is the last hour per minute, succeeded among its series, summing the same
    hour = summary["last_hour"]
    assert (hour["bucket_seconds"], len(hour["buckets"])) == (60, 60)
    assert "succeeded" in hour["series"]
    assert {s: sum(int(b[s]) for b in hour["buckets"]) for s in hour["series"]} == {
        **expected,
        "retried": 5,
    }
    # And no job item was read to count: the one batch read is the sample of active jobs
    assert reads.items_read == 0  # no active job: the sample read none
    assert reads.requests["GetItem"] == 0


def test_the_counters_spread_over_the_shards_and_expire(tb: LeaseholdTestbed) -> None:
    # Given 40 jobs run to success
    for _ in range(40):
        tb.submit("flaky", {})
    tb.run_until_idle()
    # Then their counts sit under several shards' keys (no one hot key), each item with a TTL
    raw = tb.client("dynamodb")
    items = [
        item
        for item in raw.scan(TableName=TABLE_NAME)["Items"]
        if item["pk"]["S"].startswith(COUNTER_BASE)
    ]
    keys = {item["pk"]["S"] for item in items}
    assert len(keys) >= 3, keys
    assert sum(int(item["succeeded"]["N"]) for item in items) == 40
    now_s = tb.clock.now_ms() // 1000
    assert all(now_s < int(item["expires_at"]["N"]) <= now_s + 2 * 86400 for item in items)


def test_a_lost_counter_write_loses_no_outcome(tb: LeaseholdTestbed) -> None:
    # Given the counters' writes refused by the store
    def refuse(*_: Any, **__: Any) -> None:
        from leasehold.domain.errors import StoreUnavailableError

        raise StoreUnavailableError("the table does not answer")

    original = OutcomeCounters.add_many
    OutcomeCounters.add_many = refuse  # type: ignore[method-assign]
    try:
        # When a job runs, and an outcome is counted
        job_id = tb.submit("flaky", {})
        report = tb.run_until_idle()
        inner = CountingTelemetry()
        counted = CountedOutcomes(inner, OutcomeCounters(tb.runtime.stores.table), tb.clock)
        counted.count("JobsDead")  # raises nothing: the outcome's caller carries on
    finally:
        OutcomeCounters.add_many = original  # type: ignore[method-assign]
    # Then the job succeeded at its first delivery and its metric was counted; the chart is
    # one short
    assert report.outcomes(job_id) == ["succeeded"]
    assert tb.telemetry.counts["JobsSucceeded"] == 1 and inner.counts["JobsDead"] == 1
    assert tb.runtime.ops().summary()["outcomes_last_hour"]["succeeded"] == 0


class _Writes(OutcomeCounters):
    """The outcome counters, counting their writes."""

    writes = 0

    def add_many(self, at_ms: int, counts: dict[str, int]) -> None:
        self.writes += 1
        super().add_many(at_ms, counts)


def test_a_worker_batch_writes_its_outcomes_in_one_write_at_its_end(tb: LeaseholdTestbed) -> None:
    # Given the outcome counts of one worker batch: ten successes and a retry in one minute
    counters = _Writes(tb.runtime.stores.table)
    counted = CountedOutcomes(CountingTelemetry(), counters, tb.clock)
    with counted.batched():
        for _ in range(10):
            counted.count("JobsSucceeded")
        counted.count("JobsRetried")
        counted.count("JobsClaimed")  # not an outcome
        # Then nothing is written while the batch runs
        assert counters.writes == 0
    # And one write at its end holds them all, and the summary counts them
    assert counters.writes == 1
    outcomes = tb.runtime.ops().summary()["outcomes_last_hour"]
    assert (outcomes["succeeded"], outcomes["retried"]) == (10, 1)
    # And outside a batch each outcome is written as it comes
    counted.count("JobsDead")
    assert counters.writes == 2
