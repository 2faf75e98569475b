"""`local up` keeps its workers running: a worker process that ends while the stack runs — kill -9,
a crash, an exit — is started again under its name, and the stack's log says which, how it
ended and its new pid. Restarts are bounded (`max_restarts` a worker within `window_seconds`):
past the bound the worker is held and the crash loop is said once, naming its log, rather than
spin; it is tried again once the window has room. The state of every worker (pid, restarts, how
the last one ended, held until when) is kept in `<state file's stem>.supervisor.json` beside the
state file, for `leasehold local status` (decision LS6).

Only the workers `local up` starts are supervised: one attached with `leasehold local worker`
is the user's to run (and to kill, to watch a lease expire)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAX_RESTARTS = 5
WINDOW_SECONDS = 60.0
STOP_SECONDS = 5.0


@dataclass
class _Supervised:
    process: subprocess.Popen[bytes]
    restarts: int = 0
    recent: deque[float] = field(default_factory=deque)
    last_exit: str = ""
    held_until: float | None = None


def how_it_ended(returncode: int) -> str:
    """'exit code 3' or 'was killed by SIGKILL'."""
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
        return f"was killed by signal {-returncode}"
    return f"exit code {returncode}"


class WorkerSupervisor:
    """Starts workers with `spawn(name)` and restarts the ones that end (see the module's
    docstring). `check_once` is called by `local up` every second (a Repeater thread); `stop`
    ends the supervision and then the workers (SIGTERM, `STOP_SECONDS`, SIGKILL)."""

    def __init__(
        self,
        spawn: Callable[[str], subprocess.Popen[bytes]],
        *,
        say: Callable[[str], object] = print,
        status: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_restarts: int = MAX_RESTARTS,
        window_seconds: float = WINDOW_SECONDS,
    ) -> None:
        """`status`: the stack's state file (the record goes beside it); None: none kept."""
        self._spawn = spawn
        self._say = say
        self._clock = clock
        self.max_restarts = max_restarts
        self.window_seconds = window_seconds
        self.status_path = (
            status.with_name(status.stem + ".supervisor.json") if status is not None else None
        )
        self._workers: dict[str, _Supervised] = {}
        self._stopped = False
        self._lock = threading.RLock()  # a check never spawns once `halt` has returned
        # (re-entrant: `local up`'s signal handler halts it, maybe while its own thread is in it)

    def start(self, name: str) -> subprocess.Popen[bytes]:
        process = self._spawn(name)
        self._workers[name] = _Supervised(process)
        self._save()
        return process

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        return {name: worker.process for name, worker in self._workers.items()}

    def check_once(self) -> None:
        """Restart each worker that has ended, within the bound; say what was done."""
        with self._lock:
            if not self._stopped:
                self._check_locked()

    def halt(self) -> None:
        """No more restarts (the stack is stopping); the workers are left running."""
        with self._lock:
            self._stopped = True

    def _check_locked(self) -> None:
        changed = False
        for name, worker in self._workers.items():
            code = worker.process.poll()
            if code is None:
                continue
            now = self._clock()
            if worker.held_until is not None and now < worker.held_until:
                continue
            while worker.recent and worker.recent[0] <= now - self.window_seconds:
                worker.recent.popleft()
            ended = f"{name} (pid {worker.process.pid}) {how_it_ended(code)}"
            if worker.held_until is None:
                worker.last_exit = how_it_ended(code)
            if len(worker.recent) >= self.max_restarts:
                worker.held_until = worker.recent[0] + self.window_seconds
                self._say(
                    f"leasehold: crash loop: {ended}, its {len(worker.recent) + 1}. end within "
                    f"{self.window_seconds:.0f} s; not restarting it for "
                    f"{worker.held_until - now:.0f} s (its log: {name}.log)"
                )
                changed = True
                continue
            worker.held_until = None
            worker.recent.append(now)
            worker.restarts += 1
            worker.process = self._spawn(name)
            self._say(
                f"leasehold: {ended}; restarted as pid {worker.process.pid} "
                f"(restart {len(worker.recent)} of at most {self.max_restarts} within "
                f"{self.window_seconds:.0f} s)"
            )
            changed = True
        if changed:
            self._save()

    def stop(self) -> None:
        """No more restarts; SIGTERM every worker, wait (bounded), SIGKILL what is left."""
        self.halt()
        for worker in self._workers.values():
            if worker.process.poll() is None:
                worker.process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for worker in self._workers.values():
            try:
                worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        self.forget()

    def forget(self) -> None:
        """Remove the record beside the state file (the stack has stopped)."""
        if self.status_path is not None:
            self.status_path.unlink(missing_ok=True)

    def _save(self) -> None:
        if self.status_path is None:
            return
        now = self._clock()
        record = {
            name: {
                "pid": worker.process.pid,
                "restarts": worker.restarts,
                "last_exit": worker.last_exit or None,
                "held_for_seconds": (
                    round(worker.held_until - now)
                    if worker.held_until is not None and worker.held_until > now
                    else None
                ),
            }
            for name, worker in self._workers.items()
        }
        staged = self.status_path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            staged.write_text(json.dumps(record, indent=2))
            staged.replace(self.status_path)


def read_status(state_path: Path) -> dict[str, object]:
    """What the supervisor of the stack of `state_path` last recorded ({} when none)."""
    path = state_path.with_name(state_path.stem + ".supervisor.json")
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
