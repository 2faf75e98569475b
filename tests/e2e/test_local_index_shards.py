"""On the embedded local stack (`local up`, IndexShards=8 there, decision SH4): many active jobs
and many long-delayed jobs land on many distinct `by_state` keys each (issue 30's must-show), and
the operator's summary and listing still show every one of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from leasehold.store.items import ACTIVE_PARTITION, DUE_PARTITION
from leasehold.store.shards import base_of
from leasehold_dev.local.stack import StackInfo, client
from tests.support.localstack import LocalStackProcess

ACTIVE_JOBS = 100
DELAYED_JOBS = 60


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path)  # no workers: the jobs stay queued
    try:
        yield running
    finally:
        running.stop()


def index_keys(stack: LocalStackProcess) -> Counter[str]:
    info = StackInfo.load(stack.state)
    dynamodb = client("dynamodb", info.endpoint)
    keys: Counter[str] = Counter()
    for page in dynamodb.get_paginator("scan").paginate(TableName=info.outputs["JobsTable"]):
        for item in page["Items"]:
            if item["sk"]["S"] == "JOB" and "gsi1pk" in item:
                keys[item["gsi1pk"]["S"]] += 1
    return keys


def test_active_and_delayed_jobs_spread_over_at_least_8_keys_each(
    stack: LocalStackProcess,
) -> None:
    info = StackInfo.load(stack.state)
    assert info.functions["ApiFunction"].environment["INDEX_SHARDS"] == "8"
    body = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    for index in range(ACTIVE_JOBS + DELAYED_JOBS):
        delayed = index >= ACTIVE_JOBS
        request = {**body, "delay_seconds": 3_600} if delayed else body
        status, _ = stack.request("POST", "/jobs", request, user=["alice", "bob"][index % 2])
        assert status == 202
    keys = index_keys(stack)
    active = {key: n for key, n in keys.items() if base_of(key) == ACTIVE_PARTITION}
    due = {key: n for key, n in keys.items() if base_of(key) == DUE_PARTITION}
    print("active keys:", sorted(active.items()), "due keys:", sorted(due.items()))
    assert sum(active.values()) == ACTIVE_JOBS and sum(due.values()) == DELAYED_JOBS
    assert len(active) >= 8 and len(due) >= 8
    # what the operator sees is every job, as before sharding
    status, summary = stack.request("GET", "/ops/summary", user="ops")
    assert status == 200, summary
    assert (summary["counts"]["active"], summary["delayed"]) == (ACTIVE_JOBS, DELAYED_JOBS)
    listed: list[str] = []
    cursor = None
    for _ in range(20):
        path = "/ops/jobs?state=queued&limit=100" + (f"&cursor={quote(cursor)}" if cursor else "")
        status, page = stack.request("GET", path, user="ops")
        assert status == 200, page
        listed.extend(job["job_id"] for job in page["jobs"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert len(listed) == len(set(listed)) == ACTIVE_JOBS + DELAYED_JOBS
