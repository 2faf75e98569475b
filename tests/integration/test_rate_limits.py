"""Rate limits (arch §15, decision F3): a kind declares `rate=[Rate(...)]`; a start is taken
from the key's rate item (GCRA with no burst, one conditional write) just before the claim. A
job over its rate waits `queued` until its next start is due — never failed, never spinning.
Raced with worker threads against moto in-process on a virtual clock that moves only while
every worker waits."""

from __future__ import annotations

import contextlib
import heapq
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, KindDefinitionError, Limit, Rate, StepContext, ValidationError
from leasehold.domain.errors import LeaseholdError, RateLimitedError
from leasehold.domain.limits import rate_keys
from leasehold.domain.options import Submission
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind
from leasehold.service.worker import WorkerService, WorkerSettings
from leasehold.store.leases import LeaseStore
from leasehold.store.rates import rate_item_key
from tests.support.harness import ALICE, CAROL, LEASE_MS, Harness

pytestmark = pytest.mark.integration

starts: list[int] = []  # the clock of every claim that succeeded: a start
starts_lock = threading.Lock()
runs: list[str] = []

five_a_second = Kind("five_a_second", rate=[Rate("kind", limit=5, per_seconds=1)])


@five_a_second.step()
def go(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    with starts_lock:
        runs.append(ctx.job_id)
    return {}


both = Kind(
    "both",
    concurrency=[Limit("tenant", max=1)],
    rate=[Rate("payload.account", limit=2, per_seconds=10)],
)


@both.step()
def call(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


KINDS: dict[str, JobKind] = {k.name: EngineKind(k) for k in (five_a_second, both)}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    starts.clear()
    runs.clear()
    original = LeaseStore.claim

    def recorded(self: LeaseStore, *args: Any, **kwargs: Any) -> Any:
        job = original(self, *args, **kwargs)  # the claim's one conditional write
        with starts_lock:
            starts.append(kwargs["now"])
        return job

    monkeypatch.setattr(LeaseStore, "claim", recorded)
    yield


def submit(harness: Harness, kind: str, payload: dict[str, Any], owner: Any = ALICE) -> str:
    service = JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)
    return service.accept(owner, Submission.from_body({"kind": kind, "payload": payload})).job_id


def worker(harness: Harness, name: str, *, hold_ms: int = 0, sleep: Any = None) -> WorkerService:
    return WorkerService(
        stores=harness.stores,
        queue=harness.queue,
        kinds=KINDS,
        clock=harness.clock,
        settings=WorkerSettings(
            worker_id=name,
            lease=LeasePolicy(lease_ms=LEASE_MS, safety_margin_ms=500),
            retry=RetryPolicy(base_ms=0, cap_ms=0),
            slot_wait_ms=1000,
            heartbeat_every_ms=10**9,
            rate_hold_ms=hold_ms,
        ),
        telemetry=harness.telemetry,
        rng=random.Random(name),
        sleep=sleep or _no_sleep,
    )


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"the worker slept {seconds} s with no hold configured")


class VirtualTime:
    """Time for racing worker threads that passes only when every one of them waits: a thread
    that sleeps parks until the clock reaches its deadline, and the last thread to park moves the
    shared clock to the soonest deadline and wakes whoever is due. What the workers do between
    sleeps takes no clock time, however slowly a loaded machine runs it — so the starts the test
    sees depend on the rate limiter alone, never on the scheduler (a wall-time driver thread made
    this test fail on a busy machine: the clock ran on while the workers waited for a core)."""

    def __init__(self, harness: Harness, threads: int) -> None:
        self._clock = harness.clock
        self._cond = threading.Condition()
        self._running = threads
        self._parked: list[tuple[int, int]] = []  # (deadline, ticket), soonest first
        self._woken: set[int] = set()
        self._tickets = 0

    def sleep(self, seconds: float) -> None:
        with self._cond:
            self._tickets += 1
            ticket = self._tickets
            deadline = self._clock.now_ms() + max(1, int(seconds * 1000))
            heapq.heappush(self._parked, (deadline, ticket))
            self._running -= 1
            self._advance_when_all_wait()
            while ticket not in self._woken:
                if not self._cond.wait(timeout=60):
                    raise AssertionError("virtual time stalled: a thread neither ran nor slept")
            self._woken.discard(ticket)

    def done(self) -> None:
        """A thread has finished: it no longer holds the clock back."""
        with self._cond:
            self._running -= 1
            self._advance_when_all_wait()

    def _advance_when_all_wait(self) -> None:
        if self._running > 0 or not self._parked:
            return
        deadline = self._parked[0][0]
        now = self._clock.now_ms()
        if deadline > now:
            self._clock.advance(deadline - now)
        while self._parked and self._parked[0][0] <= self._clock.now_ms():
            _, ticket = heapq.heappop(self._parked)
            self._woken.add(ticket)
            self._running += 1
        self._cond.notify_all()


def most_in_any_window(times: list[int], window_ms: int) -> int:
    """The most starts in any half-open window [t, t + window_ms)."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= window_ms:
            first += 1
        most = max(most, last - first + 1)
    return most


@pytest.mark.parametrize("hold_ms", [0, 1000], ids=["handed-off", "held-in-the-worker"])
def test_a_rate_of_5_per_second_never_gives_6_starts_in_any_second_with_8_workers(
    harness: Harness, hold_ms: int
) -> None:
    job_ids = [submit(harness, "five_a_second", {}) for _ in range(30)]
    pending, lock = list(job_ids), threading.Lock()
    finished: set[str] = set()
    time_ = VirtualTime(harness, threads=8)
    (rate,) = rate_keys(five_a_second.rate, "five_a_second", ALICE, {})

    def next_start_due() -> int:  # the rate item's theoretical arrival time (GCRA)
        item = harness.dynamodb.get_item(TableName=harness.table, Key=rate_item_key(rate.name))
        return int(item.get("Item", {}).get("tat", {}).get("N", 0))

    def work(index: int) -> None:
        me = worker(harness, f"w{index}", hold_ms=hold_ms, sleep=time_.sleep)
        try:
            for _ in range(2000):
                with lock:
                    if not pending:
                        return
                    job_id = pending.pop(0)
                with contextlib.suppress(LeaseholdError):
                    me.handle(harness.wakeup(job_id))
                job = harness.store.get(job_id)
                with lock:
                    if job is not None and job.state.value == "succeeded":
                        finished.add(job_id)
                        continue
                    pending.append(job_id)
                # handed back: this worker tries again when the kind's next start is due (as
                # the hand-off's delay brings the message back; 5 ms on if it is already due)
                time_.sleep(max(next_start_due() - harness.clock.now_ms(), 5) / 1000)
        finally:
            time_.done()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert finished == set(job_ids)
    assert len(starts) == 30 and sorted(runs) == sorted(job_ids)
    assert most_in_any_window(starts, 1000) == 5  # reached, and never passed
    assert min(b - a for a, b in zip(sorted(starts), sorted(starts)[1:], strict=False)) >= 200
    assert harness.telemetry.counts["SlotWaits"] > 0  # waits at claim (for the rate here)
    for job_id in job_ids:  # a wait is not a try
        job = harness.store.get(job_id)
        assert job is not None and job.attempts == 1


def test_a_job_over_its_rate_waits_until_its_start_is_due_saying_so(harness: Harness) -> None:
    first, second = submit(harness, "five_a_second", {}), submit(harness, "five_a_second", {})
    me = worker(harness, "w")
    assert me.handle(harness.wakeup(first)).outcome == "succeeded"
    harness.clock.advance(50)
    assert me.handle(harness.wakeup(second)).outcome == "rate_limited"
    service = JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)
    view = service.view(ALICE, second)
    assert view["state"] == "queued" and view["attempts"] == 0
    assert view["waiting_for"] == {"rate": "kind:five_a_second"}
    # ...and the operator's overview counts it as waiting for a rate (issue 34 item 5)
    assert harness.ops().summary()["queued_waiting"] == {"rate": 1}
    # Woken once, when the next start is due (150 ms away: SQS's least delay, 1 s), not polled.
    messages = harness.receive_all(wait_for_delay=True)
    assert len(messages) == 1
    attrs = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["work"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "0"
    harness.clock.advance(150)
    assert me.handle(harness.wakeup(second)).outcome == "succeeded"
    assert "waiting_for" not in service.view(ALICE, second)


def test_a_slot_wait_spends_no_start_and_a_rate_wait_gives_the_slot_back(
    harness: Harness,
) -> None:
    """Per tenant one running, per account two starts in 10 s: the slot is taken first, so a
    job that cannot run spends no start; a job refused by the rate leaves the slot free."""
    a = submit(harness, "both", {"account": "x"})
    b = submit(harness, "both", {"account": "x"})
    c = submit(harness, "both", {"account": "x"})
    now = harness.clock.now_ms()
    keys = rate_keys(both.rate, "both", ALICE, {"account": "x"})
    held = harness.claimer.claim(a, ALICE, worker_id="a", now=now, lease_ms=LEASE_MS,
                                keys=_keys(a), rates=keys)  # fmt: skip
    me = worker(harness, "w")
    assert me.handle(harness.wakeup(b)).outcome == "slots_full"
    harness.complete(held, {})
    harness.clock.advance(5000)
    assert me.handle(harness.wakeup(b)).outcome == "succeeded"  # the second start in 10 s
    assert me.handle(harness.wakeup(c)).outcome == "rate_limited"
    with pytest.raises(RateLimitedError):  # and the slot c took was given back: free for d
        harness.claimer.claim(c, ALICE, worker_id="x", now=harness.clock.now_ms(),
                             lease_ms=LEASE_MS, keys=_keys(c), rates=keys)  # fmt: skip
    other = submit(harness, "both", {"account": "y"})
    assert me.handle(harness.wakeup(other)).outcome == "succeeded"
    carols = submit(harness, "both", {"account": "x"}, owner=CAROL)  # her tenant's own account
    assert me.handle(harness.wakeup(carols)).outcome == "succeeded"
    item = harness.dynamodb.get_item(TableName=harness.table, Key=rate_item_key(keys[0].name))[
        "Item"
    ]
    assert int(item["tat"]["N"]) == now + 5000 + 5000  # the second start + 5 s


def _keys(job_id: str) -> Any:
    from leasehold.domain.limits import slot_keys

    return slot_keys(both.concurrency or (), "both", ALICE, {"account": "x"}, job_id)


def test_rates_are_declared_right() -> None:
    assert Rate("tenant", 3).interval_ms == 334  # rounded up: never a fourth in a second
    for args, message in (
        (("owner", 1), "must be 'user'"),
        (("tenant", 0), "limit must be"),
        (("tenant", 5, 0), "per_seconds must be"),
    ):
        with pytest.raises(ValueError, match=message):
            Rate(*args)
    with pytest.raises(KindDefinitionError, match="each rate key once"):
        Kind("bad", rate=[Rate("tenant", 1), Rate("tenant", 2)])
    with pytest.raises(ValidationError, match="payload.account"):
        both.validate_for({}, ALICE)


def test_a_start_due_within_the_hold_is_waited_for_in_the_invocation(harness: Harness) -> None:
    """Due in 150 ms: SQS cannot bring a message back that soon (its least delay is 1 s, which
    kept a 2-a-second kind near 1 a second), so the worker sleeps until the start is due and
    claims again — one invocation, no new message, no attempt used (decision F3)."""
    first, second = submit(harness, "five_a_second", {}), submit(harness, "five_a_second", {})
    slept: list[float] = []

    seen: list[Any] = []
    service = JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        seen.append(service.view(ALICE, second).get("waiting_for"))  # while it is held
        harness.clock.advance(int(seconds * 1000))

    me = worker(harness, "w", hold_ms=1000, sleep=sleep)
    assert me.handle(harness.wakeup(first)).outcome == "succeeded"
    harness.clock.advance(50)
    assert me.handle(harness.wakeup(second)).outcome == "succeeded"
    assert slept == [0.15]
    assert seen == [{"rate": "kind:five_a_second"}]  # the job says so while it waits
    assert "waiting_for" not in service.view(ALICE, second)  # and no more once it runs
    assert harness.receive_all(wait_for_delay=True) == []  # nothing handed back
    job = harness.store.get(second)
    assert job is not None and job.attempts == 1
    assert starts[1] - starts[0] == 200  # the interval exactly


def test_a_start_due_beyond_the_hold_or_the_invocation_is_handed_off(harness: Harness) -> None:
    """Due in 5 s (2 starts in 10 s): past the hold, so a delayed wake-up; due in 150 ms but
    with too little of the invocation left for a lease after the sleep: handed off too."""
    me = worker(harness, "w", hold_ms=1000)  # any sleep fails the test
    a = submit(harness, "both", {"account": "x"})
    b = submit(harness, "both", {"account": "x"})
    assert me.handle(harness.wakeup(a)).outcome == "succeeded"
    harness.clock.advance(1)
    assert me.handle(harness.wakeup(b)).outcome == "rate_limited"  # the next start: 5 s away
    attrs = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["work"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"  # 5 s out
    first, second = submit(harness, "five_a_second", {}), submit(harness, "five_a_second", {})
    assert me.handle(harness.wakeup(first)).outcome == "succeeded"
    short = LEASE_MS + 500 + 100  # a lease and the margin fit now, not after a 200-ms sleep
    result = me.handle(harness.wakeup(second), remaining_ms=lambda: short)
    assert result.outcome == "rate_limited"
