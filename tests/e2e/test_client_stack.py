"""`leasehold.client` driving the real API on the embedded local stack: submit → handle → wait,
paging, approval, the operator's acts, and every error of the envelope as its exception — 400,
401, 403, 404, 409, and 503 while the table is down (the moto server's outage switch), which a
keyed submission rides out and an unkeyed one does not repeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.client import ApiError, Client, WaitTimeout
from leasehold_dev.local.moto.server import set_dynamodb_outage
from leasehold_dev.local.stack import StackInfo
from tests.support.localstack import LocalStackProcess

pytestmark = pytest.mark.e2e

ONE_STEP = {"steps": [{"name": "hello", "cost": 1}]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path_factory.mktemp("client"))
    running.start_worker("w1")
    try:
        yield running
    finally:
        running.stop()


def _until(client: Client, job_id: str, state: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        view = client.get(job_id)
        if view["state"] == state or time.monotonic() > deadline:
            return view
        time.sleep(0.1)


def test_submit_wait_list_and_approve_through_the_client(stack: LocalStackProcess) -> None:
    alice = Client(stack.url, user="alice")
    handle = alice.submit("synthetic", ONE_STEP, budget={"max_cost": 5}, max_attempts=2)
    assert handle.state == "queued"
    done = handle.wait(timeout=60)
    assert (done["state"], done["result"]["cost_used"], done["max_attempts"]) == ("succeeded", 1, 2)
    # The same key and body: the same job; the key with another body: 409
    first = alice.submit("synthetic", ONE_STEP, idempotency_key="client-e2e-1")
    again = alice.submit("synthetic", ONE_STEP, idempotency_key="client-e2e-1")
    assert again.job_id == first.job_id
    with pytest.raises(ApiError.Conflict):
        alice.submit("synthetic", {"steps": [{"name": "other"}]}, idempotency_key="client-e2e-1")
    # Every page of the caller's jobs, newest first
    listed = [job["job_id"] for job in alice.list(page_size=1)]
    assert listed[:2] == [first.job_id, handle.job_id] and len(listed) == 2
    # A job that pauses for approval, approved at its current version
    paused = alice.submit(
        "synthetic", {"steps": [{"name": "prepare"}, {"name": "publish", "approval": True}]}
    )
    with pytest.raises(WaitTimeout) as waited:
        paused.wait(timeout=3)  # waiting for a person is not settled
    assert waited.value.view is not None
    assert _until(alice, paused.job_id, "waiting_approval")["state"] == "waiting_approval"
    alice.approve(paused.job_id)
    assert paused.wait(timeout=60)["state"] == "succeeded"
    with pytest.raises(ApiError.Conflict):  # ended: no second decision, no cancel
        alice.cancel(paused.job_id)


def test_each_error_answer_is_its_exception(stack: LocalStackProcess) -> None:
    alice = Client(stack.url, user="alice")
    with pytest.raises(ApiError.InvalidInput) as invalid:
        alice.submit("no_such_kind", {})
    assert invalid.value.status == 400 and invalid.value.code
    with pytest.raises(ApiError.Unauthenticated) as anonymous:
        alice.with_identity().get("j_x")
    assert anonymous.value.code == "unauthenticated"
    with pytest.raises(ApiError.Unauthenticated):
        Client(stack.url, user="mallory").list().__next__()
    with pytest.raises(ApiError.Forbidden):
        alice.ops.summary()
    with pytest.raises(ApiError.NotFound):
        alice.get("j_00000000000000000000")
    mine = alice.submit("synthetic", ONE_STEP).job_id
    with pytest.raises(ApiError.NotFound):  # not bob's: the same answer as unknown
        Client(stack.url, user="bob").get(mine)
    assert Client(stack.url).health() == {"status": "ok"}


def test_the_operator_replays_a_failed_job_and_reads_it_whole(stack: LocalStackProcess) -> None:
    alice = Client(stack.url, user="alice")
    ops = alice.with_identity(user="ops").ops
    failed = alice.submit("synthetic", {"steps": [{"name": "broken", "fatal": True}]})
    assert failed.wait(timeout=60)["state"] == "failed"
    assert failed.job_id in {row["job_id"] for row in ops.jobs("failed", tenant="study-group")}
    assert not list(ops.jobs("failed", tenant="no-such-tenant"))
    assert ops.replay(failed.job_id, note="client e2e")["state"] == "queued"
    assert failed.wait(timeout=60)["replays"] == 1
    events = [entry["event"] for entry in ops.show(failed.job_id)["history"]]
    assert "replayed" in events
    assert ops.summary()["sqs"]["dead_letter"] == ops.dead_letters() == 0
    with pytest.raises(ApiError.Conflict):  # failed again, but resolve is for unknown jobs
        ops.resolve(failed.job_id, "failed", note="not unknown")


@pytest.mark.long
def test_during_a_table_outage_a_503_is_unavailable_and_a_keyed_submission_rides_it_out(
    stack: LocalStackProcess,
) -> None:
    endpoint = StackInfo.load(stack.state).endpoint
    # Patient: during the outage the local stack's API waits its turn behind the sweeper and
    # relay (one process runs them one at a time), each spending its store retries - on a
    # loaded machine longer than the client's default 15 s (a CI run timed out so).
    alice = Client(stack.url, user="alice", retries=1, max_retry_after=1, timeout=45)
    slept: list[float] = []
    alice._sleep = slept.append
    set_dynamodb_outage(endpoint, True)
    try:
        # A read: repeated once (retries=1), then Unavailable with the server's Retry-After
        with pytest.raises(ApiError.Unavailable) as down:
            alice.list().__next__()
        assert down.value.status == 503 and down.value.retry_after == 2.0
        assert slept == [1]  # Retry-After 2, capped at max_retry_after
        # An unkeyed submission: not repeated (it may have been accepted)
        slept.clear()
        with pytest.raises(ApiError.Unavailable):
            alice.submit("synthetic", ONE_STEP)
        assert slept == []
        # A keyed one is repeated, honouring Retry-After, until the table is back
        patient = Client(stack.url, user="alice", retries=6)
        threading.Timer(1.0, set_dynamodb_outage, (endpoint, False)).start()
        started = time.monotonic()
        handle = patient.submit("synthetic", ONE_STEP, idempotency_key="during-the-outage")
        assert time.monotonic() - started >= 1.0
    finally:
        set_dynamodb_outage(endpoint, False)
    assert handle.wait(timeout=60)["state"] == "succeeded"
    assert (
        patient.submit("synthetic", ONE_STEP, idempotency_key="during-the-outage").job_id
        == handle.job_id
    )


def test_schedules_through_the_client_are_the_owners_alone(stack: LocalStackProcess) -> None:
    # (the tick itself is fired by the same Sweeper handler the stack runs every second:
    # tests/integration/test_schedules_api.py; waiting for a real minute here is not worth it)
    alice, bob = Client(stack.url, user="alice"), Client(stack.url, user="bob")
    created = alice.schedules.create(
        "synthetic", ONE_STEP, "cron(0 9 ? * MON-FRI *)", timezone="Europe/Paris"
    )
    assert created["state"] == "active" and created["next_tick_at"].endswith(":00:00.000Z")
    sid = created["schedule_id"]
    assert [s["schedule_id"] for s in alice.schedules.list()] == [sid]
    assert list(bob.schedules.list()) == []
    with pytest.raises(ApiError.NotFound):
        bob.schedules.get(sid)
    with pytest.raises(ApiError.InvalidInput, match="not supported"):
        alice.schedules.create("synthetic", ONE_STEP, "cron(0 9 L * ? *)")
    deleted = alice.schedules.delete(sid)
    assert [h["event"] for h in deleted["history"]] == ["created", "deleted"]
    with pytest.raises(ApiError.NotFound):
        alice.schedules.delete(sid)
