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
from leasehold.store.shards import base_of, item_key
from leasehold_dev.local.stack import StackInfo, client
from tests.support.localstack import LocalStackProcess

SHARDS = 8
ACTIVE_JOBS = 100
DELAYED_JOBS = 60
"""At least these many jobs of each kind; more are submitted until every shard has one (ids are
random: 60 ids miss one of 8 shards about once in 400 runs)."""
MOST_JOBS = 400


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
    assert info.functions["ApiFunction"].environment["INDEX_SHARDS"] == str(SHARDS)
    body = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    submitted: dict[str, list[str]] = {ACTIVE_PARTITION: [], DUE_PARTITION: []}
    for base, least, extra in (
        (ACTIVE_PARTITION, ACTIVE_JOBS, {}),
        (DUE_PARTITION, DELAYED_JOBS, {"delay_seconds": 3_600}),
    ):
        ids = submitted[base]
        while len(ids) < least or len({item_key(base, i, SHARDS) for i in ids}) < SHARDS:
            assert len(ids) < MOST_JOBS, f"{len(ids)} jobs never covered {SHARDS} shards"
            user = ["alice", "bob"][len(ids) % 2]
            status, answer = stack.request("POST", "/jobs", {**body, **extra}, user=user)
            assert status == 202, answer
            ids.append(answer["job_id"])
    active_jobs, delayed_jobs = len(submitted[ACTIVE_PARTITION]), len(submitted[DUE_PARTITION])
    keys = index_keys(stack)
    active = {key: n for key, n in keys.items() if base_of(key) == ACTIVE_PARTITION}
    due = {key: n for key, n in keys.items() if base_of(key) == DUE_PARTITION}
    print("active keys:", sorted(active.items()), "due keys:", sorted(due.items()))
    # each job sits under the key its id hashes to, and so each base spreads over all 8 keys
    # (the loop above submitted until the ids covered them)
    for base, seen in ((ACTIVE_PARTITION, active), (DUE_PARTITION, due)):
        assert seen == Counter(item_key(base, i, SHARDS) for i in submitted[base])
    # what the operator sees is every job, as before sharding
    status, summary = stack.request("GET", "/ops/summary", user="ops")
    assert status == 200, summary
    assert (summary["counts"]["active"], summary["delayed"]) == (active_jobs, delayed_jobs)
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
    assert len(listed) == len(set(listed)) == active_jobs + delayed_jobs
