"""What a kind's own code and data may do to the engine (arch §23): a hook that raises or
returns garbage harms only its own job or schedule; what is stored is storable, by one rule for
plain and effect steps; an open effect with no attempt left is `unknown`, never `dead`; and the
fixture refuses, as DynamoDB does, a string that is not text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.domain.errors import ANSWERED_ERRORS, ValidationError
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.storable import NotStorableError, check_storable, storable_error
from leasehold.handlers.api import STATUS_BY_ERROR
from leasehold.testing import LeaseholdTestbed
from tests.support import contained_kinds
from tests.support.api import Call, call_fixture
from tests.support.contained_kinds import KINDS, runs
from tests.support.harness import ALICE, CAROL, Harness, registry, steps

DEFAULT_KINDS = "leasehold_apps.synthetic,leasehold_apps.reading_list,leasehold_apps.doc_agent"


@pytest.fixture
def api(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    yield from call_fixture(
        monkeypatch, LEASEHOLD_KINDS=f"{DEFAULT_KINDS},tests.support.contained_kinds"
    )


@pytest.fixture
def tb() -> Iterator[LeaseholdTestbed]:
    runs.clear()
    with LeaseholdTestbed(KINDS, settings={"user_concurrency_limit": 0}) as testbed:
        yield testbed


# ---------------------------------------------------------------------- one rule for outputs


@pytest.mark.parametrize("kind", ["plain", "effectful"])
def test_floats_are_kept_exactly_by_plain_and_effect_steps(tb: LeaseholdTestbed, kind: str) -> None:
    job = tb.submit(kind, {"output": "float"})
    tb.run_until_idle()
    view = tb.view(job)
    assert view["state"] == "succeeded", view
    assert view["result"] == {"price": 12.5, "ratio": 1e-7}


@pytest.mark.parametrize("output", ["big", "int_keys", "surrogate"])
def test_an_unstorable_plain_output_fails_the_job_once_naming_why(
    tb: LeaseholdTestbed, output: str
) -> None:
    job = tb.submit("plain", {"output": output})
    tb.run_until_idle()
    view = tb.view(job)
    assert (view["state"], view["error"]["code"]) == ("failed", "output_not_json"), view
    assert runs["plain"] == 1
    assert "cannot be stored" in view["error"]["message"]


@pytest.mark.parametrize("kind", ["effectful", "keyed"])
@pytest.mark.parametrize("output", ["big", "int_keys", "surrogate"])
def test_an_unstorable_effect_output_is_unknown_at_once_never_run_again(
    tb: LeaseholdTestbed, kind: str, output: str
) -> None:
    key = "effect" if kind == "effectful" else "keyed"
    job = tb.submit(kind, {"output": output}, max_attempts=3)
    tb.run_until_idle()
    tb.advance(3600)
    tb.run_until_idle()
    view = tb.view(job)
    assert view["state"] == "unknown", view
    assert "cannot be stored" in view["error"]["message"]
    assert runs[key] == 1  # never retried: the same output would come back
    assert [op["state"] for op in tb.operations(job)] == ["submitted"]


def test_a_38_digit_integer_is_kept(tb: LeaseholdTestbed) -> None:
    job = tb.submit("keyed", {"output": "fine"})
    tb.run_until_idle()
    assert tb.view(job)["result"] == {"name": "ok", "n": 10**37}


def test_an_error_with_a_lone_surrogate_fails_the_job_with_its_error_shown(
    tb: LeaseholdTestbed,
) -> None:
    job = tb.submit("plain", {"fail": True})
    tb.run_until_idle()
    view = tb.view(job)
    assert view["state"] == "failed"
    assert view["error"] == {"code": "bad\ufffdcode", "message": "bad \ufffd text"}
    assert runs["plain"] == 1
    tb.advance(3600)
    tb.run_until_idle()
    assert tb.view(job)["state"] == "failed" and runs["plain"] == 1


# ---------------------------------------------------------------------- hooks that raise


def test_a_raising_view_costs_only_its_jobs_extra_fields(tb: LeaseholdTestbed) -> None:
    broken = tb.submit("raising_view", {})
    weird = tb.submit("garbage_view", {})
    tb.run_until_idle()
    for job in (broken, weird):
        view = tb.view(job)
        assert view["state"] == "succeeded" and view["result"] == {"ok": True}
        assert "view hook failed" in view["view_error"]
        assert "view_error" in tb.operator_view(job)
    failed = tb.submit("raising_view", {"fail": True})
    tb.run_until_idle()
    assert tb.view(failed)["state"] == "failed"
    assert tb.replay(failed)["state"] == "queued"  # committed, and the answer says so


def test_a_raising_view_leaves_every_list_at_200(api: Call) -> None:
    ids = {}
    for kind in ("raising_view", "garbage_view", "synthetic"):
        body = {"kind": kind, "payload": {}}
        if kind == "synthetic":
            body["payload"] = {"steps": [{"name": "only"}]}
        status, answer, _ = api("api-submit-job.json", body=body)
        assert status == 202, answer
        ids[kind] = answer["job_id"]
    status, listed, _ = api("api-list-jobs.json")
    assert status == 200, listed
    by_id = {job["job_id"]: job for job in listed["jobs"]}
    assert "view hook failed" in by_id[ids["raising_view"]]["view_error"]
    assert "view_error" in by_id[ids["garbage_view"]]
    assert "view_error" not in by_id[ids["synthetic"]]
    status, ops, _ = api("api-ops-jobs.json", user="ops", query={"state": "queued"})
    assert status == 200, ops
    assert {row["job_id"] for row in ops["jobs"]} >= set(ids.values())
    status, shown, _ = api("api-ops-show-job.json", user="ops", path_id=ids["raising_view"])
    assert status == 200 and "view_error" in shown, shown
    assert api("api-get-job.json", path_id=ids["raising_view"])[0] == 200


def test_a_check_that_raises_its_own_error_is_a_400(tb: LeaseholdTestbed) -> None:
    with pytest.raises(ValidationError) as refused:
        tb.submit("checked", {})
    assert refused.value.code == "check_failed"
    assert "needs_name" in str(refused.value) and "KeyError" in str(refused.value)
    assert tb.state(tb.submit("checked", {"name": "x"})) == "queued"


def test_a_check_that_raises_a_leasehold_error_without_an_answer_is_a_400_too(
    tb: LeaseholdTestbed,
) -> None:
    """A SettingError (or any LeaseholdError the API has no status for) is the check's own bug,
    not its answer: a 400 check_failed, never a 500 (decision NS6)."""
    with pytest.raises(ValidationError) as refused:
        tb.submit("checked", {"name": "unset"})
    assert refused.value.code == "check_failed" and "SettingError" in str(refused.value)


def test_the_answered_errors_are_the_apis_status_table() -> None:
    assert set(ANSWERED_ERRORS) == {error for error, _ in STATUS_BY_ERROR}


def test_a_check_that_raises_its_own_error_is_a_400_at_the_api(api: Call) -> None:
    status, body, _ = api("api-submit-job.json", body={"kind": "checked", "payload": {}})
    assert (status, body["error"]["code"]) == (400, "check_failed"), body


# ---------------------------------------------------------------------- the last attempt


def test_a_worker_dying_in_a_keyed_effect_on_the_last_attempt_leaves_it_unknown(
    tb: LeaseholdTestbed,
) -> None:
    job = tb.submit("keyed", {"output": "fine"}, max_attempts=1)
    tb.crash(in_step="keyed_step")
    tb.run_until_idle()
    tb.advance(3600)
    tb.run_until_idle()
    view = tb.view(job)
    assert view["state"] == "unknown", view
    assert view["error"]["code"] == "effect_uncertain"
    assert [op["state"] for op in tb.operations(job)] == ["submitted"]
    assert "expires_at" not in tb.operator_view(job) or tb.operator_view(job)["expires_at"] is None


# ---------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(
    "value",
    [10**38, -(10**38), {1: "x"}, "\udfff", {"\ud800": 1}, float("inf"), 1e-200, 1e130, b"x"],
)
def test_what_is_not_storable_is_refused_naming_where(value: Any) -> None:
    with pytest.raises(NotStorableError, match="out"):
        check_storable({"a": [value]}, "out")


@pytest.mark.parametrize("value", [10**38 - 1, 0.1, 1e-130, 9.9e125, "😀", [], {}, None, True])
def test_what_is_storable_passes(value: Any) -> None:
    check_storable({"a": [value]}, "out")


def test_an_error_is_bounded_and_made_text() -> None:
    stored = storable_error({"code": "c" * 5000, "message": "m\ud800" * 1000, 3: "x"})
    assert len(stored["code"]) == 100 and len(stored["message"]) == 500
    assert "\ud800" not in stored["message"] and stored["3"] == "x"


def test_the_fixture_refuses_a_lone_surrogate_as_dynamodb_does(tb: LeaseholdTestbed) -> None:
    dynamodb = tb.client("dynamodb")
    table = dynamodb.list_tables()["TableNames"][0]
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "x\ud800"}, "sk": {"S": "y"}})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "Item" not in dynamodb.get_item(
        TableName=table,
        Key={"pk": {"S": "x\ud800".encode("utf-8", "replace").decode()}, "sk": {"S": "y"}},
    )


def test_a_schedule_whose_check_starts_raising_is_marked_and_the_others_fire(
    harness: Harness,
) -> None:
    from leasehold.sdk.engine_kind import EngineKind
    from leasehold.service.schedules import ScheduleService

    kinds = {**registry(), "checked": EngineKind(contained_kinds.checked)}
    service = ScheduleService(
        harness.stores.table, kinds, harness.clock, time_ordered_ids(harness.clock, "s"),
        harness.telemetry,
    )  # fmt: skip
    every_minute = {"expression": "rate(1 minute)"}
    carols = service.create(CAROL, {"kind": "checked", "payload": {"name": "x"}, **every_minute})
    alices = service.create(ALICE, {"kind": "synthetic", "payload": steps({}), **every_minute})
    contained_kinds.CHECK_RAISES[0] = True
    try:
        for _ in range(3):
            harness.clock.advance(60_000)
            service.fire_due()
    finally:
        contained_kinds.CHECK_RAISES[0] = False
    alice = service.get(ALICE, alices["schedule_id"])
    carol = service.get(CAROL, carols["schedule_id"])
    assert alice["ticks_fired"] == 3 and alice["last_error"] is None
    assert carol["ticks_fired"] == 0 and carol["ticks_skipped"] == 3
    assert "raised RuntimeError" in carol["last_error"]
