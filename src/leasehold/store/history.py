"""A job's history: one small entry for every state change that ends an attempt or is an
operator's act — outcome, retry, dead, unknown, pause, cancel, hand-back, rescue, replay, resolve —
kept bounded (docs/architecture.md rule 8): the last HISTORY_LIMIT entries live on the job item and
the number
dropped is counted, so a job replayed a thousand times stays one small item.

Stored with short attribute names (every write of the job item pays for its whole size); the
views spell them out (`expand`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from leasehold.domain.records import HistoryEntry
from leasehold.domain.types import JsonObject

HISTORY_LIMIT = 10
_TEXT_LIMIT = 200

_SHORT = {
    "event": "ev",
    "at": "t",
    "attempt": "a",
    "epoch": "e",
    "worker": "w",
    "started": "st",
    "reason": "r",
    "state": "s",
    "by": "by",
    "note": "n",
    "operation_id": "op",
}
_LONG = {short: long for long, short in _SHORT.items()}


def entry(
    event: str,
    *,
    at: int,
    state: str | None = None,
    attempt: int | None = None,
    epoch: int | None = None,
    worker: str | None = None,
    started: int | None = None,
    reason: str | None = None,
    by: str | None = None,
    note: str | None = None,
    operation_id: str | None = None,
) -> HistoryEntry:
    """One history entry, bounded: text fields are cut to 200 characters."""
    fields: dict[str, str | int | None] = {
        "event": event,
        "at": at,
        "state": state,
        "attempt": attempt,
        "epoch": epoch,
        "worker": worker,
        "started": started,
        "reason": reason,
        "by": by,
        "note": note,
        "operation_id": operation_id,
    }
    stored: dict[str, str | int] = {}
    for name, value in fields.items():
        if value is None or value == "":
            continue
        stored[_SHORT[name]] = value[:_TEXT_LIMIT] if isinstance(value, str) else value
    return cast(HistoryEntry, stored)


def appended(
    history: Sequence[Mapping[str, Any]], new: HistoryEntry
) -> tuple[list[Mapping[str, Any]], int]:
    """The bounded history after `new`, and how many old entries fell off the front."""
    combined = [*history, new]
    dropped = max(0, len(combined) - HISTORY_LIMIT)
    return combined[dropped:], dropped


def expand(stored: Mapping[str, Any]) -> JsonObject:
    """A stored entry with its names spelled out (times stay epoch ms; views format them)."""
    return {_LONG.get(name, name): value for name, value in stored.items()}
