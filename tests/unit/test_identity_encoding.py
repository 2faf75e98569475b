"""Identities are encoded, never joined (issue 28 item 6, DESIGN §23): no separator an owner, a
key or an id may carry — `|` as in the JWT `sub` `auth0|123`, `#` as in DynamoDB keys, `%` the
escape itself, and `:`, `/`, `@`, unicode — can make two distinct tuples share a derived id, a
request token or a table key; and an ordinary identity's ids and keys are byte for byte what
they were before the encoding."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from leasehold.domain.ids import escaped, hash_source, key_of
from leasehold.domain.job import Owner
from leasehold.domain.limits import Limit, Rate, rate_keys, slot_keys
from leasehold.store.items import owner_partition, slots_key
from leasehold.store.keys import derived_id, request_token
from leasehold.store.schedules import count_key, schedule_key

ALPHABET = ["a", "b", "c", "|", "#", "%", "2", "3", "5", "7", "C", ":", "/", "@", "é", "中", "😀"]
"""Heavy on the separators and on what their escapes are made of (`%7C`, `%23`, `%25`)."""
part = st.text(st.sampled_from(ALPHABET), min_size=1, max_size=6)
ordinary = st.text(
    st.characters(blacklist_characters="%#|", blacklist_categories=("Cs",)), min_size=1
)
FP = "0123456789abcdef012345"


@st.composite
def resplit(draw: st.DrawFn, arity: int, separator: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Two tuples of `arity` parts whose parts, joined with `separator`, read the same — the
    collisions a plain join makes (`a|b`/`c` and `a`/`b|c`) — and often enough distinct."""
    pieces = draw(st.lists(part, min_size=arity, max_size=arity + 3))
    text = separator.join(pieces)
    tokens = text.split(separator)

    def grouping() -> tuple[str, ...]:
        """The tokens cut into `arity` runs, each joined back with the separator."""
        cut_at = st.sets(st.integers(1, len(tokens) - 1), min_size=arity - 1, max_size=arity - 1)
        cuts = sorted(draw(cut_at)) if len(tokens) > arity else list(range(1, arity))
        bounds = [0, *cuts, len(tokens)]
        return tuple(separator.join(tokens[a:b]) for a, b in itertools.pairwise(bounds))

    return grouping(), grouping()


def _derived(parts: tuple[str, ...]) -> str:
    namespace, tenant, user, key = parts
    return derived_id("j", Owner(tenant, user), key, namespace)


def _token(parts: tuple[str, ...]) -> str:
    tenant, user, key, fingerprint = parts
    return request_token(Owner(tenant, user), key, fingerprint)


def _owner_keys(tenant: str, user: str) -> list[Any]:
    owner = Owner(tenant, user)
    return [
        slots_key(owner),
        owner_partition(owner),
        schedule_key(tenant, user, "s_1"),
        count_key(tenant, user),
    ]


LIMITS = [Limit("user", 2), Limit("tenant", 2), Limit("kind", 2), Limit("payload.account", 2)]
RATES = [Rate("user", 2), Rate("tenant", 2), Rate("kind", 2), Rate("payload.account", 2)]


def _limit_names(kind: str, tenant: str, user: str, account: str) -> list[str]:
    owner = Owner(tenant, user)
    payload = {"account": account}
    return [key.base for key in slot_keys(LIMITS, kind, owner, payload, "j_1")] + [
        key.name for key in rate_keys(RATES, kind, owner, payload)
    ]


# ------------------------------------------------------------------ the concrete collision


def test_a_separator_in_the_tenant_or_the_user_names_two_owners_apart() -> None:
    first, second = Owner("a|b", "c"), Owner("a", "b|c")
    assert derived_id("j", first, "k") != derived_id("j", second, "k")
    assert request_token(first, "k", FP) != request_token(second, "k", FP)
    first, second = Owner("a#b", "c"), Owner("a", "b#c")
    assert slots_key(first) != slots_key(second)
    assert owner_partition(first) != owner_partition(second)
    assert schedule_key("a#b", "c", "s_1") != schedule_key("a", "b#c", "s_1")
    assert _limit_names("k", "a#b", "c", "x") != _limit_names("k", "a", "b#c", "x")
    # a payload value with a separator cannot take another tenant's concurrency slots
    assert _limit_names("k", "a", "u", "b#c") != _limit_names("k", "a#b", "u", "c")


def test_an_owner_slot_item_is_never_a_concurrency_slot_item() -> None:
    """`SLOTS#<tenant>#<user>` and a concurrency key's `SLOTS#K#<kind>#<key>#<scope>#<shard>`
    share the sort key `SLOTS`: tenant `K` must not reach a kind's slots through its user id."""
    kind_slot = slot_keys([Limit("user", 2)], "render", Owner("acme", "bob"), {}, "j_1")[0]
    assert slots_key(Owner("K", "render#user#acme#bob#0"))["pk"]["S"] != kind_slot.item_name(0)


# ------------------------------------------------------------------ properties


@settings(max_examples=200, database=None)
@given(resplit(4, "|"))
def test_derived_ids_never_collide(pair: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    first, second = pair
    assert (first == second) == (_derived(first) == _derived(second))


@settings(max_examples=200, database=None)
@given(resplit(4, "|"))
def test_request_tokens_never_collide(pair: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    first, second = pair
    assert (first == second) == (_token(first) == _token(second))


@settings(max_examples=200, database=None)
@given(st.sampled_from(["#", "|"]).flatmap(lambda sep: resplit(2, sep)))
def test_owner_keys_never_collide(pair: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    first, second = pair
    assert (first == second) == (_owner_keys(*first) == _owner_keys(*second))
    if first != second:
        for one, other in zip(_owner_keys(*first), _owner_keys(*second), strict=True):
            assert one != other


SCOPES = [(0, 1, 2), (0, 1), (0,), (0, 1, 3)] * 2
"""Which of (kind, tenant, user, account) each of `_limit_names`' names depends on: user,
tenant, kind and payload.account, for the concurrency slots and then for the rates."""


@settings(max_examples=200, database=None)
@given(resplit(4, "#"))
def test_concurrency_and_rate_keys_never_collide(
    pair: tuple[tuple[str, ...], tuple[str, ...]],
) -> None:
    first, second = pair
    assume(first[3] and second[3])  # a payload value is 1 to 100 characters
    names = zip(_limit_names(*first), _limit_names(*second), SCOPES, strict=True)
    for one, other, scope in names:
        same = all(first[i] == second[i] for i in scope)
        assert same == (one == other), (one, other)
    assert not set(_limit_names(*first)) & {
        slots_key(Owner(first[1], first[2]))["pk"]["S"],
        slots_key(Owner(second[1], second[2]))["pk"]["S"],
    }


@settings(max_examples=300, database=None)
@given(st.tuples(part, part, part, part), st.tuples(part, part, part, part))
def test_any_two_identities_stay_apart(first: tuple[str, ...], second: tuple[str, ...]) -> None:
    assert (first == second) == (_derived(first) == _derived(second))
    assert (first[1:3] == second[1:3]) == (_owner_keys(*first[1:3]) == _owner_keys(*second[1:3]))


@settings(max_examples=300, database=None)
@given(st.lists(part, min_size=1, max_size=5), st.lists(part, min_size=1, max_size=5))
def test_key_of_is_injective(first: list[str], second: list[str]) -> None:
    assert (first == second) == (key_of(*first) == key_of(*second))


@settings(max_examples=300, database=None)
@given(st.data())
def test_hash_source_is_injective_with_any_part_verbatim(data: st.DataObject) -> None:
    arity = data.draw(st.integers(1, 5))
    verbatim = data.draw(st.integers(0, arity - 1))
    first, second = data.draw(resplit(arity, "|"))
    assert (first == second) == (
        hash_source(*first, verbatim=verbatim) == hash_source(*second, verbatim=verbatim)
    )


# ------------------------------------------------------------------ nothing ordinary moves


def _old_derived(prefix: str, tenant: str, user: str, key: str, namespace: str) -> str:
    """The derivation before identities were encoded (a plain join)."""
    source = f"{namespace}|{tenant}|{user}|{key}"
    return f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:22]}"


def _old_token(tenant: str, user: str, key: str, fingerprint: str) -> str:
    source = f"{tenant}|{user}|{key}|{fingerprint}"
    return hashlib.sha256(source.encode()).hexdigest()[:36]


@settings(max_examples=200, database=None)
@given(ordinary, ordinary, ordinary, st.sampled_from(["", "schedule", "bookmarks"]), ordinary)
def test_an_ordinary_identity_keeps_its_ids_and_keys(
    tenant: str, user: str, key: str, namespace: str, account: str
) -> None:
    owner = Owner(tenant, user)
    assert derived_id("j", owner, key, namespace) == _old_derived("j", tenant, user, key, namespace)
    assert request_token(owner, key, FP) == _old_token(tenant, user, key, FP)
    assert slots_key(owner)["pk"]["S"] == f"SLOTS#{tenant}#{user}"
    assert owner_partition(owner) == f"OWNER#{tenant}#{user}"
    assert schedule_key(tenant, user, "s_1")["pk"]["S"] == f"SCHED#{tenant}#{user}"
    assert count_key(tenant, user)["pk"]["S"] == f"SCHED#{tenant}#{user}"
    assert _limit_names("render", tenant, user, account) == [
        f"SLOTS#K#render#user#{tenant}#{user}",
        f"SLOTS#K#render#tenant#{tenant}",
        "SLOTS#K#render#kind#*",
        f"SLOTS#K#render#payload.account#{tenant}#{account}",
        f"RATE#render#user#{tenant}#{user}",
        f"RATE#render#tenant#{tenant}",
        "RATE#render#kind#*",
        f"RATE#render#payload.account#{tenant}#{account}",
    ]


@settings(max_examples=200, database=None)
@given(ordinary, part, ordinary)
def test_a_user_id_with_a_separator_keeps_its_job_ids(tenant: str, user: str, key: str) -> None:
    """The user id is the hashed sources' verbatim part: an `auth0|123` user's keyed jobs and
    tokens are what they were, so a keyed retry across the deploy finds its job."""
    owner = Owner(tenant, user)
    assert derived_id("j", owner, key) == _old_derived("j", tenant, user, key, "")
    assert request_token(owner, key, FP) == _old_token(tenant, user, key, FP)


@pytest.mark.parametrize(
    ("owner", "key", "namespace", "prefix", "expected"),
    [
        (Owner("study-group", "alice"), "k1", "", "j", "j_acd27e13378dc9e03542d3"),
        (
            Owner("study-group", "alice"),
            "s_019d@1700000000000",
            "schedule",
            "j",
            "j_84027f6903e7489908cbce",
        ),
        (Owner("study-group", "alice"), "k1", "bookmarks", "b", "b_e6117e21ae0d37d06e98af"),
        (Owner("acme", "auth0|123"), "k1", "", "j", "j_d5c1b2f67bbdc2d2a35de2"),
    ],
)
def test_ids_issued_before_the_encoding_are_derived_again(
    owner: Owner, key: str, namespace: str, prefix: str, expected: str
) -> None:
    """Values computed by the plain join before this change (the ids of jobs already accepted)."""
    assert derived_id(prefix, owner, key, namespace) == expected


def test_tokens_issued_before_the_encoding_are_derived_again() -> None:
    assert request_token(Owner("study-group", "alice"), "k1", FP) == (
        "f799c605f033aeb8909d20ae13047eebe1b5"
    )
    assert request_token(Owner("acme", "auth0|123"), "k1", FP) == (
        "a9b4bfd9bc5e47b9718baedf12b6051436cc"
    )


def test_escaping_is_only_of_the_separator_and_the_escape() -> None:
    assert escaped("auth0|123", "#") == "auth0|123"
    assert escaped("auth0|123", "|") == "auth0%7C123"
    assert escaped("50%#x", "#") == "50%25%23x"
    assert escaped("plain", "|") == "plain"
    assert key_of("OWNER", "a#b", "c") == "OWNER#a%23b#c"
    assert hash_source("a|b", "c|d", "e", verbatim=1) == "a%7Cb|c|d|e"


def test_applications_build_their_keys_with_the_same_encoding() -> None:
    from leasehold.apps import items
    from leasehold_apps.reading_list.codec import bookmarks_partition

    assert items.key("ORDER", "acme", "o-1") == "ORDER#acme#o-1"
    assert items.key("ORDER", "a#b", "c") != items.key("ORDER", "a", "b#c")
    assert bookmarks_partition("study-group") == "BOOKMARKS#study-group"  # as stored before
    assert bookmarks_partition("a#b") == "BOOKMARKS#a%23b"
