"""Sharded work queues (issue 30 item 3, decision QS1): one SQS event source mapping runs at most
1,000 batches at once, so the normal priority may have 2, 4, 8 or 16 queues (`QueueShards`),
each with its own mapping. The relay spreads wake-ups over them by a stable hash of the job id,
and every other sender (a retry's outbox, the sweeper's re-dispatch, a hand-off, a redrive)
makes the same choice: all of a job's wake-ups land on its shard."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, RetryableError, StepContext
from leasehold.store.queue import MAX_QUEUE_SHARDS, Wakeup, WakeupQueue, queue_shard
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.mocking import hidden_messages

pytestmark = pytest.mark.integration

JOBS = 60
failures_left: dict[str, int] = {}

flaky = Kind("flaky", schema={"type": "object"})


@flaky.step()
def run(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    if failures_left.get(ctx.job_id, 0) > 0:
        failures_left[ctx.job_id] -= 1
        raise RetryableError("not yet")
    return {"n": payload["n"]}


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    failures_left.clear()
    with LeaseholdTestbed(
        [flaky], settings={"queue_shards": 4, "user_concurrency_limit": 0}
    ) as testbed:
        yield testbed


def test_the_relay_spreads_jobs_over_four_shards_and_each_job_stays_on_one(
    tb: LeaseholdTestbed,
) -> None:
    # Given four normal queues, and 120 jobs of which every third fails once (a second
    # wake-up, through the outbox again, after its backoff)
    assert {"work", "work_1", "work_2", "work_3"} <= set(tb.queue_urls)
    jobs = [tb.submit("flaky", {"n": n}) for n in range(JOBS)]
    for job_id in jobs[::3]:
        failures_left[job_id] = 1
    # When they all run to the end
    report = tb.drain()
    # Then every job succeeded
    assert [tb.state(job_id) for job_id in jobs] == ["succeeded"] * JOBS
    # and every wake-up of a job came from one queue, the one its id hashes to
    queues: dict[str, set[str]] = defaultdict(set)
    for delivery in report.deliveries:
        queues[delivery.job_id].add(delivery.queue)
    names = ["work", "work_1", "work_2", "work_3"]
    assert {job_id: sorted(found) for job_id, found in queues.items()} == {
        job_id: [names[queue_shard(job_id, 4)]] for job_id in jobs
    }
    # a retried job was delivered twice there (or more: a not-due arrival is delayed in place)
    retried = Counter(d.job_id for d in report.deliveries if d.job_id in failures_left)
    assert min(retried.values()) >= 2
    # and all four queues carried jobs, none of them most of them
    per_queue = Counter(names[queue_shard(job_id, 4)] for job_id in jobs)
    assert set(per_queue) == set(names)
    assert max(per_queue.values()) < JOBS // 2, per_queue


def test_a_lost_wakeup_is_sent_again_to_the_jobs_own_shard(tb: LeaseholdTestbed) -> None:
    # Given jobs whose first wake-ups are lost (deleted from their queues unread)
    jobs = [tb.submit("flaky", {"n": n}) for n in range(12)]
    tb._relay.poll()
    sqs = tb.client("sqs")
    for name in ("work", "work_1", "work_2", "work_3"):
        sqs.purge_queue(QueueUrl=tb.queue_urls[name])
    lost_at = tb.clock.now_ms()
    # When the sweeper re-dispatches them after the grace and they run
    report = tb.drain()
    # Then each ran, only from the sweeper's wake-up, from its own shard
    assert [tb.state(job_id) for job_id in jobs] == ["succeeded"] * 12
    grace_ms = tb.settings.lost_wakeup_grace_seconds * 1000
    assert min(d.at_ms for d in report.deliveries) > lost_at + grace_ms
    names = ["work", "work_1", "work_2", "work_3"]
    assert {(d.job_id, d.queue) for d in report.deliveries} == {
        (job_id, names[queue_shard(job_id, 4)]) for job_id in jobs
    }


def test_the_roles_reach_the_shards_and_only_as_the_template_grants(
    tb: LeaseholdTestbed,
) -> None:
    # The API (redrive), the relay and the worker may send to every shard; the sweeper to none;
    # only the worker receives from them
    for name in ("work_1", "work_2", "work_3"):
        arn = _queue_arn(tb.queue_urls[name])
        for function in ("ApiFunction", "RelayFunction", "WorkerFunction"):
            assert tb.roles[function].allows("sqs:SendMessage", arn), (function, name)
        assert not tb.roles["SweeperFunction"].allows("sqs:SendMessage", arn)
        assert tb.roles["WorkerFunction"].allows("sqs:ReceiveMessage", arn)
        assert not tb.roles["RelayFunction"].allows("sqs:ReceiveMessage", arn)


def _queue_arn(url: str) -> str:
    return f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"


def test_one_shard_is_the_work_queue_alone() -> None:
    queue = WakeupQueue(None, "N", None, priority_urls={"high": "H"})  # type: ignore[arg-type]
    assert {queue.url_for("normal", f"j_{n}") for n in range(50)} == {"N"}
    assert queue.url_for("high", "j_1") == "H"
    assert queue.url_for("low", "j_1") == "N"  # no low queue: the job's normal queue


def test_a_priority_without_a_queue_follows_the_jobs_shard() -> None:
    queue = WakeupQueue(None, "N0", None, shard_urls=["N1", "N2", "N3"])  # type: ignore[arg-type]
    for n in range(50):
        job_id = f"j_{n}"
        assert queue.url_for("low", job_id) == queue.url_for("normal", job_id)
        assert queue.url_for("normal", job_id) == ("N0", "N1", "N2", "N3")[queue_shard(job_id, 4)]


def test_more_shards_than_a_template_makes_or_the_same_queue_twice_are_refused() -> None:
    with pytest.raises(ValueError, match="at most 16"):
        WakeupQueue(None, "N", None, shard_urls=[f"S{n}" for n in range(16)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="each its own queue"):
        WakeupQueue(None, "N", None, shard_urls=["N"])  # type: ignore[arg-type]
    assert MAX_QUEUE_SHARDS == 16


def test_the_shard_is_a_stable_hash_not_pythons_salted_one() -> None:
    # The same in another interpreter with another hash seed (the relay, the sweeper and the
    # API run in different processes)
    ids = [f"j_{random.Random(n).getrandbits(64):x}" for n in range(200)]
    here = [queue_shard(job_id, 4) for job_id in ids]
    code = (
        "import sys; from leasehold.store.queue import queue_shard; "
        "print(','.join(str(queue_shard(i, 4)) for i in sys.argv[1:]))"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code, *ids],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        assert [int(n) for n in out.split(",")] == here
    # and roughly even: each of 4 shards gets 50 ± 25 of 200 ids
    assert all(25 <= count <= 75 for count in Counter(here).values()), Counter(here)
    assert [queue_shard(job_id, 1) for job_id in ids] == [0] * 200
    assert {queue_shard(job_id, 2) for job_id in ids} == {0, 1}


def test_a_dead_letter_returns_to_its_jobs_shard(tb: LeaseholdTestbed) -> None:
    # Given the runtime's queue (every shard) and normal wake-ups of many jobs in the DLQ
    queue = tb.runtime.queue
    jobs = [f"j_dead_{n}" for n in range(20)]
    for job_id in jobs:
        queue.send_to_dead_letters(Wakeup(job_id, tb.owner, "d").body())
    # When they are redriven one by one (moto has no message move task)
    assert queue.redrive_dead_letters() == len(jobs)
    # Then each is on the shard its job id hashes to
    sqs = tb.client("sqs")
    names = ["work", "work_1", "work_2", "work_3"]
    found: dict[str, str] = {}
    for name in names:
        while batch := sqs.receive_message(
            QueueUrl=tb.queue_urls[name], MaxNumberOfMessages=10
        ).get("Messages", []):
            for message in batch:
                found[Wakeup.parse(message["Body"]).job_id] = name
    assert found == {job_id: names[queue_shard(job_id, 4)] for job_id in jobs}
    assert len(set(found.values())) > 1


def test_the_local_relay_pump_spreads_the_harness_jobs_over_its_four_shards(moto: None) -> None:
    # Given the moto harness with the template's four normal shards and 40 accepted jobs
    from tests.support.harness import Harness

    harness = Harness.create(queue_shards=4)
    jobs = [harness.submit() for _ in range(40)]
    # When the local stack's relay pump runs the relay over the stream
    assert harness.relay_pump().poll_once() == 40
    # Then every job's wake-up is on the shard its id hashes to, and every shard has some
    urls = harness.queue.shard_urls
    assert len(urls) == 4
    found = {
        json.loads(message["Body"])["job_id"]: index
        for index, url in enumerate(urls)
        for message in harness._receive_all(url, wait_for_delay=False)
    }
    assert found == {job_id: queue_shard(job_id, 4) for job_id in jobs}
    assert set(found.values()) == {0, 1, 2, 3}


def test_a_wakeup_left_on_another_shard_by_a_raised_count_is_not_stuck(
    tb: LeaseholdTestbed,
) -> None:
    """QueueShards raised on a live stack: a wake-up sent before, to the queue the job's id
    hashed to then (the work queue, with one shard), arrives early. Hiding it until its job is
    due names the job's shard now, where that receipt handle is refused: the worker hands it off
    to the job's own shard instead of keeping it (received again and again, towards the DLQ)."""
    names = ["work", "work_1", "work_2", "work_3"]
    job_id = next(
        j
        for j in (tb.submit("flaky", {"n": n}, delay_seconds=60) for n in range(20))
        if queue_shard(j, 4) != 0
    )
    tb.run_until_idle()  # every job's delayed wake-up is sent to its own shard
    old = Wakeup(job_id, tb.owner, "before-the-raise").body()
    tb.client("sqs").send_message(QueueUrl=tb.queue_urls["work"], MessageBody=old)
    report = tb.run_until_idle()
    assert [(d.outcome, d.queue) for d in report.deliveries if d.job_id == job_id] == [
        ("not_due", "work")
    ]
    # the old queue's copy went (handed off, not hidden there until the job is due)
    on_work = [Wakeup.parse(body).job_id for _, body in hidden_messages(tb.queue_urls["work"])]
    assert job_id not in on_work
    late = tb.drain()
    assert tb.state(job_id) == "succeeded"
    assert {d.queue for d in late.deliveries if d.job_id == job_id} == {
        names[queue_shard(job_id, 4)]
    }


def test_the_functions_read_the_shards_and_refuse_more_than_a_template_makes() -> None:
    from leasehold.handlers.settings import ENV_VARIABLES, Settings, SettingsError
    from leasehold_dev.local.resources import template_environment

    queues = {"work": "q", "work_1": "q1", "work_2": "q2", "work_3": "q3", "dlq": "d"}
    env = template_environment("t", {**queues, "high": "h", "low": "l"})
    assert "QUEUE_SHARD_URLS" in ENV_VARIABLES  # every function must be given it
    assert Settings.from_env(env).queue_shard_urls == ("q1", "q2", "q3")
    assert Settings.from_env(env | {"QUEUE_SHARD_URLS": " q1 , q2 "}).queue_shard_urls == (
        "q1",
        "q2",
    )
    assert Settings.from_env(env | {"QUEUE_SHARD_URLS": ""}).queue_shard_urls == ()
    too_many = ",".join(f"s{n}" for n in range(16))  # 17 with QUEUE_URL
    with pytest.raises(SettingsError, match="QUEUE_SHARD_URLS: 17 normal queues"):
        Settings.from_env(env | {"QUEUE_SHARD_URLS": too_many})
    with pytest.raises(SettingsError, match="each a different queue"):
        Settings.from_env(env | {"QUEUE_SHARD_URLS": "q1,q"})
    missing = {k: v for k, v in env.items() if k != "QUEUE_SHARD_URLS"}
    with pytest.raises(SettingsError, match="QUEUE_SHARD_URLS is not set"):
        Settings.from_env(missing)
