"""What one tenant may take from the others (arch §17, decisions Q1–Q3): high priority only for
the tenants a deployment names, a quota of schedules per owner, a per-tenant submission rate.
Through the real API handler with the template's parameters (as deployed), and the services."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.domain.clock import SystemClock
from leasehold.domain.errors import (
    PriorityNotAllowedError,
    ScheduleQuotaExceededError,
    SubmitRateExceededError,
    ValidationError,
)
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.options import Submission
from leasehold.domain.tenancy import TenantPolicy, parse_tenant_list
from leasehold.handlers.settings import Settings, SettingsError
from leasehold.service.jobs import JobService
from leasehold.service.schedules import ScheduleService
from leasehold.store.schedules import count_key
from leasehold_dev.local.resources import parameter_defaults, template
from tests.support.api import Call, call_fixture
from tests.support.harness import ALICE, BOB, CAROL, Harness, make_job, registry, steps

HIGH = make_job(priority="high")
SCHEDULE = {"kind": "synthetic", "payload": steps({}), "expression": "rate(1 minute)"}


def _call(monkeypatch: pytest.MonkeyPatch, **env: str) -> Iterator[Call]:
    yield from call_fixture(monkeypatch, **env)


@pytest.fixture
def deployed(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """The API with the template's defaults."""
    yield from _call(monkeypatch)


@pytest.fixture
def study_group_high(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    yield from _call(monkeypatch, HIGH_PRIORITY_TENANTS="study-group")


# ---------------------------------------------------------------------- high priority (Q1)


def test_by_default_no_tenant_may_ask_for_high_priority_but_operators_may(deployed: Call) -> None:
    status, body, _ = deployed("api-submit-job.json", body=HIGH, user="alice")
    assert (status, body["error"]["code"]) == (403, "priority_not_allowed")
    assert "HighPriorityTenants" in body["error"]["message"]
    status, body, _ = deployed("api-submit-job.json", body=HIGH, user="ops")
    assert status == 202
    status, job, _ = deployed("api-get-job.json", user="ops", path_id=body["job_id"])
    assert (status, job["priority"]) == (200, "high")
    # normal and low stay open to everyone
    for priority in ("normal", "low"):
        status, _, _ = deployed("api-submit-job.json", body=make_job(priority=priority))
        assert status == 202


def test_a_listed_tenant_may_ask_for_high_and_another_may_not(study_group_high: Call) -> None:
    status, _, _ = study_group_high("api-submit-job.json", body=HIGH, user="alice")
    assert status == 202
    status, body, _ = study_group_high("api-submit-job.json", body=HIGH, user="carol")
    assert (status, body["error"]["code"]) == (403, "priority_not_allowed")
    assert "other-group" in body["error"]["message"]


def test_a_refused_high_job_writes_nothing(harness: Harness) -> None:
    service = _jobs(harness, TenantPolicy(high_priority_tenants=frozenset({"study-group"})))
    with pytest.raises(PriorityNotAllowedError):
        service.accept(CAROL, Submission.from_body(HIGH, "carol-key-1"))
    listed, _ = harness.stores.jobs.list_for_owner(CAROL, state=None, limit=10, cursor=None)
    assert listed == []
    # the same key at a priority carol may use is a new job, not a conflict with a refused one
    accepted = service.accept(CAROL, Submission.from_body(make_job(), "carol-key-1"))
    assert accepted.created


def test_a_kind_whose_own_default_is_high_runs_high_for_anyone(harness: Harness) -> None:
    from leasehold.sdk.kind import Kind

    urgent = Kind("urgent", schema={"type": "object"}, priority="high")

    @urgent.step()
    def only(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    kinds = {**registry(), **_engine_kinds(urgent)}
    service = JobService(
        harness.stores, kinds, harness.clock, harness.new_id, harness.telemetry,
        tenancy=TenantPolicy(high_priority_tenants=frozenset()),
    )  # fmt: skip
    accepted = service.accept(CAROL, Submission.from_body({"kind": "urgent", "payload": {}}))
    assert harness.stores.jobs.get(accepted.job_id).priority == "high"  # type: ignore[union-attr]
    explicit = service.accept(
        CAROL, Submission.from_body({"kind": "urgent", "payload": {}, "priority": "high"})
    )
    assert harness.stores.jobs.get(explicit.job_id).priority == "high"  # type: ignore[union-attr]


def test_a_schedule_of_high_jobs_follows_the_same_rule(study_group_high: Call) -> None:
    body = {**SCHEDULE, "priority": "high"}
    status, answer, _ = study_group_high("api-create-schedule.json", body=body, user="carol")
    assert (status, answer["error"]["code"]) == (403, "priority_not_allowed")
    status, _, _ = study_group_high("api-create-schedule.json", body=body, user="alice")
    assert status == 201


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", None),
        ("", frozenset()),
        ("acme", frozenset({"acme"})),
        ("acme,globex", frozenset({"acme", "globex"})),
        ("auth0|123,a#b", frozenset({"auth0|123", "a#b"})),
    ],
)
def test_the_tenant_list_reads_as_the_parameter_says(
    text: str, expected: frozenset[str] | None
) -> None:
    assert parse_tenant_list(text) == expected


@pytest.mark.parametrize("text", ["acme, globex", "acme,*", "*,acme", "ac*me", ",acme", "acme,"])
def test_a_tenant_list_the_template_refuses_is_refused_here_too(text: str) -> None:
    import re

    pattern = template()["Parameters"]["HighPriorityTenants"]["AllowedPattern"]
    assert not re.fullmatch(pattern, text)
    with pytest.raises(ValidationError):
        parse_tenant_list(text)


def test_settings_need_the_tenant_variables_and_check_them() -> None:
    from leasehold_dev.local.resources import template_environment

    env = template_environment("t", {"work": "q", "high": "h", "low": "l", "dlq": "d"})
    assert Settings.from_env(env).tenancy == TenantPolicy(
        high_priority_tenants=frozenset(),
        schedules_per_owner=int(parameter_defaults()["SchedulesPerOwner"]),
        submit_rate=0,
    )
    for name in ("HIGH_PRIORITY_TENANTS", "SCHEDULES_PER_OWNER", "TENANT_SUBMIT_RATE"):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({k: v for k, v in env.items() if k != name})
    with pytest.raises(SettingsError, match="submit rate"):
        Settings.from_env({**env, "TENANT_SUBMIT_RATE": "5000"})


# ---------------------------------------------------------------------- schedules (Q2)


def test_an_owner_past_the_schedule_quota_gets_a_409_until_one_is_deleted(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = next(_call(monkeypatch, SCHEDULES_PER_OWNER="2"))
    made = []
    for _ in range(2):
        status, body, _ = call("api-create-schedule.json", body=SCHEDULE)
        assert status == 201
        made.append(body["schedule_id"])
    status, body, _ = call("api-create-schedule.json", body=SCHEDULE)
    assert (status, body["error"]["code"]) == (409, "schedule_quota_exceeded")
    assert "SchedulesPerOwner" in body["error"]["message"]
    # another owner, even of the same tenant, has a quota of its own
    assert call("api-create-schedule.json", body=SCHEDULE, user="bob")[0] == 201
    # a delete gives the place back
    assert call("api-delete-schedule.json", path_id=made[0])[0] == 200
    assert call("api-create-schedule.json", body=SCHEDULE)[0] == 201
    assert call("api-create-schedule.json", body=SCHEDULE)[0] == 409
    status, listed, _ = call("api-list-schedules.json")
    assert len([s for s in listed["schedules"] if s["state"] == "active"]) == 2


def test_the_quota_counts_what_is_stored_and_a_refused_create_writes_nothing(
    harness: Harness,
) -> None:
    service = _schedules(harness, TenantPolicy(schedules_per_owner=1))
    first = service.create(ALICE, SCHEDULE)
    with pytest.raises(ScheduleQuotaExceededError):
        service.create(ALICE, SCHEDULE)
    listed = service.list(ALICE, limit=None, cursor=None)["schedules"]
    assert [s["schedule_id"] for s in listed] == [first["schedule_id"]]
    count = harness.stores.table.get(count_key(ALICE.tenant, ALICE.user_id))
    assert count is not None and count["n"] == {"N": "1"}
    service.delete(ALICE, first["schedule_id"])
    count = harness.stores.table.get(count_key(ALICE.tenant, ALICE.user_id))
    assert count is not None and count["n"] == {"N": "0"}
    # deleting it again is a 404 and gives nothing back twice
    with pytest.raises(Exception, match="no schedule"):
        service.delete(ALICE, first["schedule_id"])
    count = harness.stores.table.get(count_key(ALICE.tenant, ALICE.user_id))
    assert count is not None and count["n"] == {"N": "0"}


def test_a_schedule_made_before_the_quota_is_deleted_without_giving_back_what_it_never_took(
    harness: Harness,
) -> None:
    unlimited = _schedules(harness, TenantPolicy(schedules_per_owner=0))
    old = unlimited.create(ALICE, SCHEDULE)
    # a schedule stored before counts existed: no `counted` mark, no count item
    from leasehold.store.schedules import schedule_key

    key = schedule_key(ALICE.tenant, ALICE.user_id, old["schedule_id"])
    harness.stores.table.client.update_item(
        TableName=harness.stores.table.name, Key=key, UpdateExpression="REMOVE counted"
    )
    harness.stores.table.client.delete_item(
        TableName=harness.stores.table.name, Key=count_key(ALICE.tenant, ALICE.user_id)
    )
    limited = _schedules(harness, TenantPolicy(schedules_per_owner=1))
    made = limited.create(ALICE, SCHEDULE)
    limited.delete(ALICE, old["schedule_id"])
    with pytest.raises(ScheduleQuotaExceededError):
        limited.create(ALICE, SCHEDULE)  # the old one's delete freed no place it never held
    limited.delete(ALICE, made["schedule_id"])
    assert limited.create(ALICE, SCHEDULE)["state"] == "active"


# ---------------------------------------------------------------------- submit rate (Q3)


def test_a_tenant_past_its_rate_gets_429_with_retry_after_and_others_go_on(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_800_000_000_123]
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: now[0])
    call = next(_call(monkeypatch, TENANT_SUBMIT_RATE="2"))
    assert call("api-submit-job.json", body=make_job(), user="alice")[0] == 202
    assert call("api-submit-job.json", body=make_job(), user="bob")[0] == 202  # same tenant
    status, body, headers = call("api-submit-job.json", body=make_job(), user="alice")
    assert (status, body["error"]["code"]) == (429, "submit_rate_exceeded")
    assert headers.get("Retry-After") == "1"
    assert call("api-submit-job.json", body=make_job(), user="carol")[0] == 202  # other tenant
    status, listed, _ = call("api-list-jobs.json", user="alice")
    assert len(listed["jobs"]) == 1  # the refused one wrote nothing
    now[0] += 1000
    assert call("api-submit-job.json", body=make_job(), user="alice")[0] == 202


def test_no_rate_no_counter_write(harness: Harness) -> None:
    service = _jobs(harness, TenantPolicy())
    before = harness.stores.table.client.scan(TableName=harness.stores.table.name)["Count"]
    for _ in range(5):
        service.accept(ALICE, Submission.from_body(make_job()))
    items = harness.stores.table.client.scan(TableName=harness.stores.table.name)["Items"]
    assert not [i for i in items if i["pk"]["S"].startswith("SUBMITS#")]
    assert len(items) > before


def test_a_rate_of_three_takes_three_a_second_per_tenant(harness: Harness) -> None:
    service = _jobs(harness, TenantPolicy(submit_rate=3))
    for owner in (ALICE, BOB, ALICE):
        service.accept(owner, Submission.from_body(make_job()))
    with pytest.raises(SubmitRateExceededError):
        service.accept(BOB, Submission.from_body(make_job()))
    service.accept(CAROL, Submission.from_body(make_job()))
    harness.clock.advance(1000)
    service.accept(ALICE, Submission.from_body(make_job()))


def _jobs(harness: Harness, tenancy: TenantPolicy) -> JobService:
    return JobService(
        harness.stores, registry(), harness.clock, harness.new_id, harness.telemetry,
        tenancy=tenancy,
    )  # fmt: skip


def _schedules(harness: Harness, tenancy: TenantPolicy) -> ScheduleService:
    return ScheduleService(
        harness.stores.table, registry(), harness.clock, time_ordered_ids(harness.clock, "s"),
        harness.telemetry, tenancy=tenancy,
    )  # fmt: skip


def _engine_kinds(kind: Any) -> dict[str, Any]:
    from leasehold.sdk.engine_kind import EngineKind

    return {kind.name: EngineKind(kind)}
