"""`local up` keeps its workers running (issue 28 item 7): a worker process that dies is
restarted and the restart logged, with a bound on restarts a minute so a crash loop is visible
and never a spin; `leasehold local status` shows the restarts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold_dev.local.runner import spawn_worker_process
from leasehold_dev.local.supervisor import WorkerSupervisor
from tests.support.worker_process import stack_state, wait_polling


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from stack_state(tmp_path_factory)


def test_a_worker_killed_with_kill_9_is_restarted_and_the_restart_is_logged(state: Path) -> None:
    said: list[str] = []
    logs = state.parent / "logs"
    supervisor = WorkerSupervisor(
        lambda name: spawn_worker_process(state, name, logs), say=said.append, status=state
    )
    first = supervisor.start("worker-1")
    try:
        wait_polling(logs / "worker-1.log")
        # When the worker is killed with kill -9
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        supervisor.check_once()
        # Then a new worker runs under the same name, and the stack's log says so
        replacement = supervisor.processes()["worker-1"]
        assert replacement.pid != first.pid and replacement.poll() is None
        assert any(
            f"worker-1 (pid {first.pid}) was killed by SIGKILL" in line
            and f"restarted as pid {replacement.pid}" in line
            for line in said
        ), said
        # and `local status` can show it: the supervisor's record beside the state file
        record = json.loads(supervisor.status_path.read_text())
        assert record["worker-1"]["restarts"] == 1 and record["worker-1"]["pid"] == replacement.pid
        assert "SIGKILL" in record["worker-1"]["last_exit"]
    finally:
        supervisor.stop()
    assert all(process.poll() is not None for process in supervisor.processes().values())


def test_a_crash_loop_is_bounded_and_said_once_not_a_spin(tmp_path: Path) -> None:
    # Given a worker that exits at once, every time, and a clock the test moves
    now = [1000.0]
    said: list[str] = []

    def crashes(name: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])

    supervisor = WorkerSupervisor(
        crashes, say=said.append, clock=lambda: now[0], max_restarts=5, window_seconds=60
    )
    supervisor.start("worker-1")
    spawned = 1
    # When the supervisor checks it again and again within one minute
    for _ in range(20):
        supervisor.processes()["worker-1"].wait(timeout=10)
        before = supervisor.processes()["worker-1"]
        supervisor.check_once()
        spawned += supervisor.processes()["worker-1"] is not before
        now[0] += 1.0
    # Then it was restarted 5 times, no more, and the crash loop was said once, naming the log
    assert spawned == 1 + 5
    held = [line for line in said if "crash loop" in line]
    assert len(held) == 1 and "exit code 3" in held[0], said
    # And once the minute has passed, it is tried again (and said again)
    now[0] += 60
    before = supervisor.processes()["worker-1"]
    supervisor.check_once()
    assert supervisor.processes()["worker-1"] is not before
    supervisor.stop()
