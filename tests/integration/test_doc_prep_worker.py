"""The doc_prep kind against the worker itself (arch §7), on moto with the repository's harness:
what only a worker of the harness can show — the job's stored error details (the rejected tool
and the guard's reason, which no API view shows), a job accepted by a kind that is not the one
the worker runs, a worker that dies after its n-th progress save, and workers with a lease or a
safety margin of their own. The kind's behaviour as its user sees it is in test_doc_prep.py, on
`leasehold.testing`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from leasehold.domain.job import Owner
from leasehold.domain.states import JobState
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.view import history_view, job_view
from leasehold.service.worker import Disposition
from leasehold_apps.doc_agent import doc_prep_kind
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.planner import Proposal
from leasehold_apps.doc_agent.spec import parse_doc_prep_input
from tests.support.documents import (
    CallbackPlanner,
    CountingReader,
    agent_of,
    doc_prep_kinds,
    hosted_payload,
    job_of,
    next_tool,
    pipeline,
    s3,
    sample,
    scripted,
    submit_doc_prep,
)
from tests.support.harness import CAROL, LEASE_MS, Harness
from tests.support.kinds import registry
from tests.support.resources import create_documents_bucket

ALICE_KEY = "tenants/study-group/documents/rechnung.txt"


class Crash(BaseException):
    """The worker process dies here (nothing in the worker may catch it)."""


class CrashAfterSaves:
    """The lease store seen through a worker that dies right after its n-th progress save."""

    def __init__(self, real: Any, saves: int) -> None:
        self._real, self._left = real, saves

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if name != "save_progress":
            return method

        def save(*args: Any, **kwargs: Any) -> Any:
            answer = method(*args, **kwargs)
            self._left -= 1
            if self._left == 0:
                raise Crash
            return answer

        return save


@pytest.fixture
def bucket(harness: Harness) -> str:
    return create_documents_bucket(s3())


def _rescue_and_resume(harness: Harness, job_id: str, kinds: Any, worker: str = "w2") -> None:
    """The crashed worker's lease runs out, the sweeper rescues the job, another worker runs it."""
    harness.clock.advance(LEASE_MS + 1)
    harness.sweep()
    result = harness.worker(worker, kinds=kinds).handle(harness.wakeup(job_id))
    assert result.disposition is Disposition.ACK


# ------------------------------------------------------------------ trusted checks before a tool


def test_send_email_is_refused_and_the_reason_is_in_the_view_and_history(harness: Harness) -> None:
    # Given a scripted planner that proposes to send an e-mail first
    payload = {"document": {"text": sample("03-wrong-iban.txt")}, "planner": scripted("send_email")}
    job_id = submit_doc_prep(harness, payload)
    # When a worker runs the job
    harness.worker(kinds=doc_prep_kinds()).handle(harness.wakeup(job_id))
    # Then the job is failed / tool_rejected, no tool ran and no step was spent
    job = job_of(harness, job_id)
    view = job_view(job, registry())
    assert (view["state"], view["stop_reason"]) == ("failed", "tool_rejected")
    assert view["error"]["code"] == "tool_rejected"
    assert view["error"]["message"].startswith("tool_not_allowed: tool send_email is not allowed")
    assert job.error["tool"] == "send_email" and job.error["reason"] == "tool_not_allowed"
    last = history_view(job)[-1]
    assert (last["event"], last["reason"]) == ("stopped", "tool_rejected")
    assert last["note"] == "tool=send_email reason=tool_not_allowed"
    assert job.kind_state is None  # nothing was begun


@pytest.mark.parametrize(
    ("proposals", "reason", "tools_run"),
    [
        (["extract", "delete_all_invoices"], "tool_not_allowed", ["extract"]),
        ([{"tool": "extract", "args": {"path": "/etc/passwd"}}], "invalid_args", []),
        (["extract", {"tool": "validate", "args": {"strict": False}}], "invalid_args", ["extract"]),
        (["validate"], "out_of_order", []),
        (["extract", "extract"], "out_of_order", ["extract"]),
        (
            [{"tool": "extract", "args": {"s3_key": "tenants/other-group/documents/x.txt"}}],
            "out_of_scope",
            [],
        ),
    ],
)
def test_a_proposal_outside_the_rules_stops_the_job_before_it_runs(
    harness: Harness, proposals: list[Any], reason: str, tools_run: list[str]
) -> None:
    payload = {
        "document": {"text": sample("01-clean-invoice-en.txt")},
        "planner": scripted(*proposals),
    }
    job_id = submit_doc_prep(harness, payload)
    harness.worker(kinds=doc_prep_kinds()).handle(harness.wakeup(job_id))
    job = job_of(harness, job_id)
    assert (job.state, job.stop_reason, job.error["reason"]) == (
        JobState.FAILED,
        "tool_rejected",
        reason,
    )
    ran = list(agent_of(harness, job_id).tools_run) if job.kind_state else []
    assert ran == tools_run


class LenientDocPrep(EngineKind):
    """An accept path that forgot the tenant rule (an older version, a direct write): what the
    guard must still catch when the job runs."""

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        key = payload["document"]["s3_key"]
        parse_doc_prep_input(payload, tenant=key.split("/")[1], hosted_configured=False)


def test_another_tenants_key_found_later_is_tool_rejected_and_never_read(
    harness: Harness, bucket: str
) -> None:
    # Given alice's document, and a job of carol's naming it that got past accept
    s3().put_object(Bucket=bucket, Key=ALICE_KEY, Body=sample("01-clean-invoice-en.txt").encode())
    reader = CountingReader(bucket)
    kinds = doc_prep_kinds(reader=reader, kind=LenientDocPrep)
    job_id = submit_doc_prep(harness, {"document": {"s3_key": ALICE_KEY}}, kinds=kinds, owner=CAROL)
    # When a worker runs it
    harness.worker(kinds=doc_prep_kinds(reader=reader)).handle(harness.wakeup(job_id))
    # Then the guard refuses the first tool: failed / tool_rejected, the document never read
    job = job_of(harness, job_id)
    assert (job.state, job.stop_reason, job.error["reason"]) == (
        JobState.FAILED,
        "tool_rejected",
        "out_of_scope",
    )
    assert reader.reads == 0


# -------------------------------------------------------------- the worker's own saves and lease


def test_a_crash_after_two_tools_resumes_with_only_the_third(harness: Harness, bucket: str) -> None:
    # Given a document in the bucket, and a worker that dies right after its 4th progress save
    # (begin extract, extract done, begin validate, validate done)
    s3().put_object(Bucket=bucket, Key=ALICE_KEY, Body=sample("02-rechnung-de.txt").encode())
    reader = CountingReader(bucket)
    kinds = doc_prep_kinds(reader=reader)
    job_id = submit_doc_prep(harness, {"document": {"s3_key": ALICE_KEY}}, kinds=kinds)
    dying = replace(harness.stores, leases=CrashAfterSaves(harness.stores.leases, 4))
    with pytest.raises(Crash):
        harness.worker("w1", kinds=kinds, stores=dying).handle(harness.wakeup(job_id))
    assert agent_of(harness, job_id).tools_run == ("extract", "validate")
    # When its lease runs out and another worker takes the job on (a second attempt)
    _rescue_and_resume(harness, job_id, kinds)
    # Then only draft ran: three steps in the job's life, the document read once
    job = job_of(harness, job_id)
    assert job.state is JobState.SUCCEEDED and job.attempts == 2
    agent = agent_of(harness, job_id)
    assert agent.tools_run == ("extract", "validate", "draft") and agent.steps_started == 3
    assert reader.reads == 1
    assert job.result == pipeline(sample("02-rechnung-de.txt"))


def test_too_little_lease_hands_the_job_back_without_burning_the_attempt(harness: Harness) -> None:
    # Given a worker whose whole lease (3 s) is shorter than extract's bound plus the margin (4 s)
    job_id = submit_doc_prep(harness, {"document": {"text": sample("01-clean-invoice-en.txt")}})
    worker = harness.worker("w1", kinds=doc_prep_kinds(), lease_ms=3_000)
    # When it runs the job
    outcome = worker.handle(harness.wakeup(job_id))
    # Then the job is handed back (queued, attempt given back) with nothing begun
    job = job_of(harness, job_id)
    assert outcome.outcome == "handed_back"
    assert (job.state, job.attempts) == (JobState.QUEUED, 0)
    assert "needs 4000 ms before the lease" in history_view(job)[-1]["reason"]
    assert job.kind_state is not None and agent_of(harness, job_id).steps_started == 0
    # And a worker with a normal lease finishes it
    harness.worker("w2", kinds=doc_prep_kinds()).handle(harness.wakeup(job_id))
    assert job_of(harness, job_id).state is JobState.SUCCEEDED


def test_the_deployed_kind_keeps_back_the_workers_own_safety_margin(harness: Harness) -> None:
    # Given the kind as the package builds it (no fixed margin) and a worker that keeps back
    # 500 ms of its 3 s lease: extract's 2 s bound and that margin fit
    kinds = {**registry(), "doc_prep": EngineKind(doc_prep_kind())}
    job_id = submit_doc_prep(harness, {"document": {"text": sample("01-clean-invoice-en.txt")}})
    harness.worker("w1", kinds=kinds, lease_ms=3_000).handle(harness.wakeup(job_id))
    assert job_of(harness, job_id).state is JobState.SUCCEEDED


def test_a_lease_worn_down_by_a_slow_planner_is_renewed_once(harness: Harness) -> None:
    # Given a planner that takes 7 of the 10 s lease before proposing extract
    def slow_then_fixture(checkpoint: AgentCheckpoint) -> Proposal | None:
        harness.clock.advance(7_000)
        return next_tool(checkpoint)

    kinds = doc_prep_kinds(planner=CallbackPlanner(slow_then_fixture))
    job_id = submit_doc_prep(harness, hosted_payload(), kinds=kinds)
    # When a worker runs it
    harness.worker(kinds=kinds).handle(harness.wakeup(job_id))
    # Then each time the lease was renewed by a fenced save and the tool ran
    job = job_of(harness, job_id)
    assert job.state is JobState.SUCCEEDED and job.attempts == 1
    assert agent_of(harness, job_id).steps_started == 3
