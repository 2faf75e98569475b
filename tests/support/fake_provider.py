"""An in-memory billable provider for the property test: the same contract as the local HTTP
provider (leasehold_dev.local.provider) — idempotent keys, status lookup, a repeat charging again
otherwise — with a lost answer on demand, at the speed of a dict."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from leasehold_apps.reading_list.provider import (
    Capability,
    LookupResult,
    ProviderOutcomeUnknown,
    Receipt,
)


@dataclass
class FakeProvider:
    capability: Capability
    lose_rate: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(13))
    charges: dict[str, list[str]] = field(default_factory=dict)

    def submit(self, key: str, *, url: str, text: str | None = None, fault: Any = None) -> Receipt:
        first = self.charges.get(key)
        if first and self.capability is Capability.IDEMPOTENT_KEY:
            return self._receipt(key, first[0])
        receipt = f"rcpt_{key}_{len(first or [])}"
        self.charges.setdefault(key, []).append(receipt)  # the charge is committed…
        if self.rng.random() < self.lose_rate:
            raise ProviderOutcomeUnknown("the answer was lost")  # …and its answer lost
        return self._receipt(key, receipt)

    def lookup(self, key: str) -> LookupResult:
        if key not in self.charges:
            return LookupResult("not_found")
        return LookupResult("succeeded", self._receipt(key, self.charges[key][0]))

    @staticmethod
    def _receipt(key: str, receipt: str) -> Receipt:
        return Receipt(key=key, receipt=receipt, summary="a page", tags=["page"])
