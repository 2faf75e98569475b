"""The doc_prep kind on the whole engine (arch §7), on `leasehold.testing` as its user would test
it: the sample documents end to end (inline and from the documents bucket), the 3-step budget
across a crash, a replay and a retry, and the time checks on the testbed's clock. What needs a
worker of its own (the stored error details, a worker's own lease and margin, a crash after the
n-th save) is in test_doc_prep_worker.py on the repository's harness; planners that fail or lie
are in test_doc_prep_planners.py."""

from __future__ import annotations

import pytest

from leasehold import Owner, ValidationError
from leasehold.testing import DEFAULT_OWNER, WorkerCrashed
from tests.support.documents import (
    SAMPLE_NAMES,
    TESTBED_KEY,
    doc_prep_testbed,
    pipeline,
    progress_of,
    sample,
    scripted,
)

# The problem codes each sample yields with the default required fields (samples/documents/).
EXPECTED_CODES = {
    "01-clean-invoice-en.txt": set(),
    "02-rechnung-de.txt": set(),
    "03-wrong-iban.txt": {"iban_checksum"},
    "04-missing-vat.txt": {"missing"},
    "05-letterhead-odd-layout.txt": set(),
    "06-several-problems.txt": {
        "vat_unrecognised",
        "iban_format",
        "due_before_invoice",
        "currency_unknown",
    },
    "07-unreadable-values.txt": {"date_unparsed", "amount_unparsed"},
}
CAROL = Owner("other-group", "carol")


# ------------------------------------------------------------------ the tools, end to end


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_each_sample_document_runs_end_to_end_inline(name: str) -> None:
    with doc_prep_testbed(bucket=False) as (tb, _):
        # Given a sample document submitted inline, with the default (fixture) planner
        text = sample(name)
        job_id = tb.submit("doc_prep", {"document": {"text": text}})
        # When a worker runs the job
        tb.run_until_idle()
        # Then it succeeds with what the three tools make of the document, in one engine step
        view = tb.view(job_id)
        assert view["state"] == "succeeded"
        assert view["result"] == pipeline(text)
        assert {p["code"] for p in view["result"]["problems"]} == EXPECTED_CODES[name]
        assert view["budget"]["steps_used"] == 1 and view["attempts"] == 1
        assert view["agent"] == {
            "tools_run": ["extract", "validate", "draft"],
            "steps_started": 3,
            "tool_in_flight": None,
        }


def test_a_document_in_the_bucket_is_read_once_by_extract() -> None:
    with doc_prep_testbed() as (tb, reader):
        assert reader is not None
        # Given the German sample uploaded under the caller's tenant
        text = sample("02-rechnung-de.txt")
        tb.client("s3").put_object(Bucket="documents", Key=TESTBED_KEY, Body=text.encode("utf-8"))
        job_id = tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}})
        # When a worker runs it
        tb.run_until_idle()
        # Then the result is the same as for the inline text, and S3 was read once
        view = tb.view(job_id)
        assert view["state"] == "succeeded"
        assert view["result"] == pipeline(text)
        assert view["result"]["fields"]["supplier_name"] == "Müller & Söhne GmbH"
        assert reader.reads == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (None, "document_not_found"),
        (b"x" * (512 * 1024 + 1), "document_unreadable"),
        (b"\xff\xfe not utf-8", "document_unreadable"),
        (b"   \n ", "document_unreadable"),
    ],
)
def test_a_document_that_cannot_be_used_fails_the_job(body: bytes | None, code: str) -> None:
    with doc_prep_testbed() as (tb, _):
        if body is not None:
            tb.client("s3").put_object(Bucket="documents", Key=TESTBED_KEY, Body=body)
        job_id = tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"], view["error"]["code"]) == (
            "failed",
            "handler_error",
            code,
        )
        assert progress_of(tb, job_id).steps_started == 1  # extract was begun: the step is spent


def test_a_bucket_document_with_no_bucket_configured_fails_before_a_step_is_spent() -> None:
    with doc_prep_testbed(bucket=False) as (tb, _):
        job_id = tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}})
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["error"]["code"]) == ("failed", "documents_unconfigured")
        assert tb.progress(job_id) is None


def test_another_tenants_key_is_refused_at_accept() -> None:
    with doc_prep_testbed() as (tb, _):
        with pytest.raises(ValidationError, match="under tenants/other-group/documents/"):
            tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}}, owner=CAROL)
        with pytest.raises(ValidationError, match="s3_key"):
            key = f"tenants/{DEFAULT_OWNER.tenant}/../x"
            tb.submit("doc_prep", {"document": {"s3_key": key}})


# ------------------------------------------------------------------ the 3-step budget


def test_a_fourth_proposal_ends_the_job_budget_exhausted_without_running() -> None:
    with doc_prep_testbed(bucket=False) as (tb, _):
        payload = {
            "document": {"text": sample("01-clean-invoice-en.txt")},
            "planner": scripted("extract", "validate", "draft", "draft"),
        }
        job_id = tb.submit("doc_prep", payload)
        tb.run_until_idle()
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"], view["error"]["code"]) == (
            "failed",
            "budget_exhausted",
            "budget_exhausted",
        )
        agent = progress_of(tb, job_id)
        assert agent.tools_run == ("extract", "validate", "draft") and agent.steps_started == 3
        assert tb.history(job_id)[-1]["note"] == "tool=draft"


def test_a_crash_inside_a_tool_spends_its_step() -> None:
    # Given a worker that dies while extract reads the document (the first read only)
    def die_on_first_read(reads: int) -> None:
        if reads == 1:
            raise WorkerCrashed("the worker died inside extract")

    with doc_prep_testbed(hook=die_on_first_read) as (tb, _):
        body = sample("01-clean-invoice-en.txt").encode()
        tb.client("s3").put_object(Bucket="documents", Key=TESTBED_KEY, Body=body)
        job_id = tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}})
        assert tb.run_until_idle().outcomes(job_id) == ["crashed"]
        # Then the step was saved as begun before the tool ran
        agent = progress_of(tb, job_id)
        assert (agent.steps_started, agent.tool_in_flight, agent.tools_run) == (1, "extract", ())
        # When its lease runs out and another worker resumes: extract again (2nd step), validate
        # (3rd), and draft would be a 4th step in the job's life
        assert tb.advance(tb.settings.lease_seconds + 1) == {"rescued": 1}
        assert tb.run_until_idle().outcomes(job_id) == ["failed"]
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"]) == ("failed", "budget_exhausted")
        agent = progress_of(tb, job_id)
        assert agent.tools_run == ("extract", "validate") and agent.steps_started == 3


def test_a_replay_keeps_the_steps_already_spent() -> None:
    with doc_prep_testbed() as (tb, _):
        # Given a job that failed at extract because its document was not there yet
        job_id = tb.submit("doc_prep", {"document": {"s3_key": TESTBED_KEY}})
        tb.run_until_idle()
        assert tb.view(job_id)["error"]["code"] == "document_not_found"
        # When the document is uploaded and an operator replays the job
        body = sample("01-clean-invoice-en.txt").encode()
        tb.client("s3").put_object(Bucket="documents", Key=TESTBED_KEY, Body=body)
        tb.replay(job_id, note="document uploaded")
        tb.run_until_idle()
        # Then the replay resumes from the saved progress: the failed extract counted, so
        # extract and validate run and draft would be the 4th step of the job's life
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"]) == ("failed", "budget_exhausted")
        assert progress_of(tb, job_id).tools_run == ("extract", "validate")


# ------------------------------------------------------------------ time


def test_a_deadline_too_close_for_the_next_tool_ends_the_job_dead() -> None:
    with doc_prep_testbed(bucket=False) as (tb, _):
        # Given a job with a 10 s deadline, 7 s of which pass before a worker claims it
        payload = {"document": {"text": sample("01-clean-invoice-en.txt")}}
        job_id = tb.submit("doc_prep", payload, deadline_seconds=10)
        tb.advance(7)
        # When the worker runs it: extract needs 2 s + the 2 s margin, and 3 s remain
        tb.run_until_idle()
        # Then no attempt can finish in time: dead / deadline_exceeded now, nothing begun
        view = tb.view(job_id)
        assert (view["state"], view["stop_reason"], view["error"]["code"]) == (
            "dead",
            "deadline_exceeded",
            "deadline_too_close",
        )
        assert tb.progress(job_id) is None  # refused before anything was saved
