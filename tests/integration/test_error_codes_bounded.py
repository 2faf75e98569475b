"""An error `code` a kind gives is an identifier and is bounded like the message beside it
(issue 28 item 8): a 5,000-character code was stored whole while its message was cut at 500.
A code is kept up to 100 characters and cut there; one that is not a non-empty string is the
error's default (leasehold.testing, moto)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Effect, FatalError, Kind, RetryableError, StepContext
from leasehold.domain.errors import MAX_CODE_CHARS, StopJobError
from leasehold.testing import LeaseholdTestbed

pytestmark = pytest.mark.integration

LONG = "c" * 5000

fatal = Kind("long_code_fatal")


@fatal.step()
def give_up(ctx: StepContext, payload: dict[str, Any]) -> None:
    raise FatalError("no", code=payload["code"])


retryable = Kind("long_code_retry", max_attempts=1)


@retryable.step()
def try_later(ctx: StepContext, payload: dict[str, Any]) -> None:
    raise RetryableError("later", code=LONG)


refused = Kind("long_code_refused")


@refused.step(effect=Effect("mailer", capability="none"))
def send(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.operation.fail(LONG, "the provider refused it")
    return {"sent": False}


def test_a_fatal_errors_long_code_is_cut_like_its_message() -> None:
    with LeaseholdTestbed([fatal]) as tb:
        job_id = tb.submit("long_code_fatal", {"code": LONG})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert view["state"] == "failed"
        assert view["error"]["code"] == "c" * MAX_CODE_CHARS == "c" * 100


def test_a_retryable_errors_long_code_is_cut() -> None:
    with LeaseholdTestbed([retryable]) as tb:
        job_id = tb.submit("long_code_retry", {})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert view["state"] == "dead"
        assert view["error"]["code"] == "c" * 100


@pytest.mark.parametrize("code", ["", None, 42])
def test_a_code_that_is_not_an_identifier_is_the_errors_default(code: Any) -> None:
    with LeaseholdTestbed([fatal]) as tb:
        job_id = tb.submit("long_code_fatal", {"code": code})
        tb.run_until_idle()
        assert tb.view(job_id)["error"]["code"] == "handler_error"


def test_an_operation_refused_with_a_long_code_keeps_it_cut() -> None:
    with LeaseholdTestbed([refused]) as tb:
        job_id = tb.submit("long_code_refused", {})
        tb.run_until_idle()
        (operation,) = tb.operations(job_id)
        assert operation["state"] == "failed"
        assert operation["error"]["code"] == "c" * 100


def test_a_stop_errors_code_is_cut() -> None:
    assert StopJobError("kind_reason", LONG, "stopped").error_code == "c" * 100
