"""Workflows on the testbed (DESIGN §19): children with fan-in, signals and callbacks, durable
sleep — each rule as a user's test would check it, under the testbed's clock."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from leasehold import FatalError, Kind, SignalTimeoutError, StepContext
from leasehold.testing import LeaseholdTestbed

calls: Counter[str] = Counter()
tokens: dict[str, str] = {}

title = Kind("wf_title")


@title.step()
def fetch(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["fetch"] += 1
    if payload.get("fail"):
        raise FatalError("no such page", code="not_found")
    return {"title": payload["url"].upper()}


batch = Kind("wf_import")


@batch.step()
def fan_out(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["fan_out"] += 1
    ids = ctx.map(
        "wf_title",
        [{"url": u, "fail": u in payload.get("bad", [])} for u in payload["urls"]],
        max_concurrency=payload.get("max_concurrency"),
        tolerate_failures=payload.get("tolerate", 0),
    )
    return {"started": len(ids)}


@batch.step()
def gather(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["gather"] += 1
    done = [c.result["title"] for c in ctx.children() if c.state == "succeeded"]
    return {"titles": done}


review = Kind("wf_review")


@review.step()
def ask(ctx: StepContext, payload: dict[str, Any]) -> str:
    wait = ctx.wait_for_signal("reviewed", timeout_seconds=payload.get("timeout", 3600))
    tokens[ctx.job_id] = wait.token
    return "asked"


@review.step()
def decide(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        body = ctx.signal("reviewed")
    except SignalTimeoutError:
        if payload.get("catch"):
            return {"review": None}
        raise
    return {"review": body}


sleeper = Kind("wf_sleep")


@sleeper.step()
def first(ctx: StepContext, payload: dict[str, Any]) -> int:
    ctx.continue_after(payload["seconds"])
    return ctx.now_ms()


@sleeper.step()
def second(ctx: StepContext, payload: dict[str, Any]) -> int:
    return ctx.now_ms() - ctx.outputs["first"]


KINDS = pytest.mark.leasehold_kinds(title, batch, review, sleeper)


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    tokens.clear()


@KINDS
def test_a_parent_waits_for_its_children_and_reads_their_results(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    urls = [f"u{i}" for i in range(20)]
    job_id = tb.submit("wf_import", {"urls": urls})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert view["result"]["titles"] == [u.upper() for u in urls]
    assert calls["fetch"] == 20 and calls["fan_out"] == 1 and calls["gather"] == 1
    children = tb.children(job_id)
    assert [c["state"] for c in children] == ["succeeded"] * 20
    assert [c["result"]["title"] for c in children] == [u.upper() for u in urls]


@KINDS
def test_too_many_failed_children_fail_the_parent(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("wf_import", {"urls": ["a", "b", "c"], "bad": ["a", "b"], "tolerate": 1})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "failed" and view["stop_reason"] == "children_failed", view
    assert calls["gather"] == 0


@KINDS
def test_tolerated_failures_let_the_parent_go_on(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("wf_import", {"urls": ["a", "b", "c"], "bad": ["b"], "tolerate": 1})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"]["titles"] == ["A", "C"], view


@KINDS
def test_a_signal_resumes_the_job_with_its_body(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("wf_review", {})
    tb.run_until_idle()
    assert tb.state(job_id) == "queued"
    tb.signal(job_id, "reviewed", {"ok": True})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] == {"review": {"ok": True}}, view


@KINDS
def test_a_timed_out_wait_raises_in_the_next_step(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("wf_review", {"timeout": 60})
    tb.run_until_idle()
    tb.drain(max_seconds=3600)
    view = tb.view(job_id)
    assert view["state"] == "failed" and view["stop_reason"] == "signal_timeout", view


@KINDS
def test_durable_sleep_holds_no_lease_and_resumes_later(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("wf_sleep", {"seconds": 7200})
    tb.run_until_idle()
    assert tb.state(job_id) == "queued"
    tb.drain(max_seconds=3 * 3600)
    view = tb.view(job_id)
    assert view["state"] == "succeeded" and view["result"] >= 7200 * 1000, view
    _ = timedelta
