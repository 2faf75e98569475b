"""What the services count. The handlers plug in Powertools Metrics (EMF); tests count in memory."""

from __future__ import annotations

from collections import Counter
from typing import Protocol


class Telemetry(Protocol):
    def count(self, name: str, value: int = 1) -> None: ...


class CountingTelemetry:
    """In-memory counters: the test double and the local stack's fallback."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value
