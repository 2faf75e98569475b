"""Concurrency keys (arch §15, decision F2): a kind declares `concurrency=[Limit(...)]`, at most
N of its jobs run per key value; the claim takes one entry of each key (sharded for a busy key)
before it runs and gives them back after its outcome. Raced with worker threads against moto
in-process (DynamoDB requests serialised as the service does per item, tests/support/atomic.py)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from leasehold import Kind, KindDefinitionError, Limit, RetryableError, StepContext
from leasehold.domain.errors import (
    LeaseholdError,
    SlotsFullError,
    StoreUnavailableError,
    ValidationError,
)
from leasehold.domain.job import Owner
from leasehold.domain.limits import slot_keys
from leasehold.domain.options import Submission
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind
from leasehold.service.worker import WorkerService, WorkerSettings
from leasehold.store.blobs import BlobStore, is_ref
from leasehold.store.slots import SlotStore, holders_of, holds_declared_slot, slot_item_key
from leasehold.testing.testbed import DATA_BUCKET
from tests.support.harness import ALICE, BOB, CAROL, LEASE_MS, Harness
from tests.support.resources import REGION, create_data_bucket

pytestmark = pytest.mark.integration


class Gauge:
    """How many steps of each key run at once, and the most ever seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.runs: Counter[str] = Counter()

    def enter(self, key: str) -> None:
        with self.lock:
            self.now[key] += 1
            self.runs[key] += 1
            self.most[key] = max(self.most[key], self.now[key])

    def leave(self, key: str) -> None:
        with self.lock:
            self.now[key] -= 1

    def meet(self, key: str, count: int, timeout: float) -> None:
        """Wait (bounded) until `count` steps of `key` run at once: the steps overlap whenever
        the limits let them, whatever the threads' timing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.now[key] >= count:
                    return
            time.sleep(0.005)


gauge = Gauge()
gate = threading.Event()  # released: steps run through; cleared: they wait for it (bounded)

per_tenant = Kind("per_tenant", concurrency=[Limit("tenant", max=2, shards=2)])


@per_tenant.step()
def hold(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    gauge.enter(ctx.owner.tenant)
    try:
        # Held until a third runs (which must never happen) or 0.3 s: long enough, even on a
        # loaded machine, for the others to claim meanwhile, so the limit is reached and tried
        if not gate.is_set():
            gauge.meet(ctx.owner.tenant, 3, timeout=0.3)
        if payload.get("flaky") and ctx.attempt == 1:
            raise RetryableError("once")  # its retry is a transaction: TransactionConflict bites
        return {}
    finally:
        gauge.leave(ctx.owner.tenant)


per_account = Kind(
    "per_account",
    schema={"type": "object"},
    concurrency=[Limit("tenant", max=3), Limit("payload.account", max=1)],
    max_payload_bytes=64 * 1024,  # a 50 KiB payload goes to the data bucket (LD15's test)
)


@per_account.step()
def call_provider(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    account = f"account:{ctx.owner.tenant}:{payload['account']}"
    gauge.enter(account)
    gauge.enter(f"tenant:{ctx.owner.tenant}")
    try:
        gauge.meet(f"tenant:{ctx.owner.tenant}", 2, timeout=0.3)
        return {}
    finally:
        gauge.leave(account)
        gauge.leave(f"tenant:{ctx.owner.tenant}")


unlimited = Kind("unlimited", concurrency=[])


@unlimited.step()
def free(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


KINDS: dict[str, JobKind] = {k.name: EngineKind(k) for k in (per_tenant, per_account, unlimited)}


@pytest.fixture(autouse=True)
def fresh_gauge() -> Iterator[None]:
    gauge.__init__()  # type: ignore[misc]  # the kinds' steps hold this one
    gate.clear()
    yield


def jobs(harness: Harness) -> JobService:
    return JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)


def submit(harness: Harness, kind: str, payload: dict[str, Any], owner: Owner = ALICE) -> str:
    return (
        jobs(harness).accept(owner, Submission.from_body({"kind": kind, "payload": payload})).job_id
    )


def run_race(harness: Harness, job_ids: list[str], workers: int = 8) -> dict[str, str]:
    """`workers` threads, each a worker of its own, take wake-ups from one shared list until
    every job has finished; a refused claim (slots full, store unavailable) puts it back, as
    the re-sent message would. Bounded: 400 deliveries a thread, and a thread stops once 50
    deliveries in a row found their job leased: on this manual clock nobody's lease runs out
    until the caller moves it (a worker whose outcome the store refused left its job running),
    so spinning on to 400 only burns time — one run took minutes."""
    pending = list(job_ids)
    lock = threading.Lock()
    outcomes: dict[str, str] = {}

    def work(index: int) -> None:
        worker = WorkerService(
            stores=harness.stores,
            queue=harness.queue,
            kinds=KINDS,
            clock=harness.clock,
            settings=WorkerSettings(
                worker_id=f"w{index}",
                lease=LeasePolicy(lease_ms=LEASE_MS, safety_margin_ms=500),
                retry=RetryPolicy(base_ms=0, cap_ms=0),  # a retry is due at once
                slot_wait_ms=1000,
                heartbeat_every_ms=10**9,
            ),
            telemetry=harness.telemetry,
            rng=random.Random(index),
        )
        leased_in_a_row = 0
        for _ in range(400):
            with lock:
                if not pending or leased_in_a_row >= 50:
                    return
                job_id = pending.pop(0)
            outcome = None
            with contextlib.suppress(LeaseholdError):  # a store fault: the message stays
                outcome = worker.handle(harness.wakeup(job_id)).outcome
            leased_in_a_row = leased_in_a_row + 1 if outcome == "leased" else 0
            job = harness.store.get(job_id)
            with lock:
                if job is not None and job.state.value in {"succeeded", "failed", "dead"}:
                    outcomes[job_id] = job.state.value
                else:
                    pending.append(job_id)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def test_eight_workers_with_one_key_limited_to_2_never_run_3(harness: Harness) -> None:
    job_ids = [submit(harness, "per_tenant", {}) for _ in range(16)]
    outcomes = run_race(harness, job_ids)
    assert outcomes == dict.fromkeys(job_ids, "succeeded")
    assert gauge.most["study-group"] == 2  # the limit was reached, and never passed
    assert gauge.runs["study-group"] == 16
    assert harness.telemetry.counts["SlotWaits"] > 0  # the race did happen


def test_under_injected_transaction_conflicts_the_limit_holds_and_shards_share_the_claims(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the jobs fail once, so their retries are transactions; a third of every
    transaction is cancelled with TransactionConflict, a tenth of the single writes throttled.
    The limit still holds, every job ends, and the key's two slot items each took part of the
    claims — neither sat in every claim of the key."""
    takes: Counter[str] = Counter()  # entries taken, by item
    first: dict[str, str] = {}  # the item each claim tried first, by the claim's token
    original = SlotStore.take_at

    def counted(self: SlotStore, key: dict[str, Any], limit: int, job_id: str, token: str) -> Any:
        first.setdefault(token, key["pk"]["S"])
        take = original(self, key, limit, job_id, token)
        if take.took:
            takes[key["pk"]["S"]] += 1
        return take

    monkeypatch.setattr(SlotStore, "take_at", counted)
    job_ids = [submit(harness, "per_tenant", {"flaky": i % 2 == 0}) for i in range(16)]
    # The first transaction is always cancelled, then a third of them at random: the premise
    # (some transaction met a conflict) holds whatever the threads' draws — at 0.3 alone, the
    # eight retries' transactions all escaped it about one run in seventeen (0.7^8).
    harness.faults(
        "dynamodb.TransactWriteItems:TransactionConflict=1@1,"
        "dynamodb.TransactWriteItems:TransactionConflict=0.3,"
        "dynamodb.UpdateItem:ThrottlingException=0.1,"
        "dynamodb.UpdateItem:TransactionConflictException=0.1,"
        "dynamodb.Query[by_state]:ThrottlingException=0.5"
    )
    outcomes = run_race(harness, job_ids)
    for _ in range(3):
        # An outcome the store refused past its retries leaves the job `running` for its lease
        # (the message is kept): time passes, the sweeper puts it back, the workers go on.
        left = [job_id for job_id in job_ids if job_id not in outcomes]
        if not left:
            break
        harness.clock.advance(LEASE_MS + 1)
        harness.sweep_quietly()
        outcomes |= run_race(harness, left)
    harness.faults("")
    assert harness.injected("TransactWriteItems:TransactionConflict") > 0
    assert outcomes == dict.fromkeys(job_ids, "succeeded")
    assert gauge.most["study-group"] <= 2
    assert gauge.runs["study-group"] >= 24  # 16 jobs, 8 of them twice (more after a rescue)
    assert len(takes) == 2 and all(0 < n < sum(takes.values()) for n in takes.values()), takes
    starts = Counter(first.values())  # where claims begin: spread, not one item for all
    assert len(starts) == 2 and all(n < len(first) for n in starts.values()), starts
    # Every entry is given back — or, where the store refused a release (a throttle that
    # outlasted the SDK's retries), freed by the repair once the grace has passed.
    harness.clock.advance(2 * LEASE_MS + 1)
    repair = SlotStore(harness.stores.table, 0, 2 * LEASE_MS)
    for name in takes:
        repair.repair_at(slot_item_key(name), _item(harness, name), harness.clock.now_ms(),
                         holds_declared_slot)  # fmt: skip
        item = _item(harness, name)
        assert holders_of(item) == {} and item["n"]["N"] == "0"


def test_several_limits_apply_to_one_job(harness: Harness) -> None:
    """Per tenant 3 and per provider account 1: two jobs of one account never run together,
    jobs of other accounts do, and another tenant's jobs are not counted with these."""
    payloads = [{"account": f"acct-{i % 2}"} for i in range(10)]
    job_ids = [submit(harness, "per_account", p) for p in payloads]
    job_ids += [submit(harness, "per_account", {"account": "acct-0"}, owner=CAROL)]
    outcomes = run_race(harness, job_ids)
    assert set(outcomes.values()) == {"succeeded"} and len(outcomes) == 11
    assert gauge.most["account:study-group:acct-0"] == 1
    assert gauge.most["account:study-group:acct-1"] == 1
    assert gauge.most["tenant:study-group"] == 2  # two accounts, one job each at a time
    assert gauge.runs["account:other-group:acct-0"] == 1  # its own tenant's acct-0


def test_a_payload_in_the_data_bucket_keeps_its_keyed_field_for_the_claim(
    harness: Harness,
) -> None:
    """LD15: 50 KiB payloads go to the data bucket; the claim reads `payload.account` from the
    item (kept at accept), never the blob: one job of an account at a time, two accounts at
    once (read from the reference, every job would have shared one `-` entry)."""
    s3 = boto3.session.Session(region_name=REGION).client("s3")
    harness.stores.table.blobs = BlobStore(s3, create_data_bucket())
    pad = "".join(chr(0x61 + i % 26) for i in range(50 * 1024))
    job_ids = [submit(harness, "per_account", {"account": f"acct-{i % 2}", "pad": pad})
               for i in range(8)]  # fmt: skip
    item = harness.store.get(job_ids[0])
    assert item is not None and is_ref(item.payload)  # in the bucket: the item names it
    assert item.key_fields == {"account": "acct-0"}
    outcomes = run_race(harness, job_ids)
    assert set(outcomes.values()) == {"succeeded"} and len(outcomes) == 8
    assert gauge.most["account:study-group:acct-0"] == 1
    assert gauge.most["account:study-group:acct-1"] == 1
    assert gauge.most["tenant:study-group"] == 2  # two accounts, one job each at a time
    assert s3.list_objects_v2(Bucket=DATA_BUCKET)["KeyCount"] == 8  # one payload blob each


def test_a_job_over_its_limit_waits_queued_saying_for_what(harness: Harness) -> None:
    first, second, third = (submit(harness, "per_tenant", {}) for _ in range(3))
    keys = [slot_keys(per_tenant.concurrency or (), "per_tenant", ALICE, {}, j) for j in (first,)]
    assert keys[0][0].label == "tenant:study-group"
    harness.claimer.claim(first, ALICE, worker_id="x", now=harness.clock.now_ms(),
                         lease_ms=LEASE_MS, keys=_keys(first))  # fmt: skip
    harness.claimer.claim(second, ALICE, worker_id="y", now=harness.clock.now_ms(),
                         lease_ms=LEASE_MS, keys=_keys(second))  # fmt: skip
    result = harness.worker(kinds=KINDS).handle(harness.wakeup(third))
    assert result.outcome == "slots_full"
    view = jobs(harness).view(ALICE, third)
    assert view["state"] == "queued" and view["attempts"] == 0
    assert view["waiting_for"] == {"concurrency": "tenant:study-group"}
    # ...and the operator's overview counts it as waiting for a limit (issue 34 item 5)
    assert harness.ops().summary()["queued_waiting"] == {"concurrency": 1}
    # another tenant is not held back
    carols = submit(harness, "per_tenant", {}, owner=CAROL)
    assert harness.worker(kinds=KINDS).handle(harness.wakeup(carols)).outcome == "succeeded"
    # once one finishes, the waiting job runs and says nothing more
    harness.complete(harness.store.get(first), {})  # type: ignore[arg-type]
    assert harness.worker(kinds=KINDS).handle(harness.wakeup(third)).outcome == "succeeded"
    assert "waiting_for" not in jobs(harness).view(ALICE, third)


def _keys(job_id: str) -> Any:
    return slot_keys(per_tenant.concurrency or (), "per_tenant", ALICE, {}, job_id)


def test_a_lost_answer_on_the_take_leaves_one_entry(harness: Harness) -> None:
    """The take is applied and its answer lost (the claim is a 503 to the worker, which sends
    the wake-up again); the next claim finds the job holding no entry of that token, frees it
    and takes one afresh: one entry while it runs, none after."""
    job_id = submit(harness, "per_tenant", {})
    harness.faults("dynamodb.UpdateItem:ReadTimeout=1@1")
    with pytest.raises(StoreUnavailableError):
        harness.claimer.claim(job_id, ALICE, worker_id="w", now=harness.clock.now_ms(),
                             lease_ms=LEASE_MS, keys=_keys(job_id))  # fmt: skip
    harness.faults("")
    assert harness.injected("UpdateItem:ReadTimeout") == 1
    assert sum(len(holders_of(_item(harness, name))) for name in _names()) == 1  # applied
    job = harness.claimer.claim(job_id, ALICE, worker_id="w", now=harness.clock.now_ms(),
                               lease_ms=LEASE_MS, keys=_keys(job_id))  # fmt: skip
    assert job.slots is not None and len(job.slots) == 1
    (name,) = job.slots
    assert [holders_of(_item(harness, n)) for n in _names() if holders_of(_item(harness, n))] == [
        {job_id: job.slots[name]}
    ]
    harness.complete(job, {})
    assert sum(len(holders_of(_item(harness, name))) for name in _names()) == 0


def test_a_lapsed_lease_claimed_again_adopts_its_entry(harness: Harness) -> None:
    """A worker died holding the key's entries; the job is claimed again once its lease
    lapsed: the new claim takes over the entry rather than counting the job twice."""
    a, b = submit(harness, "per_tenant", {}), submit(harness, "per_tenant", {})
    now = harness.clock.now_ms()
    first = harness.claimer.claim(a, ALICE, worker_id="gone", now=now, lease_ms=LEASE_MS,
                                 keys=_keys(a))  # fmt: skip
    harness.claimer.claim(b, ALICE, worker_id="busy", now=now, lease_ms=10 * LEASE_MS,
                         keys=_keys(b))  # fmt: skip
    harness.clock.advance(LEASE_MS + 1)
    again = harness.claimer.claim(a, ALICE, worker_id="next", now=harness.clock.now_ms(),
                                 lease_ms=LEASE_MS, keys=_keys(a))  # fmt: skip
    assert again.epoch == first.epoch + 1 and again.slots == first.slots
    entries = [holders_of(_item(harness, name)) for name in _names()]
    assert sum(len(e) for e in entries) == 2  # a and b, once each
    harness.complete(again, {})
    assert sum(len(holders_of(_item(harness, name))) for name in _names()) == 1


def _names() -> list[str]:
    key = _keys("any")[0]
    return [key.item_name(shard) for shard in range(key.limit.shards)]


def _item(harness: Harness, name: str) -> dict[str, Any]:
    answer = harness.dynamodb.get_item(TableName=harness.table, Key=slot_item_key(name))
    return dict(answer.get("Item") or {})


def test_a_kind_declaring_no_limits_takes_no_slot_even_with_the_per_user_limit_on(
    harness: Harness,
) -> None:
    ids = [submit(harness, "unlimited", {}, owner=BOB) for _ in range(4)]
    running = [
        harness.claimer.claim(
            j, BOB, worker_id=j, now=harness.clock.now_ms(), lease_ms=LEASE_MS, keys=[]
        )  # fmt: skip
        for j in ids
    ]
    assert len(running) == 4  # more than the harness's per-user limit of 2
    assert harness.store.running_slots(BOB) == set()


def test_the_default_per_user_limit_says_what_it_waits_for(harness: Harness) -> None:
    from tests.support.harness import steps

    ids = [harness.submit(payload=steps({})) for _ in range(3)]
    harness.claim(ids[0], "a")
    harness.claim(ids[1], "b")
    with pytest.raises(SlotsFullError):
        harness.claim(ids[2], "c")
    assert harness.deliver(ids[2]).outcome == "slots_full"
    view = harness.jobs().view(ALICE, ids[2])
    assert view["waiting_for"] == {"concurrency": "user:alice"}


def test_a_payload_key_needs_its_field_at_accept(harness: Harness) -> None:
    for payload in ({}, {"account": True}, {"account": ""}, {"account": "x" * 101}):
        with pytest.raises(ValidationError, match="payload.account"):
            submit(harness, "per_account", payload)
    assert submit(harness, "per_account", {"account": 42})


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ([Limit("tenant", 1), Limit("tenant", 2)], "each concurrency key once"),
        (["tenant"], "list of Limit"),
        ([Limit(k, 1) for k in ("user", "tenant", "kind", "payload.a", "payload.b")], "at most 4"),
    ],
)
def test_bad_declarations_stop_at_declaration(limits: list[Any], message: str) -> None:
    with pytest.raises(KindDefinitionError, match=message):
        Kind("bad", concurrency=limits)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("owner", 1), "must be 'user'"),
        (("payload.no-dash", 1), "must be 'user'"),
        (("tenant", 0), "max must be"),
        (("tenant", 1001), "max must be"),
        (("tenant", 2, 3), "cannot exceed"),
        (("tenant", 40, 17), "shards must be"),
    ],
)
def test_bad_limits_are_refused(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Limit(*args)


def test_shards_share_the_limit() -> None:
    limit = Limit("kind", max=5, shards=3)
    assert [limit.capacity(s) for s in range(3)] == [2, 2, 1]
    keys = [slot_keys([limit], "k", ALICE, {}, f"j_{i}")[0] for i in range(60)]
    starts = Counter(k.start for k in keys)
    assert set(starts) == {0, 1, 2}  # jobs start on every shard
    assert keys[0].shard_order()[1:] == [(keys[0].start + i) % 3 for i in (1, 2)]
