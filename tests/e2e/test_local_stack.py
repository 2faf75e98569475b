"""The whole system on the embedded local stack (moto), over HTTP, with worker processes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.localstack import LocalStackProcess


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path)
    try:
        yield running
    finally:
        running.stop()
    assert running.process.returncode == 0, running.log.read_text()[-2000:]


def test_health_and_identity_through_the_gateway(stack: LocalStackProcess) -> None:
    assert stack.request("GET", "/health", user=None) == (200, {"status": "ok"})
    status, body = stack.request("GET", "/jobs", user=None)
    assert status == 401 and body["error"]["code"] == "unauthenticated"
    status, body = stack.request("GET", "/jobs", user="mallory")
    assert status == 401
    assert stack.request("GET", "/nowhere")[0] == 404


def test_twenty_jobs_over_two_worker_processes_each_succeed_once(stack: LocalStackProcess) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    # both polling before the first job: on a busy machine a slow-starting w2 could otherwise
    # find w1 has run all twenty (the check below that both did work would then fail)
    logs = [stack.workdir / f"{name}.log" for name in ("w1", "w2")]
    for _ in range(600):
        if all(log.is_file() and " polling " in log.read_text() for log in logs):
            break
        time.sleep(0.1)
    assert all(" polling " in log.read_text() for log in logs), "a worker never started"
    users = ["alice", "bob", "carol"]
    submitted = []
    for index in range(20):
        user = users[index % 3]
        body = {
            "kind": "synthetic",
            "payload": {
                "steps": [{"name": "a", "cost": 1, "duration_ms": 50}, {"name": "b", "cost": 2}]
            },
        }
        status, answer = stack.request("POST", "/jobs", body, user=user)
        assert status == 202
        submitted.append((answer["job_id"], user))
    views = [
        stack.wait_for(job_id, {"succeeded", "failed", "dead", "unknown"}, timeout=120, user=user)
        for job_id, user in submitted
    ]
    assert [v["state"] for v in views] == ["succeeded"] * 20
    # each ran exactly once: one claim, one attempt, both steps once
    assert {
        (v["epoch"], v["attempts"], v["result"]["steps_completed"], v["result"]["cost_used"])
        for v in views
    } == {(1, 1, 2, 3)}
    # and the work was shared by both processes (every claim names its worker in the logs)
    logs = {name: (stack.workdir / f"{name}.log").read_text() for name in ("w1", "w2")}
    assert all('"message":"succeeded"' in log for log in logs.values()), "one worker did nothing"


E2E_GSI_LAG_MS = 300
"""The lag of the lagging stack's indexes: above what AWS usually shows, well below a lease."""


@pytest.fixture
def lagging_stack(tmp_path: Path) -> Iterator[LocalStackProcess]:
    """A stack whose indexes lag (`local up --gsi-lag-ms`): the sweeper, the listings and the
    schedules' trigger read them as on AWS, a moment behind the table."""
    running = LocalStackProcess(tmp_path, extra=("--gsi-lag-ms", str(E2E_GSI_LAG_MS)))
    try:
        yield running
    finally:
        running.stop()
    assert running.process.returncode == 0, running.log.read_text()[-2000:]


def test_a_worker_killed_mid_job_loses_its_lease_and_another_finishes(
    stack: LocalStackProcess,
) -> None:
    killed_worker_is_recovered(stack)


def test_with_lagging_indexes_a_killed_workers_job_is_rescued_once(
    lagging_stack: LocalStackProcess,
) -> None:
    killed_worker_is_recovered(lagging_stack)
    assert f"indexes lag {E2E_GSI_LAG_MS} ms" in lagging_stack.startup[-1]


def killed_worker_is_recovered(stack: LocalStackProcess) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    body = {
        "kind": "synthetic",
        "payload": {"steps": [{"name": "slow", "duration_ms": 3000}, {"name": "after", "cost": 1}]},
    }
    _, answer = stack.request("POST", "/jobs", body)
    job_id = answer["job_id"]
    holder = None
    deadline = time.monotonic() + 30
    while holder is None and time.monotonic() < deadline:
        _, running = stack.request("GET", "/ops/jobs?state=running", user="ops")
        holder = next((j["lease_owner"] for j in running["jobs"] if j["job_id"] == job_id), None)
        time.sleep(0.1)
    assert holder is not None
    # The operator's view of the job names the holder's process and its pid
    _, shown = stack.request("GET", f"/ops/jobs/{job_id}", user="ops")
    holder, _, pid = holder.partition("@")
    assert holder in {"w1", "w2"} and shown["lease"]["worker"] == holder
    assert shown["lease"]["pid"] == stack.workers[holder].pid == int(pid)
    stack.kill_worker(holder)
    view = stack.wait_for(job_id, {"succeeded", "failed", "dead", "unknown"}, timeout=60)
    assert view["state"] == "succeeded"
    assert view["epoch"] == 2 and view["attempts"] == 2
    survivor = "w2" if holder == "w1" else "w1"
    assert job_id in (stack.workdir / f"{survivor}.log").read_text()


def test_invoke_runs_a_function_with_an_event_file_against_the_stack(
    stack: LocalStackProcess,
) -> None:
    import json
    import subprocess
    import sys

    from tests.support.resources import ROOT

    def invoke(function: str, event: str) -> dict:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "leasehold_dev.cli",
                "invoke",
                function,
                "--event",
                str(ROOT / "events" / event),
                "--state",
                str(stack.state),
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return json.loads(out.stdout)

    assert invoke("api", "api-health.json")["statusCode"] == 200
    # The sample wake-up names a job this stack never had: acknowledged, nothing kept
    assert invoke("WorkerFunction", "worker-wakeup.json") == {"batchItemFailures": []}
    assert invoke("relay", "relay-outbox-insert.json") == {"batchItemFailures": []}
    assert isinstance(invoke("sweeper", "sweeper-schedule.json"), dict)


def test_ops_cli_reads_the_summary_and_redrives_the_dlq(stack: LocalStackProcess) -> None:
    import json
    import subprocess
    import sys

    def ops(*args: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "leasehold_dev.cli", "ops", "--url", stack.url, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return json.loads(out.stdout)

    _, answer = stack.request(
        "POST", "/jobs", {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    )
    summary = ops("summary")
    assert (
        summary["counts"]["queued"] == 1 and summary["oldest_queued"]["job_id"] == answer["job_id"]
    )
    assert ops("jobs", "--state", "queued")["jobs"][0]["job_id"] == answer["job_id"]
    # The redrive talks to SQS, so it names the local stack by its state file, not --url
    redrive = subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", "ops", "redrive", "--state", str(stack.state),
         "--note", "e2e"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    report = json.loads(redrive.stdout)
    assert (report["redrive"], report["moved"], report["set_aside"]) == ("done", 0, [])
    assert (report["by"], report["note"]) == ("ops", "e2e")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "leasehold_dev.cli",
            "ops",
            "--url",
            stack.url,
            "replay",
            answer["job_id"],
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2 and "409 not_replayable" in bad.stderr
    # Jobs by tenant, and an operator's cancel with its note in the history
    assert ops("jobs", "--state", "queued", "--tenant", "other-group")["jobs"] == []
    assert (
        ops("jobs", "--state", "queued", "--kind", "synthetic")["jobs"][0]["job_id"]
        == (answer["job_id"])
    )
    cancelled = ops("cancel", answer["job_id"], "--note", "e2e cleanup")
    assert (cancelled["state"], cancelled["stop_reason"]) == ("cancelled", "cancelled_by_operator")
    history = ops("show", answer["job_id"])["history"]
    assert (history[-1]["event"], history[-1]["by"], history[-1]["note"]) == (
        "cancelled",
        "ops",
        "e2e cleanup",
    )


def test_local_up_stops_its_workers_on_sigterm(tmp_path: Path) -> None:
    import subprocess

    running = LocalStackProcess(tmp_path, workers=2)
    pattern = f"local worker --state {running.state}"
    workers = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    assert len(workers.stdout.split()) == 2
    running.stop()
    assert running.process.returncode == 0
    left = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == ""


def test_smoke_runs_the_same_scenario_against_the_local_stack(stack: LocalStackProcess) -> None:
    import subprocess
    import sys

    stack.start_worker("w1")
    stack.start_worker("w2")
    out = subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", "smoke", "--state", str(stack.state)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    printed = out.stdout
    for seen in (
        "it succeeds",
        "a job that fails for good",
        "an operator replays it",
        "its title lands",
        "its title fails",
    ):
        assert f"ok   {seen}" in printed, printed
    assert "FAIL" not in printed
    assert "timeout" in printed and "stored: failed" in printed
