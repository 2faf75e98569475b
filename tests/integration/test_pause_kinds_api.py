"""`/ops/kinds` through the real Api handler on moto (each exchange checked against
docs/openapi.yaml): operators only, a note required, an unknown kind a 404, a second pause a
200 that changes nothing, and a paused kind's job parked by the real worker until the resume."""

from __future__ import annotations

import pytest

from leasehold.domain.job import Owner
from leasehold.store.queue import Wakeup
from tests.support.api import Call

pytestmark = pytest.mark.integration

QUEUED = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}


def _run_worker(job_id: str, user: str = "alice") -> str:
    from leasehold.handlers.worker import worker

    worker.cache_clear()  # a cold worker: it reads the paused kinds afresh
    result = worker().handle(Wakeup(job_id, Owner("study-group", user), "test", kind="synthetic"))
    worker.cache_clear()
    return result.outcome


def test_only_operators_pause_with_a_note_and_a_known_kind(call: Call) -> None:
    note = {"note": "provider down"}
    assert call("api-ops-pause-kind.json", body=note, user="alice")[0] == 403
    assert call("api-ops-resume-kind.json", body=note, user="alice")[0] == 403
    assert call("api-ops-kinds.json", user="alice")[0] == 403
    status, body, _ = call("api-ops-pause-kind.json", body={}, user="ops")
    assert status == 400 and body["error"]["code"] == "invalid_request"
    status, body, _ = call("api-ops-pause-kind.json", body={"note": "x", "why": 1}, user="ops")
    assert status == 400
    status, body, _ = call("api-ops-pause-kind.json", path_id="no_such_kind", body=note, user="ops")
    assert status == 404 and body["error"]["code"] == "not_found"
    # nothing was paused by any of those
    kinds = call("api-ops-kinds.json", user="ops")[1]["kinds"]
    assert {k["state"] for k in kinds} == {"running"}


def test_a_paused_kinds_job_is_parked_by_the_worker_until_resume(call: Call) -> None:
    status, paused, _ = call("api-ops-pause-kind.json", body={"note": "provider down"}, user="ops")
    assert status == 200 and paused["changed"] is True and paused["paused"]["by"] == "ops"
    status, again, _ = call("api-ops-pause-kind.json", body={"note": "again"}, user="bob-ops")
    assert status == 403  # bob-ops is no operator: the group decides, not the name
    status, again, _ = call("api-ops-pause-kind.json", body={"note": "again"}, user="ops")
    assert status == 200 and again["changed"] is False and again["paused"] == paused["paused"]
    listed = {k["kind"]: k for k in call("api-ops-kinds.json", user="ops")[1]["kinds"]}
    assert listed["synthetic"]["state"] == "paused"
    job_id = call("api-submit-job.json", body=QUEUED, user="alice")[1]["job_id"]
    assert _run_worker(job_id) == "kind_paused"
    view = call("api-get-job.json", path_id=job_id, user="alice")[1]
    assert view["state"] == "queued"
    assert view["waiting_for"] == {"paused": {"since": paused["paused"]["since"], "by": "ops"}}
    status, resumed, _ = call("api-ops-resume-kind.json", body={"note": "back"}, user="ops")
    assert status == 200 and resumed["state"] == "resuming" and resumed["changed"] is True
    assert resumed["resumed"]["note"] == "back"
    # moto's index is not lagging: the resume found and woke the parked job
    assert (resumed["woken"], resumed["more"]) == (1, False)
    assert _run_worker(job_id) == "succeeded"
    status, twice, _ = call("api-ops-resume-kind.json", body={"note": "twice"}, user="ops")
    assert status == 200 and twice["changed"] is False and twice["woken"] == 0
