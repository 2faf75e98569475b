"""A graceful stop of the local stack hands running jobs back without spending an attempt
(issue 28 item 7): `leasehold local down` or Ctrl-C during a long step, and a `max_attempts: 1`
job ends `succeeded` after the next `local up`, not `dead`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.localstack import LocalStackProcess

TERMINAL = {"succeeded", "failed", "dead", "cancelled", "unknown"}
LONG_JOB = {
    "kind": "synthetic",
    "payload": {"steps": [{"name": "first"}, {"name": "long", "duration_ms": 10_000}]},
    "max_attempts": 1,
}


def _in_its_long_step(stack: LocalStackProcess) -> str:
    status, accepted = stack.request("POST", "/jobs", LONG_JOB)
    assert status == 202, accepted
    job_id = str(accepted["job_id"])
    stack.wait_for(job_id, {"running"}, timeout=30)
    time.sleep(1.5)  # step 0 done, inside the 10 s step
    return job_id


def _ops(stack: LocalStackProcess, job_id: str) -> dict[str, Any]:
    status, view = stack.request("GET", f"/ops/jobs/{job_id}", user="ops")
    assert status == 200, view
    return dict(view)


def _ran_again_with_its_attempt(tmp_path: Path, job_id: str) -> LocalStackProcess:
    again = LocalStackProcess(tmp_path, workers=1)
    view = again.wait_for(job_id, TERMINAL, timeout=60)
    ops = _ops(again, job_id)
    assert view["state"] == "succeeded", ops
    assert ops["attempts"] == 1, ops  # the interrupted run was handed back, not spent
    events = [entry.get("event") for entry in ops.get("history", [])]
    assert "handed_back" in events, events
    return again


@pytest.mark.long
def test_local_down_and_ctrl_c_during_a_step_hand_the_job_back(tmp_path: Path) -> None:
    # Given a max_attempts 1 job inside a 10 s step
    stack = LocalStackProcess(tmp_path, workers=1)
    try:
        job_id = _in_its_long_step(stack)
        # When the stack is stopped with `local down`
        started = time.monotonic()
        down = run_cli("local", "down", "--state", str(stack.state), cwd=tmp_path, timeout=60)
        assert down.returncode == 0, down.stdout + down.stderr
        stack.process.wait(timeout=30)
        stopped_in = time.monotonic() - started
    finally:
        stack.stop()
    # Then the next `local up` runs it again, to `succeeded`, on the attempt it had
    again = _ran_again_with_its_attempt(tmp_path, job_id)
    assert stopped_in < 9, stopped_in  # the stop did not wait out the step (nor kill it)
    try:
        # And Ctrl-C (SIGINT to the whole process group, as a terminal sends it) does the same
        second = _in_its_long_step(again)
        os.killpg(again.process.pid, signal.SIGINT)
        again.process.wait(timeout=30)
        time.sleep(0.5)  # the copy of its output catches up
        # (its workers ended on the same Ctrl-C: none was restarted while the stack stopped)
        assert "restarted as pid" not in again.out.read_text()
    finally:
        again.stop()
    _ran_again_with_its_attempt(tmp_path, second).stop()
