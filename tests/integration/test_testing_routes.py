"""leasehold.testing's `request`, used as a user would: an application with routes of its own
that make a kind's jobs (`submittable=False`: never `POST /jobs`) with `job_writes`, called
through the testbed as the API function would call them, and the jobs they made run by
`run_until_idle`."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.event_handler import Response

from leasehold import Kind, Owner, StepContext, ValidationError
from leasehold.apps import Engine, NotFoundError, Routes, job_states, job_writes, respond
from leasehold.testing import OPERATOR, LeaseholdTestbed

pytestmark = pytest.mark.integration

# ---------------------------------------------------------------------------------- the app

greeting = Kind("greeting", submittable=False)


@greeting.step()
def compose(ctx: StepContext, payload: dict[str, Any]) -> str:
    return f"hello, {payload['name']}"


routes = Routes()


@routes.post("/greetings")
def make_greeting() -> Response:
    owner = routes.caller()
    body = routes.body()
    if not isinstance(body.get("name"), str):
        raise ValidationError("'name' must be a string", code="bad_name")
    engine = Engine.current()
    job = job_writes(engine.table, greeting, {"name": body["name"]}, owner, now_ms=engine.now_ms())
    engine.table.transact(job.writes)
    engine.count("GreetingsMade")
    return respond(201, {"job_id": job.job_id}, headers={"Location": f"/greetings/{job.job_id}"})


@routes.get("/greetings/<job_id>")
def show_greeting(job_id: str) -> Response:
    states = job_states(Engine.current().table, [job_id])
    if job_id not in states:
        raise NotFoundError(f"no greeting {job_id}")
    return respond(200, {"job_id": job_id, "state": states[job_id]})


@routes.get("/whoami")
def whoami() -> Response:
    owner = routes.caller()
    return respond(
        200,
        {
            "tenant": owner.tenant,
            "user": owner.user_id,
            "operator": owner.is_operator,
            "limit": routes.query("limit"),
            "trace": routes.header("X-Trace"),
            "now": Engine.current().now_ms(),
        },
    )


APP = pytest.mark.leasehold_kinds(greeting, routes)


# ---------------------------------------------------------------------------------- the rules


@APP
def test_a_route_makes_a_job_that_run_until_idle_runs(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    status, made, headers = tb.request("POST", "/greetings", {"name": "Ada"})
    assert status == 201 and headers["Location"] == f"/greetings/{made['job_id']}"
    assert tb.telemetry.counts["GreetingsMade"] == 1
    assert tb.request("GET", f"/greetings/{made['job_id']}").body["state"] == "queued"
    report = tb.run_until_idle()
    assert report.outcomes(made["job_id"]) == ["succeeded"]
    assert tb.view(made["job_id"])["result"] == "hello, Ada"
    assert tb.request("GET", f"/greetings/{made['job_id']}").body["state"] == "succeeded"


@APP
def test_the_kind_itself_cannot_be_submitted(leasehold_testbed: LeaseholdTestbed) -> None:
    with pytest.raises(ValidationError, match="unknown kind"):
        leasehold_testbed.submit("greeting", {"name": "Ada"})


@APP
def test_the_caller_is_the_owner_the_request_names(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    status, me, _ = tb.request("GET", "/whoami?limit=2", headers={"X-Trace": "t-1"})
    assert status == 200
    assert me == {
        "tenant": tb.owner.tenant,
        "user": tb.owner.user_id,
        "operator": False,
        "limit": "2",
        "trace": "t-1",
        "now": tb.clock.now_ms(),
    }
    _, ops, _ = tb.request("GET", "/whoami", owner=OPERATOR)
    assert (ops["user"], ops["operator"]) == ("operator", True)
    bob = Owner("elsewhere", "bob")
    assert tb.request("GET", "/whoami", owner=bob).body["tenant"] == "elsewhere"
    # A job a route makes is its caller's
    made = tb.request("POST", "/greetings", {"name": "Bo"}, owner=bob).body
    assert tb.view(made["job_id"])["job_id"] == made["job_id"]
    assert tb.operator_view(made["job_id"])["tenant"] == "elsewhere"


@APP
def test_errors_come_back_in_the_apis_envelope(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    status, body, _ = tb.request("POST", "/greetings", {"name": 7})
    assert (status, body["error"]["code"]) == (400, "bad_name")
    status, body, _ = tb.request("POST", "/greetings", "{not json")
    assert (status, body["error"]["code"]) == (400, "malformed_json")
    status, body, _ = tb.request("GET", "/greetings/j_0000000000000000000000")
    assert (status, body["error"]["code"]) == (404, "not_found")
    # no such route, and the engine's own routes, which have their own testbed methods
    for path in ("/nowhere", "/jobs"):
        status, body, _ = tb.request("GET", path)
        assert (status, body["error"]) == (404, {"code": "not_found", "message": "no such route"})


@APP
def test_faults_reach_the_routes_door_as_the_functions(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    tb.faults("dynamodb.TransactWriteItems:ProvisionedThroughputExceededException=1.0")
    status, body, headers = tb.request("POST", "/greetings", {"name": "Ada"})
    assert (status, headers["Retry-After"]) == (503, "2")
    assert body["error"]["code"] == "store_unavailable"
    assert tb.injected()["TransactWriteItems:ProvisionedThroughputExceededException"] >= 1
    tb.faults("")
    assert tb.request("POST", "/greetings", {"name": "Ada"})[0] == 201


def _running_engine() -> Engine | None:
    try:
        return Engine.current()
    except RuntimeError:  # none in this process yet
        return None


def test_the_engine_and_the_routers_are_given_back_when_it_closes() -> None:
    engine, resolver = _running_engine(), routes.api_resolver
    with LeaseholdTestbed([greeting, routes]) as tb:
        assert Engine.current().clock is tb.clock
        assert Engine.current().table.name == tb.table_name
        assert routes.api_resolver is not resolver
    assert routes.api_resolver is resolver
    assert _running_engine() is engine  # whatever ran before (a cold start's, or none)
    with pytest.raises(RuntimeError, match="not open"):
        tb.request("GET", "/whoami")


def test_a_module_strings_routes_are_mounted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reading list as LEASEHOLD_KINDS names it: its kinds and its routes
    monkeypatch.setenv("TITLE_FETCHER", "fixture")
    monkeypatch.setenv("ENRICHMENT_PROVIDER_CAPABILITY", "none")
    with LeaseholdTestbed("leasehold_apps.reading_list") as tb:
        assert sorted(tb.kinds) == ["enrich", "imported_title", "reading_list_import", "title"]
        status, page, _ = tb.request("GET", "/bookmarks")
        assert (status, page) == (200, {"items": [], "next_cursor": None})
