"""`Debounce`: submissions of one kind with one key, within a quiet window, collapse into one
pending job that runs once the window has been quiet (DESIGN §21, decisions DB1–DB6).

    Kind("reindex", debounce=Debounce(by=["payload.account"], seconds=30, keep="last"))

The key is always the submitting owner's (tenant and user) and the kind's, then the values of
`by` (payload fields): a submission never collapses into another caller's job. Each
submission in the window pushes the job's due time to now + `seconds`, but never past the
window's first submission + `max_wait_seconds`, so a steady stream cannot starve it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Job, Owner

PAYLOAD_PREFIX = "payload."
MAX_DEBOUNCE_SECONDS = 7 * 24 * 3600
"""The longest quiet window, and the longest `max_wait_seconds` (Inngest's limit too)."""
MAX_WAIT_FACTOR = 10
"""`max_wait_seconds` left out: this many windows (at most MAX_DEBOUNCE_SECONDS)."""
MAX_BY_FIELDS = 5
MAX_VALUE_CHARS = 256
DEBOUNCE_FIELDS = frozenset({"by", "seconds", "keep", "max_wait_seconds"})

Keep = Literal["first", "last"]


def _int_in(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"'debounce.{name}' must be an integer from {low} to {high}")
    return value


@dataclass(frozen=True)
class Debounce:
    """Collapse submissions with one key into one pending job.

    - `by`: payload fields (`"payload.account"`, at most 5) whose values, with the kind and
      the submitting owner, make the key; `[]`: one key per owner and kind.
    - `seconds`: the quiet window (1 s to 7 days): the job runs once no submission with its
      key came for this long.
    - `keep`: `"last"` (the default) runs the latest submission's payload, `"first"` the
      first's.
    - `max_wait_seconds`: the longest a job waits from its window's first submission, however
      often submissions come (default 10 × `seconds`, at most 7 days; at least `seconds`).

    A value out of range raises ValidationError (HTTP 400) with the message `POST /jobs`
    gives for it."""

    by: Sequence[str] = ()
    seconds: int = 60
    keep: Keep = "last"
    max_wait_seconds: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.by, str) or not isinstance(self.by, Sequence):
            raise ValidationError("'debounce.by' must be a list of payload fields")
        if len(self.by) > MAX_BY_FIELDS:
            raise ValidationError(f"'debounce.by' names at most {MAX_BY_FIELDS} fields")
        for entry in self.by:
            if (
                not isinstance(entry, str)
                or not entry.startswith(PAYLOAD_PREFIX)
                or not 1 <= len(entry) - len(PAYLOAD_PREFIX) <= 64
            ):
                raise ValidationError(
                    "'debounce.by' entries are payload fields, 'payload.<field>' "
                    "(the key is always the caller's own)"
                )
        if len(set(self.by)) != len(self.by):
            raise ValidationError("'debounce.by' names a field twice")
        object.__setattr__(self, "by", tuple(self.by))
        _int_in(self.seconds, "seconds", 1, MAX_DEBOUNCE_SECONDS)
        if self.keep not in ("first", "last"):
            raise ValidationError('\'debounce.keep\' must be "first" or "last"')
        if self.max_wait_seconds is not None:
            _int_in(self.max_wait_seconds, "max_wait_seconds", self.seconds, MAX_DEBOUNCE_SECONDS)

    @property
    def max_wait(self) -> int:
        """The longest wait in seconds from the window's first submission."""
        if self.max_wait_seconds is not None:
            return self.max_wait_seconds
        return min(MAX_DEBOUNCE_SECONDS, self.seconds * MAX_WAIT_FACTOR)

    def key(self, kind: str, owner: Owner, payload: Mapping[str, Any]) -> str:
        """The window's key: a hash of the kind, the owner and the `by` values. A payload
        without a usable value (a string, an integer or a boolean) is a ValidationError."""
        values: list[Any] = []
        for entry in self.by:
            field = entry[len(PAYLOAD_PREFIX) :]
            value = payload.get(field)
            if not isinstance(value, str | int) or len(str(value)) > MAX_VALUE_CHARS:
                raise ValidationError(
                    f"'{entry}' is required (a string, integer or boolean of at most "
                    f"{MAX_VALUE_CHARS} characters): the kind debounces by it"
                )
            values.append(value)
        text = json.dumps([kind, owner.tenant, owner.user_id, values], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:40]

    def due(self, now: int, window_from: int) -> int:
        """When a job whose window opened at `window_from` is due after a submission at `now`
        (epoch ms): `seconds` after it, but no later than `max_wait` after the window opened."""
        return min(now + self.seconds * 1000, window_from + self.max_wait * 1000)

    def body(self) -> dict[str, Any]:
        """As `POST /jobs` takes it (`"debounce": {...}`)."""
        body: dict[str, Any] = {"by": list(self.by), "seconds": self.seconds, "keep": self.keep}
        if self.max_wait_seconds is not None:
            body["max_wait_seconds"] = self.max_wait_seconds
        return body

    @staticmethod
    def from_body(raw: Any) -> Debounce | None:
        """A request's `debounce` object (None: none), each field checked (400 naming it)."""
        if raw is None or isinstance(raw, Debounce):
            return raw
        if not isinstance(raw, Mapping):
            raise ValidationError(
                '\'debounce\' must be an object: {"by": [...], "seconds": n, "keep": ...}'
            )
        extra = sorted(set(raw) - DEBOUNCE_FIELDS)
        if extra:
            raise ValidationError(f"unknown 'debounce' field(s): {', '.join(extra)[:200]}")
        if "seconds" not in raw:
            raise ValidationError("'debounce.seconds' is required")
        by = raw.get("by", [])
        if not isinstance(by, list):
            raise ValidationError("'debounce.by' must be a list of payload fields")
        return Debounce(
            by=tuple(by),
            seconds=raw["seconds"],
            keep=raw.get("keep", "last"),
            max_wait_seconds=raw.get("max_wait_seconds"),
        )


def checked_debounce(debounce: Any) -> Debounce | None:
    """A kind's `debounce=` as declared: None or a Debounce (TypeError otherwise)."""
    if debounce is not None and not isinstance(debounce, Debounce):
        raise TypeError("debounce is a leasehold.Debounce(by=..., seconds=..., keep=...)")
    return debounce


def debounced(job: Job, debounce: Debounce) -> Job:
    """`job` (as just made, due at accept) due at the end of a new window instead, its
    deadline counted from then as a delayed job's is."""
    due = debounce.due(job.created_at, job.created_at)
    length = job.deadline_at - (job.next_attempt_at or job.created_at)
    return replace(job, next_attempt_at=due, deadline_at=due + length)


__all__ = ["Debounce", "debounced"]
