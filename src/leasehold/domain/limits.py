"""Concurrency limits a kind declares (decision F2): at most `max` of the kind's jobs
running per value of a key — the user, the tenant, a payload field, or the whole kind — each
counted on slot items of its own, sharded when the key is busy."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from leasehold.domain.errors import ValidationError
from leasehold.domain.ids import hash_source, key_of
from leasehold.domain.job import Owner

KEYS = ("user", "tenant", "kind")
PAYLOAD_PREFIX = "payload."
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_LIMIT = 1000
MAX_SHARDS = 16
MAX_LIMITS = 4
MAX_VALUE_CHARS = 100
SHARD_TRIES = 4
"""How many shards of a key one claim tries (from the job's own, in turn) before it waits."""


@dataclass(frozen=True)
class Limit:
    """At most `max` jobs of this kind running at once per value of `key`:

    - `"user"`: per caller (tenant and user), `"tenant"`: per tenant, `"kind"`: in all;
    - `"payload.<field>"`: per value of that top-level payload field within the tenant (one
      provider account, one customer): the field must be a string or an integer (≤ 100
      characters) in every payload, or the job is a 400 at accept.

    `shards` (1 to 16, at most `max`) spreads the key over that many slot items, each holding
    its share of `max`, so that no single item is written by every claim of a busy key; a claim
    tries its job's own shard first, then up to three others."""

    key: str
    max: int
    shards: int = 1

    def __post_init__(self) -> None:
        field = self.key[len(PAYLOAD_PREFIX) :] if self.key.startswith(PAYLOAD_PREFIX) else None
        if self.key not in KEYS and (field is None or not _FIELD.match(field)):
            raise ValueError(
                f"Limit key {self.key!r} must be 'user', 'tenant', 'kind' or 'payload.<field>'"
            )
        for name, value, high in (
            ("max", self.max, MAX_LIMIT),
            ("shards", self.shards, MAX_SHARDS),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"Limit {name} must be an integer 1 to {high}")
        if self.shards > self.max:
            raise ValueError(f"Limit shards ({self.shards}) cannot exceed max ({self.max})")

    @property
    def payload_field(self) -> str | None:
        """The payload field this limit is keyed by (None for the other keys)."""
        return self.key[len(PAYLOAD_PREFIX) :] if self.key.startswith(PAYLOAD_PREFIX) else None

    def capacity(self, shard: int) -> int:
        """Shard `shard`'s share of `max` (the shares add up to `max`)."""
        return self.max // self.shards + (1 if shard < self.max % self.shards else 0)


@dataclass(frozen=True)
class SlotKey:
    """One limit as it applies to one job: the slot items to take from and the label the job
    view shows while the job waits for it (`tenant:acme`)."""

    label: str
    base: str
    limit: Limit
    start: int
    """The job's own shard (from its id): where its claim tries first."""

    def shard_order(self) -> list[int]:
        """The shards a claim tries, in turn: its own, then the next ones (at most 4)."""
        shards = self.limit.shards
        return [(self.start + i) % shards for i in range(min(shards, SHARD_TRIES))]

    def item_name(self, shard: int) -> str:
        return f"{self.base}#{shard}"


Declared = TypeVar("Declared", "Limit", "Rate")


def _check_declared(
    declared: Sequence[Declared], of: type[Declared], field: str, plural: str, example: str
) -> tuple[Declared, ...]:
    """A kind's `field` declaration: only `of`s (else the `example` of one), each key once, at
    most MAX_LIMITS of them."""
    out = tuple(declared)
    if not all(isinstance(item, of) for item in out):
        raise ValueError(f"{field} must be a list of {example}")
    if len(out) > MAX_LIMITS:
        raise ValueError(f"at most {MAX_LIMITS} {plural} on one kind")
    if len({item.key for item in out}) != len(out):
        raise ValueError(f"each {field} key once")
    return out


def check_limits(limits: Sequence[Limit]) -> tuple[Limit, ...]:
    """A kind's declaration: Limits, each key once, at most four."""
    return _check_declared(
        limits, Limit, "concurrency", "concurrency limits", "Limit(key=..., max=...)"
    )


NO_VALUE = "-"
"""The value of a payload key a job's payload lacks (it was accepted before its kind declared
the limit): such jobs share one bucket rather than run unlimited."""


def key_value(
    limit: Limit, kind: str, owner: Owner, payload: Mapping[str, Any], *, strict: bool = True
) -> str:
    """The value of the limit's key for a job (what the view names). `strict` (at accept): a
    payload without a usable value is a ValidationError; otherwise it is NO_VALUE."""
    if limit.key == "user":
        return owner.user_id
    if limit.key == "tenant":
        return owner.tenant
    if limit.key == "kind":
        return kind
    field = limit.payload_field
    assert field is not None
    value = payload.get(field)
    usable = not isinstance(value, bool) and isinstance(value, str | int)
    if not strict and not (usable and 1 <= len(str(value)) <= MAX_VALUE_CHARS):
        return NO_VALUE
    if not usable:
        raise ValidationError(
            f"'payload.{field}' is required (a string or an integer): the kind limits its "
            "running jobs per value of it"
        )
    text = str(value)
    if not 1 <= len(text) <= MAX_VALUE_CHARS:
        raise ValidationError(f"'payload.{field}' must be 1 to {MAX_VALUE_CHARS} characters")
    return text


def keyed_fields(
    limits: Sequence[Limit], rates: Sequence[Rate], payload: Mapping[str, Any]
) -> dict[str, str]:
    """The payload fields `limits` and `rates` are keyed by, as `key_value` reads them (text),
    for the item of a job whose payload is kept in the data bucket (decision LD15): at most
    eight fields of at most MAX_VALUE_CHARS each. A field without a usable value is left out
    (the claim counts it under NO_VALUE, as it would have read it from the payload)."""
    out: dict[str, str] = {}
    for limit in (*limits, *(Limit(rate.key, 1) for rate in rates)):
        field = limit.payload_field
        if field is None:
            continue
        value = payload.get(field)
        usable = not isinstance(value, bool) and isinstance(value, str | int)
        if usable and 1 <= len(str(value)) <= MAX_VALUE_CHARS:
            out[field] = str(value)
    return out


def _scope(key: str, owner: Owner, value: str) -> tuple[str, ...]:
    """Whose a key's items are: the tenant's (and the user's, or the payload value's), or the
    whole kind's (`*`). Parts of an encoded key (decision ID1), never joined: a tenant, user or
    value holding `#` cannot reach another's items."""
    if key == "user":
        return owner.tenant, owner.user_id
    if key == "tenant":
        return (owner.tenant,)
    if key == "kind":
        return ("*",)
    return owner.tenant, value


def slot_keys(
    limits: Sequence[Limit],
    kind: str,
    owner: Owner,
    payload: Mapping[str, Any],
    job_id: str,
    *,
    strict: bool = True,
) -> list[SlotKey]:
    """The slot keys a job of `kind` takes before it runs, one per limit. A key's items are the
    kind's own; every key but `kind` is scoped to the tenant."""
    out = []
    for limit in limits:
        value = key_value(limit, kind, owner, payload, strict=strict)
        source = hash_source(job_id, limit.key, verbatim=0)
        digest = hashlib.sha256(source.encode()).digest()
        out.append(
            SlotKey(
                label=f"{limit.key}:{value}",
                base=key_of("SLOTS", "K", kind, limit.key, *_scope(limit.key, owner, value)),
                limit=limit,
                start=int.from_bytes(digest[:4], "big") % limit.shards,
            )
        )
    return out


@dataclass(frozen=True)
class Rate:
    """At most `limit` starts of this kind's jobs per `per_seconds` per value of `key` (the
    keys of `Limit`): GCRA without a burst, so starts are at least `per_seconds / limit` apart
    and no window of `per_seconds` holds more than `limit` (decision F3). A job over its rate
    waits `queued` until the next start is due; it never fails for it."""

    key: str
    limit: int
    per_seconds: int = 1

    def __post_init__(self) -> None:
        Limit(self.key, 1)  # the same keys
        for name, value, high in (
            ("limit", self.limit, 1000),
            ("per_seconds", self.per_seconds, 86400),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"Rate {name} must be an integer 1 to {high}")

    @property
    def interval_ms(self) -> int:
        """The least time between two starts (rounded up: never more than `limit`)."""
        return -(-self.per_seconds * 1000 // self.limit)


@dataclass(frozen=True)
class RateKey:
    """One rate as it applies to one job: its item and the label the view shows."""

    label: str
    name: str
    interval_ms: int


def check_rates(rates: Sequence[Rate]) -> tuple[Rate, ...]:
    """A kind's rate declaration: Rates, each key once, at most four."""
    return _check_declared(
        rates, Rate, "rate", "rates", "Rate(key=..., limit=..., per_seconds=...)"
    )


def rate_keys(
    rates: Sequence[Rate],
    kind: str,
    owner: Owner,
    payload: Mapping[str, Any],
    *,
    strict: bool = True,
) -> list[RateKey]:
    """The rate items a job of `kind` takes a start from, one per rate."""
    out = []
    for rate in rates:
        limit = Limit(rate.key, 1)
        value = key_value(limit, kind, owner, payload, strict=strict)
        out.append(
            RateKey(
                label=f"{rate.key}:{value}",
                name=key_of("RATE", kind, rate.key, *_scope(rate.key, owner, value)),
                interval_ms=rate.interval_ms,
            )
        )
    return out
