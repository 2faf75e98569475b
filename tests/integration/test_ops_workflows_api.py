"""The operator's workflow routes through the real Api handler on moto (issue 31 item 5): any
tenant's job's children with what each waits for, and an operator's signal, audited in the
job's history like the operator's other acts (decision WF40)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.domain.job import Owner
from leasehold.store.queue import Wakeup
from tests.support.api import Call, call_fixture

KINDS = "leasehold_apps.synthetic,tests.support.workflow_kinds"


@pytest.fixture
def api(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    yield from call_fixture(monkeypatch, LEASEHOLD_KINDS=KINDS)


def _run_worker(job_id: str) -> None:
    from leasehold.handlers.worker import worker

    worker.cache_clear()
    worker().handle(Wakeup(job_id, Owner("study-group", "bob"), "test"))
    worker.cache_clear()


def _children(
    api: Call, job_id: str, user: str = "ops", **query: str
) -> tuple[int, dict[str, Any]]:
    status, page, _ = api("api-ops-children.json", path_id=job_id, user=user, query=query)
    return status, page


def test_an_operator_pages_any_tenants_children_with_what_each_waits_for(api: Call) -> None:
    # Given bob's parent whose three children each wait for a signal
    parent = api(
        "api-submit-job.json",
        body={"kind": "ops_fan", "payload": {"n": 3, "wait": True}},
        user="bob",
    )[1]["job_id"]
    _run_worker(parent)
    status, page = _children(api, parent, limit="100")
    assert status == 200 and len(page["items"]) == 3, page
    for child in page["items"]:
        _run_worker(child["job_id"])
    # When an operator (not bob, not bob's tenant's user) reads two at a time
    status, first = _children(api, parent, limit="2")
    status2, second = _children(api, parent, limit="2", cursor=first["next_cursor"])
    # Then every child comes once, in order, with its state, what it waits for, its own count
    assert (status, status2) == (200, 200)
    rows = first["items"] + second["items"]
    assert second["next_cursor"] is None and len(rows) == 3
    assert [r["job_id"] for r in rows] == [c["job_id"] for c in page["items"]]
    assert {r["state"] for r in rows} == {"queued"}
    assert [r["waiting_for"]["signal"] for r in rows] == ["reviewed"] * 3
    assert [r["children"] for r in rows] == [0, 0, 0] and [r["step"] for r in rows] == [0] * 3
    # And the parent's own view counts them
    shown = api("api-ops-show-job.json", path_id=parent, user="ops")[1]
    assert shown["waiting_for"] == {"children": {"done": 0, "total": 3}}, shown["waiting_for"]
    # And a non-operator is refused, an unknown job is a 404, a forged cursor a 400
    assert _children(api, parent, user="bob")[0] == 403
    assert _children(api, "j_" + "0" * 22)[0] == 404
    assert _children(api, parent, cursor="9.9")[0] == 400


def test_an_operator_signals_a_waiting_job_and_its_history_says_who_and_why(api: Call) -> None:
    # Given bob's job waiting for the signal `reviewed`
    job_id = api("api-submit-job.json", body={"kind": "ops_wait", "payload": {}}, user="bob")[1][
        "job_id"
    ]
    _run_worker(job_id)

    def signal(body: object, user: str = "ops") -> tuple[int, dict[str, Any]]:
        event = "api-ops-signal.json"
        status, answer, _ = api(event, path_id=job_id, body=body, user=user)
        return status, answer

    # When a non-operator asks: 403; without a note, or with another field: 400
    assert signal({"note": "x", "body": 1}, user="bob")[0] == 403
    assert signal({"body": 1})[0] == 400
    assert signal({"note": "x", "extra": 1})[0] == 400
    # When the operator signals it with a note
    status, view = signal({"note": "approved by phone", "body": {"ok": True}})
    # Then it is due again, and its history names the operator, the signal and the note
    assert status == 202 and view["state"] == "queued", view
    shown = api("api-ops-show-job.json", path_id=job_id, user="ops")[1]
    acts = [e for e in shown["history"] if e["event"] == "signaled"]
    assert [(e["by"], e["note"], e["reason"]) for e in acts] == [
        ("ops", "approved by phone", "reviewed")
    ]
    # And the job resumes with the body; a second signal of that name is a 409
    _run_worker(job_id)
    done = api("api-ops-show-job.json", path_id=job_id, user="ops")[1]
    assert done["state"] == "succeeded" and done["result"] == {"reviewed": {"ok": True}}, done
    status, answer = signal({"note": "again"})
    assert status == 409 and answer["error"]["code"] == "not_waiting"
