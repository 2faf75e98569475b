"""Starting and stopping the local stack the way a newcomer does: in the background, commands
from a subdirectory with no --url (submit, show, ops list, invoke), a worker attached by hand,
the DLQ rehearsal and a redrive past poison messages, then `local down` — and nothing of it
left running. Each test starts one stack (~10 s)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from leasehold_dev.local.processes import ProcessRef, WorkerRegistry, wait_gone
from tests.support.cli import run_cli
from tests.support.localstack import LocalStackProcess
from tests.support.resources import ROOT


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, timeout=120)


def _json(out: subprocess.CompletedProcess[str]) -> Any:
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def _attach(name: str, cwd: Path, log: Path, *state: str) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "LEASEHOLD_STATE"}
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "leasehold_dev.cli", "local", "worker", "--name", name, *state],
            cwd=cwd,
            env={**environment, "PYTHONUNBUFFERED": "1"},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def _registered(state: Path, count: int, timeout: float = 30) -> dict[ProcessRef, str]:
    deadline = time.monotonic() + timeout
    workers = WorkerRegistry(state).workers()
    while len(workers) < count and time.monotonic() < deadline:
        time.sleep(0.2)
        workers = WorkerRegistry(state).workers()
    assert len(workers) == count, workers
    return workers


@pytest.mark.long
def test_local_down_from_a_subdirectory_leaves_no_process_behind(tmp_path: Path) -> None:
    # Given a stack started in the background with one worker, its state at the checkout's
    # usual place, and a worker attached by hand from a subdirectory (no --state, no --url)
    state = tmp_path / ".leasehold" / "local-stack.json"
    stack = LocalStackProcess(tmp_path, workers=1, state=state)
    deep = tmp_path / "src" / "deeper"
    deep.mkdir(parents=True)
    attached = _attach("by-hand", deep, tmp_path / "by-hand.log")
    try:
        workers = _registered(state, 2)
        assert "by-hand" in workers.values()
        # When a user submits a job and sees it finish, from the subdirectory with no flags
        request = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
        job_id = _json(_cli("submit", json.dumps(request), cwd=deep))["job_id"]
        assert stack.wait_for(job_id, {"succeeded"})["state"] == "succeeded"
        assert _json(_cli("show", job_id, cwd=deep))["state"] == "succeeded"
        waiting = {"kind": "synthetic", "payload": {"steps": [{"name": "b", "approval": True}]}}
        waiting_id = _json(_cli("submit", json.dumps(waiting), "--user", "bob", cwd=deep))["job_id"]
        assert stack.wait_for(waiting_id, {"waiting_approval"}, user="bob")["state"] == (
            "waiting_approval"
        )
        listed = _json(_cli("ops", "list", "--state", "waiting_approval", cwd=deep))["jobs"]
        assert [row["job_id"] for row in listed] == [waiting_id]
        event = str(ROOT / "events" / "api-health.json")
        assert _json(_cli("invoke", "api", "--event", event, cwd=deep))["statusCode"] == 200
        # And the DLQ holds its wake-up between two poison messages (not a wake-up; a
        # wake-up for a job that does not exist), redriven from the subdirectory
        ghost = json.dumps({"job_id": "j_ghost", "tenant": "t", "user_id": "u"})
        _json(_cli("ops", "dlq-send", "--body", "not a wake-up", cwd=deep))
        assert _json(_cli("ops", "dlq-send", job_id, cwd=deep))["dead_lettered"] == job_id
        _json(_cli("ops", "dlq-send", "--body", ghost, cwd=deep))
        assert _json(_cli("ops", "summary", cwd=deep))["sqs"]["dead_letter"] == 3
        redriven = _json(_cli("ops", "redrive", "--note", "rehearsal", cwd=deep))
        # Then the wake-up is moved and recorded, the poison set aside in the file, once
        assert redriven["moved"] == 1 and redriven["history_recorded"] == [job_id]
        assert sorted(p["body"] for p in redriven["set_aside"]) == sorted(["not a wake-up", ghost])
        kept = Path(redriven["set_aside_file"]).read_text().splitlines()
        assert sorted(json.loads(line)["body"] for line in kept) == sorted(["not a wake-up", ghost])
        again = _json(_cli("ops", "redrive", "--note", "again", cwd=deep))
        assert again["moved"] == 0 and again["set_aside"] == []
        history = _json(_cli("ops", "show", job_id, cwd=deep))["history"]
        assert history[-1]["event"] == "redriven"
        assert (history[-1]["by"], history[-1]["note"]) == ("ops", "rehearsal")
        # And `local down` runs from the subdirectory
        down = _cli("local", "down", cwd=deep)
        # Then the stack process, its worker and the attached one are all gone (bounded)
        assert down.returncode == 0, down.stderr
        assert stack.process.wait(timeout=30) == 0
        assert attached.wait(timeout=15) == 0
        assert wait_gone(workers, 15) == []
        assert not state.exists() and not WorkerRegistry(state).directory.exists()
        left = subprocess.run(
            ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False
        )
        assert left.stdout.strip() == "", left.stdout
        assert "leasehold local stack stopped" in down.stdout
    finally:
        if attached.poll() is None:
            attached.kill()
            attached.wait()
        stack.stop()


def test_an_attached_worker_stops_on_its_own_when_the_stack_dies(tmp_path: Path) -> None:
    # Given a stack and a worker attached to it
    stack = LocalStackProcess(tmp_path)
    log = tmp_path / "attached.log"
    attached = _attach("attached", tmp_path, log, "--state", str(stack.state))
    try:
        _registered(stack.state, 1)
        # When the stack process dies without cleaning up (SIGKILL: its state file stays)
        stack.process.send_signal(signal.SIGKILL)
        stack.process.wait(timeout=10)
        # Then the worker notices within a couple of seconds and stops, instead of polling
        # a dead endpoint forever
        assert attached.wait(timeout=10) == 0
        assert "the local stack is gone" in log.read_text()
        # And `local down` clears the stale state file
        down = _cli("local", "down", "--state", str(stack.state), cwd=tmp_path)
        assert down.returncode == 0 and "was not running" in down.stdout, down.stderr
        assert not stack.state.exists()
    finally:
        if attached.poll() is None:
            attached.kill()
            attached.wait()
        stack.stop()


def test_ctrl_c_on_local_up_stops_the_workers_attached_to_it(tmp_path: Path) -> None:
    stack = LocalStackProcess(tmp_path)
    attached = _attach("attached", tmp_path, tmp_path / "attached.log", "--state", str(stack.state))
    try:
        _registered(stack.state, 1)
        stack.process.send_signal(signal.SIGINT)
        assert stack.process.wait(timeout=30) == 0
        assert attached.wait(timeout=10) == 0
        assert not stack.state.exists()
    finally:
        if attached.poll() is None:
            attached.kill()
            attached.wait()
        stack.stop()
