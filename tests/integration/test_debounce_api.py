"""`POST /jobs` with `"debounce"` (DESIGN §21, decisions DB1-DB6): the answers name one pending
job, later ones with `"debounced": true`; bad input is a 400 naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Call

pytestmark = pytest.mark.integration

STEPS = {"steps": [{"name": "a", "cost": 1}]}
DEBOUNCE = {"by": [], "seconds": 60, "keep": "last"}
"""The synthetic kind takes only `steps`: one key per caller (the testbed's tests key by a
payload field)."""


def submit(call: Call, body: dict[str, Any], **kwargs: Any) -> tuple[int, dict[str, Any]]:
    status, answer, _ = call("api-submit-job.json", body=body, **kwargs)
    return status, answer


def test_submissions_with_one_key_answer_one_job(call: Call) -> None:
    body = {"kind": "synthetic", "payload": STEPS, "debounce": DEBOUNCE}
    status, first = submit(call, body)
    assert status == 202 and "debounced" not in first
    status, again = submit(call, {**body, "payload": {**STEPS, "steps": [{"name": "b"}]}})
    assert status == 202 and again["debounced"] is True
    assert again["job_id"] == first["job_id"] and again["status_url"] == first["status_url"]
    _, view, _ = call("api-get-job.json", path_id=first["job_id"])
    assert view["state"] == "queued" and view["next_attempt_at"] is not None
    # another caller: another job
    status, bobs = submit(call, body, user="bob")
    assert status == 202 and bobs["job_id"] != first["job_id"] and "debounced" not in bobs


@pytest.mark.parametrize(
    ("debounce", "extra", "message"),
    [
        ("soon", {}, "'debounce' must be an object"),
        ({}, {}, "'debounce.seconds' is required"),
        ({"seconds": 0}, {}, "'debounce.seconds' must be an integer from 1 to 604800"),
        ({"seconds": True}, {}, "'debounce.seconds' must be an integer"),
        ({"seconds": 5, "keep": "middle"}, {}, "'debounce.keep' must be"),
        ({"seconds": 5, "by": "payload.account"}, {}, "'debounce.by' must be a list"),
        ({"seconds": 5, "by": ["account"]}, {}, "'payload.<field>'"),
        ({"seconds": 5, "by": ["payload.x", "payload.x"]}, {}, "names a field twice"),
        ({"seconds": 5, "max_wait_seconds": 4}, {}, "'debounce.max_wait_seconds' must be"),
        ({"seconds": 5, "window": 1}, {}, "unknown 'debounce' field(s): window"),
        ({"seconds": 5, "by": ["payload.steps"]}, {}, "'payload.steps' is required"),
        ({"seconds": 5}, {"delay_seconds": 5}, "not both"),
    ],
)
def test_bad_debounce_is_a_400_naming_it(
    call: Call, debounce: Any, extra: dict[str, Any], message: str
) -> None:
    body = {"kind": "synthetic", "payload": STEPS, "debounce": debounce, **extra}
    status, answer = submit(call, body)
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert message in answer["error"]["message"]


def test_a_debounced_submission_with_an_idempotency_key_is_a_400(call: Call) -> None:
    body = {"kind": "synthetic", "payload": STEPS, "debounce": {"seconds": 5}}
    status, answer = submit(call, body, headers={"idempotency-key": "k1"})
    assert status == 400 and answer["error"]["code"] == "debounce_with_key"
