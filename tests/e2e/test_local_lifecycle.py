"""Starting and stopping the local stack the way a newcomer does: in the background, commands
from a subdirectory with no --url, a worker attached by hand, the DLQ rehearsal and redrive,
then `local down` — and nothing of it left running. Each test starts one stack (~10 s)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from leasehold.local.processes import ProcessRef, WorkerRegistry, wait_gone
from tests.support.localstack import LocalStackProcess


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "LEASEHOLD_STATE"}
    return subprocess.run(
        [sys.executable, "-m", "leasehold.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=cwd,
        env=environment,
    )


def _json(out: subprocess.CompletedProcess[str]) -> Any:
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def _attach(name: str, cwd: Path, log: Path, *state: str) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "LEASEHOLD_STATE"}
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "leasehold.cli", "local", "worker", "--name", name, *state],
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
        # When a job runs, and its wake-up is put in the DLQ and redriven, from the subdirectory
        _, accepted = stack.request(
            "POST", "/jobs", {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
        )
        job_id = accepted["job_id"]
        assert stack.wait_for(job_id, {"succeeded"})["state"] == "succeeded"
        assert _json(_cli("ops", "dlq-poison", job_id, cwd=deep))["dead_lettered"] == job_id
        assert _json(_cli("ops", "summary", cwd=deep))["sqs"]["dead_letter"] == 1
        redriven = _json(_cli("ops", "redrive", "--note", "rehearsal", cwd=deep))
        assert redriven["moved"] == 1 and redriven["history_recorded"] == [job_id]
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
