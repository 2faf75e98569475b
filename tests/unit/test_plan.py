"""Capacity on paper (bench/plan.py) on hand-made measurements: docs/capacity.md's hot-key
figures come from these functions, so each must model the store as it is (decisions C3, C5) —
one shared `STATE#active` partition, a slot item written alone and priced on its size."""

from __future__ import annotations

from typing import Any

import pytest
from bench.plan import (
    BUSY_USER,
    HEADLINE,
    RETRY,
    SWEEP_ACTIVE_BUDGET,
    Workload,
    active_partition,
    plan,
    slot_item,
)


def scenario(*, by_state: float, slots: float = 1.0, wcu_base: float = 5.0) -> dict[str, Any]:
    """A 1-step job: accept (base + by_state put), claim (job + slot take), outcome (job + slot
    release + by_state removal)."""
    phases: dict[str, dict[str, Any]] = {
        "accept": {"wcu": wcu_base + by_state / 2, "wcu_by_part": {"base:JOB (tx)": wcu_base}},
        "claim": {"wcu": 1 + slots, "wcu_by_part": {"base:JOB": 1.0, "base:SLOTS": slots}},
        "outcome": {"wcu": 1 + slots, "wcu_by_part": {"base:JOB": 1.0, "base:SLOTS": slots}},
    }
    phases["accept"]["wcu_by_part"]["index:by_state"] = by_state / 2
    phases["outcome"]["wcu_by_part"]["index:by_state"] = by_state / 2
    wcu = sum(phase["wcu"] for phase in phases.values()) + by_state / 2
    return {
        "per_job": {
            "wcu": wcu,
            "rcu": 0.0,
            "dynamodb_requests": 5,
            "sqs_requests": 0.5,
            "api_requests": 1,
            "log_bytes": 1000,
            "lambda_invocations": {"api": 1, "worker": 0.2},
        },
        "usd_per_million_jobs": {"total": 10.0},
        "phases": phases,
        "job_item_bytes_at_end": 900,
        "job_item_attribute_bytes": {"pk": 30, "sk": 5, "gsi2pk": 60, "gsi2sk": 44},
    }


def results(*, by_state: float = 2.0, busy_item_bytes: int = 2048) -> dict[str, Any]:
    load = Workload()
    scenarios = {name: scenario(by_state=by_state) for name, _ in load.mix}
    scenarios[HEADLINE] = scenario(by_state=by_state)
    scenarios[RETRY] = scenario(by_state=by_state)
    busy = scenario(by_state=by_state, slots=2.0)
    busy.update(
        per_user_limit=50,
        slot_item_bytes_max=busy_item_bytes,
        slot_wait={
            "wcu_per_wait": 3.0,
            "wcu_by_part_per_wait": {"base:JOB": 1.0, "base:SLOTS (failed)": 2.0},
        },
    )
    scenarios[BUSY_USER] = busy
    return {
        "scenarios": scenarios,
        "sweeper": {"loaded_sweep": {"rcu": 101.5}, "wcu_per_rescue": 5.0},
    }


def test_queued_and_running_share_one_partition_that_takes_every_state_index_write() -> None:
    avg = {"wcu_index_by_state": 2.0}
    active = active_partition(avg, peak=200)
    assert active["wru_per_second_peak"] == 400
    assert active["jobs_per_second_at_1000_wru"] == 500
    assert active["shards_needed_at_80_percent"] == 1
    assert active_partition(avg, peak=2000)["shards_needed_at_80_percent"] == 5


def test_plan_reports_the_shared_partition_from_the_measured_index_writes() -> None:
    out = plan(results(by_state=2.0), Workload())
    keys = out["hot_keys"]
    assert set(keys) == {"by_state STATE#active", "per-user slot item", "headline_phase_split"}
    assert keys["by_state STATE#active"]["wru_per_second_peak"] == 400
    ten = plan(results(by_state=2.0), Workload().scaled(10))
    assert ten["hot_keys"]["by_state STATE#active"]["wru_per_second_peak"] == 4000


def test_the_slot_item_is_written_alone_and_priced_on_its_size() -> None:
    # 50 holders in 2,048 B: 5 holders (the template's limit) fit in one unit per write.
    small = slot_item(results(busy_item_bytes=2048), worker_seconds=1.0)
    assert small["wru_per_slot_write_at_limit"] == 1
    assert small["slot_writes_per_job"] == 2.0
    assert small["wru_per_second_busy_user"] == pytest.approx(10.0)
    assert small["jobs_per_second_per_user_at_1000_wru"] == 500
    assert small["wru_per_slot_wait"] == 2.0  # the job's write + one failed take
    assert small["waiting_jobs_per_user_at_1000_wru"] == 9900
    # 50 holders in 22,000 B: 5 of them take 2,200 B, so three units for every slot write.
    large = slot_item(results(busy_item_bytes=22_000), worker_seconds=1.0)
    assert large["wru_per_slot_write_at_limit"] == 3
    assert large["jobs_per_second_per_user_at_1000_wru"] == 167


def test_the_sweeper_reads_its_budget_of_active_jobs() -> None:
    sweeper = plan(results(), Workload())["sweeper"]
    assert sweeper["jobs_listed_per_sweep"] == SWEEP_ACTIVE_BUDGET == 10 * 60
    assert sweeper["rcu_per_listed_job"] == pytest.approx(1.015)


def test_storage_counts_the_owner_entry_but_no_state_entry() -> None:
    out = plan(results(), Workload())
    # 30 M finished jobs × (900 + 139 + 2 × 100) B + 2 days of 1 M outbox items × 250 B.
    gib = (30e6 * 1239 + 2e6 * 250) / 1024**3
    stored = out["monthly_usd"]["DynamoDB storage (30-day retention)"]
    assert stored == pytest.approx(round(gib * 0.25, 2))
