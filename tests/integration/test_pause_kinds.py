"""Pausing a kind (DESIGN §21, issue 33 item 4, decisions PA1–PA5), on the testbed's clock: a
paused kind's jobs stay `queued`, parked with `waiting_for {"paused"}` and no busy loop; another
kind keeps running; resume wakes every one of them, nothing lost; a running job finishes its
step and its next one waits for the resume."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Kind, StepContext
from leasehold.domain.errors import JobNotFoundError
from leasehold.service import pausing
from leasehold.service.pausing import PAUSE_CACHE_MS
from leasehold.testing import LeaseholdTestbed
from tests.support.index_lag import lagging_index

pytestmark = pytest.mark.integration

ran: list[tuple[str, str]] = []  # (kind, job id) at each step's start

mail = Kind("mail", schema={"type": "object"})
sms = Kind("sms", schema={"type": "object"})
two = Kind("two_steps", schema={"type": "object"})


@mail.step()
def send_mail(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ran.append(("mail", ctx.job_id))
    return {}


@sms.step()
def send_sms(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ran.append(("sms", ctx.job_id))
    return {}


@two.step()
def first(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ran.append(("first", ctx.job_id))
    if payload.get("pause"):  # an operator pauses the kind while this step runs
        Engine.testbed.pause_kind("two_steps", "paused mid-run")
        Engine.testbed.advance(PAUSE_CACHE_MS / 1000, sweep=False)
    return {}


@two.step()
def second(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ran.append(("second", ctx.job_id))
    return {}


class Engine:
    testbed: LeaseholdTestbed


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    """Indexes lagging 500 ms (a GSI is eventually consistent): resume must not miss a job
    parked just before it, nor the sweeper let a resume go while one is still parked."""
    ran.clear()
    with LeaseholdTestbed([mail, sms, two]) as testbed, lagging_index(testbed.clock):
        Engine.testbed = testbed
        yield testbed


def warm(tb: LeaseholdTestbed) -> None:
    """Run one job of another kind, so the worker has read the paused kinds (none) and cached
    them; then let the cache run out, as a warm worker's would within PAUSE_CACHE_MS."""
    tb.submit("sms", {})
    tb.run_until_idle()
    tb.advance(PAUSE_CACHE_MS / 1000)


def test_a_paused_kinds_job_does_not_start_until_resume(tb: LeaseholdTestbed) -> None:
    warm(tb)
    paused = tb.pause_kind("mail", "the mail provider is down")
    assert paused["state"] == "paused" and paused["changed"] is True
    assert paused["paused"]["by"] == "operator" and paused["paused"]["note"].startswith("the mail")
    job_id = tb.submit("mail", {})
    other = tb.submit("sms", {})
    report = tb.run_until_idle()
    # parked at its claim: queued, saying why, its wake-up let go (no message left to spin)
    assert ("mail", job_id) not in ran and ("sms", other) in ran
    assert [d.outcome for d in report.deliveries if d.job_id == job_id] == ["kind_paused"]
    view = tb.view(job_id)
    assert view["state"] == "queued"
    assert view["waiting_for"] == {"paused": {"since": paused["paused"]["since"], "by": "operator"}}
    # an hour on: no wake-up, no sweep and no claim brings it back while paused
    for _ in range(6):
        tb.advance(600)
        assert tb.run_until_idle().deliveries == ()
    assert ("mail", job_id) not in ran and tb.state(job_id) == "queued"
    resumed = tb.resume_kind("mail", "the provider is back")
    assert (resumed["changed"], resumed["woken"], resumed["more"]) == (True, 1, False)
    tb.run_until_idle()
    assert ("mail", job_id) in ran and tb.state(job_id) == "succeeded"
    events = [(e["event"], e.get("by"), e.get("note")) for e in tb.history(job_id)]
    assert ("kind_paused", "operator", "the mail provider is down") in events
    assert ("kind_resumed", "operator", None) in events


def test_every_job_queued_while_paused_runs_after_resume(
    tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pausing, "WAKE_PER_CALL", 20)  # 50 jobs: the sweeper wakes 30
    tb.pause_kind("mail", "maintenance")
    count = 50
    jobs = [tb.submit("mail", {"n": n}) for n in range(count)]
    tb.run_until_idle()
    assert not [j for kind, j in ran if kind == "mail"]
    assert all(tb.view(j)["waiting_for"]["paused"]["by"] == "operator" for j in jobs)
    # pausing again changes nothing (PA1); the kind list shows it paused
    again = tb.pause_kind("mail", "twice")
    assert again["changed"] is False and again["paused"]["note"] == "maintenance"
    listed = {k["kind"]: k["state"] for k in tb._ops.kinds()["kinds"]}
    assert listed == {"mail": "paused", "sms": "running", "two_steps": "running"}
    tb.advance(1, sweep=False)  # the index has caught up with the last park
    resumed = tb.resume_kind("mail", "done")
    assert resumed["woken"] == 20 and resumed["more"] is True
    tb.run_until_idle()
    assert len({j for kind, j in ran if kind == "mail"}) == 20
    tb.advance(60)  # the sweeper wakes the rest
    tb.run_until_idle()
    assert sorted(j for kind, j in ran if kind == "mail") == sorted(jobs)  # each once, none lost
    assert all(tb.state(j) == "succeeded" for j in jobs)
    tb.advance(60)  # nothing left parked after the index's lag: the kind's entry goes
    assert {k["kind"]: k["state"] for k in tb._ops.kinds()["kinds"]}["mail"] == "running"


def test_a_running_job_finishes_its_step_and_its_next_waits_for_resume(
    tb: LeaseholdTestbed,
) -> None:
    job_id = tb.submit("two_steps", {"pause": True})
    tb.run_until_idle()
    assert ("first", job_id) in ran and ("second", job_id) not in ran
    view = tb.view(job_id)
    assert view["state"] == "queued" and "paused" in view["waiting_for"]
    assert view["attempts"] == 0  # handed back: the attempt was not spent
    tb.advance(1, sweep=False)
    tb.resume_kind("two_steps", "go on")
    tb.run_until_idle()
    assert [step for step, j in ran if j == job_id] == ["first", "second"]
    assert tb.state(job_id) == "succeeded"


def test_a_deadline_does_not_run_out_while_parked(tb: LeaseholdTestbed) -> None:
    tb.pause_kind("mail", "long pause")
    job_id = tb.submit("mail", {})
    tb.run_until_idle()
    deadline = tb.view(job_id)["deadline_at"]
    tb.advance(3 * 24 * 3600)  # far past the job's own deadline
    tb.run_until_idle()
    assert tb.state(job_id) == "queued"
    tb.resume_kind("mail", "back")
    tb.run_until_idle()
    assert tb.state(job_id) == "succeeded" and tb.view(job_id)["deadline_at"] > deadline


def test_a_resume_the_index_has_not_caught_up_with_loses_nothing(tb: LeaseholdTestbed) -> None:
    tb.pause_kind("mail", "brief")
    job_id = tb.submit("mail", {})
    tb.run_until_idle()
    resumed = tb.resume_kind("mail", "at once")  # the lagging index does not list it yet
    assert resumed["woken"] == 0
    tb.advance(1)  # the sweeper's next run finds it
    tb.run_until_idle()
    assert tb.state(job_id) == "succeeded"


def test_a_claim_reads_the_paused_kinds_once_per_cache_period(tb: LeaseholdTestbed) -> None:
    jobs = [tb.submit("sms", {}) for _ in range(20)]
    tb.run_until_idle()
    assert all(tb.state(j) == "succeeded" for j in jobs)
    cache = tb._worker._claiming.parking.cache
    assert cache.reads == 1  # 20 claims at one time: one GetItem in all
    tb.advance(PAUSE_CACHE_MS / 1000)
    tb.submit("sms", {})
    tb.run_until_idle()
    assert cache.reads == 2


def test_a_worker_that_still_thinks_a_resumed_kind_paused_parks_nothing(
    tb: LeaseholdTestbed,
) -> None:
    tb.pause_kind("mail", "brief")
    parked = tb.submit("mail", {})
    tb.run_until_idle()  # the worker has read the kind paused, and cached it
    tb.advance(1, sweep=False)
    tb.resume_kind("mail", "over")
    fresh = tb.submit("mail", {})  # within the worker's 5 s: its cache still says paused
    tb.run_until_idle()
    # the park's transaction checks the kind is still paused: both run, neither is parked
    assert tb.state(parked) == "succeeded" and tb.state(fresh) == "succeeded"


def test_a_kind_dropped_while_paused_can_still_be_resumed(tb: LeaseholdTestbed) -> None:
    tb.pause_kind("mail", "before the deploy that drops it")
    tb._ops._pauses._kinds = ["sms", "two_steps"]  # a deploy without `mail`
    listed = {k["kind"]: k["state"] for k in tb._ops.kinds()["kinds"]}
    assert listed["mail"] == "paused"  # still listed, so an operator sees it
    assert tb.resume_kind("mail", "let its jobs go")["changed"] is True
    with pytest.raises(JobNotFoundError):
        tb.pause_kind("mail", "a kind no longer registered")
