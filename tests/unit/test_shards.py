"""Index shards (decision SH1): a stable hash spreads ids evenly, and shard 0 is the bare key."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any, cast

import pytest

from leasehold.domain.states import JobState
from leasehold.store.expressions import Expression
from leasehold.store.guards import state_change
from leasehold.store.shards import base_of, item_key, shard_key, shard_keys, shard_of
from leasehold.store.table import Table


def test_shard_of_is_stable_across_processes() -> None:
    ids = [f"j_{n:022x}" for n in range(50)]
    here = [shard_of(job_id, 64) for job_id in ids]
    # another interpreter with another hash seed computes the same shards (hash() would not)
    code = (
        "from leasehold.store.shards import shard_of; "
        "print([shard_of(f'j_{n:022x}', 64) for n in range(50)])"
    )
    there = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
    ).stdout.strip()
    assert there == str(here)
    assert shard_of("j_0190f2a1b2c3d4e5f6a7b8c9", 64) == shard_of("j_0190f2a1b2c3d4e5f6a7b8c9", 64)


def test_ten_thousand_ids_spread_within_twenty_percent_of_even_over_64_shards() -> None:
    # ids shaped like the API's: time-ordered, 12 hex of milliseconds + 10 of randomness
    ids = [
        f"j_{1_764_000_000_000 + n * 7:012x}{(n * 2_654_435_761) % 2**40:010x}"
        for n in range(10_000)
    ]
    counts = Counter(shard_of(job_id, 64) for job_id in ids)
    even = 10_000 / 64
    assert set(counts) == set(range(64))
    assert min(counts.values()) >= 0.8 * even, counts.most_common()[-3:]
    assert max(counts.values()) <= 1.2 * even, counts.most_common(3)


def test_counter_ids_spread_too() -> None:
    counts = Counter(shard_of(f"j_{n:06d}", 8) for n in range(1, 801))
    assert set(counts) == set(range(8))
    assert max(counts.values()) <= 1.3 * 100


def test_shard_zero_is_the_bare_key_so_an_unsharded_table_is_count_one() -> None:
    assert shard_key("STATE#active", 0) == "STATE#active"
    assert shard_key("STATE#active", 7) == "STATE#active#7"
    assert shard_keys("STATE#due", 3) == ["STATE#due", "STATE#due#1", "STATE#due#2"]
    assert all(shard_of(f"j_{n}", 1) == 0 for n in range(100))
    assert item_key("SCHEDULES#due", "s_1", 1) == "SCHEDULES#due"


def test_raising_the_count_keeps_every_old_key_among_the_keys_read() -> None:
    assert set(shard_keys("STATE#active", 4)) <= set(shard_keys("STATE#active", 16))


def test_base_of_a_shard_key() -> None:
    assert base_of("STATE#active#12") == "STATE#active"
    assert base_of("STATE#active") == "STATE#active"
    assert base_of("SCHEDULES#due#3") == "SCHEDULES#due"
    assert base_of("STATE#waiting_approval") == "STATE#waiting_approval"


def test_a_state_change_takes_the_shard_count_from_the_table_and_needs_it_to_stay_indexed() -> None:
    table = Table(cast(Any, None), "jobs", index_shards=8)
    moved = state_change(Expression(), JobState.DEAD, "j_0", table, from_active=True)
    assert {"S": "STATE#dead#3"} in moved.values.values()  # j_0's shard among the table's 8
    # a state the index leaves out needs no table; one it keeps cannot be written without one
    left = state_change(Expression(), JobState.CANCELLED, "", None, from_active=True)
    assert "REMOVE" in left.update_expression()
    assert "gsi1pk" in left.names.values()
    with pytest.raises(ValueError, match="index shards"):
        state_change(Expression(), JobState.QUEUED, "j_0", None, from_active=False)
