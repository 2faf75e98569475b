"""Sharded `by_state` keys on moto (decisions SH1–SH3): the per-shard pages the sweeper's passes
read, and the merged readers, over a table whose keys are spread over several shards."""

from __future__ import annotations

from collections import Counter

import pytest

from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.states import JobState
from leasehold.service.schedules import ScheduleService
from leasehold.store.items import ACTIVE_PARTITION, DUE_PARTITION
from leasehold.store.schedules import DUE_PARTITION as SCHEDULES_DUE
from leasehold.store.schedules import ScheduleStore, schedule_key
from leasehold.store.shards import base_of, shard_key, shard_of
from tests.support.harness import ALICE, Harness, registry, steps

SHARDS = 4
HOUR_MS = 3_600_000


@pytest.fixture
def sharded(moto: None) -> Harness:
    return Harness.create(index_shards=SHARDS)


def pages(read: object, shard: int, limit: int, **kw: object) -> list[str]:
    """Every job id of one shard, page after page, as a pass with a cursor reads them."""
    ids: list[str] = []
    after: str | None = None
    for _ in range(100):
        jobs, after = read(shard, after=after, limit=limit, **kw)  # type: ignore[operator]
        ids.extend(job.job_id for job in jobs)
        if after is None:
            return ids
    raise AssertionError("a shard's pages never ended")


def test_each_active_job_is_in_its_own_shard_and_read_once_oldest_first(sharded: Harness) -> None:
    h = sharded
    ids = []
    for _ in range(20):
        ids.append(h.submit())
        h.clock.advance(10)
    for job_id in ids:
        assert h.raw(job_id)["gsi1pk"] == shard_key(ACTIVE_PARTITION, shard_of(job_id, SHARDS))
    assert len({h.raw(job_id)["gsi1pk"] for job_id in ids}) == SHARDS
    jobs = h.stores.jobs
    assert jobs.shard_count == SHARDS
    seen: list[str] = []
    for shard in range(SHARDS):
        read = pages(jobs.active_page, shard, limit=3)
        assert all(shard_of(job_id, SHARDS) == shard for job_id in read)
        assert read == sorted(read, key=ids.index)  # oldest first
        seen.extend(read)
    assert sorted(seen) == sorted(ids)
    # the merged reader: every shard, oldest first
    assert [job.job_id for job in jobs.list_active(limit=100)] == ids
    assert [job.job_id for job in jobs.list_active(limit=5)] == ids[:5]


def test_a_due_shard_lists_only_what_is_due_by_then_soonest_first(sharded: Harness) -> None:
    h = sharded
    later = {h.submit(delay_seconds=3_600 + n * 60): 3_600 + n * 60 for n in range(16)}
    for job_id in later:
        assert base_of(h.raw(job_id)["gsi1pk"]) == DUE_PARTITION
    until = h.clock.now_ms() + HOUR_MS + 7 * 60_000  # the first eight are due by then
    due_by_then = {job_id for job_id, delay in later.items() if delay <= 3_600 + 7 * 60}
    seen: list[str] = []
    for shard in range(SHARDS):
        read = pages(h.stores.jobs.due_page, shard, limit=2, until=until)
        assert read == sorted(read, key=lambda job_id: later[job_id])  # soonest first
        seen.extend(read)
    assert sorted(seen) == sorted(due_by_then)
    merged = [job.job_id for job in h.stores.jobs.list_due(until=until, limit=100)]
    assert merged == sorted(due_by_then, key=lambda job_id: later[job_id])
    assert h.stores.jobs.count_due() == 16


def test_a_shard_page_rechecks_each_job_on_its_item(sharded: Harness) -> None:
    """GL2: an entry whose job has left the range since (here: finished, its entry removed from
    under a stale index by writing the item back) is not returned as active."""
    h = sharded
    job_id = h.submit()
    shard = shard_of(job_id, SHARDS)
    jobs, _ = h.stores.jobs.active_page(shard, after=None, limit=10)
    assert [job.job_id for job in jobs] == [job_id]
    # the item says the job is in another state's range; the index still lists it (stale)
    h.dynamodb.update_item(
        TableName=h.table,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET gsi1pk = :f",
        ExpressionAttributeValues={":f": {"S": "STATE#failed"}},
    )
    jobs, _ = h.stores.jobs.active_page(shard, after=None, limit=10)
    assert jobs == []
    with pytest.raises(ValueError):
        h.stores.jobs.active_page(SHARDS, after=None, limit=10)


def test_schedules_due_per_shard_and_merged(sharded: Harness) -> None:
    h = sharded
    service = ScheduleService(
        h.stores.table, registry(), h.clock, time_ordered_ids(h.clock, "s"), h.telemetry
    )
    made = []
    for _ in range(12):
        view = service.create(
            ALICE, {"kind": "synthetic", "payload": steps({}), "expression": "rate(1 minute)"}
        )
        made.append(view["schedule_id"])
        h.clock.advance(1)
    store = ScheduleStore(h.stores.table)
    assert store.shard_count == SHARDS
    keys = Counter(
        h.dynamodb.get_item(TableName=h.table, Key=schedule_key(ALICE.tenant, ALICE.user_id, sid))[
            "Item"
        ]["gsi1pk"]["S"]
        for sid in made
    )
    assert all(base_of(key) == SCHEDULES_DUE for key in keys)
    assert len(keys) > 1
    now = h.clock.now_ms() + 120_000
    seen = []
    for shard in range(SHARDS):
        after: str | None = None
        while True:
            due, after = store.due_page(shard, now=now, after=after, limit=2)
            assert all(shard_of(s.schedule_id, SHARDS) == shard for s in due)
            seen.extend(s.schedule_id for s in due)
            if after is None:
                break
    assert sorted(seen) == sorted(made)
    assert sorted(s.schedule_id for s in store.due(now, limit=100)) == sorted(made)
    assert len(store.due(now, limit=5)) == 5


def test_state_listings_merge_shards_oldest_first_with_a_cursor(sharded: Harness) -> None:
    h = sharded
    ids = []
    for _ in range(11):
        ids.append(h.submit())
        h.clock.advance(10)
    listed: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        jobs, cursor = h.stores.jobs.list_by_state(JobState.QUEUED, limit=3, cursor=cursor)
        listed.extend(job.job_id for job in jobs)
        if cursor is None:
            break
    assert listed == ids
    assert h.stores.jobs.count_indexed("active", cap=1000) == (11, False)
    assert h.stores.jobs.count_indexed("active", cap=5) == (5, True)
    assert [job.job_id for job in h.stores.jobs.sample("active", limit=4)] == ids[:4]
    assert [job.job_id for job in h.stores.jobs.sample("active", limit=4, newest=True)] == (
        ids[::-1][:4]
    )
