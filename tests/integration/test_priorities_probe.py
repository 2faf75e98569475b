"""Hostile inputs for priorities and the queued listing's cursors, through the real Api
handler: every one a clear 4xx, never a 500."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import Call, call_fixture

STEPS = {"steps": [{"name": "a", "cost": 1}]}


@pytest.fixture
def call(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """A deployment that lets every tenant ask for high priority (the default lets none but
    operators: tests/integration/test_tenant_limits.py)."""
    yield from call_fixture(monkeypatch, HIGH_PRIORITY_TENANTS="*")


@pytest.mark.parametrize(
    "priority",
    [None, True, False, 0, 1, 1.5, "", "HIGH", "urgent", " high", [], ["high"], {}, {"p": "high"}],
)
def test_every_bad_priority_is_a_400_naming_it(call: Call, priority: Any) -> None:
    body = {"kind": "synthetic", "payload": STEPS, "priority": priority}
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 400, answer
    assert "priority" in answer["error"]["message"], answer


@pytest.mark.parametrize("priority", ["high", "normal", "low"])
def test_each_priority_is_accepted_and_shown(call: Call, priority: str) -> None:
    body = {"kind": "synthetic", "payload": STEPS, "priority": priority}
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 202, answer
    status, view, _ = call("api-get-job.json", path_id=answer["job_id"])
    assert view["priority"] == priority


def test_same_key_with_and_without_normal_is_the_same_job(call: Call) -> None:
    plain = {"kind": "synthetic", "payload": STEPS}
    _, first, _ = call("api-submit-job.json", body=plain, headers={"idempotency-key": "k"})
    status, again, _ = call(
        "api-submit-job.json",
        body={**plain, "priority": "normal"},
        headers={"idempotency-key": "k"},
    )
    assert status == 202 and again["job_id"] == first["job_id"]
    status, other, _ = call(
        "api-submit-job.json", body={**plain, "priority": "high"}, headers={"idempotency-key": "k"}
    )
    assert status == 409, other


def _b64(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "due",
        "DUE",
        "due ",
        _b64({"gsi1pk": {"S": "due"}}),
        _b64({"gsi1pk": "due"}),
        _b64({"gsi1pk": {"S": 1}}),
        _b64({"gsi1pk": {"S": "due"}, "pk": {"S": "x"}, "sk": {"S": "x"}, "gsi1sk": {"N": "1"}}),
        _b64({"gsi1pk": {"S": "dead"}, "pk": {"S": "x"}, "sk": {"S": "x"}, "gsi1sk": {"S": "1"}}),
        _b64([1]),
        _b64("due"),
        "!!!",
    ],
)
@pytest.mark.parametrize("state", ["queued", "running", "dead", "unknown"])
def test_forged_cursors_are_400_not_500(call: Call, cursor: str, state: str) -> None:
    status, body, _ = call(
        "api-ops-jobs.json", user="ops", query={"state": state, "cursor": cursor}
    )
    assert status in {200, 400}, (status, body)
    if state != "queued" or cursor not in {"due"}:
        assert status == 400 or body["jobs"] == [], (status, body)


def test_due_start_cursor_with_filters(call: Call) -> None:
    for tenant_user in ("alice", "carol"):
        body = {"kind": "synthetic", "payload": STEPS, "delay_seconds": 7200}
        assert call("api-submit-job.json", body=body, user=tenant_user)[0] == 202
    for query in ({}, {"kind": "synthetic"}, {"tenant": "study-group"}, {"kind": "nope"}):
        status, page, _ = call(
            "api-ops-jobs.json", user="ops", query={"state": "queued", "cursor": "due", **query}
        )
        assert status == 200, (query, page)
