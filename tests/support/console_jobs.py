"""Jobs the operator console is tried on, made on a local stack the way they happen for real:
a job `dead` because its deadline passed while no worker ran, a job `unknown` because its worker
was killed inside an external effect, one held for approval, and jobs whose step name, error,
note and URL carry markup. Shared by tests/e2e/test_console.py and scripts/console_shots.py."""

from __future__ import annotations

import time
from typing import Any

from tests.support.localstack import LocalStackProcess

XSS_STEP = "<script>window.__xss=1</script>"
"""A step name: it reaches the job's error message ("step '<script>…' failed for good")."""
XSS_NOTE = '"><img src=x onerror="window.__xss=2">'
"""An operator's note: it reaches the job's history."""
XSS_URL = 'https://example.org/<script>alert(1)</script>?q="><img/src="x"/onerror="alert(2)">'
"""A bookmark's URL (no whitespace: the reading list refuses it): it reaches the title job's
payload and the console's link to the page."""


def synthetic(steps: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"kind": "synthetic", "payload": {"steps": steps}, **fields}


def submit(stack: LocalStackProcess, body: dict[str, Any], user: str = "alice") -> str:
    status, answer = stack.request("POST", "/jobs", body, user=user)
    assert status == 202, answer
    return str(answer["job_id"])


def ops_view(stack: LocalStackProcess, job_id: str) -> dict[str, Any]:
    status, view = stack.request("GET", f"/ops/jobs/{job_id}", user="ops")
    assert status == 200, view
    return view


def ensure_worker(stack: LocalStackProcess, name: str) -> None:
    """Worker `name` running (started now unless it already runs)."""
    process = stack.workers.get(name)
    if process is None or process.poll() is not None:
        stack.start_worker(name)


def dead_by_deadline(stack: LocalStackProcess) -> str:
    """A job whose one-second deadline passes with no worker running: the sweeper makes it
    `dead` (`deadline_exceeded`). Call it while the stack has no worker; a replay renews the
    deadline, so once a worker runs the replayed job succeeds."""
    job_id = submit(stack, synthetic([{"name": "nightly-report", "cost": 1}], deadline_seconds=1))
    stack.wait_for(job_id, {"dead"}, timeout=30)
    return job_id


def effect_in_flight(stack: LocalStackProcess, worker: str) -> str:
    """A job whose worker `worker` (started here) is killed inside its external effect: once the
    lease runs out the job is `unknown` (the synthetic provider can be neither asked nor
    deduplicated). Returns as soon as the worker is dead; wait for `unknown` afterwards."""
    stack.start_worker(worker)
    job_id = submit(
        stack, synthetic([{"name": "charge-card", "effect": True, "duration_ms": 4000}])
    )
    deadline = time.monotonic() + 30
    while not ops_view(stack, job_id).get("effect"):
        assert time.monotonic() < deadline, "the effect never started"
        time.sleep(0.1)
    stack.kill_worker(worker)
    return job_id


def waiting_for_approval(stack: LocalStackProcess) -> str:
    job_id = submit(stack, synthetic([{"name": "send-invoice", "approval": True}]))
    stack.wait_for(job_id, {"waiting_approval"}, timeout=30)
    return job_id


def failed_with_markup(stack: LocalStackProcess) -> str:
    """A job that fails for good in a step named with a <script>, replayed by an operator
    whose note holds an <img onerror>: its error and its history carry markup."""
    job_id = submit(stack, synthetic([{"name": XSS_STEP, "fatal": True}]))
    stack.wait_for(job_id, {"failed"}, timeout=30)
    status, answer = stack.request(
        "POST", f"/ops/jobs/{job_id}/replay", {"note": XSS_NOTE}, user="ops"
    )
    assert status == 202, answer
    deadline = time.monotonic() + 30
    while ops_view(stack, job_id)["state"] != "failed":
        assert time.monotonic() < deadline, "the replayed job did not fail again"
        time.sleep(0.2)
    return job_id


def title_job_with_markup(stack: LocalStackProcess) -> str:
    """A bookmark whose URL carries markup: its title job's payload and link carry it too."""
    status, bookmark = stack.request("POST", "/bookmarks", {"url": XSS_URL})
    assert status == 201, bookmark
    return str(bookmark["title_job"]["job_id"])


def wait_state(stack: LocalStackProcess, job_id: str, state: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while ops_view(stack, job_id)["state"] != state:
        assert time.monotonic() < deadline, f"{job_id} did not become {state}"
        time.sleep(0.2)
