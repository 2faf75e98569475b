"""Fault injection around the worker's rate hold (decision F3): what happens to a wake-up held
for its rate when the job changes, or the store fails, while it is held."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.domain.errors import SlotsFullError, StoreUnavailableError
from leasehold.service.claiming import Claimer
from leasehold.service.jobs import JobService
from leasehold.store.leases import LeaseStore
from tests.integration.test_rate_limits import KINDS, fresh, starts, submit, worker  # noqa: F401
from tests.support.harness import ALICE, LEASE_MS, Harness

pytestmark = pytest.mark.integration


def _service(harness: Harness) -> JobService:
    return JobService(harness.stores, KINDS, harness.clock, harness.new_id, harness.telemetry)


def _two(harness: Harness) -> tuple[str, str]:
    first, second = submit(harness, "five_a_second", {}), submit(harness, "five_a_second", {})
    me = worker(harness, "w0", hold_ms=1000, sleep=lambda s: harness.clock.advance(int(s * 1000)))
    assert me.handle(harness.wakeup(first)).outcome == "succeeded"
    harness.clock.advance(50)
    return first, second


def test_a_job_cancelled_while_held_is_not_started(harness: Harness) -> None:
    _, second = _two(harness)

    def sleep(seconds: float) -> None:
        _service(harness).cancel(ALICE, second)
        harness.clock.advance(int(seconds * 1000))

    result = worker(harness, "w", hold_ms=1000, sleep=sleep).handle(harness.wakeup(second))
    assert result.outcome == "terminal"
    job = harness.store.get(second)
    assert job is not None and job.attempts == 0 and job.state.value == "cancelled"
    assert len(starts) == 1


def test_a_job_claimed_by_another_worker_while_held_is_not_claimed_twice(
    harness: Harness,
) -> None:
    _, second = _two(harness)
    other: list[Any] = []

    def sleep(seconds: float) -> None:
        harness.clock.advance(int(seconds * 1000))
        if not other:  # another worker's copy of the wake-up, delivered during the hold
            other.append(worker(harness, "w2").handle(harness.wakeup(second)).outcome)

    result = worker(harness, "w", hold_ms=1000, sleep=sleep).handle(harness.wakeup(second))
    assert other == ["succeeded"]
    assert result.outcome in {"terminal", "leased"}
    job = harness.store.get(second)
    assert job is not None and job.attempts == 1
    assert len(starts) == 2


def test_a_note_the_store_refuses_still_holds_and_starts(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = _two(harness)

    def down(*_: Any, **__: Any) -> None:
        raise StoreUnavailableError("injected")

    monkeypatch.setattr(LeaseStore, "note_dispatch", down)
    me = worker(harness, "w", hold_ms=1000, sleep=lambda s: harness.clock.advance(int(s * 1000)))
    assert me.handle(harness.wakeup(second)).outcome == "succeeded"
    assert harness.receive_all(wait_for_delay=True) == []


@pytest.mark.parametrize("fault", ["slots_full", "store_unavailable"])
def test_a_claim_refused_after_the_hold_is_handed_off_not_lost(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    _, second = _two(harness)
    calls: list[int] = []
    original = Claimer.claim

    def claim(self: Claimer, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            if fault == "slots_full":
                raise SlotsFullError("full", "tenant:x")
            raise StoreUnavailableError("injected")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Claimer, "claim", claim)
    me = worker(harness, "w", hold_ms=1000, sleep=lambda s: harness.clock.advance(int(s * 1000)))
    result = me.handle(harness.wakeup(second))
    assert result.outcome == fault and result.disposition.value == "ack"
    bodies = harness.bodies(wait_for_delay=True)
    assert [b["job_id"] for b in bodies] == [second]  # the wake-up is re-sent
    job = harness.store.get(second)
    assert job is not None and job.attempts == 0 and job.state.value == "queued"
    view = _service(harness).view(ALICE, second)
    if fault == "slots_full":
        assert view.get("waiting_for") == {"concurrency": "tenant:x"}


def test_the_hold_never_sleeps_into_the_time_a_lease_needs(harness: Harness) -> None:
    _, second = _two(harness)
    budget = [LEASE_MS + 500 + 200]  # exactly enough for the 150-ms sleep and a lease
    seen: list[int] = []

    def sleep(seconds: float) -> None:
        budget[0] -= int(seconds * 1000)
        harness.clock.advance(int(seconds * 1000))

    def remaining() -> int:
        seen.append(budget[0])
        return budget[0]

    me = worker(harness, "w", hold_ms=1000, sleep=sleep)
    assert me.handle(harness.wakeup(second), remaining_ms=remaining).outcome == "succeeded"
    assert min(seen) >= LEASE_MS + 500
