"""Every reader of an index, with the index lagging (leasehold_dev.local.moto.index_lag): a GSI
may list an item as it was a moment ago. Each reader re-checks what it listed against the item
itself (read strongly consistent) — a listing never shows a job in a state it has left, the
sweeper never acts on a job the index no longer holds — or is safe without (decisions GL*)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from leasehold import Kind, StepContext
from leasehold.domain.states import JobState
from leasehold.store.items import ACTIVE_PARTITION, DUE_PARTITION
from leasehold.testing import LeaseholdTestbed
from tests.support.harness import ALICE, LEASE_MS, OPS, Harness, steps
from tests.support.index_lag import lagging_index

MOMENT_MS = 100
"""How long ago the item changed: well inside the lag (500 ms)."""


@pytest.fixture
def lagged(harness: Harness) -> Iterator[Harness]:
    with lagging_index(harness.clock):
        yield harness


def listed(h: Harness, state: JobState) -> list[tuple[str, str]]:
    jobs, _ = h.stores.jobs.list_by_state(state, limit=50)
    return [(job.job_id, job.state.value) for job in jobs]


def settle(h: Harness) -> None:
    """Past the lag: the index has caught up with everything written so far."""
    h.clock.advance(1_000)


def test_a_failed_job_replayed_a_moment_ago_is_not_listed_as_failed(lagged: Harness) -> None:
    h = lagged
    job_id = h.submit(payload=steps({"fatal": True}))
    h.deliver(job_id)
    settle(h)
    assert listed(h, JobState.FAILED) == [(job_id, "failed")]
    h.ops().replay(job_id, OPS, {"note": "fixed upstream"})
    h.clock.advance(MOMENT_MS)
    assert listed(h, JobState.FAILED) == []


def test_a_delayed_job_cancelled_a_moment_ago_is_not_listed_as_queued(lagged: Harness) -> None:
    h = lagged
    job_id = h.submit(delay_seconds=3_600)
    assert h.raw(job_id)["gsi1pk"] == DUE_PARTITION
    settle(h)
    assert listed(h, JobState.QUEUED) == [(job_id, "queued")]
    h.jobs().cancel(ALICE, job_id)
    h.clock.advance(MOMENT_MS)
    assert listed(h, JobState.QUEUED) == []


def test_a_delayed_job_brought_due_a_moment_ago_gets_no_second_wakeup(lagged: Harness) -> None:
    h = lagged
    job_id = h.submit(delay_seconds=20 * 60)
    h.clock.advance(10 * 60 * 1000)  # due in 10 minutes: within SQS's reach
    assert h.sweep() == {"due": 1}
    assert h.raw(job_id)["gsi1pk"] == ACTIVE_PARTITION
    wakeups = len(h.outbox(job_id))
    h.clock.advance(MOMENT_MS)
    # the index still lists it as delayed: the sweeper must see from the item that it is not
    assert h.sweep() == {}
    assert len(h.outbox(job_id)) == wakeups


def test_a_job_finished_a_moment_ago_is_not_settled_or_redispatched_by_the_sweeper(
    lagged: Harness,
) -> None:
    h = lagged
    slow = h.submit()
    lost = h.submit()
    h.clock.advance(6_000)  # both queued past the lost-wake-up grace (5 s)
    job = h.claim(slow, "w1")
    h.clock.advance(LEASE_MS - 1)
    # one finishes just before its lease runs out, the other's wake-up comes at last
    h.complete(job, {"done": True})
    h.deliver(lost)
    h.clock.advance(MOMENT_MS)
    # the index still lists them as running (lease expired) and queued (dispatch lost);
    # their items say succeeded: the sweeper must leave both alone
    assert h.sweep() == {}
    assert h.state(slow) == "succeeded" and h.state(lost) == "succeeded"


def test_an_owners_listing_filtered_by_state_shows_each_job_as_it_is(lagged: Harness) -> None:
    h = lagged
    job_id = h.submit()
    settle(h)
    h.deliver(job_id)
    h.clock.advance(MOMENT_MS)
    queued, _ = h.stores.jobs.list_for_owner(ALICE, state=JobState.QUEUED, limit=10, cursor=None)
    everything, _ = h.stores.jobs.list_for_owner(ALICE, state=None, limit=10, cursor=None)
    assert queued == []
    assert [(job.job_id, job.state.value) for job in everything] == [(job_id, "succeeded")]


def test_the_testbeds_drain_does_not_take_a_lagging_index_for_nothing_left_to_do() -> None:
    # Given a testbed whose index lags, and a job whose worker dies inside its step in the
    # millisecond it was submitted (the index does not list the job yet)
    with LeaseholdTestbed([quick]) as tb, lagging_index(tb.clock):
        tb.crash(in_step="only")
        job_id = tb.submit("quick", {})
        # When it drains: the job is still running, and the testbed must wait out its lease
        tb.drain()
        # Then the sweeper took it on and the second attempt finished it
        assert tb.state(job_id) == "succeeded"
        assert tb.view(job_id)["attempts"] == 2


quick = Kind("quick", schema={"type": "object"})


@quick.step()
def only(ctx: StepContext, payload: dict[str, object]) -> dict[str, object]:
    return {}
