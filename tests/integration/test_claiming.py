"""Claiming is the service's room, the claim's write the store's (issue 29): the slot decisions
are made by `Claimer`, and `LeaseStore.claim` is only the conditional write it is told to make
(on moto)."""

from __future__ import annotations

import pytest

from leasehold.domain.errors import SlotsFullError
from leasehold.store.items import slots_key
from leasehold.store.slots import holders_of
from tests.support.harness import ALICE, LEASE_MS, SLOT_LIMIT, Harness, steps


def slot_holders(harness: Harness) -> dict[str, str]:
    item = harness.stores.table.get(slots_key(ALICE))
    return holders_of(item)


def test_the_store_write_takes_no_slot_and_the_claimer_takes_one(harness: Harness) -> None:
    ids = [harness.submit(payload=steps({})) for _ in range(SLOT_LIMIT + 2)]
    now = harness.clock.now_ms()
    # The store's write alone records no slot: it is told what to record, and was told nothing.
    bare = harness.leases.claim(ids[0], ALICE, worker_id="w0", now=now, lease_ms=LEASE_MS)
    assert bare.slot_token is None and slot_holders(harness) == {}
    # The claimer takes the per-user slot first and has the write record its token.
    for n, job_id in enumerate(ids[1 : SLOT_LIMIT + 1], 1):
        job = harness.claimer.claim(job_id, ALICE, worker_id=f"w{n}", now=now, lease_ms=LEASE_MS)
        assert job.slot_token is not None and slot_holders(harness)[job_id] == job.slot_token
    with pytest.raises(SlotsFullError):
        harness.claimer.claim(ids[-1], ALICE, worker_id="late", now=now, lease_ms=LEASE_MS)
    assert harness.store.get(ids[-1]).state.value == "queued"  # refused before its write
