"""The unique key (decision UQ1): what it is a hash of, and what it ignores."""

from __future__ import annotations

import pytest

from leasehold import Kind, KindDefinitionError, Unique, ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.states import JobState
from leasehold.domain.unique import DEFAULT_UNIQUE_STATES

ALICE = Owner("t1", "alice")
BOB = Owner("t1", "bob")
CAROL = Owner("t2", "carol")


def key(unique: Unique, payload: dict[str, object], owner: Owner = ALICE, kind: str = "k") -> str:
    return unique.claim(kind, owner, payload, 0).key


def test_the_key_is_the_kind_the_tenant_and_the_named_values() -> None:
    by_account = Unique(by=["payload.account.id"], period_seconds=60)
    base = key(by_account, {"account": {"id": 7}, "note": "a"})
    assert key(by_account, {"account": {"id": 7}, "note": "b"}) == base  # other fields: no
    assert key(by_account, {"account": {"id": 7}}, BOB) == base  # the tenant's users share it
    assert key(by_account, {"account": {"id": 8}}) != base
    assert key(by_account, {"account": {"id": "7"}}) != base  # the JSON value, typed
    assert key(by_account, {"account": {"id": 7}}, CAROL) != base  # never across tenants
    assert key(by_account, {"account": {"id": 7}}, kind="other") != base
    per_user = Unique(by=["owner", "payload.account.id"], period_seconds=60)
    assert key(per_user, {"account": {"id": 7}}) != key(per_user, {"account": {"id": 7}}, BOB)


def test_the_order_of_by_does_not_change_the_key() -> None:
    one = Unique(by=["payload.a", "payload.b"], period_seconds=60)
    other = Unique(by=["payload.b", "payload.a"], period_seconds=60)
    assert key(one, {"a": 1, "b": 2}) == key(other, {"a": 1, "b": 2})
    assert key(one, {"a": 1, "b": 2}) != key(one, {"a": 2, "b": 1})


def test_the_window_and_the_states() -> None:
    claim = Unique(by=["kind"], period_seconds=90).claim("k", ALICE, {}, 1_000)
    assert claim.until_ms == 91_000
    assert claim.counting == DEFAULT_UNIQUE_STATES
    assert JobState.SUCCEEDED in claim.counting
    assert not {JobState.CANCELLED, JobState.FAILED, JobState.DEAD} & claim.counting
    chosen = Unique(by=["kind"], period_seconds=90, states=["queued", JobState.RUNNING])
    assert chosen.counting == {JobState.QUEUED, JobState.RUNNING}
    assert chosen.body()["states"] == ["queued", "running"]
    assert "states" not in Unique(by=["kind"], period_seconds=90).body()


@pytest.mark.parametrize(
    ("by", "period", "message"),
    [
        ("payload.a", 60, "list of 1 to 8"),
        (["payload.a", "payload.a"], 60, "names one thing twice"),
        (["payload." + ".".join("abcdefghi")], 60, "at most 8 fields"),
        ([1], 60, "holds strings"),
        (["kind"], True, "must be an integer"),
    ],
)
def test_a_bad_unique_names_what_is_wrong(by: object, period: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Unique(by=by, period_seconds=period)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="names a state twice"):
        Unique(by=["kind"], period_seconds=60, states=["queued", "queued"])


def test_a_kind_takes_only_a_unique() -> None:
    with pytest.raises(KindDefinitionError, match="unique is a leasehold.Unique"):
        Kind("bad_unique", unique={"by": ["kind"], "period_seconds": 60})  # type: ignore[arg-type]
    assert Kind("good_unique", unique=Unique(by=["kind"], period_seconds=60)).unique is not None
