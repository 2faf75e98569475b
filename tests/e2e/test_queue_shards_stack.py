"""Sharded normal queues on the embedded local stack (decision QS1): `local up --parameter
QueueShards=4` makes the template's four normal queues and the worker's mapping of each; the
relay spreads the jobs' wake-ups over them, and one worker process, one poller per mapping,
runs every job."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leasehold.store.queue import queue_shard
from leasehold_dev.local.stack import StackInfo, client
from tests.support.localstack import LocalStackProcess

pytestmark = pytest.mark.e2e

JOBS = 24
"""At least this many jobs; more are submitted until every shard has some (ids are random)."""
MOST_JOBS = 200
QUICK = {"steps": [{"name": "quick"}]}
DEPTH = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path, extra=("--parameter", "QueueShards=4"))
    try:
        yield running
    finally:
        running.stop()


def _depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=DEPTH)
    return sum(int(attributes["Attributes"][name]) for name in DEPTH)


def test_four_shards_carry_the_wakeups_and_one_worker_runs_them_all(
    stack: LocalStackProcess,
) -> None:
    info = StackInfo.load(stack.state)
    shards = [info.outputs["WorkQueue"], *(info.outputs[f"WorkQueueShard{n}"] for n in (1, 2, 3))]
    assert len(info.worker_mappings()) == 6  # high, four normal shards, low
    alice = stack.client("alice")
    # Given jobs submitted while no worker runs: their wake-ups wait on the queues. Job ids are
    # random, so 24 of them leave a shard empty about once in 250 runs: submit until each shard
    # has some (bounded; 200 ids all missing one shard is a 1-in-10^25 event, i.e. a bug)
    jobs: list[str] = []
    expected = [0, 0, 0, 0]
    while len(jobs) < JOBS or not all(expected):
        assert len(jobs) < MOST_JOBS, expected
        jobs.append(alice.submit("synthetic", QUICK).job_id)
        expected[queue_shard(jobs[-1], 4)] += 1
    sqs = client("sqs", info.endpoint)
    for _ in range(100):  # the relay runs in the stack's own process
        if [_depth(sqs, url) for url in shards] == expected:
            break
        time.sleep(0.1)
    # Then each shard holds exactly the wake-ups of the jobs that hash to it (every shard has
    # some: the loop above submitted until it did)
    assert [_depth(sqs, url) for url in shards] == expected
    # When one worker process starts (one poller per mapping), every job succeeds
    stack.start_worker("w1")
    for job_id in jobs:
        assert alice.wait(job_id, timeout=60)["state"] == "succeeded"
    assert [_depth(sqs, url) for url in shards] == [0, 0, 0, 0]
