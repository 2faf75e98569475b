"""leasehold.testing used as a user would: kinds declared here with the public `Kind` API, run
by the `leasehold_testbed` fixture (and once by the class alone), every rule checked through
what the user can see — the job view, the history, the ledger, how often a step ran."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import (
    Effect,
    FatalError,
    Kind,
    KindLoadError,
    RetryableError,
    StepContext,
    ValidationError,
)
from leasehold.testing import LeaseholdTestbed, NotIdleError, WorkerCrashed

pytestmark = pytest.mark.integration
# The fixtures come from `pytest_plugins = ["leasehold.testing.pytest_plugin"]` in
# tests/conftest.py, where a user's conftest.py would name them too.

calls: Counter[str] = Counter()
seen: list[tuple[bool, str]] = []  # (ctx.operation.recovering, ctx.operation.key) per try


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    calls.clear()
    seen.clear()
    yield


# ---------------------------------------------------------------------------------- the kinds

shop = Kind(
    "shop",
    schema={
        "type": "object",
        "required": ["item", "qty"],
        "properties": {
            "item": {"type": "string"},
            "qty": {"type": "integer", "minimum": 1},
            "mode": {"enum": ["ok", "flaky", "fatal"]},
        },
        "additionalProperties": False,
    },
)


@shop.step()
def price(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["price"] += 1
    if payload.get("mode") == "flaky" and ctx.attempt == 1:
        raise RetryableError("the price service timed out", code="price_timeout")
    if payload.get("mode") == "fatal":
        raise FatalError(f"no such item: {payload['item']}", code="unknown_item")
    return {"unit": 250, "attempt": ctx.attempt}


@shop.step()
def total(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["total"] += 1
    return {"item": payload["item"], "total": ctx.outputs["price"]["unit"] * payload["qty"]}


def charge(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    calls["charge"] += 1
    seen.append((ctx.operation.recovering, ctx.operation.key))
    return {"charge_id": f"ch-{ctx.operation.key}", "amount": payload["amount"]}


def receipt(ctx: StepContext, payload: dict[str, Any]) -> str:
    calls["receipt"] += 1
    return f"paid {ctx.outputs['charge']['amount']} ({ctx.outputs['charge']['charge_id']})"


payments = Kind("payments")  # the provider deduplicates by key: a lost answer is retried
payments.step("charge", effect=Effect("acme-pay", capability="idempotent_key"))(charge)
payments.step("receipt")(receipt)

blind_payments = Kind("blind_payments")  # nothing can be learnt after a lost answer
blind_payments.step("charge", effect=Effect("cash-drawer", capability="none"))(charge)
blind_payments.step("receipt")(receipt)

reviewed = Kind("reviewed")


@reviewed.step()
def draft(ctx: StepContext, payload: dict[str, Any]) -> str:
    calls["draft"] += 1
    return f"draft of {payload['title']}"


@reviewed.step(approval=True)
def publish(ctx: StepContext, payload: dict[str, Any]) -> str:
    calls["publish"] += 1
    return f"published {ctx.outputs['draft']}"


KINDS = pytest.mark.leasehold_kinds(shop, payments, blind_payments, reviewed)


def lease_expiry(tb: LeaseholdTestbed) -> float:
    return tb.settings.lease_seconds + 1


# ---------------------------------------------------------------------------------- the rules


@KINDS
def test_success_passes_each_output_to_the_next_step(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("shop", {"item": "tea", "qty": 3})
    assert tb.state(job_id) == "queued"
    assert calls == {}  # nothing runs before the test says so

    report = tb.run_until_idle()

    view = tb.view(job_id)
    assert view["state"] == "succeeded"
    assert view["result"] == {"item": "tea", "total": 750}
    assert view["attempts"] == 1
    assert view["progress"] == {"step": 2, "steps_total": 2}
    assert calls == {"price": 1, "total": 1}
    assert report.outcomes(job_id) == ["succeeded"]
    assert [entry["event"] for entry in tb.history(job_id)] == ["succeeded"]


@KINDS
def test_a_retry_waits_for_its_backoff_on_the_testbeds_clock(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    backoff = tb.settings.backoff_base_ms / 1000  # attempt 1's ceiling (jitter off)
    job_id = tb.submit("shop", {"item": "tea", "qty": 2, "mode": "flaky"})
    started = tb.clock.now_ms()

    tb.run_until_idle()
    view = tb.view(job_id)
    assert (view["state"], view["attempts"]) == ("queued", 1)
    assert view["error"]["code"] == "price_timeout"
    assert tb.next_due_in() == backoff
    # Not due yet: running again, or letting less than the backoff pass, runs nothing.
    tb.run_until_idle()
    tb.advance(backoff - 0.5)
    tb.run_until_idle()
    assert (tb.state(job_id), calls["price"]) == ("queued", 1)
    assert tb.clock.now_ms() - started == (backoff - 0.5) * 1000  # run_until_idle keeps time

    tb.advance(0.5)
    tb.run_until_idle()
    view = tb.view(job_id)
    assert (view["state"], view["attempts"]) == ("succeeded", 2)
    assert view["result"] == {"item": "tea", "total": 500}
    assert calls == {"price": 2, "total": 1}
    assert [entry["event"] for entry in tb.history(job_id)] == ["retry", "succeeded"]


@KINDS
def test_a_fatal_error_fails_the_job_without_a_retry(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("shop", {"item": "unobtainium", "qty": 1, "mode": "fatal"})

    tb.drain()  # even with all the time in the world, nothing is retried

    view = tb.view(job_id)
    assert (view["state"], view["stop_reason"]) == ("failed", "handler_error")
    assert view["error"] == {"code": "unknown_item", "message": "no such item: unobtainium"}
    assert (view["attempts"], calls["price"], calls["total"]) == (1, 1, 0)


@KINDS
def test_a_payload_against_the_schema_is_refused_as_post_jobs_refuses_it(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    with pytest.raises(ValidationError, match="qty") as refused:
        tb.submit("shop", {"item": "tea"})
    assert refused.value.code == "invalid_request"
    with pytest.raises(ValidationError, match="payload.qty"):
        tb.submit("shop", {"item": "tea", "qty": 0})
    with pytest.raises(ValidationError, match="unknown kind"):
        tb.submit("shopping", {"item": "tea", "qty": 1})
    with pytest.raises(ValidationError, match="max_attempts"):
        tb.submit("shop", {"item": "tea", "qty": 1}, max_attempts=11)
    assert tb.telemetry.counts["JobsAccepted"] == 0
    assert tb.run_until_idle().deliveries == ()


@KINDS
def test_a_crash_between_steps_resumes_without_running_the_finished_step_again(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    crash = tb.crash(after_step="price")
    job_id = tb.submit("shop", {"item": "tea", "qty": 4})

    report = tb.run_until_idle()
    assert report.crashes == 1 and crash.fired == [job_id]
    view = tb.view(job_id)
    assert (view["state"], view["progress"]["step"]) == ("running", 1)  # price is checkpointed
    # The dead worker's lease holds until it runs out: nobody takes the job before that.
    tb.advance(tb.settings.lease_seconds - 1)
    tb.run_until_idle()
    assert tb.state(job_id) == "running"

    assert tb.advance(2) == {"rescued": 1}
    tb.run_until_idle()

    view = tb.view(job_id)
    assert (view["state"], view["attempts"]) == ("succeeded", 2)
    assert view["result"] == {"item": "tea", "total": 1000}
    assert calls == {"price": 1, "total": 1}
    events = [(e["event"], e["worker"], e.get("by")) for e in tb.history(job_id)]
    assert events == [
        ("rescued", "testbed-worker-1", "sweeper"),  # the dead worker's attempt, ended
        ("succeeded", "testbed-worker-2", None),  # a new execution environment took over
    ]


@KINDS
def test_a_crash_inside_an_idempotent_effect_is_retried_with_the_same_key(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    tb.crash(in_step="charge")
    job_id = tb.submit("payments", {"amount": 42})
    key = f"{job_id}:0"

    tb.run_until_idle()
    [opened] = tb.operations(job_id)
    assert (opened["state"], opened["key"], opened["capability"]) == (
        "submitted",
        key,
        "idempotent_key",
    )
    assert tb.view(job_id)["effect"]["idempotency_key"] == key  # said plainly: in progress

    tb.advance(lease_expiry(tb))
    tb.run_until_idle()

    view = tb.view(job_id)
    assert view["state"] == "succeeded"
    assert view["result"] == f"paid 42 (ch-{key})"
    assert seen == [(False, key), (True, key)]  # the retry knows, and sends the same key
    [settled] = tb.operations(job_id)
    assert (settled["state"], settled["reconciled"]) == ("confirmed", True)
    assert settled["receipt"] == {"charge_id": f"ch-{key}", "amount": 42}
    assert calls == {"charge": 2, "receipt": 1}


@KINDS
def test_a_crash_inside_an_effect_nobody_can_check_makes_the_job_unknown(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    tb.crash(in_step="charge")
    job_id = tb.submit("blind_payments", {"amount": 42})

    tb.run_until_idle()
    assert tb.advance(lease_expiry(tb)) == {"unknown": 1}
    tb.drain()  # nothing ever retries it

    view = tb.view(job_id)
    assert (view["state"], view["stop_reason"]) == ("unknown", "effect_uncertain")
    assert seen == [(False, f"{job_id}:0")]
    assert tb.operations(job_id)[0]["state"] == "submitted"
    assert tb.next_due_in() is None
    # An operator who checked the drawer settles it.
    resolved = tb.resolve(job_id, "succeeded", "counted the drawer: paid", receipt="drawer-7")
    assert resolved["state"] == "succeeded"
    assert calls == {"charge": 1}


@KINDS
def test_an_approval_step_waits_for_the_owner(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("reviewed", {"title": "Q3 report"})

    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "waiting_approval"
    assert view["approval"]["step_name"] == "publish"
    tb.advance(600)
    tb.run_until_idle()
    assert (tb.state(job_id), calls["publish"]) == ("waiting_approval", 0)

    assert tb.approve(job_id)["state"] == "queued"
    tb.run_until_idle()

    view = tb.view(job_id)
    assert (view["state"], view["result"]) == ("succeeded", "published draft of Q3 report")
    assert calls == {"draft": 1, "publish": 1}


@KINDS
def test_drain_skips_the_clock_to_whatever_is_due_next(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    tb.crash(after_step="price")
    job_id = tb.submit("shop", {"item": "tea", "qty": 1, "mode": "flaky"})

    report = tb.drain()

    assert tb.view(job_id)["result"] == {"item": "tea", "total": 250}
    assert report.outcomes(job_id) == ["retry_scheduled", "crashed", "succeeded"]
    # the backoff (attempt 1's ceiling), then the dead worker's lease to its end, and no more
    backoff = tb.settings.backoff_base_ms / 1000
    assert report.advanced_seconds == pytest.approx(backoff + tb.settings.lease_seconds + 0.001)
    assert calls == {"price": 2, "total": 1}
    assert tb.next_due_in() is None


tally = Kind("tally")  # one step that works through its items, saving its progress after each


@tally.step()
def count_items(ctx: StepContext, payload: dict[str, Any]) -> int:
    done = list((ctx.progress or {}).get("done", []))
    for item in payload["items"][len(done) :]:
        calls[item] += 1
        if item == payload.get("die_at") and calls[item] == 1:
            raise WorkerCrashed(f"the process died while counting {item}")
        done.append(item)
        ctx.save_progress({"done": done})
    return len(done)


@pytest.mark.leasehold_kinds(tally)
def test_a_step_resumes_from_its_saved_progress_after_a_crash_of_its_own_making(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("tally", {"items": ["a", "b", "c"], "die_at": "c"})
    assert tb.progress(job_id) is None
    assert tb.run_until_idle().outcomes(job_id) == ["crashed"]
    assert tb.progress(job_id) == {"done": ["a", "b"]}
    assert tb.state(job_id) == "running"  # its lease is the dead worker's until it runs out
    assert tb.advance(tb.settings.lease_seconds + 1) == {"rescued": 1}
    assert tb.run_until_idle().outcomes(job_id) == ["succeeded"]
    assert tb.view(job_id)["result"] == 3
    assert tb.progress(job_id) == {"done": ["a", "b", "c"]}
    assert calls == {"a": 1, "b": 1, "c": 2}  # only the item it died in ran again


@pytest.mark.leasehold_kinds("leasehold_apps.synthetic")
def test_the_synthetic_application_by_its_module_string(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    assert set(tb.kinds) == {"synthetic"}
    steps = [{"name": "a", "cost": 2}, {"name": "b", "fail_times": 1, "cost": 3}]
    job_id = tb.submit("synthetic", {"steps": steps}, budget={"max_cost": 10})
    with pytest.raises(ValidationError, match="unknown field"):
        tb.submit("synthetic", {"steps": [{"name": "a", "colour": "red"}]})

    report = tb.drain()

    view = tb.view(job_id)
    assert (view["state"], view["attempts"]) == ("succeeded", 2)
    assert view["result"]["steps_completed"] == 2
    assert view["result"]["cost_used"] == 5
    assert report.outcomes(job_id) == ["retry_scheduled", "succeeded"]
    assert report.advanced_seconds == tb.settings.backoff_base_ms / 1000


@pytest.mark.leasehold_kinds(shop, lease_seconds=20)
def test_faults_are_injected_and_the_jobs_still_finish(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    assert tb.settings.lease_seconds == 20
    # An SQS send refused twice (botocore retries it) is sent once: a refused request was
    # never applied, so the job gets one wake-up, not three.
    tb.faults("sqs.SendMessageBatch:InternalError=1@2")
    first = tb.submit("shop", {"item": "tea", "qty": 1})
    report = tb.run_until_idle()
    assert report.outcomes(first) == ["succeeded"]
    assert tb.injected() == {"SendMessageBatch:InternalError": 2}

    tb.faults("dynamodb.TransactWriteItems:TransactionConflict=0.3")
    job_ids = [tb.submit("shop", {"item": f"tea-{i}", "qty": i + 1}) for i in range(4)]
    tb.drain()

    assert [tb.state(job_id) for job_id in job_ids] == ["succeeded"] * 4
    assert tb.injected()["TransactWriteItems:TransactionConflict"] > 0
    assert calls == {"price": 5, "total": 5}


def test_the_class_alone_runs_a_module_string_and_refuses_what_the_functions_refuse() -> None:
    with LeaseholdTestbed("leasehold_apps.synthetic", seed=3) as tb:
        job_id = tb.submit("synthetic", {"steps": [{"name": "only"}]})
        tb.run_until_idle()
        assert tb.view(job_id)["result"]["steps_completed"] == 1
        tb.submit("synthetic", {"steps": [{"name": "x", "fail_times": 1}]})
        with pytest.raises(NotIdleError):  # its retry is due in 2 s: more than drain may skip
            tb.drain(max_seconds=1)
    impostor = Kind("shop")
    impostor.step("price")(price)
    with pytest.raises(KindLoadError, match="twice"):
        LeaseholdTestbed([shop, impostor])
    with pytest.raises(KindLoadError, match="cannot be imported"):
        LeaseholdTestbed("no_such_module_anywhere")
    with pytest.raises(TypeError, match="lease_secs"):
        LeaseholdTestbed([shop], settings={"lease_secs": 5})
    with pytest.raises(ValueError, match="exactly one"):
        LeaseholdTestbed([shop]).crash(after_step="price", in_step="total")
