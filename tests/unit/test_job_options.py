"""`JobOptions` (decision OW1): each field checked where it is declared, with `POST /jobs`' own
messages; the old keyword arguments build one; what the client sends parses back to the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from leasehold import Budget, JobOptions, ValidationError
from leasehold.domain.options import Submission

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"idempotency_key": "no spaces"}, "Idempotency-Key must be 1–128 characters"),
        ({"budget": Budget(max_steps=10_001)}, "'budget.max_steps' must be between 0 and 10000"),
        ({"deadline_seconds": True}, "'deadline_seconds' must be an integer"),
        ({"max_attempts": 0}, "'max_attempts' must be between 1 and 10"),
        ({"priority": "urgent"}, "'priority' must be one of: high, normal, low"),
        ({"delay_seconds": -1}, "'delay_seconds' must be between 0 and 31536000"),
        ({"run_at": "tomorrow"}, "'run_at' must be an ISO 8601 time with an offset"),
        ({"run_at": datetime(2026, 1, 1)}, "'run_at' needs a UTC offset"),  # noqa: DTZ001
        ({"run_at": "2026-01-01T00:00:00Z", "delay_seconds": 1}, "not both"),
    ],
)
def test_each_field_is_checked_with_the_apis_message(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        JobOptions(**fields)
    # ...and a POST /jobs body with the same field is refused with the same message
    body = {"kind": "k", "payload": {}, **JobOptions.of(None).body_fields()}
    raw = {name: value for name, value in fields.items() if name != "idempotency_key"}
    if "budget" in raw:
        raw["budget"] = {"max_steps": raw["budget"].max_steps}
    if isinstance(raw.get("run_at"), datetime):
        return  # a body's run_at is text
    with pytest.raises(ValidationError, match=message):
        Submission.from_body({**body, **raw}, fields.get("idempotency_key"))


def test_the_old_keywords_build_the_same_options() -> None:
    built = JobOptions.of(None, budget={"max_cost": 5}, max_attempts=2, priority=None)
    assert built == JobOptions(budget=Budget(max_cost=5), max_attempts=2)
    # keywords lay over an options value; an unknown one is a TypeError, as a keyword was
    assert JobOptions.of(built, max_attempts=3) == JobOptions(budget=Budget(5), max_attempts=3)
    with pytest.raises(TypeError, match="unknown job option"):
        JobOptions.of(None, retries=2)
    with pytest.raises(ValidationError, match="'budget' must be an object"):
        JobOptions.of(None, budget={"max_cost": 1, "other": 2})


def test_what_the_client_sends_parses_back_to_the_same_options() -> None:
    options = JobOptions(
        idempotency_key="k-1",
        budget=Budget(max_cost=5, max_steps=3),
        deadline_seconds=60,
        max_attempts=4,
        priority="low",
        run_at=datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    )
    body = {"kind": "k", "payload": {"a": 1}, **options.body_fields()}
    parsed = Submission.from_body(body, "k-1").options
    assert parsed.run_at_ms == options.run_at_ms
    assert parsed == JobOptions(**{**options.__dict__, "run_at": parsed.run_at})
    delayed = JobOptions(delay_seconds=30)
    assert Submission.from_body({"kind": "k", "payload": {}, **delayed.body_fields()}).options == (
        delayed
    )


def test_an_explicit_null_is_refused_where_post_jobs_refuses_it() -> None:
    for name in ("deadline_seconds", "max_attempts", "priority"):
        with pytest.raises(ValidationError):
            Submission.from_body({"kind": "k", "payload": {}, name: None})
    for name in ("budget", "run_at", "delay_seconds"):  # null: the default
        assert Submission.from_body({"kind": "k", "payload": {}, name: None}).options == (
            JobOptions()
        )
