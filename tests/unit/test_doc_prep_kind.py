"""The doc_prep kind's pure parts: its one engine step and bound, the accept rule with the
caller's tenant, the demo's planner delay, the job view of its progress, the documents reader's
error mapping (botocore's Stubber: no I/O) and the hosted planner's settings."""

from __future__ import annotations

import io
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from leasehold import SettingError
from leasehold.domain.errors import LeaseholdError, StopJobError, ValidationError
from leasehold.domain.job import Owner, new_job
from leasehold.service.view import job_view, ops_row
from leasehold_apps.doc_agent import doc_prep_kind
from leasehold_apps.doc_agent.documents import (
    DocumentNotFoundError,
    DocumentUnavailableError,
    S3Documents,
)
from leasehold_apps.doc_agent.guard import SAFETY_MARGIN_MS, TOOL_BOUND_MS
from leasehold_apps.doc_agent.kind import PROPOSALS_PER_JOB, STEP_MARGIN_MS, TOOLS_BOUND_MS
from leasehold_apps.doc_agent.settings import AgentSettings, hosted_planner
from leasehold_apps.doc_agent.spec import MAX_STEP_DELAY_MS
from leasehold_apps.doc_agent.vocabulary import MAX_TOOL_STEPS
from tests.support.kinds import registry

ALICE = Owner("study-group", "alice")
CAROL = Owner("other-group", "carol")
KEY = "tenants/study-group/documents/invoice.txt"


def test_the_kinds_bounds_agree_with_the_guards() -> None:
    assert sum(TOOL_BOUND_MS.values()) == TOOLS_BOUND_MS
    assert STEP_MARGIN_MS == SAFETY_MARGIN_MS
    assert PROPOSALS_PER_JOB == MAX_TOOL_STEPS + 1


def test_doc_prep_is_one_submittable_engine_step_bounding_every_tool_and_delay() -> None:
    kind = registry()["doc_prep"]
    assert kind.submittable
    (step,) = kind.plan({"document": {"text": "x"}})
    assert (step.name, step.cost, step.needs_approval, step.has_effect) == (
        "agent",
        0,
        False,
        False,
    )
    assert step.duration_ms == 6_000
    delayed = {"kind": "fixture", "step_delay_ms": 1_500}
    (slow,) = kind.plan({"document": {"text": "x"}, "planner": delayed})
    assert slow.duration_ms == 6_000 + 4 * 1_500
    # The slowest demo job still fits the local stack's MAX_STEP_SECONDS (20)
    (slowest,) = kind.plan(
        {"document": {"text": "x"}, "planner": {"step_delay_ms": MAX_STEP_DELAY_MS}}
    )
    assert slowest.duration_ms <= 20_000


def test_the_steps_bound_is_exact_to_the_millisecond_for_every_planner_delay() -> None:
    kind = registry()["doc_prep"]
    for delay in range(MAX_STEP_DELAY_MS + 1):
        planner = {"kind": "fixture", "step_delay_ms": delay}
        (step,) = kind.plan({"document": {"text": "x"}, "planner": planner})
        assert step.duration_ms == 6_000 + 4 * delay


def test_accept_checks_the_key_against_the_callers_tenant() -> None:
    kind = doc_prep_kind()
    kind.validate_for({"document": {"s3_key": KEY}}, ALICE)
    with pytest.raises(ValidationError, match="tenants/other-group/documents/"):
        kind.validate_for({"document": {"s3_key": KEY}}, CAROL)


def test_accept_allows_hosted_only_when_a_hosted_planner_is_configured() -> None:
    payload = {"document": {"text": "x"}, "planner": {"kind": "hosted"}}
    with pytest.raises(ValidationError, match="model endpoint"):
        doc_prep_kind().validate_for(payload, ALICE)
    doc_prep_kind(hosted_planner=lambda: None).validate_for(payload, ALICE)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    ("planner", "ok"),
    [
        ({"kind": "fixture", "step_delay_ms": 0}, True),
        ({"kind": "fixture", "step_delay_ms": MAX_STEP_DELAY_MS}, True),
        (
            {
                "kind": "scripted",
                "proposals": [{"tool": "extract", "args": {}}],
                "step_delay_ms": 500,
            },
            True,
        ),  # fmt: skip
        ({"kind": "fixture", "step_delay_ms": MAX_STEP_DELAY_MS + 1}, False),
        ({"kind": "fixture", "step_delay_ms": -1}, False),
        ({"kind": "fixture", "step_delay_ms": True}, False),
        ({"kind": "fixture", "step_delay_ms": 1.5}, False),
        ({"kind": "hosted", "step_delay_ms": 100}, False),
    ],
)
def test_the_planners_step_delay_is_bounded_and_not_for_a_hosted_model(
    planner: dict[str, Any], ok: bool
) -> None:
    kind = doc_prep_kind(hosted_planner=lambda: None)  # type: ignore[arg-type,return-value]
    payload = {"document": {"text": "x"}, "planner": planner}
    if ok:
        kind.validate_for(payload, ALICE)
    else:
        with pytest.raises(ValidationError, match="step_delay_ms"):
            kind.validate_for(payload, ALICE)


def test_a_kind_may_end_a_job_failed_or_dead_only() -> None:
    assert StopJobError("deadline_exceeded", "x", "y", state="dead").state == "dead"
    assert StopJobError("tool_rejected", "x", "y").state == "failed"
    with pytest.raises(ValueError, match="failed or dead"):
        StopJobError("tool_rejected", "x", "y", state="succeeded")


def test_the_views_show_the_agents_progress_by_names_and_counters_only() -> None:
    job = new_job("j_1", "doc_prep", ALICE, {"document": {"text": "x"}}, now=0, steps_total=1)
    assert "agent" not in job_view(job, registry())
    job.kind_state = {
        "version": 1,
        "next_step": 1,
        "steps_started": 2,
        "tools_run": ["extract"],
        "tool_in_flight": "validate",
        "fields": {"supplier_name": "Secret Supplier Ltd"},
        "problems": [],
        "draft_note": None,
    }
    expected = {"tools_run": ["extract"], "steps_started": 2, "tool_in_flight": "validate"}
    assert job_view(job, registry())["agent"] == expected
    assert ops_row(job, now=0, kinds=registry())["agent"] == expected
    assert "Secret Supplier" not in str(job_view(job, registry())) + str(
        ops_row(job, now=0, kinds=registry())
    )


# ------------------------------------------------------------------ the documents bucket reader


def _reader() -> tuple[S3Documents, Stubber]:
    client = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    ).client("s3")
    return S3Documents(client, "docs"), Stubber(client)


def test_the_reader_asks_for_one_byte_more_than_the_limit_and_no_more() -> None:
    reader, stub = _reader()
    data = b"x" * 11
    stub.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(data), len(data))},
        {"Bucket": "docs", "Key": KEY, "Range": "bytes=0-10"},
    )
    with stub:
        assert reader.read(KEY, 10) == data
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("NoSuchKey", 404, DocumentNotFoundError),
        ("AccessDenied", 403, DocumentNotFoundError),
        ("SlowDown", 503, DocumentUnavailableError),
        ("InternalError", 500, DocumentUnavailableError),
        ("InvalidObjectState", 403, LeaseholdError),
    ],
)
def test_the_readers_errors_say_whether_a_retry_can_help(
    code: str, status: int, error: type[LeaseholdError]
) -> None:
    reader, stub = _reader()
    stub.add_client_error("get_object", service_error_code=code, http_status_code=status)
    with stub, pytest.raises(error) as raised:
        reader.read(KEY, 10)
    assert type(raised.value) is error


def test_an_empty_object_reads_as_no_bytes() -> None:
    reader, stub = _reader()
    stub.add_client_error("get_object", service_error_code="InvalidRange", http_status_code=416)
    with stub:
        assert reader.read(KEY, 10) == b""


# ------------------------------------------------------------------ settings


def _settings(monkeypatch: pytest.MonkeyPatch, **overrides: str) -> AgentSettings:
    """The agent's settings as a cold start reads them, from this environment."""
    env = {
        "DOCUMENTS_BUCKET": "docs", "HOSTED_PLANNER_ENDPOINT": "", "HOSTED_PLANNER_MODEL": "",
        "HOSTED_PLANNER_API_KEY_SECRET": "",
    }  # fmt: skip
    for name, value in (env | overrides).items():
        monkeypatch.setenv(name, value)
    return AgentSettings.from_env()


def test_the_hosted_planner_is_off_unless_an_endpoint_and_a_model_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = _settings(monkeypatch)
    assert settings.hosted_planner_endpoint == "" and settings.documents_bucket == "docs"
    with pytest.raises(SettingError, match="HOSTED_PLANNER_MODEL"):
        _settings(monkeypatch, HOSTED_PLANNER_ENDPOINT="https://models.example/v1/chat")
    with pytest.raises(SettingError, match="HOSTED_PLANNER_API_KEY_SECRET"):
        _settings(monkeypatch, HOSTED_PLANNER_API_KEY_SECRET="arn:aws:secretsmanager:x")
    with pytest.raises(SettingError, match="DOCUMENTS_BUCKET"):
        _settings(monkeypatch, DOCUMENTS_BUCKET="")


def test_the_hosted_planner_is_built_only_when_configured_and_checked_at_cold_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from leasehold_apps.doc_agent.hosted import HostedPlannerConfigError

    assert hosted_planner(_settings(monkeypatch)) is None
    configured = {"HOSTED_PLANNER_ENDPOINT": "https://models.example/v1/chat/completions",
                  "HOSTED_PLANNER_MODEL": "small"}  # fmt: skip
    factory = hosted_planner(_settings(monkeypatch, **configured))
    assert callable(factory)  # built, not called: no request, no secret read at cold start
    plain_http = configured | {"HOSTED_PLANNER_ENDPOINT": "http://models.example/v1/chat"}
    with pytest.raises(HostedPlannerConfigError, match="https"):
        hosted_planner(_settings(monkeypatch, **plain_http))
