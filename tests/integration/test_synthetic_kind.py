"""The synthetic kind's behaviour as its user sees it, on `leasehold.testing` (the kind loaded by
its module string, as `LEASEHOLD_KINDS` names it): failures, retries and deadlines; cancel and
approval; budgets; an operator's replay and resolve. Each case moved here from
test_lifecycle.py or test_controls.py with its assertions; the races, fences and fault matrices
of the engine itself stay there, on the repository's harness."""

from __future__ import annotations

import pytest

from leasehold.testing import LeaseholdTestbed
from tests.support.harness import steps

pytestmark = pytest.mark.leasehold_kinds("leasehold_apps.synthetic")


def test_attempts_exhausted_gives_dead(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({"fail_times": 5}), max_attempts=2)
    assert tb.run_until_idle().outcomes(job_id) == ["retry_scheduled"]
    tb.advance(10)
    assert tb.run_until_idle().outcomes(job_id) == ["dead"]
    view = tb.view(job_id)
    assert view["stop_reason"] == "attempts_exhausted" and view["attempts"] == 2


def test_fatal_error_gives_failed_handler_error(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({"fatal": True}))
    assert tb.run_until_idle().outcomes(job_id) == ["failed"]
    view = tb.view(job_id)
    assert view["stop_reason"] == "handler_error" and view["error"]["code"] == "handler_error"


def test_deadline_passed_while_queued_gives_dead(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({}), deadline_seconds=5)
    tb.advance(6, sweep=False)  # the worker's own check (the sweeper would end it first)
    assert tb.run_until_idle().outcomes(job_id) == ["deadline"]
    view = tb.view(job_id)
    assert view["state"] == "dead" and view["stop_reason"] == "deadline_exceeded"


# ------------------------------------------------------------------ operators


def test_replay_keeps_identity_history_and_budget_use(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit(
        "synthetic",
        steps({"cost": 3}, {"fail_times": 9}),
        max_attempts=1,
        budget={"max_cost": 10},
    )
    assert tb.run_until_idle().outcomes(job_id) == ["dead"]
    view = tb.replay(job_id, note="fixed the fetcher")
    replayed = tb.operator_view(job_id)
    assert view["job_id"] == job_id
    assert replayed["state"] == "queued"
    assert replayed["replays"] == 1 and replayed["attempts"] == 0
    assert replayed["budget"]["cost_used"] == 3  # a replay never resets what was spent
    assert replayed["budget"]["max_cost"] == 10
    # The history keeps the attempt that died and says who replayed it, when and why
    events = [(e["event"], e.get("by"), e.get("note")) for e in tb.history(job_id)]
    assert events[-2:] == [("stopped", None, None), ("replayed", "operator", "fixed the fetcher")]


def test_resolve_settles_unknown_with_a_note(leasehold_testbed: LeaseholdTestbed) -> None:
    # Given a worker that died inside an effect step, and its lease ran out: `unknown`
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({"effect": True}))
    tb.crash(in_step="s0")
    assert tb.run_until_idle().outcomes(job_id) == ["crashed"]
    assert tb.advance(tb.settings.lease_seconds + 1) == {"unknown": 1}
    view = tb.resolve(job_id, "succeeded", "provider shows the charge", receipt="rcpt_1")
    # The job says what was resolved and by whom, and no longer carries the uncertainty error
    assert view["state"] == "succeeded" and "error" not in view
    assert view["resolution"]["by"] == "operator" and view["resolution"]["receipt"] == "rcpt_1"
    assert view["resolution"]["note"] == "provider shows the charge"
    assert view["resolution"]["operation_id"] == f"{job_id}:0"


# ------------------------------------------------------------------ cancellation and approval


def test_cancel_queued_is_immediate_and_a_later_delivery_never_runs_it(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({"cost": 1}))
    view = tb.cancel(job_id)
    assert view["state"] == "cancelled" and view["stop_reason"] == "cancelled_by_user"
    assert tb.run_until_idle().outcomes(job_id) == ["terminal"]
    assert tb.view(job_id)["budget"]["steps_used"] == 0


def test_approve_resumes_at_the_paused_step_without_repeating_finished_ones(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit("synthetic", steps({"cost": 1}, {"cost": 2, "approval": True}, {"cost": 3}))
    assert tb.run_until_idle().outcomes(job_id) == ["waiting_approval"]
    assert tb.approve(job_id)["state"] == "queued"
    # The worker resumes it from the recorded checkpoint
    assert tb.run_until_idle().outcomes(job_id) == ["succeeded"]
    result = tb.view(job_id)["result"]
    assert result["steps_completed"] == 3 and result["cost_used"] == 6
    assert [o["step"] for o in result["outputs"]] == ["s0", "s1", "s2"]


# ------------------------------------------------------------------ budgets


def test_a_step_that_would_pass_max_cost_is_not_run(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    job_id = tb.submit(
        "synthetic", steps({"cost": 3}, {"cost": 3}, {"cost": 3}), budget={"max_cost": 7}
    )
    assert tb.run_until_idle().outcomes(job_id) == ["failed"]
    view = tb.view(job_id)
    assert (
        view["stop_reason"] == "budget_exhausted"
        and view["budget"]["cost_used"] == 6
        and view["budget"]["steps_used"] == 2
    )
    assert view["budget"] == {"max_cost": 7, "cost_used": 6, "max_steps": None, "steps_used": 2}
    assert view["error"]["code"] == "budget_exhausted"


def test_max_steps_and_a_retry_never_resets_what_was_used(
    leasehold_testbed: LeaseholdTestbed,
) -> None:
    tb = leasehold_testbed
    job_id = tb.submit(
        "synthetic",
        steps({"cost": 2}, {"cost": 2, "fail_times": 1}, {"cost": 2}),
        budget={"max_steps": 2},
    )
    assert tb.run_until_idle().outcomes(job_id) == ["retry_scheduled"]
    assert tb.view(job_id)["budget"]["cost_used"] == 2
    tb.advance(10)
    assert tb.run_until_idle().outcomes(job_id) == ["failed"]
    budget, view = tb.view(job_id)["budget"], tb.view(job_id)
    assert (
        budget["steps_used"] == 2
        and budget["cost_used"] == 4
        and view["stop_reason"] == "budget_exhausted"
    )
