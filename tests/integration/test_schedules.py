"""Schedules on moto with a controlled clock (arch §15, decisions FS2–FS4): one job per tick
however the trigger fires, the missed-tick policies, owner scope and the audit trail."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from leasehold.domain.clock import iso
from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.job import Job
from leasehold.domain.schedule import MINUTE_MS
from leasehold.domain.states import JobState
from leasehold.service.schedules import ScheduleService, tick_job_id
from leasehold.store.schedules import DUE_PARTITION, ScheduleStore, schedule_key
from tests.support.harness import ALICE, BOB, Harness, registry, steps
from tests.support.index_lag import current_index, lagging_index

PAYLOAD = steps({})


def service(harness: Harness, kinds: Any = None) -> ScheduleService:
    return ScheduleService(
        harness.stores.table,
        registry() if kinds is None else kinds,
        harness.clock,
        time_ordered_ids(harness.clock, "s"),
        harness.telemetry,
    )


@pytest.fixture(autouse=True)
def lagging(harness: Harness) -> Iterator[None]:
    """Every test here runs with the index 500 ms behind the table: the trigger finds due
    schedules through it, and must fire each tick once, never early."""
    with lagging_index(harness.clock):
        yield


def alices_jobs(harness: Harness) -> list[Job]:
    """The test's own look (the index as stored: the jobs a fire just wrote)."""
    with current_index():
        jobs, _ = harness.stores.jobs.list_for_owner(ALICE, state=None, limit=100, cursor=None)
    return jobs


def create(harness: Harness, **body: Any) -> dict[str, Any]:
    request = {"kind": "synthetic", "payload": PAYLOAD, "expression": "rate(1 minute)", **body}
    return service(harness).create(ALICE, request)


def at(harness: Harness, *parts: int) -> None:
    target = int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]
    harness.clock.advance(target - harness.clock.now_ms())


def to_tick(harness: Harness, view: dict[str, Any], plus_ms: int = 0) -> int:
    tick = int(datetime.fromisoformat(view["next_tick_at"]).timestamp() * 1000)
    harness.clock.advance(tick + plus_ms - harness.clock.now_ms())
    return tick


# ------------------------------------------------------------------ one job per tick


def test_two_firings_of_one_tick_at_once_give_one_job(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule whose tick has come
    view = create(harness)
    tick = to_tick(harness, view, plus_ms=1_000)
    # When two triggers read it as due at the same moment and both fire it
    both_read = threading.Barrier(2, timeout=10)
    original = ScheduleStore.due_page

    def due_then_wait(self: ScheduleStore, shard: int, **page: Any) -> tuple[list[Any], Any]:
        found = original(self, shard, **page)
        both_read.wait()
        return found

    monkeypatch.setattr(ScheduleStore, "due_page", due_then_wait)
    reports: list[dict[str, int]] = []
    threads = [
        threading.Thread(target=lambda: reports.append(service(harness).fire_due()))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Then exactly one job exists, the tick's, and one fire lost the race
    assert [job.job_id for job in alices_jobs(harness)] == [
        tick_job_id(ALICE, view["schedule_id"], tick)
    ]
    assert sorted(r.get("schedule_jobs", 0) for r in reports) == [0, 1]
    assert sorted(r.get("schedule_fires_lost_race", 0) for r in reports) == [0, 1]
    after = service(harness).get(ALICE, view["schedule_id"])
    assert after["ticks_fired"] == 1 and after["next_tick_at"] > view["next_tick_at"]


def test_a_late_second_fire_of_a_tick_makes_nothing_even_when_its_job_is_gone(
    harness: Harness,
) -> None:
    # Given a tick fired once, and its job since removed (expired by TTL)
    view = create(harness)
    tick = to_tick(harness, view, plus_ms=1_000)
    stale = harness.stores.table
    schedule = ScheduleStore(stale).due(harness.clock.now_ms(), limit=10)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    job_id = tick_job_id(ALICE, view["schedule_id"], tick)
    harness.dynamodb.delete_item(
        TableName=harness.table, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
    )
    # When a trigger that read the schedule before that fire fires the same tick again
    store = ScheduleStore(stale)
    advance = store.advance(
        schedule[0],
        next_tick_at=tick + MINUTE_MS,
        fired=1,
        skipped=0,
        last_tick_at=tick,
        last_job_id=job_id,
        last_error=None,
        now=harness.clock.now_ms(),
    )
    from leasehold.domain.job import Owner, new_job
    from leasehold.store.guards import new_job_writes

    job = new_job(
        job_id,
        "synthetic",
        Owner(ALICE.tenant, ALICE.user_id),
        PAYLOAD,
        now=harness.clock.now_ms(),
        steps_total=1,
        max_attempts=3,
        deadline_seconds=3600,
        budget=None,
    )
    committed = store.fire(advance, [new_job_writes(job)])
    # Then its condition on the tick refuses it: no job comes back
    assert committed is None
    assert alices_jobs(harness) == []


def test_a_tick_whose_job_exists_already_advances_without_a_second_job(
    harness: Harness,
) -> None:
    # Given a tick fired, then the schedule put back on that tick (its advance lost)
    view = create(harness)
    tick = to_tick(harness, view, plus_ms=1_000)
    service(harness).fire_due()
    harness.dynamodb.update_item(
        TableName=harness.table,
        Key=schedule_key(ALICE.tenant, ALICE.user_id, view["schedule_id"]),
        UpdateExpression="SET next_tick_at = :t, gsi1sk = :s",
        ExpressionAttributeValues={
            ":t": {"N": str(tick)},
            ":s": {"S": f"{tick:013d}#{view['schedule_id']}"},
        },
    )
    # When the trigger fires that tick again
    report = service(harness).fire_due()
    # Then there is still one job, and the schedule moved on rather than sticking
    assert len(alices_jobs(harness)) == 1
    assert report == {"schedule_jobs_existing": 1}
    assert service(harness).get(ALICE, view["schedule_id"])["next_tick_at"] > view["next_tick_at"]


def test_a_fire_before_the_tick_makes_nothing_and_each_tick_later_makes_one(
    harness: Harness,
) -> None:
    view = create(harness)
    to_tick(harness, view, plus_ms=-1)
    assert service(harness).fire_due() == {}
    for _ in range(3):
        harness.clock.advance(MINUTE_MS)
        service(harness).fire_due()
        service(harness).fire_due()  # a duplicate trigger in the same minute
    assert len(alices_jobs(harness)) == 3
    assert all(job.state is JobState.QUEUED for job in alices_jobs(harness))


def test_a_schedule_just_ticked_is_not_fired_early_by_an_index_that_still_says_due(
    harness: Harness,
) -> None:
    # Given a schedule whose tick was fired 100 ms ago (the index lags 500 ms)
    view = create(harness)
    tick = to_tick(harness, view, plus_ms=1_000)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    harness.clock.advance(100)
    # When the trigger runs again while the index still lists the schedule at that tick
    report = service(harness).fire_due()
    # Then nothing fires: its next tick is a minute away, whatever the index says
    assert report == {}
    after = service(harness).get(ALICE, view["schedule_id"])
    assert after["ticks_fired"] == 1
    assert after["next_tick_at"] == iso(tick + MINUTE_MS)
    next_job = tick_job_id(ALICE, view["schedule_id"], tick + MINUTE_MS)
    assert harness.store.get(next_job) is None
    # And at the next tick it fires once, as it would have without the lag
    harness.clock.advance(MINUTE_MS)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    assert harness.store.get(next_job) is not None


# ------------------------------------------------------------------ missed ticks


@pytest.mark.parametrize(("missed", "jobs", "skipped"), [("skip", 1, 9), ("run_once", 2, 8)])
def test_a_trigger_ten_periods_late_skips_or_runs_the_missed_ticks_once(
    harness: Harness, missed: str, jobs: int, skipped: int
) -> None:
    # Given a rate(1 minute) schedule whose trigger stops for ten minutes past its tick
    view = create(harness, missed=missed)
    first = to_tick(harness, view)
    harness.clock.advance(9 * MINUTE_MS + 30_000)
    # When it fires again
    service(harness).fire_due()
    # Then: one job for the latest tick, plus (run_once) one for the missed ones
    made = {job.job_id for job in alices_jobs(harness)}
    latest = first + 9 * MINUTE_MS
    expected = {tick_job_id(ALICE, view["schedule_id"], latest)}
    if missed == "run_once":
        expected.add(tick_job_id(ALICE, view["schedule_id"], first))
    assert made == expected and len(made) == jobs
    after = service(harness).get(ALICE, view["schedule_id"])
    assert after["ticks_skipped"] == skipped
    assert after["next_tick_at"] == datetime.fromtimestamp(
        (latest + MINUTE_MS) / 1000, tz=UTC
    ).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_cron_in_a_time_zone_fires_at_its_local_time(harness: Harness) -> None:
    at(harness, 2026, 3, 28, 12, 0)
    view = create(harness, expression="cron(30 2 * * ? *)", timezone="Europe/Paris")
    # 02:30 does not exist in Paris on 2026-03-29: the tick is 03:00 CEST (01:00 UTC)
    assert view["next_tick_at"] == "2026-03-29T01:00:00.000Z"
    at(harness, 2026, 3, 29, 1, 0)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    assert service(harness).get(ALICE, view["schedule_id"])["next_tick_at"] == (
        "2026-03-30T00:30:00.000Z"
    )


def test_a_tick_whose_kind_is_gone_makes_no_job_says_why_and_moves_on(harness: Harness) -> None:
    view = create(harness)
    to_tick(harness, view)
    report = service(harness, kinds={}).fire_due()
    assert report == {"schedule_errors": 1}
    after = service(harness).get(ALICE, view["schedule_id"])
    assert "made no job" in after["last_error"] and after["ticks_skipped"] == 1
    assert alices_jobs(harness) == []


# ------------------------------------------------------------------ owner scope and audit


def test_another_user_cannot_see_or_delete_a_schedule(harness: Harness) -> None:
    view = create(harness)
    with pytest.raises(JobNotFoundError):
        service(harness).get(BOB, view["schedule_id"])
    with pytest.raises(JobNotFoundError):
        service(harness).delete(BOB, view["schedule_id"])
    assert service(harness).list(BOB, limit=None, cursor=None)["schedules"] == []
    assert [
        s["schedule_id"] for s in service(harness).list(ALICE, limit=None, cursor=None)["schedules"]
    ] == [view["schedule_id"]]


def test_a_deleted_schedule_never_fires_and_its_history_says_who_and_when(
    harness: Harness,
) -> None:
    view = create(harness)
    harness.clock.advance(5_000)
    deleted = service(harness).delete(ALICE, view["schedule_id"])
    assert deleted["state"] == "deleted" and deleted["next_tick_at"] is not None
    assert [(h["event"], h["by"]) for h in deleted["history"]] == [
        ("created", "alice"),
        ("deleted", "alice"),
    ]
    to_tick(harness, view, plus_ms=MINUTE_MS)
    assert service(harness).fire_due() == {}
    assert alices_jobs(harness) == []
    with pytest.raises(JobNotFoundError):
        service(harness).delete(ALICE, view["schedule_id"])


def test_the_list_pages_newest_first(harness: Harness) -> None:
    made = []
    for _ in range(3):
        made.append(create(harness)["schedule_id"])
        harness.clock.advance(10)
    first = service(harness).list(ALICE, limit="2", cursor=None)
    second = service(harness).list(ALICE, limit="2", cursor=first["next_cursor"])
    seen = [s["schedule_id"] for s in first["schedules"] + second["schedules"]]
    assert seen == made[::-1]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"expression": "cron(0 9 * * *)"}, "6 fields"),
        ({"expression": "rate(5 minutes)", "timezone": "Nowhere/City"}, "unknown time zone"),
        ({"missed": "sometimes"}, "skip"),
        ({"kind": "nope"}, "kind"),
        ({"payload": {"steps": []}}, "steps"),
        ({"color": "blue"}, "unknown field 'color'"),
        ({"expression": "cron(0 0 1 1 ? 2020)"}, "never fire"),
        ({"max_attempts": 99}, "max_attempts"),
    ],
)
def test_a_schedule_that_could_not_make_its_job_is_refused_at_creation(
    harness: Harness, body: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        create(harness, **body)
    assert service(harness).list(ALICE, limit=None, cursor=None)["schedules"] == []


def test_a_fire_that_read_the_schedule_before_its_delete_makes_nothing(harness: Harness) -> None:
    # Given a trigger that read a due schedule, and its owner deleting it before the fire
    view = create(harness)
    tick = to_tick(harness, view)
    store = ScheduleStore(harness.stores.table)
    (stale,) = store.due(harness.clock.now_ms(), limit=10)
    service(harness).delete(ALICE, view["schedule_id"])
    # When the trigger fires what it read
    advance = store.advance(
        stale, next_tick_at=tick + MINUTE_MS, fired=0, skipped=0, last_tick_at=tick,
        last_job_id=None, last_error=None, now=harness.clock.now_ms(),
    )  # fmt: skip
    # Then the delete wins: nothing is written, the schedule stays deleted and out of the index
    assert store.fire(advance, []) is None
    assert service(harness).get(ALICE, view["schedule_id"])["state"] == "deleted"


def test_a_deleted_schedule_leaves_the_due_index(harness: Harness) -> None:
    # (a deleted schedule left there would fill the trigger's bounded batch for ever)
    view = create(harness)
    service(harness).delete(ALICE, view["schedule_id"])
    answer = harness.dynamodb.query(
        TableName=harness.table,
        IndexName="by_state",
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": DUE_PARTITION}},
    )
    assert answer["Items"] == []


# ------------------------------------------------------------------ declared on a kind


def declaring(*schedules: Any) -> dict[str, Any]:
    from leasehold import Kind
    from leasehold.sdk.engine_kind import EngineKind

    kind = Kind("nightly", schedules=list(schedules))

    @kind.step()
    def report(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    return {**registry(), "nightly": EngineKind(kind)}


def test_a_schedule_declared_on_a_kind_is_created_once_and_replaced_when_it_changes(
    harness: Harness,
) -> None:
    from leasehold import Schedule
    from leasehold.domain.job import Owner
    from leasehold.service.schedules import DEPLOY, KIND_TENANT

    owner = Owner(KIND_TENANT, "nightly")
    daily = Schedule("cron(0 9 * * ? *)", tz="Europe/Paris", payload={"n": 1})
    # Given a kind that declares a schedule, When two cold starts sync it
    assert service(harness, kinds=declaring(daily)).sync_declared() == {"declared_created": 1}
    assert service(harness, kinds=declaring(daily)).sync_declared() == {}
    (stored,) = service(harness).list(owner, limit=None, cursor=None)["schedules"]
    assert stored["declared_by_kind"] and stored["timezone"] == "Europe/Paris"
    assert stored["history"][0]["by"] == DEPLOY
    # When a deploy changes the declaration
    hourly = Schedule("rate(1 hour)", payload={"n": 1}, missed="run_once")
    changed = service(harness, kinds=declaring(hourly)).sync_declared()
    # Then the old schedule is deleted (by deploy) and the new one stands
    assert changed == {"declared_created": 1, "declared_deleted": 1}
    views = {s["expression"]: s for s in service(harness).list(owner, limit=None, cursor=None)[
        "schedules"
    ]}  # fmt: skip
    assert views["cron(0 9 * * ? *)"]["state"] == "deleted"
    assert views["cron(0 9 * * ? *)"]["history"][-1]["by"] == DEPLOY
    assert views["rate(1 hour)"]["state"] == "active"
    # and declaring the first again brings it back, under its own id
    again = service(harness, kinds=declaring(daily, hourly)).sync_declared()
    assert again == {"declared_created": 1}
    assert service(harness).get(owner, views["cron(0 9 * * ? *)"]["schedule_id"])["state"] == (
        "active"
    )
    # and its tick makes a job owned by the kind's reserved owner
    to_tick(harness, views["rate(1 hour)"])
    assert service(harness, kinds=declaring(daily, hourly)).fire_due() == {"schedule_jobs": 1}


def test_a_declared_schedule_the_kind_refuses_is_logged_not_fatal(harness: Harness) -> None:
    from leasehold import Kind, Schedule
    from leasehold.sdk.engine_kind import EngineKind

    strict = Kind(
        "strict",
        schema={"type": "object", "required": ["n"]},
        schedules=[Schedule("rate(1 hour)", payload={})],
    )

    @strict.step()
    def only(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    kinds = {**registry(), "strict": EngineKind(strict)}
    assert service(harness, kinds=kinds).sync_declared() == {"declared_refused": 1}


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"expression": "cron(0 9 L * ? *)"}, "not supported"),
        ({"expression": "rate(1 hour)", "tz": "Mars/Base"}, "unknown time zone"),
        ({"expression": "rate(1 hour)", "missed": "often"}, "often"),
    ],
)
def test_a_bad_declared_schedule_stops_the_kind_where_it_is_declared(
    arguments: dict[str, Any], says: str
) -> None:
    from leasehold import KindDefinitionError, Schedule

    with pytest.raises(KindDefinitionError, match=says):
        Schedule(**arguments)


def test_a_schedules_priority_is_each_of_its_jobs_and_the_default_is_normal(
    harness: Harness,
) -> None:
    high = create(harness, priority="high")
    plain = create(harness, payload=steps({}, {}))
    assert high["priority"] == "high" and "priority" not in plain
    to_tick(harness, high)
    service(harness).fire_due()
    jobs = {job.job_id: job.priority for job in alices_jobs(harness)}
    assert sorted(jobs.values()) == ["high", "normal"]
    assert jobs[str(service(harness).get(ALICE, high["schedule_id"])["last_job_id"])] == "high"
    with pytest.raises(ValidationError, match="'priority' must be one of"):
        create(harness, priority="urgent")
