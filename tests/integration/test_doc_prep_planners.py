"""The doc_prep kind in the engine with planners that fail or lie (arch §7), on `leasehold.testing`:
a planner that raises or answers garbage, a hosted model that does not answer, a cancel while it
plans, and a hosted planner asked for where none is configured."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import ValidationError
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.planner import PlannerError, Proposal
from tests.support.documents import (
    CallbackPlanner,
    doc_prep_testbed,
    hosted_payload,
    next_tool,
    progress_of,
)


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (RuntimeError("model exploded"), "the planner failed: RuntimeError"),
        ("rm -rf /", "a proposal must be an object"),
        ({"tool": "extract"}, "exactly the keys 'tool' and 'args'"),
        ({"tool": "extract; send_email", "args": {}}, "must be a name"),
    ],
)
def test_a_planner_that_raises_or_answers_garbage_fails_the_job(answer: Any, fragment: str) -> None:
    def planner(checkpoint: AgentCheckpoint) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    with doc_prep_testbed(bucket=False, planner=CallbackPlanner(planner)) as (tb, _):
        job_id = tb.submit("doc_prep", hosted_payload())
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"], view["error"]["code"]) == (
            "failed",
            "handler_error",
            "planner_error",
        )
        assert fragment in view["error"]["message"]
        assert "model exploded" not in view["error"]["message"]
        assert tb.progress(job_id) is None


def test_a_hosted_planner_that_does_not_answer_is_retried() -> None:
    calls = []

    def flaky(checkpoint: AgentCheckpoint) -> Proposal | None:
        calls.append(checkpoint.next_step)
        if len(calls) == 1:
            raise PlannerError("the planner endpoint answered HTTP 503", transient=True)
        return next_tool(checkpoint)

    with doc_prep_testbed(bucket=False, planner=CallbackPlanner(flaky)) as (tb, _):
        job_id = tb.submit("doc_prep", hosted_payload())
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["error"]["code"]) == ("queued", "planner_error")
        tb.advance(60)
        tb.run_until_idle()
        assert tb.state(job_id) == "succeeded"


def test_a_cancel_between_tools_stops_the_agent() -> None:
    # Given a planner during whose second proposal the owner cancels the job
    def cancel_while_planning_validate(checkpoint: AgentCheckpoint) -> Proposal | None:
        if checkpoint.next_step == 1:
            tb.cancel(job_id)
        return next_tool(checkpoint)

    planner = CallbackPlanner(cancel_while_planning_validate)
    with doc_prep_testbed(bucket=False, planner=planner) as (tb, _):
        job_id = tb.submit("doc_prep", hosted_payload())
        tb.run_until_idle()
        # Then the tool already allowed finishes, and the heartbeat before the next stops the job
        assert tb.state(job_id) == "cancelled"
        assert progress_of(tb, job_id).tools_run == ("extract", "validate")


def test_a_hosted_planner_must_be_configured_to_be_asked_for() -> None:
    payload = {"document": {"text": "x"}, "planner": {"kind": "hosted"}}
    with (
        doc_prep_testbed(bucket=False) as (tb, _),
        pytest.raises(ValidationError, match="needs a model endpoint"),
    ):
        tb.submit("doc_prep", payload)
