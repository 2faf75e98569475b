"""The key-heat model (bench/keyheat.py) on a recording made by hand, with every share worked
out on paper, and the schema of the committed bench/scale.json (issue 30, DESIGN §18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench.capacity import IndexSpec, TableSpec, WriteEvent
from bench.keyheat import (
    Assumptions,
    Recording,
    Touch,
    first_at,
    key_rows,
    model,
    pattern_of,
    reader_costs,
)
from bench.meter import _query_partition
from bench.scale import touches

ROOT = Path(__file__).resolve().parents[2]

# Two jobs, a and b. Each writes its own job item (3 WCU), puts and removes its entry under the
# sharded `STATE#active` (1 + 1 WCU), writes the unsharded `STATE#succeeded` once (1 WCU) and
# its user's slot item twice (1 + 1 WCU).
JOBS = [
    Touch("table", "JOB#a", wcu=3),
    Touch("table", "JOB#b", wcu=3),
    Touch("by_state", "STATE#active", wcu=1),
    Touch("by_state", "STATE#active", wcu=1),
    Touch("by_state", "STATE#active#1", wcu=1),
    Touch("by_state", "STATE#active#1", wcu=1),
    Touch("by_state", "STATE#succeeded", wcu=1),
    Touch("by_state", "STATE#succeeded", wcu=1),
    Touch("table", "SLOTS#t#u", wcu=2),
    Touch("table", "SLOTS#t#u", wcu=2),
]
# One sweep, recorded over 2 shards: one Query of each (0.5 RRU), then 60 RRU of job items.
SWEEP = [
    Touch("by_state", "STATE#active", rcu=0.5, operation="Query"),
    Touch("by_state", "STATE#active#1", rcu=0.5, operation="Query"),
    Touch("table", "JOB#x", rcu=60, operation="BatchGetItem"),
]
ASSUME = Assumptions(mix=(("s", 1.0),), job_seconds=1.0, jobs_per_user_per_second=0.02)


def recording() -> Recording:
    return Recording(
        scenarios={"s": (2, JOBS)},
        passes={"sweep": (1 / 60, SWEEP)},
        services={"s": {"api_requests": 1.0, "sqs_requests": 3.0}},
    )


def by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in rows}


def test_patterns_replace_ids_and_shards() -> None:
    assert pattern_of("JOB#j_51bb6c43") == ("JOB#<job>", "job")
    assert pattern_of("STATE#active#7") == ("STATE#active#{shard}", "fixed")
    assert pattern_of("STATE#active") == ("STATE#active#{shard}", "fixed")
    assert pattern_of("STATE#succeeded") == ("STATE#succeeded", "fixed")
    assert pattern_of("SLOTS#tenant-0001#cc30") == ("SLOTS#<tenant>#<user>", "user")
    assert pattern_of("OWNER#tenant-0001#cc30") == ("OWNER#<tenant>#<user>", "user")
    assert pattern_of("BOOKMARKS#tenant-0001") == ("BOOKMARKS#<tenant>", "tenant")


def test_shares_by_hand() -> None:
    rows = by_key(key_rows(recording(), ASSUME, rate=100, shards=4))
    # STATE#active: 4 WCU over 2 jobs = 2 a job; 200 WCU/s over 4 shards = 50 a key.
    active = rows["STATE#active#{shard}"]
    assert active["total_wcu_per_second"] == 200
    assert active["wcu_per_second"] == 50
    # the sweep reads each of 4 shards: max(1 RRU / 4, one 0.5-RRU query) a minute
    assert active["rcu_per_second"] == pytest.approx(0.5 / 60, abs=1e-4)
    assert active["share"] == 0.05
    assert active["keys_recorded"] == active["keys_written"] == 2  # STATE#active, STATE#active#1
    # STATE#succeeded is one key: 1 WCU a job, 100 WCU/s, 0.1 of a partition
    assert rows["STATE#succeeded"]["wcu_per_second"] == 100
    assert rows["STATE#succeeded"]["share"] == 0.1
    # one key per job: 3 WCU within its 1-s life, 100 keys alive at once
    job = rows["JOB#<job>"]
    assert (job["wcu_per_second"], job["keys"], job["share"]) == (3, 100, 0.003)
    # users: 100 jobs/s ÷ 0.02 = 5,000 users; 2 WCU a job → 200 WCU/s, 0.04 a user
    assert rows["SLOTS#<tenant>#<user>"]["wcu_per_second"] == 0.04
    # the hottest user runs 5 ÷ 1.04 jobs/s at 2 WCU each
    assert rows["SLOTS#<tenant>#<user> (hottest user)"]["wcu_per_second"] == round(2 * 5 / 1.04, 4)


def test_one_shard_is_the_layout_before() -> None:
    rows = by_key(key_rows(recording(), ASSUME, rate=100, shards=1))
    assert rows["STATE#active#{shard}"]["wcu_per_second"] == 200
    assert rows["STATE#active#{shard}"]["share"] == 0.2


def test_first_key_at_80_percent() -> None:
    # before (1 shard): STATE#active, 2 WCU a job, reaches 800 WCU/s at 400 jobs/s;
    # after (4 shards): STATE#succeeded (1 WCU a job, unsharded) first, at 800 jobs/s
    at, key = first_at(recording(), ASSUME, shards=1)
    assert key == "by_state STATE#active#{shard}"
    assert at == pytest.approx(400, rel=0.01)
    at, key = first_at(recording(), ASSUME, shards=4)
    assert key == "by_state STATE#succeeded"
    assert at == pytest.approx(800, rel=0.01)


def test_what_shards_cost_the_readers() -> None:
    # the sweep was recorded over 2 shards: 1 Query a shard (61 RRU in all, a minute apart);
    # each shard more is a Query more, at least 0.5 RRU
    one, four = reader_costs(recording(), 2, (1, 4), read_unit_usd=1e-6)
    assert one["sweep"] == {"queries": 1, "rcu": 60.5, "usd_per_month": round(43_200 * 60.5e-6, 2)}
    assert four["sweep"]["queries"] == 4
    assert four["sweep"]["rcu"] == 62


def test_quotas_scale_with_the_rate() -> None:
    result = model(recording(), ASSUME, rate=20_000, shards=4)
    quotas = {q["name"]: q for q in result["quotas"]}
    api = quotas["API Gateway throttle (account, Region, requests/s)"]
    assert (api["needed"], api["default"]) == (20_000, 10_000)
    assert "20,000" in api["increase"]
    mapping = quotas["SQS event source mapping concurrency (per mapping)"]
    assert mapping["needed"] == 20_000  # 20,000 jobs/s × 1 s each
    assert "20 queues" in mapping["increase"]
    # table writes: job 3 + slots 2 a job on the table, 3 on by_state = 8 a job
    writes = quotas["DynamoDB table write throughput (WRU/s, table + its indexes)"]
    assert writes["needed"] == 160_000
    assert model(recording(), ASSUME, rate=10, shards=4)["quotas"][0]["increase"] == "none"


def test_touches_name_each_index_entry_under_its_own_key() -> None:
    by_state = IndexSpec("by_state", "gsi1pk", "gsi1sk")
    spec = TableSpec("jobs", "pk", "sk", (by_state,))
    old = {"pk": {"S": "JOB#a"}, "sk": {"S": "JOB"}, "gsi1pk": {"S": "STATE#active#3"},
           "gsi1sk": {"S": "1"}}  # fmt: skip
    new = {**old, "gsi1pk": {"S": "STATE#failed"}}
    event = WriteEvent("outcome", "UpdateItem", {"pk": old["pk"], "sk": old["sk"]}, old, new,
                       transactional=False, failed=False)  # fmt: skip
    got = [(t.index, t.key, t.wcu) for t in touches(spec, [event], [])]
    assert got == [
        ("table", "JOB#a", 1),
        ("by_state", "STATE#active#3", 1),
        ("by_state", "STATE#failed", 1),
    ]


def test_a_query_names_its_partition() -> None:
    spec = TableSpec("jobs", "pk", "sk", (IndexSpec("by_state", "gsi1pk", "gsi1sk"),))
    params = {
        "KeyConditionExpression": "#p = :p AND gsi1sk <= :s",
        "ExpressionAttributeNames": {"#p": "gsi1pk"},
        "ExpressionAttributeValues": {":p": {"S": "STATE#due#2"}, ":s": {"S": "9"}},
    }
    assert _query_partition(spec, "by_state", params) == "STATE#due#2"
    on_table = {
        "KeyConditionExpression": "pk = :k",
        "ExpressionAttributeValues": {":k": {"S": "SCHED#x"}},
    }
    assert _query_partition(spec, "table", on_table) == "SCHED#x"


def test_scale_json_schema() -> None:
    """bench/scale.json, as `make bench-scale` wrote it: the issue's schema, every share
    consistent with its units, and the quotas named."""
    scale = json.loads((ROOT / "bench" / "scale.json").read_text())
    assert scale["target_jobs_per_second"] == 10_000
    assert scale["keys"] and scale["quotas"]
    for row in scale["keys"]:
        assert {"key", "index", "wcu_per_second", "rcu_per_second", "limit", "share"} <= set(row)
        assert row["limit"] == 1000
        assert isinstance(row["key"], str) and isinstance(row["index"], str)
        expected = max(row["wcu_per_second"] / 1000, row["rcu_per_second"] / 3000)
        assert row["share"] == pytest.approx(expected, abs=1e-4)
    assert [r["share"] for r in scale["keys"]] == sorted(
        (r["share"] for r in scale["keys"]), reverse=True
    )
    names = " ".join(q["name"] for q in scale["quotas"])
    for quota in ("table write", "Lambda", "mapping", "API Gateway", "SQS", "stream"):
        assert quota in names
    for q in scale["quotas"]:
        assert set(q) == {"name", "needed", "default", "increase"}
        assert isinstance(q["needed"], int) and q["increase"]
        assert q["default"] is None or isinstance(q["default"], int)
    assert set(scale["ceiling"]) == {"before", "after"}
    assert scale["ceiling"]["before"]["index_shards"] == 1


def test_no_key_above_half_a_partition_at_10000_jobs_a_second() -> None:
    """The issue's target, on the committed layout (the template's IndexShards)."""
    scale = json.loads((ROOT / "bench" / "scale.json").read_text())
    assert scale["index_shards"] > 1
    # recorded on the sharded layout: the jobs' active entries were written on many keys
    active = next(r for r in scale["keys"] if r["key"] == "STATE#active#{shard}")
    assert active["keys_written"] >= 8
    over = [(r["index"], r["key"], r["share"]) for r in scale["keys"] if r["share"] > 0.5]
    assert over == []


def test_a_fan_out_s_counters_take_a_bounded_share_of_its_ends() -> None:
    from bench.keyheat import FanoutRecording, fanout_rows

    from leasehold.domain.waits import expected_per_shard, fanin_shards

    rec = FanoutRecording(
        children=100, shards=16,
        per_end={"FANIN#<parent>#<step>#<shard>": (2.0, 1.0)},
        per_set={"FANIN#<parent>#<step>#<shard>": (0.0, 2.0), "JOB#<parent>": (10.0, 2.0)},
        spawn={"JOB#<parent>": (2 / 49, 0.0)},
    )  # fmt: skip
    counts = expected_per_shard("j_" + "0" * 22, 0, 10_000, fanin_shards(10_000))
    assert len(counts) == 16 and sum(counts) == 10_000 and max(counts) <= 700
    rows = {(r["key"], r["phase"]): r for r in fanout_rows(
        rec, counts, ends_per_second=1000, spawned_per_second=1000)}  # fmt: skip
    counter = rows[("FANIN#<parent>#<step>#<shard>", "children ending")]
    assert counter["wcu_per_second"] == pytest.approx(1000 * max(counts) / 10_000 * 2.0, abs=0.01)
    assert counter["rcu_per_second"] == pytest.approx(1000 * max(counts) / 10_000 + 2.0, abs=0.01)
    assert counter["share"] < 0.2
    parent = rows[("JOB#<parent>", "children ending")]
    assert parent["wcu_per_second"] == 10.0  # once a set, whatever its size
    assert rows[("JOB#<parent>", "children being written")]["wcu_per_second"] == pytest.approx(
        1000 * 2 / 49, abs=0.01
    )
    # one counter item for the whole set would take every end: twice a partition
    (one,) = [r for r in fanout_rows(rec, [10_000], ends_per_second=1000, spawned_per_second=0)
              if r["key"].startswith("FANIN")]  # fmt: skip
    assert one["share"] == pytest.approx(2.0)
