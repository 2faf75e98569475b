"""`Debounce` (decisions DB1-DB6): what a rule may be, its key, and when its job is due."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Debounce, JobOptions, Owner, ValidationError

pytestmark = pytest.mark.unit

ALICE = Owner("t-1", "alice")


def test_each_submission_pushes_the_due_time_but_never_past_max_wait() -> None:
    rule = Debounce(seconds=10, max_wait_seconds=30)
    start = 1_000_000
    assert rule.due(start, start) == start + 10_000
    assert rule.due(start + 15_000, start) == start + 25_000
    assert rule.due(start + 25_000, start) == start + 30_000  # capped by max_wait
    assert rule.due(start + 90_000, start) == start + 30_000  # past it: due already
    assert Debounce(seconds=10).max_wait == 100  # default 10 × seconds
    assert Debounce(seconds=86_400).max_wait == 7 * 24 * 3600  # at most 7 days


def test_the_key_is_the_kinds_the_owners_and_the_by_values() -> None:
    rule = Debounce(by=["payload.account"], seconds=5)
    key = rule.key("k", ALICE, {"account": "a", "other": 1})
    assert key == rule.key("k", ALICE, {"account": "a", "other": 2})
    assert key != rule.key("k", ALICE, {"account": "b"})
    assert key != rule.key("k2", ALICE, {"account": "a"})
    assert key != rule.key("k", Owner("t-1", "bob"), {"account": "a"})
    assert key != rule.key("k", Owner("t-2", "alice"), {"account": "a"})
    assert rule.key("k", ALICE, {"account": 1}) != rule.key("k", ALICE, {"account": "1"})


@pytest.mark.parametrize(
    "payload", [{}, {"account": None}, {"account": [1]}, {"account": "x" * 257}]
)
def test_a_payload_without_a_usable_by_value_is_a_400(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=r"'payload\.account' is required"):
        Debounce(by=["payload.account"], seconds=5).key("k", ALICE, payload)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"seconds": 0}, r"debounce\.seconds"),
        ({"seconds": 604_801}, r"debounce\.seconds"),
        ({"seconds": 5, "keep": "all"}, r"debounce\.keep"),
        ({"seconds": 5, "by": "payload.a"}, r"debounce\.by' must be a list"),
        ({"seconds": 5, "by": ["owner.tenant"]}, r"payload\.<field>"),
        ({"seconds": 5, "by": [f"payload.f{i}" for i in range(6)]}, "at most 5"),
        ({"seconds": 10, "max_wait_seconds": 9}, r"debounce\.max_wait_seconds"),
    ],
)
def test_a_bad_rule_is_a_400_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Debounce(**fields)


def test_a_rule_goes_through_post_jobs_and_back() -> None:
    rule = Debounce(by=["payload.a"], seconds=5, keep="first", max_wait_seconds=60)
    assert Debounce.from_body(rule.body()) == rule
    assert JobOptions(debounce=rule).body_fields() == {"debounce": rule.body()}
    with pytest.raises(ValidationError, match="Idempotency-Key"):
        JobOptions(debounce=rule, idempotency_key="k")
    with pytest.raises(ValidationError, match="not both"):
        JobOptions(debounce=rule, run_at="2026-12-24T09:00:00Z")


def test_a_kind_takes_only_a_debounce_rule() -> None:
    from leasehold import Kind, KindDefinitionError

    assert Kind("k", debounce=Debounce(seconds=5)).debounce == Debounce(seconds=5)
    with pytest.raises(KindDefinitionError, match="kind 'k': debounce is a leasehold.Debounce"):
        Kind("k", debounce={"seconds": 5})  # type: ignore[arg-type]
