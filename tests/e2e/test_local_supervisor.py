"""`leasehold local up` keeps its workers running (issue 28 item 7): a worker killed with kill -9
is replaced, the stack's log says so, `local status` shows it, and jobs go on running."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.localstack import LocalStackProcess


def _status(stack: LocalStackProcess, cwd: Path) -> dict[str, Any]:
    answer = run_cli("local", "status", "--state", str(stack.state), cwd=cwd, timeout=30)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    return dict(json.loads(answer.stdout))


def _worker_pids(status: dict[str, Any], name: str) -> list[int]:
    return [int(worker["pid"]) for worker in status["workers"] if worker["name"] == name]


def test_a_worker_killed_with_kill_9_is_replaced_and_said(tmp_path: Path) -> None:
    # Given a stack with one worker
    stack = LocalStackProcess(tmp_path, workers=1)
    try:
        deadline = time.monotonic() + 20
        while not _worker_pids(_status(stack, tmp_path), "worker-1"):
            assert time.monotonic() < deadline, "worker-1 never registered"
            time.sleep(0.3)
        [first] = _worker_pids(_status(stack, tmp_path), "worker-1")
        # When it is killed with kill -9
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 20
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = _status(stack, tmp_path)
            if [pid for pid in _worker_pids(status, "worker-1") if pid != first]:
                break
            time.sleep(0.5)
        # Then a new worker-1 runs, `local status` says it was restarted and why
        assert [pid for pid in _worker_pids(status, "worker-1") if pid != first], status
        worker = status["supervised"]["worker-1"]
        assert worker["pid"] != first and worker["restarts"] == 1, status
        assert worker["last_exit"] == "was killed by SIGKILL", status
        # and the stack's log says so
        said = stack.out.read_text()
        assert f"worker-1 (pid {first}) was killed by SIGKILL; restarted as pid" in said, said
        # and the replacement runs jobs
        job = {"kind": "synthetic", "payload": {"steps": [{"name": "after"}]}}
        job_id = stack.request("POST", "/jobs", job)[1]["job_id"]
        assert stack.wait_for(job_id, {"succeeded", "dead", "failed"}, timeout=60)["state"] == (
            "succeeded"
        )
    finally:
        stack.stop()
