"""The /schedules routes through the real Api handler and the sample events of events/ (every
answer checked against docs/openapi.yaml by the `call` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Call

BODY = {
    "kind": "synthetic",
    "payload": {"steps": [{"name": "report"}]},
    "expression": "rate(5 minutes)",
}


def test_create_get_list_delete_with_location_owner_scope_and_history(call: Call) -> None:
    status, view, headers = call("api-create-schedule.json", body=BODY)
    assert status == 201 and headers["Location"] == f"/schedules/{view['schedule_id']}"
    assert view["state"] == "active" and view["next_tick_at"] is not None
    sid = view["schedule_id"]
    assert call("api-get-schedule.json", path_id=sid)[1]["schedule_id"] == sid
    listed = call("api-list-schedules.json")[1]
    assert [s["schedule_id"] for s in listed["schedules"]] == [sid]
    # another user of the tenant, and one of another tenant: the same 404 as an unknown id
    unknown = call("api-get-schedule.json", path_id="s_0000000000000000000000")[:2]
    for user in ("bob", "carol"):
        status, body, _ = call("api-get-schedule.json", path_id=sid, user=user)
        text = body["error"]["message"].replace(sid, "s_0000000000000000000000")
        assert (status, body["error"]["code"], text) == (
            unknown[0],
            unknown[1]["error"]["code"],
            unknown[1]["error"]["message"],
        )
        assert call("api-delete-schedule.json", path_id=sid, user=user)[0] == 404
        assert call("api-list-schedules.json", user=user)[1]["schedules"] == []
    status, deleted, _ = call("api-delete-schedule.json", path_id=sid)
    assert status == 200 and deleted["state"] == "deleted"
    assert [(h["event"], h["by"]) for h in deleted["history"]] == [
        ("created", "alice"),
        ("deleted", "alice"),
    ]
    assert call("api-delete-schedule.json", path_id=sid)[0] == 404


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"expression": "cron(0 9 L * ? *)"}, "invalid_request"),
        ({"expression": "cron(0 9 * * ? *)", "timezone": "Europe/Atlantis"}, "invalid_request"),
        ({"missed": "maybe"}, "invalid_request"),
        ({"kind": "no_such_kind"}, "unknown_kind"),
        ({"payload": {"steps": "many"}}, "invalid_request"),
        ({"every": "day"}, "invalid_request"),
    ],
)
def test_a_bad_schedule_is_a_400_saying_why(call: Call, change: dict[str, Any], code: str) -> None:
    status, body, _ = call("api-create-schedule.json", body={**BODY, **change})
    assert status == 400 and body["error"]["code"] == code and body["error"]["message"]
    assert call("api-list-schedules.json")[1]["schedules"] == []


def test_a_schedule_without_identity_is_401(call: Call) -> None:
    assert call("api-create-schedule.json", body=BODY, user=None)[0] == 401
    assert call("api-list-schedules.json", user=None)[0] == 401


def test_the_sweeper_function_fires_a_due_schedule_once(call: Call) -> None:
    # Given a schedule created over the API whose tick has come (moved into the past)
    from leasehold.handlers import sweeper, wiring
    from leasehold.store.schedules import schedule_key
    from leasehold_dev.local.invoke import LocalContext
    from tests.conftest import load_event
    from tests.support.api import acting_as_function

    _, view, _ = call("api-create-schedule.json", body=BODY)
    table = wiring.runtime().stores.table
    past = wiring.runtime().clock.now_ms() - 60_000
    table.client.update_item(
        TableName=table.name,
        Key=schedule_key("study-group", "alice", view["schedule_id"]),
        UpdateExpression="SET next_tick_at = :t, gsi1sk = :s",
        ExpressionAttributeValues={
            ":t": {"N": str(past)},
            ":s": {"S": f"{past:013d}#{view['schedule_id']}"},
        },
    )
    # When the sweeper's scheduled event comes, twice (acting as the sweeper's role)
    with acting_as_function(call, "SweeperFunction"):
        first = sweeper.handler(load_event("sweeper-schedule.json"), LocalContext("sweeper"))
        second = sweeper.handler(load_event("sweeper-schedule.json"), LocalContext("sweeper"))
    # Then the first made the tick's job and the second nothing
    assert first.get("schedule_jobs") == 1 and "schedule_jobs" not in second
    jobs = call("api-list-jobs.json", query={})[1]["jobs"]
    assert [job["job_id"] for job in jobs] == [
        call("api-get-schedule.json", path_id=view["schedule_id"])[1]["last_job_id"]
    ]


def test_the_sweeper_creates_a_kinds_declared_schedule_at_its_cold_start(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leasehold.domain.job import Owner
    from leasehold.handlers import sweeper, wiring
    from leasehold.service.schedules import KIND_TENANT
    from leasehold.store.schedules import ScheduleStore
    from leasehold_dev.local.invoke import LocalContext
    from tests.conftest import load_event
    from tests.support.api import acting_as_function, call_fixture

    kinds = "leasehold_apps.synthetic,leasehold_apps.reading_list,leasehold_apps.doc_agent"
    fixture = call_fixture(monkeypatch, LEASEHOLD_KINDS=f"{kinds},tests.support.scheduled_kinds")
    call = next(fixture)
    monkeypatch.setattr(sweeper, "_declared_synced", [])
    try:
        with acting_as_function(call, "SweeperFunction"):
            first = sweeper.handler(load_event("sweeper-schedule.json"), LocalContext("sweeper"))
            second = sweeper.handler(load_event("sweeper-schedule.json"), LocalContext("sweeper"))
        assert first.get("declared_created") == 1 and "declared_created" not in second
        store = ScheduleStore(wiring.runtime().stores.table)
        (declared,), _ = store.list_for_owner(Owner(KIND_TENANT, "nightly"), limit=10, cursor=None)
        assert declared.expression == "rate(1 hour)" and declared.declared_by_kind
    finally:
        fixture.close()
