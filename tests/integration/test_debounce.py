"""Debounce (DESIGN §21, decisions DB1–DB6) on the testbed's controlled clock: submissions with
one key within the quiet window collapse into one pending job that runs once, with the
declared payload; the races between a submission and the job's claim give one run, never
two, never none."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Debounce, JobOptions, Kind, StepContext, Submission, ValidationError
from leasehold.domain.clock import iso
from leasehold.domain.errors import ClaimRejectedError, StoreUnavailableError
from leasehold.store import debounce as debounce_store
from leasehold.store.leases import LeaseStore
from leasehold.store.table import Table
from leasehold.testing import LeaseholdTestbed

pytestmark = pytest.mark.integration

ran: list[tuple[str, Any, int]] = []  # (job id, payload's n, clock at the step's start)


def _kind(name: str, debounce: Debounce | None, most: int = 16 * 1024) -> Kind:
    kind = Kind(name, schema={"type": "object"}, debounce=debounce, max_payload_bytes=most)

    @kind.step()
    def go(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        ran.append((ctx.job_id, payload.get("n"), ctx.now_ms()))
        return {"n": payload.get("n")}

    return kind


last = _kind("last", Debounce(by=["payload.account"], seconds=10, keep="last"))
first = _kind("first", Debounce(by=["payload.account"], seconds=10, keep="first"))
capped = _kind("capped", Debounce(seconds=10, max_wait_seconds=30))
plain = _kind("plain", None)
first_large = _kind(
    "first_large", Debounce(by=["payload.account"], seconds=10, keep="first"), 64 * 1024
)
last_large = _kind(
    "last_large", Debounce(by=["payload.account"], seconds=10, keep="last"), 64 * 1024
)


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    ran.clear()
    with LeaseholdTestbed([last, first, capped, plain, first_large, last_large]) as testbed:
        yield testbed


def tick(tb: LeaseholdTestbed, seconds: int) -> None:
    """Move the clock, sweeping and running what is due, as the schedule and queues would."""
    for _ in range(seconds):
        tb.advance(1)
        tb.run_until_idle()


def test_submissions_within_the_window_run_once_with_the_last_payload(
    tb: LeaseholdTestbed,
) -> None:
    ids = []
    for n in range(5):  # every 5 s: never 10 s quiet
        ids.append(tb.submit("last", {"account": "a", "n": n}))
        tick(tb, 5)
    assert len(set(ids)) == 1, ids
    assert ran == []  # not yet quiet for 10 s since the last submission
    assert tb.view(ids[0])["next_attempt_at"] == iso(tb.clock.now_ms() + 5_000)
    tick(tb, 6)
    assert [(job, n) for job, n, _ in ran] == [(ids[0], 4)]
    assert tb.state(ids[0]) == "succeeded"
    tb.advance(60)
    tb.run_until_idle()
    assert len(ran) == 1  # and never again


def test_keep_first_runs_the_first_payload(tb: LeaseholdTestbed) -> None:
    ids = [tb.submit("first", {"account": "a", "n": n}) for n in range(3)]
    assert len(set(ids)) == 1
    tick(tb, 11)
    assert [(job, n) for job, n, _ in ran] == [(ids[0], 0)]


def test_a_quiet_window_then_another_submission_runs_twice(tb: LeaseholdTestbed) -> None:
    one = tb.submit("last", {"account": "a", "n": 1})
    tick(tb, 11)
    two = tb.submit("last", {"account": "a", "n": 2})
    assert two != one
    tick(tb, 11)
    assert [(job, n) for job, n, _ in ran] == [(one, 1), (two, 2)]


def test_other_keys_and_other_owners_do_not_collapse(tb: LeaseholdTestbed) -> None:
    from leasehold import Owner

    a = tb.submit("last", {"account": "a", "n": 1})
    b = tb.submit("last", {"account": "b", "n": 2})
    c = tb.submit("last", {"account": "a", "n": 3}, owner=Owner("t-1", "someone-else"))
    d = tb.submit("plain", {"account": "a", "n": 4})
    e = tb.submit("plain", {"account": "a", "n": 5})
    assert len({a, b, c, d, e}) == 5
    tick(tb, 11)
    assert sorted(n for _, n, _ in ran) == [1, 2, 3, 4, 5]


def test_a_steady_stream_runs_by_max_wait(tb: LeaseholdTestbed) -> None:
    start = tb.clock.now_ms()
    first_id = tb.submit("capped", {"n": 0})
    for n in range(1, 8):  # every 5 s for 35 s: the window is never quiet
        tick(tb, 5)
        tb.submit("capped", {"n": n})
    tick(tb, 11)
    # max_wait 30 s: the first job was due at 30 s however often submissions came; the one at
    # 30 s came before its claim (it runs it, due at once), the one at 35 s after: that one
    # opened the next window, which ran when quiet.
    assert ran[0][0] == first_id
    assert 30_000 <= ran[0][2] - start <= 31_000
    assert [n for _, n, _ in ran] == [6, 7]


def test_a_request_debounces_a_kind_that_declares_none(tb: LeaseholdTestbed) -> None:
    options = JobOptions(debounce=Debounce(by=["payload.account"], seconds=3, keep="first"))
    ids = {tb.submit("plain", {"account": "a", "n": n}, options=options) for n in range(3)}
    assert len(ids) == 1
    tick(tb, 4)
    assert [n for _, n, _ in ran] == [0]


def test_bad_debounce_input_is_refused(tb: LeaseholdTestbed) -> None:
    with pytest.raises(ValidationError, match=r"payload\.account' is required"):
        tb.submit("last", {"n": 1})  # the key's field is missing
    with pytest.raises(ValidationError, match="Idempotency-Key"):
        tb.submit("last", {"account": "a"}, idempotency_key="k1")
    with pytest.raises(ValidationError, match="not both"):
        tb.submit("last", {"account": "a"}, delay_seconds=5)
    with pytest.raises(ValidationError, match=r"debounce\.seconds"):
        JobOptions(debounce=Debounce(seconds=0))
    assert tb.submit_many([Submission("last", {"account": "a"})])[0].code == "debounce_in_batch"


def _api_table(tb: LeaseholdTestbed) -> Table:
    return tb._stores.table  # the table the API's accept path writes through


def _claim(tb: LeaseholdTestbed, job_id: str) -> None:
    """A worker's claim of the job, as the worker makes it (the one conditional write)."""
    job = tb._stores.jobs.get(job_id)
    assert job is not None
    LeaseStore(_api_table(tb)).claim(
        job_id, job.owner, worker_id="racer", now=tb.clock.now_ms(), lease_ms=60_000
    )


def test_a_submission_that_loses_to_the_claim_opens_the_next_window(
    tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The submission read the pending job still queued; the claim commits before its collapse
    does. The collapse must fail and the submission make the next job: never none (its payload
    runs) and never two (the claimed job runs once)."""
    one = tb.submit("last", {"account": "a", "n": 1})
    tb.advance(10)  # the window is quiet: the job is due
    real_commit = debounce_store.commit_debounced
    raced: list[str] = []

    def claim_first(table: Table, plan: debounce_store.DebouncePlan) -> None:
        if plan.debounced and not raced:
            raced.append(plan.job_id)
            _claim(tb, plan.job_id)  # the worker's claim wins the race
        real_commit(table, plan)

    monkeypatch.setattr(debounce_store, "commit_debounced", claim_first)
    two = tb.submit("last", {"account": "a", "n": 2})
    assert raced == [one]
    assert two != one
    assert tb.state(one) == "running"
    assert tb.view(two)["state"] == "queued"
    monkeypatch.setattr(debounce_store, "commit_debounced", real_commit)
    tb.advance(61)  # the racer's lease runs out: the sweeper gives the job to a worker
    tick(tb, 15)
    assert sorted((job, n) for job, n, _ in ran) == sorted([(one, 1), (two, 2)])


def test_a_collapse_that_wins_against_the_claim_defers_it(tb: LeaseholdTestbed) -> None:
    """The collapse commits first: the claim (its wake-up delivered when the job was due) is
    refused as not due, and the job runs once, at the new window's end, with the new payload."""
    one = tb.submit("last", {"account": "a", "n": 1})
    tb.advance(10)
    assert tb.submit("last", {"account": "a", "n": 2}) == one  # just before the claim
    tb.run_until_idle()  # the wake-up of the first window is delivered: not due
    assert ran == [] and tb.state(one) == "queued"
    tick(tb, 11)
    assert [(job, n) for job, n, _ in ran] == [(one, 2)]


def test_racing_submissions_from_threads_make_one_job(tb: LeaseholdTestbed) -> None:
    """Eight threads submit at once with one key (the window's item is absent: each tries to
    open it); every answer names one job, which runs once with one of their payloads."""
    barrier = threading.Barrier(8)
    answers: list[str] = []
    errors: list[BaseException] = []

    def submit(n: int) -> None:
        try:
            barrier.wait()
            answers.append(tb.submit("last", {"account": "t", "n": n}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(answers) == 8 and len(set(answers)) == 1
    tick(tb, 11)
    assert len(ran) == 1 and ran[0][0] == answers[0] and ran[0][1] in range(8)


def test_racing_submissions_and_claims_from_threads_never_run_twice_or_none(
    tb: LeaseholdTestbed,
) -> None:
    """Three threads submit with one key while a fourth claims, over and over, whatever job
    the answers name, as a worker would once it is due. Every job an answer names runs once
    (never two), every submission's job runs (never none), and a job runs with the payload it
    had when it was claimed: no submission changed a job that had started."""
    answers: dict[int, str] = {}
    errors: list[BaseException] = []
    done = threading.Event()
    at_claim: dict[str, Any] = {}  # job id → its payload's n when the racer claimed it
    unavailable: list[int] = []

    def submitter(base: int) -> None:
        try:
            for n in range(base, base + 10):
                for _ in range(20):
                    try:
                        answers[n] = tb.submit("last", {"account": "r", "n": n})
                        break
                    except StoreUnavailableError:
                        # A 503 accepted nothing (this racer claims each job the instant it
                        # exists, which no due time allows): retry, as a client would.
                        unavailable.append(n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def claimer() -> None:
        while not done.is_set():
            for job_id in set(answers.values()) - set(at_claim):
                job = tb._stores.jobs.get(job_id)
                if job is None or job.state.value != "queued":
                    continue
                try:
                    claimed = LeaseStore(_api_table(tb)).claim(
                        job_id,
                        job.owner,
                        worker_id="racer",
                        now=(job.next_attempt_at or 0) + 1,  # due, as far as it knows
                        lease_ms=1,
                    )
                except ClaimRejectedError:  # a collapse pushed it past that: try again
                    continue
                at_claim[job_id] = claimed.payload["n"]

    workers = [threading.Thread(target=submitter, args=(base,)) for base in (0, 100, 200)]
    racer = threading.Thread(target=claimer)
    racer.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    racer.join()
    assert errors == []
    assert len(answers) == 30, unavailable
    jobs = set(answers.values())
    assert len(at_claim) >= 2, at_claim  # the racer did start jobs between submissions
    tb.advance(120)  # the racer's leases ran out: the sweeper gives its jobs to the worker
    tick(tb, 3)
    print(f"{len(jobs)} jobs, {len(at_claim)} claimed by the racer, {len(unavailable)} 503s")
    runs = [job for job, _, _ in ran]
    assert sorted(runs) == sorted(jobs)  # each job once: never two, never none
    ran_with = {job: n for job, n, _ in ran}
    for job_id in jobs:
        named = {n for n, j in answers.items() if j == job_id}
        assert ran_with[job_id] in named  # its payload is one of its own submissions'
        if job_id in at_claim:
            assert ran_with[job_id] == at_claim[job_id]  # unchanged after it started


def test_injected_transaction_conflicts_still_give_one_job_run_once(
    tb: LeaseholdTestbed,
) -> None:
    """With the store cancelling half the transactions and refusing half the single writes
    (TransactionConflict, injected into the API's client), each submission is retried by the
    table's bounded retries or answered 503 with nothing accepted; what was accepted is one job
    that runs once with the last accepted payload."""
    tb.faults(
        "dynamodb.TransactWriteItems:TransactionConflict=0.5,"
        "dynamodb.UpdateItem:TransactionConflictException=0.5"
    )
    accepted: list[tuple[int, str]] = []
    for n in range(6):
        try:
            accepted.append((n, tb.submit("last", {"account": "f", "n": n})))
        except StoreUnavailableError:
            continue  # nothing accepted: a client retries or gives up
    tb.faults("")
    assert sum(tb.injected().values()) > 0
    assert accepted and len({job for _, job in accepted}) == 1
    tick(tb, 11)
    assert [(job, n) for job, n, _ in ran] == [(accepted[-1][1], accepted[-1][0])]


def test_job_writes_of_a_debounced_kind_open_then_collapse_the_window(
    tb: LeaseholdTestbed,
) -> None:
    """An application's own transaction: the first writes open the window (the job and the
    window's item), the next are one Update of the pending job; the job runs once, with the last
    payload. A table given by name cannot be read: 400."""
    from leasehold.apps import job_writes

    table = _api_table(tb)
    opened = job_writes(table, last, {"account": "w", "n": 1}, tb.owner, now_ms=tb.clock.now_ms())
    assert not opened.debounced and len(opened.writes) >= 2
    table.transact(opened.writes)
    tb.advance(5)
    collapsed = job_writes(
        table, last, {"account": "w", "n": 2}, tb.owner, now_ms=tb.clock.now_ms()
    )
    assert collapsed.debounced and collapsed.job_id == opened.job_id
    assert [next(iter(w)) for w in collapsed.writes] == ["Update"]
    table.transact(collapsed.writes)
    tick(tb, 11)
    assert [(job, n) for job, n, _ in ran] == [(opened.job_id, 2)]
    with pytest.raises(ValidationError, match="pass the Table"):
        job_writes("t", last, {"account": "w"}, tb.owner)


def test_a_payload_in_the_data_bucket_is_keyed_by_its_own_field(tb: LeaseholdTestbed) -> None:
    # LD15: 50 KiB payloads go to the data bucket at accept; the window's key is read from the
    # whole payload, not from the reference the item keeps (which has no `account`: a 400)
    pad = "".join(chr(0x61 + i % 26) for i in range(50 * 1024))
    a1 = tb.submit("first_large", {"account": "a", "n": 1, "pad": pad})
    b1 = tb.submit("first_large", {"account": "b", "n": 2, "pad": pad})
    a2 = tb.submit("first_large", {"account": "a", "n": 3, "pad": pad})
    assert a1 == a2 and b1 != a1
    tick(tb, 11)
    assert sorted((job, n) for job, n, _ in ran) == sorted([(a1, 1), (b1, 2)])


def test_keep_last_with_a_payload_in_the_data_bucket_runs_the_last_one(
    tb: LeaseholdTestbed,
) -> None:
    # the last payload is a blob under its own submission's id: the pending job it collapses
    # into reads only blobs under its own prefix (LD4), so it is copied there
    pad = "".join(chr(0x61 + i % 26) for i in range(50 * 1024))
    ids = [tb.submit("last_large", {"account": "a", "n": n, "pad": pad}) for n in range(3)]
    assert len(set(ids)) == 1
    tick(tb, 11)
    assert tb.state(ids[0]) == "succeeded", tb.view(ids[0])
    assert [(job, n) for job, n, _ in ran] == [(ids[0], 2)]
