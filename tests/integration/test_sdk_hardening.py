"""What a kind's own mistakes become, on the engine (leasehold.testing, moto): each ends the job
with its reason named, or is refused at accept — never a job that waits out a lease on every
attempt with the cause only in the logs (found by an adversarial review of the kinds SDK)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Effect, Finished, Kind, RetryableError, Step, StepContext, ValidationError
from leasehold.apps import job_writes
from leasehold.sdk.engine_kind import _output_of
from leasehold.testing import DEFAULT_OWNER, LeaseholdTestbed

pytestmark = pytest.mark.integration

CALLS: dict[str, int] = {}


def _count(name: str) -> int:
    CALLS[name] = CALLS.get(name, 0) + 1
    return CALLS[name]


# ----------------------------------------------------------------------------- the kinds

flaky_plan = Kind("flaky_plan")


@flaky_plan.planner
def _plan(payload: dict[str, Any]) -> list[Step]:
    if _count("plan") > 1:  # accept plans once; the worker's plan raises
        raise RuntimeError("the planner broke")
    return [Step("only", lambda ctx, payload: {"ok": True})]


bad_result = Kind("bad_result")
bad_result.step("only")(lambda ctx, payload: {"n": 1})


@bad_result.result
def _result(finished: Finished) -> Any:
    raise KeyError("no such output")


long_planned = Kind("long_planned")
long_planned.planner(
    lambda payload: [Step("crawl", lambda ctx, payload: None, timeout_seconds=payload["s"])]
)

always_times_out = Kind("always_times_out")


@always_times_out.step(effect=Effect("payments", capability="idempotent_key"))
def _charge(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    raise RetryableError("the provider timed out")


returns_a_number = Kind("returns_a_number")
returns_a_number.step("count", effect=Effect("counter", capability="idempotent_key"))(
    lambda ctx, payload: 7
)

confirms_itself = Kind("confirms_itself")


@confirms_itself.step(effect=Effect("payments", capability="status_lookup"))
def _pay(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.operation.confirm({"provider_receipt": "r-1"})
    return {"amount": 250}


too_big = Kind("too_big")
# over the 10 MiB a plain step's output may be (16 KiB before large data, decision LD2)
too_big.step("dump")(lambda ctx, payload: {"blob": "x" * (10 * 1024 * 1024)})

unregistered = Kind("unregistered")
unregistered.step("only")(lambda ctx, payload: None)

KINDS = [
    flaky_plan,
    bad_result,
    long_planned,
    always_times_out,
    returns_a_number,
    confirms_itself,
    too_big,
]


@pytest.fixture
def tb() -> Any:
    CALLS.clear()
    with LeaseholdTestbed(KINDS) as testbed:
        yield testbed


def _ended(tb: Any, job_id: str) -> tuple[str, str | None, str | None]:
    view = tb.view(job_id)
    return view["state"], view.get("stop_reason"), (view.get("error") or {}).get("code")


def test_a_planner_that_raises_at_run_time_fails_the_job_naming_it(tb: Any) -> None:
    job_id = tb.submit("flaky_plan", {})
    tb.run_until_idle()
    assert _ended(tb, job_id) == ("failed", "handler_error", "plan_failed")
    assert tb.view(job_id)["attempts"] == 1  # no lease waited out, no second attempt


def test_a_result_hook_that_raises_fails_the_job_naming_it(tb: Any) -> None:
    job_id = tb.submit("bad_result", {})
    tb.run_until_idle()
    assert _ended(tb, job_id) == ("failed", "handler_error", "result_failed")


def test_a_planned_step_longer_than_the_deployment_allows_is_refused_at_accept(tb: Any) -> None:
    longest = tb.settings.max_step_seconds
    with pytest.raises(ValidationError, match="longest step"):
        tb.submit("long_planned", {"s": longest + 1})
    tb.submit("long_planned", {"s": longest})  # the longest allowed is accepted


def test_an_effect_still_open_when_the_attempts_run_out_is_unknown_not_dead(tb: Any) -> None:
    job_id = tb.submit("always_times_out", {}, max_attempts=2)
    tb.drain()
    assert _ended(tb, job_id)[:2] == ("unknown", "effect_uncertain")
    [operation] = tb.operations(job_id)
    assert operation["state"] == "submitted"  # kept for an operator, never expired


def test_a_confirmed_operation_keeps_what_the_step_returned(tb: Any) -> None:
    # A worker that dies after the confirm and before the checkpoint hands the next one this
    # output, instead of running the step (and charging) again.
    number = tb.submit("returns_a_number", {})
    paid = tb.submit("confirms_itself", {})
    tb.run_until_idle()
    assert tb.view(number)["result"] == 7 and tb.view(paid)["result"] == {"amount": 250}
    [counted] = tb.operations(number)
    [charged] = tb.operations(paid)
    assert (counted["receipt"], counted["returned"]) == ({"value": 7}, "value")
    assert charged["receipt"] == {"provider_receipt": "r-1"}
    assert (_output_of(counted), _output_of(charged)) == (7, {"amount": 250})


def test_a_step_output_over_10_mib_fails_the_job(tb: Any) -> None:
    job_id = tb.submit("too_big", {})
    tb.run_until_idle()
    assert _ended(tb, job_id) == ("failed", "handler_error", "output_too_large")


def test_a_job_of_a_kind_this_deployment_does_not_register_fails_naming_it(tb: Any) -> None:
    # Committed by code of the user's own (job_writes with a Kind nobody registered)
    new = job_writes(tb.table_name, unregistered, {}, DEFAULT_OWNER, now_ms=tb.clock.now_ms())
    tb.client("dynamodb").transact_write_items(TransactItems=new.writes)
    tb.run_until_idle()
    assert _ended(tb, new.job_id) == ("failed", "handler_error", "unknown_kind")
