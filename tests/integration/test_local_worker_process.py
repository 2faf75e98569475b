"""A local worker process lives as long as the process that started it — not the thread.

The demo starts replacement workers from a task's thread; Linux's parent-death signal
(`PR_SET_PDEATHSIG`) fires when the *thread* that forked the child ends, so such workers were sent
SIGTERM as soon as their task finished, each took one more message and left the queue with no
consumer (`make demo`'s table-outage phase: jobs queued for minutes, wake-ups piling up)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold_dev.local.runner import spawn_worker_process
from tests.support.worker_process import stack_state, wait_polling


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from stack_state(tmp_path_factory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_started_from_a_thread_outlives_the_thread(state: Path) -> None:
    # Given a worker process started from a task's thread (as the demo's tasks do), polling
    started: list[subprocess.Popen[bytes]] = []

    def task() -> None:
        started.append(spawn_worker_process(state, "w-thread", state.parent))
        wait_polling(state.parent / "w-thread.log")

    spawner = threading.Thread(target=task)
    spawner.start()
    spawner.join(timeout=40)
    worker = started[0]
    try:
        # When the thread has ended and a few idle polls have passed
        time.sleep(3)
        # Then the worker is still polling
        assert worker.poll() is None, (state.parent / "w-thread.log").read_text()
    finally:
        worker.terminate()
        worker.wait(timeout=10)


def test_a_worker_whose_parent_process_dies_exits(state: Path) -> None:
    # Given a worker started by a process that then exits without stopping it
    code = (
        "import sys; from pathlib import Path; "
        "from leasehold_dev.local.runner import spawn_worker_process; "
        "p = spawn_worker_process(Path(sys.argv[1]), 'w-orphan', Path(sys.argv[2])); "
        "print(p.pid, flush=True)"
    )
    parent = subprocess.run(
        [sys.executable, "-c", code, str(state), str(state.parent)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid = int(parent.stdout.split()[0])
    # Then the orphaned worker notices and exits on its own (no orphans left polling)
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    still_alive = _alive(pid)
    if still_alive:
        os.kill(pid, 9)
    assert not still_alive
