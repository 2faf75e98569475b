"""Workflows' races and crashes, as issue 31's "must show" lists them (DESIGN §19, WF1–WF11+),
on the moto testbed: a crashed parent step re-run starts no second set; a child's end counted
once however often it is delivered (and when the sweeper races its worker); a cancelled
parent's unfinished children end `cancelled`, across cascade pages; another tenant's signal
and children are not found; a used, unknown or expired callback token is refused; a timed-out
wait raises `SignalTimeoutError` in the next step and a late signal is 409."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import FatalError, JobOptions, Kind, SignalTimeoutError, StepContext
from leasehold.domain.errors import ConflictError, JobNotFoundError
from leasehold.domain.job import Owner
from leasehold.domain.waits import fanin_shards
from leasehold.service import workflows
from leasehold.store.waits import WaitStore
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.delivery import Message, QueueSource
from tests.support.race_kinds import child, hooks, runs

parent = Kind("race_parent")


@parent.step()
def fan_out(ctx: StepContext, payload: dict[str, Any]) -> int:
    runs[f"fan_out:{ctx.job_id}"] += 1
    hook = hooks.pop("fan_out", None)
    if hook is not None:
        hook(ctx)
    n, later = payload["n"], payload.get("later", 0)
    base = 1000 * (ctx.attempt - 1) if payload.get("by_attempt") else 0
    ids = ctx.map("race_child", [{"i": base + i} for i in range(n - later)])
    if later:  # the rest of the same set, not due for ten minutes
        ids += ctx.map(
            "race_child",
            [{"i": i} for i in range(n - later, n)],
            options=JobOptions(delay_seconds=600),
        )
    return len(ids)


@parent.step()
def gather(ctx: StepContext, payload: dict[str, Any]) -> int:
    runs[f"gather:{ctx.job_id}"] += 1
    return sum(1 for c in ctx.children() if c.state == "succeeded")


review = Kind("race_review")


@review.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> str:
    hooks["token"] = ctx.wait_for_signal("ok", timeout_seconds=payload.get("timeout", 3600)).token
    return "asked"


@review.step()
def decide(ctx: StepContext, payload: dict[str, Any]) -> Any:
    runs[f"decide:{ctx.job_id}"] += 1
    try:
        return {"body": ctx.signal("ok")}
    except SignalTimeoutError:
        return {"timed_out": True}


sleeper = Kind("race_sleep")


@sleeper.step()
def nap(ctx: StepContext, payload: dict[str, Any]) -> int:
    ctx.continue_after(30 * 86400)
    return ctx.now_ms()


@sleeper.step()
def wake_up(ctx: StepContext, payload: dict[str, Any]) -> int:
    return ctx.now_ms() - int(ctx.outputs["nap"])


KINDS = pytest.mark.leasehold_kinds(child, parent, review, sleeper)
OTHER = Owner(tenant="t-other", user_id="u-other")


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    runs.clear()
    hooks.clear()
    yield
    hooks.clear()


def _fanin(tb: LeaseholdTestbed, parent_id: str, n: int) -> tuple[int, int]:
    fan = WaitStore(tb._stores.table).fanin(parent_id, 0, fanin_shards(n))  # noqa: SLF001
    return fan.ended, fan.failed


def _check_one_set(tb: LeaseholdTestbed, parent_id: str, n: int) -> list[dict[str, Any]]:
    """The set has exactly n children, each run once, counted once; the parent resumed once."""
    view = tb.view(parent_id)
    assert view["state"] == "succeeded" and view["result"] == n, view
    kids = tb.children(parent_id)
    assert len(kids) == n and len({k["job_id"] for k in kids}) == n
    assert [k["state"] for k in kids] == ["succeeded"] * n
    assert [runs[f"work:{k['job_id']}"] for k in kids] == [1] * n
    assert [runs[f"finish:{k['job_id']}"] for k in kids] == [1] * n
    assert runs[f"gather:{parent_id}"] == 1
    assert _fanin(tb, parent_id, n) == (n, 0)
    return kids


# ---------------------------------------------------------------- a crashed parent step re-run


@KINDS
@pytest.mark.parametrize("point", ["children_chunk", "children_written"])
def test_a_crashed_spawning_step_rerun_starts_no_second_set(
    leasehold_testbed: LeaseholdTestbed, point: str
) -> None:
    tb = leasehold_testbed
    n = 60  # two transactions of children (49 each)
    job_id = tb.submit("race_parent", {"n": n})
    plan = tb.crash(at=point, job_id=job_id)  # type: ignore[arg-type]
    tb.drain(max_seconds=3600)
    assert plan.fired == [job_id]
    assert runs[f"fan_out:{job_id}"] == 2  # the step ran again after its lease ran out
    _check_one_set(tb, job_id, n)


@KINDS
def test_a_crash_between_the_last_end_and_the_wake_is_found_by_the_parents_check(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("race_parent", {"n": 3})
    plan = tb.crash(at="child_ended", job_id=job_id)
    tb.run_until_idle()
    assert plan.fired == [job_id]
    assert tb.view(job_id)["state"] == "queued", "woken though the wake was lost"
    assert _fanin(tb, job_id, 3) == (3, 0)
    tb.drain(max_seconds=3600)  # its own check (WF5), a minute after the park
    _check_one_set(tb, job_id, 3)


@KINDS
def test_a_stale_parent_starts_no_children(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    n = 3

    def outlive_the_lease(ctx: StepContext) -> None:
        tb.advance(120)  # the sweeper gives the parent to a new attempt while this one runs

    hooks["fan_out"] = outlive_the_lease
    job_id = tb.submit("race_parent", {"n": n, "by_attempt": True})
    tb.drain(max_seconds=3600)
    assert runs[f"fan_out:{job_id}"] == 2
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] == n, view
    kids = tb.children(job_id)
    # every child is the second attempt's (i + 1000): the stale first one wrote none
    assert [k["result"] for k in kids] == [1000 + i for i in range(n)], kids
    assert _fanin(tb, job_id, n) == (n, 0)


# ---------------------------------------------------------------- a child's end counted once


@KINDS
def test_a_childs_end_delivered_again_is_counted_once(
    leasehold_testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = leasehold_testbed
    seen: list[tuple[str, str]] = []
    real = QueueSource.receive

    def receive(self: QueueSource) -> list[Message]:
        got = real(self)
        seen.extend((self.queue_url, m.body) for m in got)
        return got

    monkeypatch.setattr(QueueSource, "receive", receive)
    n = 4
    job_id = tb.submit("race_parent", {"n": n})
    tb.run_until_idle()
    kids = _check_one_set(tb, job_id, n)
    ids = {k["job_id"] for k in kids}
    redeliver = [(url, body) for url, body in seen if any(i in body for i in ids)]
    assert len(redeliver) >= n
    sqs = tb._sqs  # noqa: SLF001
    for _ in range(2):  # two redeliveries of every child's messages
        for url, body in redeliver:
            sqs.send_message(QueueUrl=url, MessageBody=body)
        tb.run_until_idle()
    _check_one_set(tb, job_id, n)


@KINDS
def test_the_sweeper_racing_a_worker_on_an_expired_lease_counts_the_end_once(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    n = 3

    def outlive_the_lease(ctx: StepContext) -> None:
        tb.advance(120)  # the lease (60 s) runs out under the step: the sweeper rescues it

    hooks["work:1"] = outlive_the_lease
    job_id = tb.submit("race_parent", {"n": n})
    tb.drain(max_seconds=3600)
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] == n, view
    kids = tb.children(job_id)
    assert [k["state"] for k in kids] == ["succeeded"] * n
    assert runs[f"work:{kids[1]['job_id']}"] == 2  # the stale run, and the rescued one
    assert runs[f"gather:{job_id}"] == 1
    assert _fanin(tb, job_id, n) == (n, 0)


# ---------------------------------------------------------------- a cancelled parent


@KINDS
def test_a_cancelled_parents_unfinished_children_end_cancelled(
    leasehold_testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = leasehold_testbed
    monkeypatch.setattr(workflows, "CASCADE_PAGE", 4)  # 30 children: 8 pages,
    monkeypatch.setattr(workflows, "CASCADE_PAGES_PER_MESSAGE", 2)  # 4 cascade messages
    n = 30
    job_id = tb.submit("race_parent", {"n": n, "later": n - 3})
    # The first child to run dies after its first step: `running`, holding its lease; the two
    # others due now went down with its invocation (their messages come back later), the other
    # 27 are not due for ten minutes: all queued when the parent is cancelled.
    plan = tb.crash(after_step="work")
    tb.run_until_idle()
    assert len(plan.fired) == 1
    kids = tb.children(job_id)
    assert Counter(k["state"] for k in kids) == {"running": 1, "queued": n - 1}
    tb.cancel(job_id)
    report = tb.run_until_idle()
    assert [d.outcome for d in report.deliveries].count("cascade") == 4
    tb.drain(max_seconds=3600)  # the running one: rescued, then stopped before `finish`
    assert tb.view(job_id)["state"] == "cancelled"
    kids = tb.children(job_id)
    assert [k["state"] for k in kids] == ["cancelled"] * n
    assert {
        k["job_id"]: runs[f"work:{k['job_id']}"] for k in kids if runs[f"work:{k['job_id']}"]
    } == {plan.fired[0]: 1}
    assert sum(runs[f"finish:{k['job_id']}"] for k in kids) == 0
    assert runs[f"gather:{job_id}"] == 0
    assert _fanin(tb, job_id, n) == (n, n)


# ---------------------------------------------------------------- signals and callbacks


@KINDS
def test_another_tenants_signal_and_children_are_not_found(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    review_id = tb.submit("race_review", {})
    parent_id = tb.submit("race_parent", {"n": 2})
    tb.run_until_idle()
    with pytest.raises(JobNotFoundError):
        tb.signal(review_id, "ok", {"a": 1}, owner=OTHER)
    with pytest.raises(JobNotFoundError):
        tb.children(parent_id, owner=OTHER)
    assert tb.view(review_id)["state"] == "queued"  # not signalled
    assert len(tb.children(parent_id)) == 2  # its owner sees them
    tb.signal(review_id, "ok", {"a": 1})
    tb.run_until_idle()
    assert tb.view(review_id)["result"] == {"body": {"a": 1}}


@KINDS
def test_a_used_unknown_or_expired_callback_token_is_refused(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("race_review", {"timeout": 600})
    tb.run_until_idle()
    token = hooks["token"]
    with pytest.raises(JobNotFoundError):
        tb.callback("x" * 32, {"a": 1})  # unknown
    assert tb.callback(token, {"a": 1}) == {"job_id": job_id, "accepted": True}
    with pytest.raises(JobNotFoundError):
        tb.callback(token, {"a": 2})  # used
    tb.run_until_idle()
    assert tb.view(job_id)["result"] == {"body": {"a": 1}}
    late = tb.submit("race_review", {"timeout": 600})
    tb.run_until_idle()
    tb.advance(601, sweep=False)
    with pytest.raises(JobNotFoundError):
        tb.callback(hooks["token"], {"a": 3})  # expired with its wait
    tb.drain(max_seconds=3600)
    assert tb.view(late)["result"] == {"timed_out": True}


@KINDS
def test_a_timed_out_wait_raises_in_the_next_step_and_a_late_signal_is_409(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("race_review", {"timeout": 60})
    tb.run_until_idle()
    tb.drain(max_seconds=3600)
    assert tb.view(job_id)["result"] == {"timed_out": True}
    with pytest.raises(ConflictError) as late:
        tb.signal(job_id, "ok", {"a": 1})
    assert late.value.code in {"signal_exists", "not_waiting"}


@KINDS
def test_expire_wait_times_a_signal_wait_out_now(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("race_review", {"timeout": 3 * 24 * 3600})
    tb.run_until_idle()
    token = hooks["token"]
    now = tb.clock.now_ms()
    tb.expire_wait(job_id)
    with pytest.raises(ConflictError) as late:
        tb.signal(job_id, "ok", {"a": 1})  # before the next step ran: late all the same
    assert late.value.code == "signal_exists"
    tb.run_until_idle()
    assert tb.clock.now_ms() == now  # the clock did not move
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] == {"timed_out": True}, view
    assert runs[f"decide:{job_id}"] == 1
    with pytest.raises((ConflictError, JobNotFoundError)):
        tb.callback(token, {"a": 2})


# ---------------------------------------------------------------- the docs' user test (sdk.md)

docs_title = Kind("title")


@docs_title.step()
def title_of(ctx: StepContext, payload: dict[str, Any]) -> str:
    runs[f"title:{ctx.job_id}"] += 1
    return str(payload["url"]).upper()


import_list = Kind("import_list")


@import_list.step()
def list_fan_out(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.map("title", [{"url": u} for u in payload["urls"]], max_concurrency=10, tolerate_failures=2)
    return {"started": len(payload["urls"])}


@import_list.step()
def list_gather(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    done = [c for c in ctx.children() if c.state == "succeeded"]
    ctx.wait_for_signal("reviewed", timeout_seconds=3 * 86400)
    return {"titles": len(done)}


@import_list.step()
def list_publish(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        review = ctx.signal("reviewed")
    except SignalTimeoutError:
        raise FatalError("nobody reviewed it") from None
    ctx.continue_after(3600)
    return {"review": review}


@pytest.mark.leasehold_kinds(docs_title, import_list)
def test_the_docs_crashed_fan_out_starts_no_second_set(leasehold_testbed: LeaseholdTestbed) -> None:
    """docs/sdk.md, "Testing workflows", as a user would write it."""
    tb = leasehold_testbed
    urls = [f"https://{i}.example" for i in range(60)]  # two transactions of children
    job_id = tb.submit("import_list", {"urls": urls})
    plan = tb.crash(at="children_chunk", job_id=job_id)  # dies after the first 49
    tb.run_until_idle()
    assert plan.fired == [job_id]
    tb.advance(61)  # its lease runs out: the step runs again
    tb.run_until_idle()
    kids = tb.children(job_id)
    assert len(kids) == 60  # the same 60, not 109
    assert [runs[f"title:{k['job_id']}"] for k in kids] == [1] * 60
    assert tb.view(job_id)["waiting_for"]["signal"] == "reviewed"
    tb.expire_wait(job_id)  # nobody reviews it
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "failed" and view["error"]["message"] == "nobody reviewed it", view


@KINDS
def test_expire_wait_ends_a_sleep_now_and_refuses_what_is_not_waiting(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("race_sleep", {})
    other = tb.submit("race_sleep", {})
    parent_id = tb.submit("race_parent", {"n": 1, "later": 1})  # its child not due for 10 min
    with pytest.raises(ValueError, match="not waiting"):
        tb.expire_wait(job_id)  # queued, not run yet: no wait
    tb.run_until_idle()
    assert tb.view(job_id)["waiting_for"] is not None
    with pytest.raises(ValueError, match="waits for children"):
        tb.expire_wait(parent_id)
    tb.expire_wait(job_id)
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] == 0, view  # the clock never moved
    assert tb.state(other) == "queued"  # the other sleeper sleeps on
    with pytest.raises(ValueError, match="not waiting"):
        tb.expire_wait(job_id)


@KINDS
def test_a_named_crash_point_is_checked(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    with pytest.raises(ValueError, match="at= is one of children_chunk"):
        tb.crash(at="nowhere")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of"):
        tb.crash(at="child_ended", after_step="fan_out")
    plan = tb.crash(at="children_written", job_id="j_elsewhere")
    job_id = tb.submit("race_parent", {"n": 2})
    tb.run_until_idle()
    assert plan.fired == [] and plan.armed  # another parent's point: not this one
    assert tb.view(job_id)["state"] == "succeeded"
