"""The example kind on leasehold's testbed: moto, a manual clock, the functions' own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from leasehold import ValidationError
from leasehold.testing import LeaseholdTestbed

EVENTS = Path(__file__).resolve().parents[1] / "events"


def test_a_greeting_runs_both_steps(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("greet", {"name": "Ada"})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert view["result"] == {"greeting": "Hello, Ada!", "attempts": {"compose": 1, "sign": 1}}


def test_a_retry_does_not_run_the_finished_step_again(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("greet", {"name": "Bo", "succeed_on_attempt": 2})
    tb.run_until_idle()
    assert tb.state(job_id) == "queued"  # attempt 1 failed; the retry waits its backoff
    tb.advance(tb.next_due_in())
    tb.run_until_idle()
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    # `sign` ran twice; `compose` once, its output read back from the checkpoint
    assert view["result"]["attempts"] == {"compose": 1, "sign": 2}


def test_a_crashed_worker_resumes_from_the_checkpoint(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    tb.crash(after_step="compose")
    job_id = tb.submit("greet", {"name": "Cy"})
    tb.run_until_idle()
    assert tb.state(job_id) == "running"  # its worker died holding the lease
    tb.drain()  # past the lease: the sweeper hands it back, attempt 2 runs `sign` only
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert view["result"]["attempts"] == {"compose": 1, "sign": 2}


def test_a_fatal_error_fails_the_job_for_good(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("greet", {"name": "Di", "fail": "fatal"})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert (view["state"], view["stop_reason"]) == ("failed", "handler_error"), view


@pytest.mark.parametrize("payload", [{}, {"name": ""}, {"name": "Ed", "extra": 1}])
def test_a_payload_the_schema_refuses_is_a_400(
    leasehold_testbed: LeaseholdTestbed, payload: dict[str, object]
) -> None:
    with pytest.raises(ValidationError):
        leasehold_testbed.submit("greet", payload)


def test_the_sample_event_submits_a_job_the_kind_accepts(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    event = json.loads((EVENTS / "api-submit-greet.json").read_text())
    body = json.loads(event["body"])
    assert (event["routeKey"], body["kind"]) == ("POST /jobs", "greet")
    job_id = leasehold_testbed.submit(body["kind"], body["payload"])
    leasehold_testbed.run_until_idle()
    assert leasehold_testbed.state(job_id) == "succeeded"
