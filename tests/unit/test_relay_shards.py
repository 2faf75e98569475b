"""The relay over sharded normal queues (decision QS1): each wake-up goes to its job's shard,
and a stream batch is grouped by queue before it is cut into SendMessageBatch requests of 10, so
sharding multiplies no request: 100 wake-ups over 4 shards cost Σ ⌈wake-ups of a shard / 10⌉
(about 12), not up to one request per shard for every 10 (40)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from leasehold.domain.clock import ManualClock
from leasehold.service.relay import relay_records
from leasehold.service.telemetry import CountingTelemetry
from leasehold.store.items import serialize
from leasehold.store.queue import Wakeup, WakeupQueue, queue_shard

SHARDS = ("N0", "N1", "N2", "N3")


class CountingSqs:
    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.requests: list[tuple[str, list[str]]] = []
        self.broken = broken

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:  # noqa: N803
        bodies = [Wakeup.parse(e["MessageBody"]).job_id for e in Entries]
        self.requests.append((QueueUrl, bodies))
        failed = [{"Id": e["Id"]} for e in Entries] if QueueUrl in self.broken else []
        return {"Failed": failed}


def _record(n: int, job_id: str) -> dict[str, Any]:
    item = {
        "pk": f"OUTBOX#{job_id}",
        "sk": "1",
        "job_id": job_id,
        "tenant": "t",
        "user_id": "u",
        "deliver_at": 0,
    }
    return {
        "eventName": "INSERT",
        "dynamodb": {
            "SequenceNumber": str(n),
            "NewImage": {k: serialize(v) for k, v in item.items()},
        },
    }


def test_a_batch_of_100_goes_to_each_jobs_shard_in_full_requests() -> None:
    sqs = CountingSqs()
    queue = WakeupQueue(sqs, SHARDS[0], None, shard_urls=SHARDS[1:])  # type: ignore[arg-type]
    jobs = [f"j_{n:04d}" for n in range(100)]
    failed = relay_records(
        [_record(n, job) for n, job in enumerate(jobs)], queue, ManualClock(), CountingTelemetry()
    )
    assert failed == []
    # each job's wake-up on its shard, every job exactly once
    sent = [(url, job) for url, bodies in sqs.requests for job in bodies]
    assert sorted(sent) == sorted((SHARDS[queue_shard(job, 4)], job) for job in jobs)
    # and no more requests than each shard's own count of wake-ups needs
    per_shard = Counter(SHARDS[queue_shard(job, 4)] for job in jobs)
    assert len(sqs.requests) == sum(math.ceil(n / 10) for n in per_shard.values())
    assert len(sqs.requests) <= 13  # against up to 40 if each chunk of 10 touched every shard
    # every request but each shard's last carries a full 10
    last = {url: index for index, (url, _) in enumerate(sqs.requests)}
    full = [b for i, (url, b) in enumerate(sqs.requests) if i != last[url]]
    assert full and all(len(bodies) == 10 for bodies in full)


def test_a_shard_that_refuses_fails_only_its_own_records() -> None:
    sqs = CountingSqs(broken=frozenset({"N2"}))
    queue = WakeupQueue(sqs, SHARDS[0], None, shard_urls=SHARDS[1:])  # type: ignore[arg-type]
    jobs = [f"j_{n:04d}" for n in range(40)]
    failed = relay_records(
        [_record(n, job) for n, job in enumerate(jobs)], queue, ManualClock(), CountingTelemetry()
    )
    assert sorted(failed, key=int) == [
        str(n) for n, job in enumerate(jobs) if queue_shard(job, 4) == 2
    ]
    assert failed  # some job did hash to the broken shard


def _spawn_record(n: int, parent: str, children: list[str]) -> dict[str, Any]:
    record = _record(n, parent)
    record["dynamodb"]["NewImage"]["spawn"] = {"L": [{"S": c} for c in children]}
    return record


def test_a_spawn_item_wakes_each_child_it_names_and_not_its_parent() -> None:
    """One outbox item for a parent's 98 children (WF43): one message per child, on each
    child's shard; the parent itself gets none."""
    sqs = CountingSqs()
    queue = WakeupQueue(sqs, SHARDS[0], None, shard_urls=SHARDS[1:])  # type: ignore[arg-type]
    children = [f"j_c{n:03d}" for n in range(98)]
    telemetry = CountingTelemetry()
    failed = relay_records(
        [_spawn_record(7, "j_parent", children)], queue, ManualClock(), telemetry
    )
    assert failed == []
    sent = [(url, job) for url, bodies in sqs.requests for job in bodies]
    assert sorted(sent) == sorted((SHARDS[queue_shard(job, 4)], job) for job in children)


def test_a_spawn_item_with_one_message_refused_is_failed_once_and_sent_again_whole() -> None:
    sqs = CountingSqs(broken=frozenset({"N1"}))
    queue = WakeupQueue(sqs, SHARDS[0], None, shard_urls=SHARDS[1:])  # type: ignore[arg-type]
    children = [f"j_c{n:03d}" for n in range(30)]
    assert any(queue_shard(c, 4) == 1 for c in children)
    failed = relay_records(
        [_spawn_record(3, "j_p", children), _record(4, "j_other")],
        queue,
        ManualClock(),
        CountingTelemetry(),
    )
    # the stream retries from the spawn's record: every child is sent again (a child woken
    # twice is claimed once), and a record is named once however many of its messages failed
    assert failed == ["3"] + (["4"] if queue_shard("j_other", 4) == 1 else [])
