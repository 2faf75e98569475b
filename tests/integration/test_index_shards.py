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
from leasehold.store.sharded import SHARDS_KEY, ShardCountLoweredError, record_shard_count
from leasehold.store.shards import base_of, shard_key, shard_of
from tests.support.harness import ALICE, Harness, registry, steps

SHARDS = 4
HOUR_MS = 3_600_000


@pytest.fixture
def sharded(moto: None) -> Harness:
    return Harness.create(slot_limit=0, index_shards=SHARDS)


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


# ------------------------------------------------------------------ raising the count (SH3)


def ids_of(h: Harness, state: JobState) -> set[str]:
    listed: list[str] = []
    cursor: str | None = None
    for _ in range(50):
        jobs, cursor = h.stores.jobs.list_by_state(state, limit=4, cursor=cursor)
        listed.extend(job.job_id for job in jobs)
        if cursor is None:
            break
    assert len(listed) == len(set(listed)), listed  # nothing listed twice across pages
    return set(listed)


def test_raising_the_shard_count_with_jobs_in_flight_loses_none(sharded: Harness) -> None:
    h = sharded
    schedules = ScheduleService(
        h.stores.table, registry(), h.clock, time_ordered_ids(h.clock, "s"), h.telemetry
    )
    # Given jobs of every kind in flight, written over 4 shards
    queued = [h.submit() for _ in range(6)]
    running = [h.submit() for _ in range(4)]
    for job_id in running:
        h.claim(job_id, "w-gone")  # a worker that will never finish: its lease expires
    delayed = [h.submit(delay_seconds=1_800 + 60 * n) for n in range(5)]
    failed = [h.submit(payload=steps({"fatal": True})) for _ in range(3)]
    for job_id in failed:
        h.deliver(job_id)
    schedule = schedules.create(
        ALICE, {"kind": "synthetic", "payload": steps({}), "expression": "rate(1 hour)"}
    )
    assert record_shard_count(h.stores.table) == SHARDS
    old_keys = {h.raw(job_id)["gsi1pk"] for job_id in queued + running + delayed + failed}
    assert {base_of(key) for key in old_keys} == {ACTIVE_PARTITION, DUE_PARTITION, "STATE#failed"}
    before = h.ops().summary()["counts"]

    # When a deploy raises IndexShards to 16 (every store reads and writes through this door)
    h.stores.table.index_shards = 16
    assert record_shard_count(h.stores.table) == 16
    later = [h.submit() for _ in range(12)]
    assert any(
        shard_of(job_id, 16) >= SHARDS
        and h.raw(job_id)["gsi1pk"].endswith(f"#{shard_of(job_id, 16)}")
        for job_id in later
    )

    # Then every view and count still lists every job, old shards and new
    assert ids_of(h, JobState.QUEUED) == set(queued + delayed + later)
    assert ids_of(h, JobState.RUNNING) == set(running)
    assert ids_of(h, JobState.FAILED) == set(failed)
    jobs = h.stores.jobs
    assert jobs.count_indexed("active", cap=1000) == (6 + 4 + 12, False)
    assert jobs.count_indexed("delayed", cap=1000) == (5, False)
    assert jobs.count_indexed(JobState.FAILED, cap=1000) == (3, False)
    after = h.ops().summary()["counts"]
    assert after["queued"] == before["queued"] + 12
    assert (after["running"], after["failed"]) == (before["running"], before["failed"]) == (4, 3)

    # And the worker and the sweeper take every one of them to its end, and the schedule's
    # tick (due in an old shard's key) makes its job, which runs too
    unfinished = set(queued + running + delayed + later)
    tick_job = None
    for _ in range(40):
        h.clock.advance(5 * 60_000)  # leases expire, delays come due, the schedule ticks
        h.sweep()
        schedules.fire_due()
        for job in jobs.list_active(limit=1_000):
            if job.state is JobState.QUEUED and (job.next_attempt_at or 0) <= h.clock.now_ms():
                h.deliver(job.job_id)
        unfinished = {job_id for job_id in unfinished if h.state(job_id) != "succeeded"}
        tick_job = schedules.get(ALICE, schedule["schedule_id"]).get("last_job_id")
        if not unfinished and tick_job is not None and h.state(tick_job) == "succeeded":
            break
    assert unfinished == set()
    assert tick_job is not None and h.state(tick_job) == "succeeded"
    assert {h.state(job_id) for job_id in failed} == {"failed"}
    assert ids_of(h, JobState.FAILED) == set(failed)
    assert jobs.count_indexed("active", cap=1000) == (0, False)
    assert jobs.count_indexed("delayed", cap=1000) == (0, False)


def test_lowering_the_shard_count_is_refused(sharded: Harness) -> None:
    h = sharded
    h.submit()
    assert record_shard_count(h.stores.table) == SHARDS
    h.stores.table.index_shards = 2
    with pytest.raises(ShardCountLoweredError, match="IndexShards=4"):
        record_shard_count(h.stores.table)
    h.stores.table.index_shards = SHARDS  # the same count again is fine, and writes nothing
    assert record_shard_count(h.stores.table) == SHARDS


def test_an_unsharded_table_records_nothing(moto: None) -> None:
    h = Harness.create()
    assert record_shard_count(h.stores.table) == 1
    assert h.dynamodb.get_item(TableName=h.table, Key=SHARDS_KEY).get("Item") is None
