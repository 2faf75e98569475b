"""The local stack's processes: the `leasehold local up` process and every worker.

Each is named by its pid *and* its start time (Linux `/proc/<pid>/stat`), so a pid the kernel has
recycled for some other program is never taken for ours and never signalled. Workers register in
a directory beside the state file — the ones `local up` spawns and the ones attached with
`leasehold local worker` alike — so that `leasehold local down` and a stopping `local up` find
every one of them. Every wait here is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRef:
    """A process as it was when recorded: `started` is its start time in clock ticks since boot
    (0 where /proc is absent, and then the pid alone identifies it)."""

    pid: int
    started: int = 0

    @staticmethod
    def of(pid: int) -> ProcessRef:
        stat = _stat(pid)
        return ProcessRef(pid, stat[1] if stat else 0)

    @staticmethod
    def current() -> ProcessRef:
        return ProcessRef.of(os.getpid())

    def alive(self) -> bool:
        """Running (a zombie is not), and the same process that was recorded."""
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, under another user: /proc still tells whether it is ours
        stat = _stat(self.pid)
        if stat is None:
            return True
        state, started = stat
        if state in {"Z", "X"}:
            return False
        return not self.started or started == self.started

    def signal(self, signum: int) -> bool:
        """Send `signum` if the recorded process still runs; whether it was sent."""
        if not self.alive():
            return False
        try:
            os.kill(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) from /proc/<pid>/stat, or None without /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[19])


def stop_requested_by_signals() -> threading.Event:
    """An event that SIGTERM or SIGINT sets from now on in this process (call it from the main
    thread): a long-running local process finishes what it holds, then ends."""
    requested = threading.Event()

    def stop(*_: object) -> None:
        requested.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return requested


def wait_gone(processes: Iterable[ProcessRef], timeout: float) -> list[ProcessRef]:
    """Poll until none of `processes` runs or `timeout` passes; the ones still running."""
    remaining = [process for process in processes if process.alive()]
    deadline = time.monotonic() + timeout
    while remaining and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = [process for process in remaining if process.alive()]
    return remaining


def stop_processes(processes: Iterable[ProcessRef], *, grace: float = 5.0) -> list[ProcessRef]:
    """SIGTERM each, wait up to `grace` seconds, SIGKILL what is left and wait for it (bounded).
    Returns the processes that were running when asked to stop."""
    running = [process for process in processes if process.signal(signal.SIGTERM)]
    stubborn = wait_gone(running, grace)
    for process in stubborn:
        process.signal(signal.SIGKILL)
    wait_gone(stubborn, 5.0)
    return running


class WorkerRegistry:
    """One small file per worker of a stack, in `<state file's stem>.workers/` beside the state
    file. A worker registers when it starts and removes its file when it stops; a file left by
    a worker that was killed names a process that no longer runs, and is ignored and cleared."""

    def __init__(self, state_path: Path) -> None:
        self.directory = state_path.with_name(state_path.stem + ".workers")

    def register(self, name: str, process: ProcessRef) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"pid": process.pid, "started": process.started, "name": name}
        path = self.directory / f"{process.pid}.json"
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(record))
        staged.replace(path)

    def unregister(self, process: ProcessRef) -> None:
        with contextlib.suppress(OSError):
            (self.directory / f"{process.pid}.json").unlink()

    def workers(self) -> dict[ProcessRef, str]:
        """The registered workers that still run, with their names."""
        found: dict[ProcessRef, str] = {}
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                process = ProcessRef(int(record["pid"]), int(record.get("started", 0)))
                name = str(record.get("name", ""))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # half-written or foreign: not a worker we can vouch for
            if process.alive():
                found[process] = name
        return found

    def clear(self) -> None:
        """Remove the directory once nothing in it runs."""
        for path in self.directory.glob("*"):
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            self.directory.rmdir()
