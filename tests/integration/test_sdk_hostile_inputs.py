"""Hostile inputs to the kinds SDK, found by an adversarial review (h6): values Python's json
reads or writes but JSON has not (NaN, Infinity, 1e400), a schema check that overflows on the
caller's number, an effect step's huge error message. Each must end as a clear 400 or a job
outcome, never a 500, an unparseable job view or an exception out of the worker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold import Effect, FatalError, Kind, StepContext, ValidationError
from leasehold.sdk.routes import body_of
from leasehold.testing import LeaseholdTestbed

pytestmark = pytest.mark.integration

not_finite = Kind("not_finite")


@not_finite.step()
def measure(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"ratio": float(payload["value"])}  # "nan" or "inf" from the caller


@not_finite.step()
def report(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return dict(ctx.outputs["measure"])


not_finite_result = Kind("not_finite_result")


@not_finite_result.step()
def only(ctx: StepContext, payload: dict[str, Any]) -> int:
    return 1


@not_finite_result.result
def ratio(finished: Any) -> dict[str, float]:
    return {"ratio": float("nan")}


tenths = Kind("tenths", schema={"type": "object", "properties": {"n": {"multipleOf": 0.1}}})


@tenths.step()
def keep(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return dict(payload)


loud = Kind("loud")


@loud.step(effect=Effect("mailer", capability="none"))
def send(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    raise FatalError("provider said: " + "x" * 500_000)


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_step_output_that_is_not_json_fails_the_job(value: str) -> None:
    with LeaseholdTestbed([not_finite]) as tb:
        job_id = tb.submit("not_finite", {"value": value})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert view["state"] == "failed"
        assert view["error"]["code"] == "output_not_json"
        json.dumps(view, allow_nan=False)  # what the API sends is JSON


def test_a_result_hook_that_is_not_json_fails_the_job() -> None:
    with LeaseholdTestbed([not_finite_result]) as tb:
        job_id = tb.submit("not_finite_result", {})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["error"]["code"]) == ("failed", "result_not_json")
        json.dumps(view, allow_nan=False)


@pytest.mark.parametrize(
    "body", ['{"n": NaN}', '{"n": Infinity}', '{"n": -Infinity}', '{"n": 1e400}']
)
def test_a_body_with_a_number_json_has_not_is_a_400(body: str) -> None:
    with pytest.raises(ValidationError) as refused:
        body_of({"body": body})
    assert refused.value.code == "malformed_json"


@pytest.mark.parametrize("n", [10**400, float("inf")])
def test_a_schema_check_that_overflows_is_a_400(n: Any) -> None:
    with LeaseholdTestbed([tenths]) as tb:
        with pytest.raises(ValidationError):
            tb.submit("tenths", {"n": n})
        assert tb.view(tb.submit("tenths", {"n": 0.3}))["state"] == "queued"


def test_an_effect_step_with_a_huge_error_message_still_ends_unknown() -> None:
    with LeaseholdTestbed([loud]) as tb:
        job_id = tb.submit("loud", {})
        tb.run_until_idle()  # the outcome write fits in an item: nothing escapes the worker
        view = tb.view(job_id)
        assert view["state"] == "unknown"
        assert view["error"]["code"] == "effect_uncertain"
        assert len(view["error"]["message"]) < 1000
        assert tb.operations(job_id)[0]["state"] == "submitted"
