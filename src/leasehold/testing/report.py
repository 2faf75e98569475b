"""What `run_until_idle` and `drain` did: each wake-up delivered, and what the worker said."""

from __future__ import annotations

from dataclasses import dataclass, field

from leasehold.domain.errors import LeaseholdError


class NotIdleError(LeaseholdError, AssertionError):
    """The testbed was still busy after the rounds (or the virtual time) it was allowed: a kind
    that never settles, or a bound set too low. An AssertionError, so pytest reports it as a
    failed expectation."""


@dataclass(frozen=True)
class Delivery:
    """One wake-up handed to a worker."""

    job_id: str
    outcome: str
    """What the worker said (`succeeded`, `retry_scheduled`, `waiting_approval`, `not_due`,
    `terminal`, …), `crashed` for a planned crash, `malformed` for a body not a wake-up."""
    worker: str
    """The worker's id: a new one after each crash (a new execution environment)."""
    at_ms: int
    """The testbed's clock when it was delivered."""
    queue: str = ""
    """The queue it came from, as `queue_urls` names it (`work`, `work_1`…, `high`, `low`)."""


@dataclass(frozen=True)
class RunReport:
    """What one `run_until_idle` (or the whole of a `drain`) did."""

    rounds: int = 0
    """Relay-and-deliver rounds run (the last one found nothing to do)."""
    relayed: int = 0
    """Outbox items the relay turned into wake-ups."""
    deliveries: tuple[Delivery, ...] = field(default_factory=tuple)
    advanced_seconds: float = 0.0
    """Virtual time `drain` skipped (0 for `run_until_idle`)."""

    @property
    def crashes(self) -> int:
        """How many planned crashes fired."""
        return sum(1 for d in self.deliveries if d.outcome == "crashed")

    def outcomes(self, job_id: str | None = None) -> list[str]:
        """The worker's outcomes in order, of one job or of all."""
        return [d.outcome for d in self.deliveries if job_id in (None, d.job_id)]

    def __add__(self, other: RunReport) -> RunReport:
        return RunReport(
            rounds=self.rounds + other.rounds,
            relayed=self.relayed + other.relayed,
            deliveries=self.deliveries + other.deliveries,
            advanced_seconds=self.advanced_seconds + other.advanced_seconds,
        )


__all__ = ["Delivery", "NotIdleError", "RunReport"]
