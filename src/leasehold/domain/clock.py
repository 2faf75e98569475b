"""Time is injected everywhere, so a test can expire a lease exactly. Milliseconds since epoch."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """The writer's clock. DynamoDB conditions have no server clock (docs/architecture.md rule
    7)."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)


class ManualClock:
    """A clock that only moves when told to: for tests and the stateful model."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms


def iso(ms: int | None) -> str | None:
    """ISO 8601 UTC with milliseconds, as the HTTP contract shows times."""
    if ms is None:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )
