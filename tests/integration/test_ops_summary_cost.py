"""`GET /ops/summary` costs a bounded number of reads whatever the table holds (issue 27 item 6):
counts come from COUNT queries on the keys-only `by_state` index (no job item read to count),
the outcomes come from the per-minute outcome counters, and the few jobs it shows (the oldest
queued ones) are a bounded sample.
Counted on moto: DynamoDB requests and the job items they read, with 60 and with 600 active
jobs — the same."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from moto import mock_aws

from leasehold.service import summary as ops_summary
from tests.support.harness import ALICE, Harness, steps

pytestmark = pytest.mark.integration


class ReadCounter:
    """DynamoDB requests of one client by operation, and the job items BatchGetItem/GetItem
    asked for (each is a read of a whole item)."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.items_read = 0
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.requests[model.name] += 1
        body = json.loads(params.get("body") or b"{}")
        if model.name == "BatchGetItem":
            self.items_read += sum(len(t["Keys"]) for t in body["RequestItems"].values())
        elif model.name == "GetItem":
            self.items_read += 1

    def reset(self) -> None:
        self.requests.clear()
        self.items_read = 0


def _fill(harness: Harness, jobs: int) -> None:
    """`jobs` queued jobs (accepted through the service), a quarter of them claimed (running)."""
    for i in range(jobs):
        job_id = harness.submit(payload=steps({}))
        if i % 4 == 0:
            harness.claim(job_id, "w1", ALICE)


def _summary_cost(active: int) -> tuple[Counter[str], int, dict[str, Any]]:
    with mock_aws():  # a table of its own
        harness = Harness.create(slot_limit=0)
        _fill(harness, active)
        counter = ReadCounter(harness.dynamodb)
        summary = harness.ops().summary()
    return counter.requests, counter.items_read, summary


@pytest.mark.usefixtures("aws_env")
def test_the_summary_costs_the_same_reads_for_60_and_600_active_jobs() -> None:
    small_requests, small_items, small = _summary_cost(60)
    large_requests, large_items, large = _summary_cost(600)
    # Then the number of requests and of job items read does not grow with the table
    assert large_items == small_items <= ops_summary.ACTIVE_SAMPLE, (small_items, large_items)
    assert large_requests == small_requests, (small_requests, large_requests)
    # 6 counts, the active sample (a query and a batch get), the outcome counters (a query)
    assert large_requests == {"Query": 8, "BatchGetItem": 1}, large_requests
    # And the counts are the index's, whole; queued and running are not told apart (too many)
    assert (small["counts"]["active"], large["counts"]["active"]) == (60, 600)
    assert (large["counts"]["queued"], large["counts"]["running"], large["queue_depth"]) == (
        None,
        None,
        None,
    )
    assert large["counts_capped"] == []


@pytest.mark.usefixtures("aws_env")
def test_a_count_stops_at_its_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_summary, "COUNT_CAP", 10)
    _, _, summary = _summary_cost(12)
    assert summary["counts"]["active"] == 10 and summary["counts_capped"] == ["active"]
    assert summary["counts"]["queued"] is None  # not told apart past the cap


@pytest.mark.usefixtures("aws_env")
def test_a_few_active_jobs_are_told_apart() -> None:
    _, _, summary = _summary_cost(8)
    counts = summary["counts"]
    assert (counts["active"], counts["queued"], counts["running"]) == (8, 6, 2)
    assert summary["queue_depth"] == 6
