"""The views the API answers with, built from items in every state they can be in, against
docs/openapi.yaml's schemas — including shapes the HTTP suites rarely reach (an enrichment, an
open effect, an operator's resolution, a failed title)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from leasehold.domain.job import Budget, Checkpoint, Job, Owner, new_job
from leasehold.domain.states import JobState
from leasehold.service.view import job_view, operator_view, ops_row
from leasehold_apps.reading_list.bookmark import Bookmark
from leasehold_apps.reading_list.service import bookmark_view
from tests.support.yamlfile import read_yaml

DOCUMENT = read_yaml(Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml")
NOW = 1_795_964_400_000
OWNER = Owner("study-group", "alice")
JOB_ID = "j_019d2a7f3c01f0e1d2c3b4"
BOOKMARK_ID = "b_019d2a7f3c00a1b2c3d4e5"


def _errors(schema_name: str, value: Any) -> list[str]:
    validator = Draft202012Validator(
        {"$ref": f"#/components/schemas/{schema_name}", "components": DOCUMENT["components"]},
        format_checker=FormatChecker(),
    )
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]


def _bookmark(**overrides: Any) -> Bookmark:
    fields: dict[str, Any] = {
        "bookmark_id": BOOKMARK_ID,
        "tenant": "study-group",
        "owner": "alice",
        "url": "https://example.org/a",
        "note": "",
        "version": 1,
        "source_version": 1,
        "created_at": NOW,
        "updated_at": NOW,
        "title_job_id": JOB_ID,
    }
    return Bookmark(**{**fields, **overrides})


ENRICHED = {
    "summary": "A page.",
    "tags": ["a"],
    "receipt": "rcpt_1",
    "operation_id": f"{JOB_ID}:0:1",
    "job_id": JOB_ID,
    "status": "ready",
    "at": NOW + 5,
}
ENRICH_FAILED = {
    "job_id": JOB_ID,
    "error": {"code": "provider_rejected", "message": "no"},
    "status": "failed",
    "at": NOW + 5,
}


@pytest.mark.parametrize("enrichment", [ENRICHED, ENRICH_FAILED], ids=["ready", "failed"])
def test_an_enrichment_time_is_iso_8601_like_every_time_in_the_api(
    enrichment: dict[str, Any],
) -> None:
    # Found by make fuzz: the stored epoch milliseconds went out as they were
    view = bookmark_view(_bookmark(enrichment=dict(enrichment)), OWNER, "succeeded")
    assert view["enrichment"]["at"] == "2026-11-29T15:00:00.005Z"
    assert _errors("BookmarkView", view) == []


@pytest.mark.parametrize(
    "bookmark",
    [
        _bookmark(),
        _bookmark(title="T", title_status="ready", read_by={"alice"}, title_mode="ok"),
        _bookmark(title_status="failed", title_error={"code": "timeout", "message": "slow"}),
    ],
    ids=["pending", "ready", "failed"],
)
@pytest.mark.parametrize("job_state", ["queued", "succeeded", None])
def test_bookmark_views_match_the_document(bookmark: Bookmark, job_state: str | None) -> None:
    assert _errors("BookmarkView", bookmark_view(bookmark, OWNER, job_state)) == []


def _job(kind: str = "synthetic", **overrides: Any) -> Job:
    payload: dict[str, Any] = {"steps": [{"name": "a"}, {"name": "b", "effect": True}]}
    if kind in {"title", "enrich"}:
        payload = {"bookmark_id": BOOKMARK_ID, "url": "https://example.org/a", "source_version": 1}
    job = new_job(JOB_ID, kind, OWNER, payload, now=NOW, steps_total=2, budget=Budget(5, None))
    for name, value in overrides.items():
        setattr(job, name, value)
    return job


OPERATION = {
    "provider": "enrichment",
    "key": f"{JOB_ID}:0:1",
    "fingerprint": "ab" * 16,
    "capability": "idempotent_key",
    "state": "confirmed",
    "step": 0,
    "submitted_at": NOW,
    "settled_at": NOW + 3,
    "receipt": {"key": f"{JOB_ID}:0:1", "receipt": "rcpt_1", "summary": "s", "tags": ["t"]},
    "reconciled": True,
}
JOBS = {
    "queued": _job(),
    "running with an open effect": _job(
        state=JobState.RUNNING,
        attempts=1,
        epoch=1,
        next_attempt_at=NOW,
        lease_owner="worker-1@4242",
        lease_expires_at=NOW + 30_000,
        effect_intent={
            "operation_id": f"{JOB_ID}:1",
            "idempotency_key": f"{JOB_ID}:1",
            "step": 1,
            "started_at": NOW + 10,
        },
        checkpoint=Checkpoint(next_step=1, cost_used=0, steps_used=1),
    ),
    "waiting for approval": _job(
        state=JobState.WAITING_APPROVAL,
        approval={"step": 1, "step_name": "b", "requested_at": NOW + 20},
    ),
    "succeeded": _job(
        state=JobState.SUCCEEDED,
        result={"steps_completed": 2, "cost_used": 0, "outputs": [{"step": "a", "cost": 0}]},
        history=[{"ev": "succeeded", "t": NOW + 50, "s": "succeeded", "a": 1, "e": 1, "w": "w1"}],
    ),
    "resolved by an operator": _job(
        state=JobState.FAILED,
        stop_reason="resolved_by_operator",
        error={"code": "resolved_failed", "message": "resolved as failed by ops: no charge"},
        resolution={
            "outcome": "failed",
            "by": "ops",
            "at": NOW + 60,
            "note": "no charge",
            "operation_id": f"{JOB_ID}:1",
        },
    ),
    "enrich, confirmed": _job(
        "enrich",
        state=JobState.SUCCEEDED,
        operations={f"{JOB_ID}:0:1": OPERATION},
        result={
            "bookmark_id": BOOKMARK_ID,
            "operation_id": f"{JOB_ID}:0:1",
            "receipt": "rcpt_1",
            "summary": "s",
            "tags": ["t"],
        },
    ),
    "parked while a durable sleep was due (its kind paused)": _job(
        wait={"type": "time", "step": 0, "at": NOW + 5},
        next_attempt_at=NOW + 5_000_000,
        waiting_for={"paused": {"since": "2026-11-29T15:00:00.000Z", "by": "ops"}},
        checkpoint=Checkpoint(next_step=1, cost_used=0, steps_used=1),
    ),
    "title, dead": _job(
        "title",
        state=JobState.DEAD,
        stop_reason="attempts_exhausted",
        error={"code": "timeout", "message": "slow", "tool": "extract"},
    ),
}


@pytest.mark.parametrize("job", list(JOBS.values()), ids=list(JOBS))
def test_job_views_match_the_document(job: Job) -> None:
    assert _errors("JobView", job_view(job)) == []
    assert _errors("OperatorJobView", operator_view(job, NOW + 100)) == []
    assert _errors("OpsRow", ops_row(job, NOW + 100)) == []


def test_the_document_refuses_a_view_that_drifts() -> None:
    # The schemas are closed: a field the document does not name is refused, so a view that
    # grows one fails the tests above until the document says what it is
    view = job_view(JOBS["queued"])
    assert _errors("JobView", {**view, "surprise": 1}) != []
    assert _errors("JobView", {k: v for k, v in view.items() if k != "epoch"}) != []
    assert _errors("JobView", {**view, "created_at": NOW}) != []


def test_a_parked_job_says_it_waits_for_its_kinds_resume_before_any_other_wait() -> None:
    job = JOBS["parked while a durable sleep was due (its kind paused)"]
    assert job_view(job, now=NOW + 100)["waiting_for"] == {
        "paused": {"since": "2026-11-29T15:00:00.000Z", "by": "ops"}
    }
