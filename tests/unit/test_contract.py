"""The oracle the suites check every answer with (tests/support/contract.py) can fail: each way an
answer can break docs/openapi.yaml is refused, and a conforming exchange passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.contract import ContractViolationError, Exchange, check_exchange

JOB_ID = "j_019d2a7f3c01f0e1d2c3b4"
VIEW = {
    "job_id": JOB_ID,
    "kind": "synthetic",
    "state": "queued",
    "priority": "normal",
    "attempts": 0,
    "max_attempts": 3,
    "version": 1,
    "epoch": 0,
    "created_at": "2026-11-29T15:00:00.000Z",
    "updated_at": "2026-11-29T15:00:00.000Z",
    "deadline_at": "2026-11-29T16:00:00.000Z",
    "next_attempt_at": "2026-11-29T15:00:00.000Z",
    "budget": {"max_cost": None, "cost_used": 0, "max_steps": None, "steps_used": 0},
    "progress": {"step": 0, "steps_total": 1},
    "cancel_requested": False,
    "replays": 0,
}
ACCEPTED = {"job_id": JOB_ID, "state": "queued", "status_url": f"/jobs/{JOB_ID}"}
SUBMIT = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
JSON = {"Content-Type": "application/json"}


def _get(body: Any, status: int = 200, path: str = f"/jobs/{JOB_ID}") -> Exchange:
    return Exchange(
        "GET", path, {}, {"X-Demo-User": "alice"}, None, status, JSON, json.dumps(body).encode()
    )


def _submit(request: Any, status: int, headers: dict[str, str], answer: Any) -> Exchange:
    return Exchange(
        "POST",
        "/jobs",
        {},
        {"X-Demo-User": "alice", "Content-Type": "application/json"},
        json.dumps(request).encode(),
        status,
        {**JSON, **headers},
        json.dumps(answer).encode(),
        route="/jobs",
    )


def test_conforming_exchanges_pass() -> None:
    check_exchange(_get(VIEW))
    check_exchange(_get({"error": {"code": "not_found", "message": "no job"}}, 404))
    check_exchange(_submit(SUBMIT, 202, {"Location": f"/jobs/{JOB_ID}"}, ACCEPTED))
    # A request the document refuses is fine when the API refused it too
    bad = {**SUBMIT, "colour": "red"}
    check_exchange(_submit(bad, 400, {}, {"error": {"code": "invalid_request", "message": "x"}}))
    # A path no route has: the 404 envelope
    check_exchange(_get({"error": {"code": "not_found", "message": "no such route"}}, 404, "/x"))


@pytest.mark.parametrize(
    ("exchange", "why"),
    [
        (_get({**VIEW, "surprise": 1}), "surprise"),
        (_get({k: v for k, v in VIEW.items() if k != "epoch"}), "epoch"),
        (_get({**VIEW, "created_at": 1_795_964_400_000}), "created_at"),
        (_get({**VIEW, "state": "finished"}), "state"),
        (_get({**VIEW, "priority": "urgent"}), "priority"),
        (_get({**VIEW, "state": "running"}), "next_attempt_at"),  # only while queued
        (_get({"error": {"code": "nope", "message": "x"}}, 404), "not_found"),
        (_get({"error": {"code": "internal_error", "message": "x"}}, 500), "500"),
        (_submit(SUBMIT, 202, {}, ACCEPTED), "Location"),
        (
            _submit({**SUBMIT, "colour": "red"}, 202, {"Location": f"/jobs/{JOB_ID}"}, ACCEPTED),
            "colour",
        ),
        (_get({"error": "no"}, 404, "/x"), "no route"),
        (_get({"error": {"code": "not_found", "message": "x"}}, 200, "/x"), "no route"),
    ],
    ids=[
        "undocumented field",
        "missing field",
        "time as a number",
        "unknown state",
        "unknown priority",
        "next_attempt_at outside queued",
        "wrong error code for 404",
        "undocumented status",
        "missing Location",
        "accepted request the document refuses",
        "no route, not the envelope",
        "no route, not a 404",
    ],
)
def test_each_way_an_answer_breaks_the_document_is_refused(exchange: Exchange, why: str) -> None:
    with pytest.raises(ContractViolationError, match=why):
        check_exchange(exchange)
