"""`Unique`: at most one job per unique key within a window (issue 33 item 1, DESIGN §21,
decisions UQ1–UQ6) — River's `UniqueOpts`, Oban's `unique`.

    Kind("sync", unique=Unique(by=["payload.account"], period_seconds=3600))

A job's unique key is a hash of its kind, its tenant (never shared between tenants), the user
too when `by` names `"owner"`, and the values of the payload paths `by` names. A second job
with the key within `period_seconds` of the first one's accept is not created while the first
is in one of `states`: the request is answered with the first job (`"duplicate": true`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject

MAX_UNIQUE_PERIOD_SECONDS = 365 * 24 * 3600
"""The longest window: a year, as for a delay."""
MAX_BY = 8
"""The most names in `by`."""
MAX_PATH_DEPTH = 8
PAYLOAD_PREFIX = "payload."
OWNER_NAMES = ("kind", "owner")
"""The names `by` may hold besides payload paths: `kind` (the kind alone: one job of it per
tenant) and `owner` (the submitting user, not the whole tenant)."""
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_UNIQUE_STATES: frozenset[JobState] = frozenset(
    {
        JobState.QUEUED,
        JobState.RUNNING,
        JobState.WAITING_APPROVAL,
        JobState.SUCCEEDED,
        JobState.UNKNOWN,
    }
)
"""River's `ByState` default, in leasehold's states: every state but the ones a job was given up
in (`cancelled`, `failed`, `dead` — River's cancelled and discarded). A succeeded job still
counts (it did the work this window); an `unknown` one does too (its effect may have happened)."""


@dataclass(frozen=True)
class Unique:
    """At most one job per unique key within `period_seconds` (1 s to 365 days) of the first
    one's accept. `by`: 1 to 8 of `"payload.<path>"` (a dotted path into the payload; the
    value there, any JSON, is part of the key, and a payload without it is a 400), `"owner"`
    (per user, not per tenant) and `"kind"` (nothing more than the kind: one job of it per
    tenant). `states`: the states of the first job in which it still counts (default
    `DEFAULT_UNIQUE_STATES`: all but cancelled, failed and dead). A bad value raises
    ValidationError (HTTP 400) naming it."""

    by: Sequence[str]
    period_seconds: int
    states: Collection[JobState | str] | None = None

    def __post_init__(self) -> None:
        by = self.by
        if isinstance(by, str) or not isinstance(by, Sequence) or not 1 <= len(by) <= MAX_BY:
            raise ValidationError(
                f"'unique.by' must be a list of 1 to {MAX_BY} names: \"payload.<path>\", "
                '"owner" or "kind"'
            )
        for name in by:
            check_by_name(name)
        if len(set(by)) != len(by):
            raise ValidationError("'unique.by' names one thing twice")
        period = self.period_seconds
        if isinstance(period, bool) or not isinstance(period, int):
            raise ValidationError("'unique.period_seconds' must be an integer")
        if not 1 <= period <= MAX_UNIQUE_PERIOD_SECONDS:
            raise ValidationError(
                f"'unique.period_seconds' must be between 1 and {MAX_UNIQUE_PERIOD_SECONDS} "
                "(365 days)"
            )
        object.__setattr__(self, "by", tuple(by))
        object.__setattr__(self, "states", _states_of(self.states))

    @property
    def counting(self) -> frozenset[JobState]:
        """The states in which an existing job still makes a new one a duplicate."""
        states = self.states
        return states if isinstance(states, frozenset) else DEFAULT_UNIQUE_STATES

    def body(self) -> JsonObject:
        """As a `POST /jobs` body's `unique` field."""
        body: JsonObject = {"by": list(self.by), "period_seconds": self.period_seconds}
        if self.counting != DEFAULT_UNIQUE_STATES:
            body["states"] = sorted(state.value for state in self.counting)
        return body

    def claim(self, kind: str, owner: Owner, payload: Mapping[str, Any], now_ms: int) -> Claim:
        """The claim a job of `kind` by `owner` with `payload`, accepted at `now_ms`, makes: its
        key and window. ValidationError when the payload lacks a path `by` names."""
        values: list[Any] = []
        for name in self.by:
            if name.startswith(PAYLOAD_PREFIX):
                values.append(_at_path(payload, name))
        source = json.dumps(
            [
                "unique",
                kind,
                owner.tenant,
                owner.user_id if "owner" in self.by else None,
                sorted(self.by),
                [values[i] for i in _order(self.by)],
            ],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return Claim(digest, now_ms + self.period_seconds * 1000, self.counting)


@dataclass(frozen=True)
class Claim:
    """What a new job with a unique declaration writes: its key's hash, the end of its window
    (epoch ms) and the states in which a job holding the key counts."""

    key: str
    until_ms: int
    counting: frozenset[JobState]


def check_by_name(name: Any) -> None:
    """ValidationError unless `name` is `kind`, `owner` or `payload.<a>[.<b>…]`."""
    if not isinstance(name, str):
        raise ValidationError("'unique.by' holds strings")
    if name in OWNER_NAMES:
        return
    if not name.startswith(PAYLOAD_PREFIX):
        raise ValidationError(
            f"'unique.by' name {name[:80]!r} must be \"payload.<path>\" (e.g. "
            f'"payload.{name[:40]}"), "owner" or "kind"'
        )
    segments = name.removeprefix(PAYLOAD_PREFIX).split(".")
    if len(segments) > MAX_PATH_DEPTH or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise ValidationError(
            f"'unique.by' path {name[:80]!r} must be payload.<field>[.<field>…]: at most "
            f"{MAX_PATH_DEPTH} fields of 1 to 64 of A-Z a-z 0-9 _ -"
        )


def unique_of(raw: Any) -> Unique | None:
    """A request's `unique` field (`{"by": [...], "period_seconds": n, "states": [...]}`)."""
    if raw is None or isinstance(raw, Unique):
        return raw
    if not isinstance(raw, Mapping) or set(raw) - {"by", "period_seconds", "states"}:
        raise ValidationError(
            "'unique' must be an object with 'by', 'period_seconds' and optionally 'states'"
        )
    if "by" not in raw or "period_seconds" not in raw:
        raise ValidationError("'unique' needs 'by' and 'period_seconds'")
    states = raw.get("states")
    if states is not None and not isinstance(states, list):
        raise ValidationError("'unique.states' must be a list of job states")
    by = raw["by"]
    if not isinstance(by, list):
        raise ValidationError("'unique.by' must be a list")
    return Unique(by=by, period_seconds=raw["period_seconds"], states=states)


def chosen_unique(declared: Unique | None, requested: Unique | None, kind: str) -> Unique | None:
    """The uniqueness a job gets: the kind's rule, which a request may repeat but not change
    (a 400 `unique_conflict` naming the kind's), else the request's."""
    if declared is None or requested is None or requested == declared:
        return declared or requested
    raise ValidationError(
        f"kind '{kind}' declares its jobs unique by {list(declared.by)} for "
        f"{declared.period_seconds} s; a request may not declare another 'unique' for it",
        code="unique_conflict",
    )


def _states_of(states: Collection[JobState | str] | None) -> frozenset[JobState]:
    if states is None:
        return DEFAULT_UNIQUE_STATES
    if isinstance(states, str) or not isinstance(states, Collection) or not states:
        raise ValidationError("'unique.states' must be a non-empty list of job states")
    chosen: set[JobState] = set()
    for state in states:
        try:
            chosen.add(JobState(state))
        except ValueError as exc:
            known = ", ".join(s.value for s in JobState)
            raise ValidationError(
                f"'unique.states' has unknown state {str(state)[:32]!r}; one of: {known}"
            ) from exc
    if len(chosen) != len(list(states)):
        raise ValidationError("'unique.states' names a state twice")
    return frozenset(chosen)


def _order(by: Sequence[str]) -> list[int]:
    """The payload values' positions in `by`'s sorted order (the key ignores `by`'s order)."""
    paths = [name for name in by if name.startswith(PAYLOAD_PREFIX)]
    return sorted(range(len(paths)), key=lambda i: paths[i])


def _at_path(payload: Mapping[str, Any], name: str) -> Any:
    value: Any = payload
    for segment in name.removeprefix(PAYLOAD_PREFIX).split("."):
        if not isinstance(value, Mapping) or segment not in value:
            raise ValidationError(f"'{name[:80]}' is required: the job is unique by it (unique.by)")
        value = value[segment]
    return value


def checked_unique(unique: object) -> Unique | None:
    """A kind's `unique=` as declared, or TypeError naming what it must be."""
    if unique is not None and not isinstance(unique, Unique):
        raise TypeError("unique is a leasehold.Unique(...)")
    return unique


__all__ = [
    "DEFAULT_UNIQUE_STATES",
    "MAX_UNIQUE_PERIOD_SECONDS",
    "Claim",
    "Unique",
    "checked_unique",
    "chosen_unique",
    "unique_of",
]
