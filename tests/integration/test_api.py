"""The HTTP contract of arch §4 through the real Api handler, on moto."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from botocore.stub import Stubber

from leasehold.handlers import api, wiring
from leasehold_dev.local.invoke import LocalContext
from tests.conftest import load_event
from tests.support.api import CACHED, Call

SUBMIT = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "cost": 1}]}}


def test_health_needs_no_identity(call: Call) -> None:
    status, body, _ = call("api-health.json", user=None)
    assert (status, body) == (200, {"status": "ok"})


def test_missing_identity_is_401_in_the_error_envelope(call: Call) -> None:
    status, body, _ = call("api-list-jobs.json", user=None)
    assert status == 401
    assert body["error"]["code"] == "unauthenticated" and body["error"]["message"]


def test_submit_answers_202_with_location_and_status_url(call: Call) -> None:
    status, body, headers = call("api-submit-job.json", headers={"idempotency-key": "k1"})
    assert status == 202 and body["state"] == "queued"
    assert headers["Location"] == f"/jobs/{body['job_id']}" == body["status_url"]
    status, view, _ = call("api-get-job.json", path_id=body["job_id"])
    assert status == 200 and view["job_id"] == body["job_id"] and view["state"] == "queued"
    assert view["budget"] == {"max_cost": 10, "cost_used": 0, "max_steps": 5, "steps_used": 0}
    assert view["progress"] == {"step": 0, "steps_total": 2} and view["version"] == 1
    assert view["created_at"].endswith("Z")


def test_same_key_same_body_same_job_other_body_409(call: Call) -> None:
    _, first, _ = call("api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "same"})
    status, again, _ = call("api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "same"})
    assert status == 202 and again["job_id"] == first["job_id"]
    other = {**SUBMIT, "payload": {"steps": [{"name": "b"}]}}
    status, conflict, _ = call(
        "api-submit-job.json", body=other, headers={"idempotency-key": "same"}
    )
    assert status == 409 and conflict["error"]["code"] == "idempotency_key_reused"
    # The key is scoped to the user: bob may use the same key for his own job
    status, bobs, _ = call(
        "api-submit-job.json", body=other, user="bob", headers={"idempotency-key": "same"}
    )
    assert status == 202 and bobs["job_id"] != first["job_id"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"payload": {"steps": [{"name": "a"}]}}, "invalid_request"),
        ({"kind": "nope", "payload": {}}, "unknown_kind"),
        ({"kind": "synthetic"}, "invalid_request"),
        ({"kind": "synthetic", "payload": {"steps": []}}, "invalid_request"),
        (
            {"kind": "synthetic", "payload": {"steps": [{"name": "a", "cost": -1}]}},
            "invalid_request",
        ),
        (
            {"kind": "synthetic", "payload": {"steps": [{"name": "a", "duration_ms": 60001}]}},
            "invalid_request",
        ),
        (
            {"kind": "synthetic", "payload": {"steps": [{"name": f"s{i}"} for i in range(21)]}},
            "invalid_request",
        ),
        ({**SUBMIT, "max_attempts": 11}, "invalid_request"),
        ({**SUBMIT, "max_attempts": True}, "invalid_request"),
        ({**SUBMIT, "deadline_seconds": 86401}, "invalid_request"),
        ({**SUBMIT, "delay_seconds": 60, "run_at": "2030-01-01T00:00:00Z"}, "invalid_request"),
        ({**SUBMIT, "delay_seconds": 365 * 86400 + 1}, "invalid_request"),
        ({**SUBMIT, "run_at": "2030-01-01T00:00:00"}, "invalid_request"),
        ({**SUBMIT, "run_at": "2999-01-01T00:00:00Z"}, "invalid_request"),
        ({**SUBMIT, "run_at": "soon"}, "invalid_request"),
        ({**SUBMIT, "budget": {"max_cost": "ten"}}, "invalid_request"),
        ({**SUBMIT, "tenant": "other-group"}, "invalid_request"),
        (
            {
                "kind": "synthetic",
                "payload": {"steps": [{"name": "x" * 64, "cost": 1}] * 20, "pad": "y"},
            },
            "invalid_request",
        ),
        ([1, 2], "invalid_request"),
    ],
)
def test_bad_submissions_are_400_with_a_code(call: Call, body: Any, code: str) -> None:
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 400 and answer["error"]["code"] == code and answer["error"]["message"]


def test_a_delayed_job_is_queued_with_next_attempt_at_and_waiting_for(call: Call) -> None:
    """Over HTTP (and against docs/openapi.yaml): a delay beyond SQS's 15 minutes, and one
    within, each `queued`, saying when it may start; cancel works before it is due."""
    for delay in (3600, 60):
        status, body, _ = call("api-submit-job.json", body={**SUBMIT, "delay_seconds": delay})
        assert status == 202 and body["state"] == "queued"
        _, view, _ = call("api-get-job.json", path_id=body["job_id"])
        assert view["waiting_for"] == {"time": view["next_attempt_at"]}
        due = view["next_attempt_at"]
        assert due > view["created_at"] and view["deadline_at"] > due
        status, cancelled, _ = call("api-cancel-job.json", path_id=body["job_id"])
        assert status == 202 and cancelled["state"] == "cancelled"
        assert "waiting_for" not in cancelled and "next_attempt_at" not in cancelled


def test_malformed_json_oversized_body_and_bad_key_are_400(call: Call) -> None:
    assert call("api-submit-job.json", raw_body="{not json")[1]["error"]["code"] == "malformed_json"
    big = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "blob": "x" * 70_000}}
    status, answer, _ = call("api-submit-job.json", body=big)
    # within the body's limit but past the kind's payload limit: a 413 (decision LD2)
    assert status == 413 and answer["error"]["code"] == "payload_too_large"
    status, answer, _ = call(
        "api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "bad key!"}
    )
    assert status == 400 and answer["error"]["code"] == "invalid_idempotency_key"


def test_other_users_job_is_404_identical_to_unknown(call: Call) -> None:
    _, created, _ = call("api-submit-job.json", body=SUBMIT)
    unknown = call("api-get-job.json", path_id="j_doesnotexist")
    foreign_same_tenant = call("api-get-job.json", path_id=created["job_id"], user="bob")
    foreign_tenant = call("api-get-job.json", path_id=created["job_id"], user="carol")
    assert unknown[0] == foreign_same_tenant[0] == foreign_tenant[0] == 404
    assert unknown[1]["error"]["code"] == foreign_tenant[1]["error"]["code"] == "not_found"


def test_list_is_newest_first_with_state_filter_and_cursor(call: Call) -> None:
    ids = []
    for _ in range(5):
        ids.append(call("api-submit-job.json", body=SUBMIT)[1]["job_id"])
        time.sleep(0.002)  # distinct creation milliseconds: "newest first" is then exact
    call("api-submit-job.json", body=SUBMIT, user="bob")
    status, page1, _ = call("api-list-jobs.json", query={"limit": "2"})
    assert status == 200 and [j["job_id"] for j in page1["jobs"]] == ids[::-1][:2]
    _, page2, _ = call("api-list-jobs.json", query={"limit": "2", "cursor": page1["next_cursor"]})
    assert [j["job_id"] for j in page2["jobs"]] == ids[::-1][2:4]
    _, queued, _ = call("api-list-jobs.json", query={"state": "queued", "limit": "100"})
    assert sorted(j["job_id"] for j in queued["jobs"]) == sorted(ids)
    _, none, _ = call("api-list-jobs.json", query={"state": "succeeded"})
    assert none["jobs"] == []
    assert call("api-list-jobs.json", query={"state": "bogus"})[0] == 400
    assert call("api-list-jobs.json", query={"limit": "101"})[0] == 400
    assert call("api-list-jobs.json", query={"cursor": "###"})[0] == 400


def test_ops_routes_are_403_for_non_operators(call: Call) -> None:
    status, body, _ = call("api-ops-summary.json", user="alice")
    assert status == 403 and body["error"]["code"] == "forbidden"
    status, summary, _ = call("api-ops-summary.json", user="ops")
    assert status == 200 and set(summary["counts"]) >= {"queued", "running", "dead", "unknown"}
    assert summary["sqs"] == {"visible": 0, "in_flight": 0, "delayed": 0, "dead_letter": 0}


def test_unknown_route_is_404_in_the_envelope(call: Call) -> None:
    event = load_event("api-health.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/nope"
    event["routeKey"] = "GET /nope"
    answer = api.handler(event, LocalContext("api"))
    assert (
        answer["statusCode"] == 404 and json.loads(answer["body"])["error"]["code"] == "not_found"
    )


def test_store_unavailable_on_accept_is_503_and_leaves_nothing(call: Call) -> None:
    db = wiring.runtime().stores.table.client  # the client the handler built
    with Stubber(db) as stub:
        for _ in range(3):  # the SDK's own retries, then the handler's answer
            stub.add_client_error(
                "transact_write_items",
                service_error_code="ProvisionedThroughputExceededException",
                http_status_code=400,
            )
        status, body, headers = call("api-submit-job.json", body=SUBMIT)
    assert status == 503 and body["error"]["code"] == "store_unavailable"
    assert headers.get("Retry-After") == "2"
    items = db.scan(TableName=wiring.runtime().settings.table_name)["Items"]
    assert items == []


def test_malformed_ids_and_foreign_cursors_are_4xx_not_500(call: Call) -> None:
    for bad in ("x" * 500, "j_1%2F..", "a b"):
        status, body, _ = call("api-get-job.json", path_id=bad)
        assert status == 404 and body["error"]["code"] == "not_found", bad
    assert call("api-cancel-job.json", path_id="x" * 300)[0] == 404
    assert call("api-ops-replay.json", path_id="x" * 300, user="ops")[0] == 404
    # a well-formed cursor for a key this index never returned
    import base64

    forged = base64.urlsafe_b64encode(json.dumps({"pk": {"S": "nope"}}).encode()).decode()
    status, body, _ = call("api-list-jobs.json", query={"cursor": forged})
    assert status == 400 and "cursor" in body["error"]["message"]


# ------------------------------------------------------------------ arch §3.9 at the API


def _with_faults(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    """The functions read LEASEHOLD_FAULTS once at cold start: set it, then start cold."""
    monkeypatch.setenv("LEASEHOLD_FAULTS", spec)
    for cached in CACHED:
        cached.cache_clear()


def test_keyed_submit_and_approval_under_transaction_conflicts_are_503_not_500(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "approval": True}]}}
    status, accepted, _ = call("api-submit-job.json", body=paused)
    assert status == 202
    _with_faults(monkeypatch, "dynamodb.TransactWriteItems:TransactionConflict=1")
    # A keyed submission whose transaction keeps being cancelled for contention
    status, body, headers = call(
        "api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "k-conflict"}
    )
    assert status == 503 and body["error"]["code"] == "store_unavailable"
    assert headers.get("Retry-After") == "2"
    # And once the store is quiet the same key is simply accepted (nothing half-written)
    _with_faults(monkeypatch, "")
    status, body, _ = call(
        "api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "k-conflict"}
    )
    assert status == 202
    # An approval under contention is a 503 too, never a 500, and works afterwards
    from leasehold.handlers.worker import worker

    job_id = accepted["job_id"]
    wakeup_owner = {"tenant": "study-group", "user_id": "alice"}
    from leasehold.domain.job import Owner
    from leasehold.store.queue import Wakeup

    worker.cache_clear()
    worker().handle(Wakeup(job_id, Owner(**wakeup_owner), "test"))
    status, view, _ = call("api-get-job.json", path_id=job_id)
    assert view["state"] == "waiting_approval"
    _with_faults(monkeypatch, "dynamodb.TransactWriteItems:TransactionConflict=1")
    decision = {"decision": "approve", "version": view["version"]}
    status, body, _ = call("api-decide-approval.json", path_id=job_id, body=decision)
    assert status == 503 and body["error"]["code"] == "store_unavailable"
    _with_faults(monkeypatch, "")
    status, body, _ = call("api-decide-approval.json", path_id=job_id, body=decision)
    assert status == 200 and body["state"] == "queued"
    worker.cache_clear()


def test_a_commit_whose_answer_was_lost_is_503_and_the_key_finds_the_job(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_faults(monkeypatch, "dynamodb.TransactWriteItems:ReadTimeout=1")
    status, body, _ = call(
        "api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "k-lost"}
    )
    # The commit happened; its answer did not arrive: nothing is promised, but the retry with
    # the same key finds the job the first try made
    assert status == 503 and "Idempotency-Key" in body["error"]["message"]
    _with_faults(monkeypatch, "")
    status, again, _ = call(
        "api-submit-job.json", body=SUBMIT, headers={"idempotency-key": "k-lost"}
    )
    assert status == 202
    items = wiring.runtime().stores.table.client.scan(
        TableName=wiring.runtime().settings.table_name
    )["Items"]
    jobs = [i for i in items if i["pk"]["S"].startswith("JOB#")]
    assert [j["job_id"]["S"] for j in jobs] == [again["job_id"]]


def test_an_idempotent_repeat_answers_the_jobs_current_state(call: Call) -> None:
    headers = {"idempotency-key": "k-cancel"}
    status, first, _ = call("api-submit-job.json", body=SUBMIT, headers=headers)
    assert status == 202 and first["state"] == "queued"
    assert call("api-cancel-job.json", path_id=first["job_id"])[0] == 202
    status, again, _ = call("api-submit-job.json", body=SUBMIT, headers=headers)
    assert status == 202 and again["job_id"] == first["job_id"]
    assert again["state"] == "cancelled"


def test_malformed_input_is_400_never_500(call: Call) -> None:
    # A body nested thousands deep (json.loads raises RecursionError)
    status, body, _ = call("api-submit-job.json", raw_body="[" * 30_000 + "]" * 30_000)
    assert status == 400 and body["error"]["code"] == "malformed_json"
    # A limit of non-ASCII digits ('²'.isdigit() is True, int('²') fails)
    for limit in ("²", "٣", "1e2", "-1", "0", "101", " 5"):
        status, body, _ = call("api-list-jobs.json", query={"limit": limit})
        assert status == 400 and "limit" in body["error"]["message"], limit
    # An approval version far beyond any counter (a Decimal that DynamoDB cannot take)
    paused = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "approval": True}]}}
    job_id = call("api-submit-job.json", body=paused)[1]["job_id"]
    for version in (10**38, 2**53 + 1, 1.5, "1", True, 0):
        decision = {"decision": "approve", "version": version}
        status, body, _ = call("api-decide-approval.json", path_id=job_id, body=decision)
        assert status == 400 and "version" in body["error"]["message"], version


def test_a_cursor_from_another_owners_list_is_400(call: Call) -> None:
    import base64

    for _ in range(3):
        call("api-submit-job.json", body=SUBMIT, user="bob")
    status, page, _ = call("api-list-jobs.json", user="bob", query={"limit": "1"})
    assert status == 200 and page["next_cursor"]
    # Alice presents Bob's cursor: on DynamoDB that start key is in another partition
    # (a ValidationException, a 500); here it is refused before the query
    status, body, _ = call("api-list-jobs.json", query={"cursor": page["next_cursor"]})
    assert status == 400 and "cursor" in body["error"]["message"]
    key = json.loads(base64.urlsafe_b64decode(page["next_cursor"]))
    assert key["gsi2pk"]["S"].endswith("#bob")


def test_an_operator_sees_one_job_whole(call: Call) -> None:
    from leasehold.domain.job import Owner
    from leasehold.handlers.worker import worker
    from leasehold.store.queue import Wakeup

    body = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "fatal": True}]}}
    job_id = call("api-submit-job.json", body=body, user="bob")[1]["job_id"]
    worker.cache_clear()
    worker().handle(Wakeup(job_id, Owner("study-group", "bob"), "test"))
    assert call("api-ops-show-job.json", path_id=job_id, user="bob")[0] == 403
    assert call("api-ops-show-job.json", path_id="j_nope", user="ops")[0] == 404
    status, shown, _ = call("api-ops-show-job.json", path_id=job_id, user="ops")
    assert status == 200 and shown["state"] == "failed"
    assert (shown["tenant"], shown["user_id"]) == ("study-group", "bob")
    (entry,) = shown["history"]
    assert entry["event"] == "stopped" and entry["reason"] == "handler_error"
    assert entry["attempt"] == 1 and entry["epoch"] == 1 and entry["worker"]
    assert entry["at"].endswith("Z")  # ISO 8601 UTC, as everywhere a person reads a time
    assert shown["lease"] is None and shown["operations"] == []
    worker.cache_clear()
