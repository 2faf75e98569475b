"""`submit_direct` and `job_writes` with what is not Unicode text — a lone UTF-16 surrogate, which
no UTF-8 request can carry — raise leasehold's ValidationError naming where it is, as `POST
/jobs` answers 400, never a raw UnicodeEncodeError from deep in a hash or a boto3 call (issue 28
item 8). Nothing is written (moto, the table of template.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Kind, Owner, StepContext, ValidationError
from leasehold.apps import job_writes, submit_direct
from tests.support.harness import ALICE, Harness

echo = Kind("echo_text")


@echo.step()
def keep(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"text": "a\ud800b"}, "'payload.text'"),
        ({"items": [{"name": "ok"}, {"name": "\udfff"}]}, "'payload.items[1].name'"),
        ({"bad\udc00key": 1}, "a key in 'payload'"),
    ],
)
def test_a_lone_surrogate_in_the_payload_is_a_validation_error_naming_it(
    harness: Harness, payload: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit_direct(
            harness.table, echo, payload, ALICE, client=harness.dynamodb,
            now_ms=harness.clock.now_ms(), idempotency_key="k-1",
        )  # fmt: skip
    assert where in str(refused.value)
    assert refused.value.code == "invalid_request"
    with pytest.raises(ValidationError):
        job_writes(harness.table, echo, payload, ALICE, now_ms=harness.clock.now_ms())
    assert harness.dynamodb.scan(TableName=harness.table)["Items"] == []


@pytest.mark.parametrize(
    ("owner", "where"),
    [(Owner("acme", "al\ud800ice"), "the owner's user id"), (Owner("ac\udfffme", "a"), "tenant")],
)
def test_a_lone_surrogate_in_the_owner_is_a_validation_error(
    harness: Harness, owner: Owner, where: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit_direct(
            harness.table, echo, {"text": "hi"}, owner, client=harness.dynamodb,
            now_ms=harness.clock.now_ms(), idempotency_key="k-1",
        )  # fmt: skip
    assert where in str(refused.value)
    assert harness.dynamodb.scan(TableName=harness.table)["Items"] == []


def test_text_that_is_unicode_goes_through(harness: Harness) -> None:
    made = submit_direct(
        harness.table, echo, {"text": "😀 ok"}, ALICE, client=harness.dynamodb,
        now_ms=harness.clock.now_ms(),
    )  # fmt: skip
    assert made.created and made.state == "queued"
