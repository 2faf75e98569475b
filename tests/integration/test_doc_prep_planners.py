"""The doc_prep kind in the engine with planners that fail or lie (arch §7), on moto with the
harness: a planner that raises or answers garbage, a hosted model that does not answer, a cancel
while it plans, and a hosted planner asked for where none is configured."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.domain.errors import ValidationError
from leasehold.domain.states import JobState
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.planner import PlannerError, Proposal
from tests.support.documents import (
    CallbackPlanner,
    agent_of,
    doc_prep_kinds,
    hosted_payload,
    job_of,
    next_tool,
    submit_doc_prep,
)
from tests.support.harness import ALICE, Harness


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (RuntimeError("model exploded"), "the planner failed: RuntimeError"),
        ("rm -rf /", "a proposal must be an object"),
        ({"tool": "extract"}, "exactly the keys 'tool' and 'args'"),
        ({"tool": "extract; send_email", "args": {}}, "must be a name"),
    ],
)
def test_a_planner_that_raises_or_answers_garbage_fails_the_job(
    harness: Harness, answer: Any, fragment: str
) -> None:
    def planner(checkpoint: AgentCheckpoint) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    kinds = doc_prep_kinds(planner=CallbackPlanner(planner))
    job_id = submit_doc_prep(harness, hosted_payload(), kinds=kinds)
    harness.worker(kinds=kinds).handle(harness.wakeup(job_id))
    job = job_of(harness, job_id)
    assert (job.state, job.stop_reason, job.error["code"]) == (
        JobState.FAILED,
        "handler_error",
        "planner_error",
    )
    assert fragment in job.error["message"]
    assert "model exploded" not in job.error["message"]
    assert job.kind_state is None


def test_a_hosted_planner_that_does_not_answer_is_retried(harness: Harness) -> None:
    calls = []

    def flaky(checkpoint: AgentCheckpoint) -> Proposal | None:
        calls.append(checkpoint.next_step)
        if len(calls) == 1:
            raise PlannerError("the planner endpoint answered HTTP 503", transient=True)
        return next_tool(checkpoint)

    kinds = doc_prep_kinds(planner=CallbackPlanner(flaky))
    job_id = submit_doc_prep(harness, hosted_payload(), kinds=kinds)
    harness.worker(kinds=kinds).handle(harness.wakeup(job_id))
    job = job_of(harness, job_id)
    assert (job.state, job.error["code"]) == (JobState.QUEUED, "planner_error")
    harness.clock.advance(60_000)
    harness.worker("w2", kinds=kinds).handle(harness.wakeup(job_id))
    assert job_of(harness, job_id).state is JobState.SUCCEEDED


def test_a_cancel_between_tools_stops_the_agent(harness: Harness) -> None:
    # Given a planner during whose second proposal alice cancels the job
    def cancel_while_planning_validate(checkpoint: AgentCheckpoint) -> Proposal | None:
        if checkpoint.next_step == 1:
            harness.jobs().cancel(ALICE, job_id)
        return next_tool(checkpoint)

    kinds = doc_prep_kinds(planner=CallbackPlanner(cancel_while_planning_validate))
    job_id = submit_doc_prep(harness, hosted_payload(), kinds=kinds)
    harness.worker(kinds=kinds).handle(harness.wakeup(job_id))
    # Then the tool already allowed finishes, and the heartbeat before the next stops the job
    job = job_of(harness, job_id)
    assert job.state is JobState.CANCELLED
    assert agent_of(harness, job_id).tools_run == ("extract", "validate")


def test_a_hosted_planner_must_be_configured_to_be_asked_for(harness: Harness) -> None:
    with pytest.raises(ValidationError, match="needs a model endpoint"):
        submit_doc_prep(harness, {"document": {"text": "x"}, "planner": {"kind": "hosted"}})
