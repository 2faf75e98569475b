"""The sweeper's walks (service/passes.py, decisions SP1–SP4) over a small in-memory index: the
cursor carries a walk across runs, a run stops at its budget (items or time), and segments own
disjoint shards that together are all of them."""

from __future__ import annotations

import re

import pytest
from scripts.build_sizes import FUNCTION_ENV

from leasehold.handlers.settings import Settings, SettingsError
from leasehold.handlers.sweeper import SweepEventError, event_segment
from leasehold.service.passes import PAGE_LIMIT, SAFETY_MARGIN_MS, Budget, Segment, Walk, run_budget
from leasehold.store.passes import PassCursor

BUILD_ENV = dict(FUNCTION_ENV, INDEX_SHARDS="8")
"""Every function's environment (template.yaml's Globals) as the build check holds it."""


class ShardedIndex:
    """Items by shard, each shard sorted by its key; a page is what `active_page` returns."""

    def __init__(self, shards: int, items: int) -> None:
        self.shards: dict[int, list[str]] = {s: [] for s in range(shards)}
        for n in range(items):
            self.shards[n % shards].append(f"k{n:05d}")
        self.reads = 0

    def read(self, shard: int, after: str | None, limit: int) -> tuple[list[str], str | None]:
        self.reads += 1
        rest = [key for key in self.shards[shard] if after is None or key > after]
        page = rest[:limit]
        return page, (page[-1] if len(rest) > limit else None)

    def remove(self, key: str) -> None:
        for keys in self.shards.values():
            if key in keys:
                keys.remove(key)


def run(index: ShardedIndex, cursor: PassCursor, shards: list[int], items: int) -> list[str]:
    walk = Walk[str](cursor, shards, Budget(items))
    return list(walk.items(index.read))


def test_a_walk_over_three_runs_reads_every_item_once_a_lap() -> None:
    # Given 30 active items over 4 shards and a budget of 10 a run
    index = ShardedIndex(4, 30)
    cursor = PassCursor()
    everything = sorted(k for keys in index.shards.values() for k in keys)
    # When three runs walk from the saved cursor
    seen = [run(index, cursor, [0, 1, 2, 3], 10) for _ in range(3)]
    # Then each run read its budget, and together they read every item exactly once
    assert [len(part) for part in seen] == [10, 10, 10]
    assert sorted(k for part in seen for k in part) == everything
    assert cursor.laps == 1
    # And the fourth run starts the next lap from the first shard's first item
    assert run(index, cursor, [0, 1, 2, 3], 10)[:8] == index.shards[0]


def test_a_fresh_cursor_every_run_reads_the_same_oldest_items() -> None:
    """What the cursor fixes: without it, items past the first budget are never read."""
    index = ShardedIndex(4, 30)
    seen = {k for _ in range(3) for k in run(index, PassCursor(), [0, 1, 2, 3], 10)}
    assert len(seen) == 10


def test_a_run_stops_at_its_budget_mid_shard_and_the_next_goes_on_from_there() -> None:
    index = ShardedIndex(1, 250)
    cursor = PassCursor()
    first = run(index, cursor, [0], 130)
    assert first == index.shards[0][:130]
    assert cursor.positions == {0: index.shards[0][129]}
    second = run(index, cursor, [0], 1000)
    assert second == index.shards[0][130:]  # the rest, then the lap ends: no re-read
    assert cursor.laps == 1 and cursor.positions == {}


def test_pages_ask_no_more_than_the_budget_left() -> None:
    index = ShardedIndex(1, 1000)
    asked: list[int] = []

    def read(shard: int, after: str | None, limit: int) -> tuple[list[str], str | None]:
        asked.append(limit)
        return index.read(shard, after, limit)

    list(Walk[str](PassCursor(), [0], Budget(250)).items(read))
    assert asked == [PAGE_LIMIT, PAGE_LIMIT, 50]


def test_a_run_reads_no_page_once_its_time_is_nearly_up() -> None:
    index = ShardedIndex(2, 500)
    left = [SAFETY_MARGIN_MS + 5_000]

    def time_left() -> int:
        return left[0]

    walk = Walk[str](PassCursor(), [0, 1], Budget(10_000, time_left))
    read = []
    for key in walk.items(index.read):
        read.append(key)
        left[0] -= 30  # each item takes 30 ms of the invocation
    # 5 s of slack at 30 ms an item: two pages of 100, then no third page is started
    assert len(read) == 2 * PAGE_LIMIT
    assert walk.cursor.positions == {0: read[-1]}


def test_items_that_leave_the_index_are_all_handled_at_the_rate() -> None:
    """The due pass: 1,000 items due at once, 10 a second over a 60-s interval: 600 a run."""
    index = ShardedIndex(8, 1000)
    cursor = PassCursor()
    budget = run_budget(10, 60, 1)
    handled: list[list[str]] = []
    for _ in range(3):
        walk = Walk[str](cursor, list(range(8)), Budget(budget))
        done = []
        for key in walk.items(index.read):
            index.remove(key)  # brought due: out of the index
            done.append(key)
        handled.append(done)
    assert [len(h) for h in handled] == [600, 400, 0]
    assert not any(index.shards.values())


def test_segments_own_disjoint_shards_that_together_are_all() -> None:
    for count in (1, 2, 3, 8):
        owned = [Segment(k, count).shards(64) for k in range(count)]
        flat = [s for part in owned for s in part]
        assert sorted(flat) == list(range(64)), count
        assert len(flat) == len(set(flat)), count
        assert all(s % count == k for k, part in enumerate(owned) for s in part)


def test_a_segment_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ValueError, match="segment 2 of 2"):
        Segment(2, 2)
    with pytest.raises(ValueError):
        Segment(0, 0)


def test_the_run_budget_is_the_rate_over_the_interval_shared_by_the_segments() -> None:
    assert run_budget(10, 60, 1) == 600
    assert run_budget(10, 60, 8) == 75
    assert run_budget(1, 60, 7) == 9  # rounded up: the segments together read at least the rate


def test_a_cursor_of_shards_no_longer_owned_starts_at_the_first_owned() -> None:
    index = ShardedIndex(4, 40)
    cursor = PassCursor(next_shard=9, positions={9: "k99999"})
    assert run(index, cursor, [0, 2], 5) == index.shards[0][:5]
    assert 9 not in cursor.positions


def _env(**changes: str) -> dict[str, str]:
    env = dict(BUILD_ENV)
    env.update(changes)
    return env


def test_the_settings_refuse_rates_segments_and_schedules_that_make_no_sense() -> None:
    settings = Settings.from_env(_env())
    assert (settings.sweep_active_rate, settings.sweep_segments) == (10, 1)
    assert settings.sweep_interval_seconds == 60
    assert Settings.from_env(_env(SWEEP_SCHEDULE="rate(5 minutes)")).sweep_interval_seconds == 300
    for variable, value, said in (
        ("SWEEP_DUE_RATE", "0", "SWEEP_DUE_RATE=0 must be between 1 and"),
        ("SWEEP_ACTIVE_RATE", "-3", "SWEEP_ACTIVE_RATE=-3"),
        ("SWEEP_SCHEDULE_RATE", "100001", "SWEEP_SCHEDULE_RATE=100001"),
        ("SWEEP_SEGMENTS", "0", "SWEEP_SEGMENTS=0 must be between 1 and 64"),
        ("SWEEP_SEGMENTS", "65", "SWEEP_SEGMENTS=65"),
        ("SWEEP_SCHEDULE", "cron(0 * * * ? *)", "must be rate"),
        ("SWEEP_SCHEDULE", "rate(30 seconds)", "must be rate"),
    ):
        with pytest.raises(SettingsError, match=re.escape(said)):
            Settings.from_env(_env(**{variable: value}))


def test_an_event_may_name_one_segment_of_the_deployments_own_count() -> None:
    assert event_segment({}, 4) is None  # the schedule's plain event: every segment
    assert event_segment({"segment": 2, "segments": 4}, 4) == Segment(2, 4)
    assert event_segment({"segment": 0}, 1) == Segment(0, 1)
    for event in (
        {"segment": 4, "segments": 4},
        {"segment": 1, "segments": 2},  # another count: its shards overlap another segment's
        {"segment": "1", "segments": 4},
        {"segment": True, "segments": 4},
        {"segment": -1, "segments": 4},
    ):
        with pytest.raises(SweepEventError, match="segment"):
            event_segment(event, 4)
