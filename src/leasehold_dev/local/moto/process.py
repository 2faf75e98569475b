"""The local stack's moto server in a process of its own.

`leasehold local up` ran the embedded moto server as a thread beside the gateway, the API
handler, the relay and the sweeper: one interpreter lock for all of them, so the stack could use
one core of the machine and no more (`make bench-local` found it at ~0.9 of a core while the
second core waited). The server now runs in this module's process, with every leasehold patch
of moto (`start_moto`), and the stack process talks to it over HTTP as the workers always did.
Nothing is lost by the move: the tables and queues never were shared memory — every client,
in-process or not, reached them through the server's endpoint.

The child prints one line, `ready <endpoint>`, when it serves (or `error <message>` when it
cannot: its data directory is in use or damaged). It ends on SIGTERM, and on its own within a
poll or two once the process that started it is no longer its parent (a `local up` killed with
SIGKILL leaves no server behind). Every wait here is bounded.

With `--data DIR` it serves that data directory: it takes the directory's lock, loads its
snapshot and journal before it says `ready`, and journals every write from the moment `local
up` asks it to restore them into the stack's new tables (leasehold_dev.local.moto.durable). A
stop by SIGTERM syncs and compacts the journal; a SIGKILL loses nothing it acknowledged.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from leasehold.domain.errors import LeaseholdError
from leasehold_dev.local.processes import stop_requested_by_signals

READY = "ready "
FAILED = "error "
START_SECONDS = 60.0
STOP_SECONDS = 5.0
PARENT_POLL_SECONDS = 0.25


class MotoProcessError(LeaseholdError, RuntimeError):
    """The moto server process did not start or answer; the message says what it printed."""


@dataclass
class MotoProcess:
    """A running moto server process: its endpoint, and how to stop it."""

    process: subprocess.Popen[bytes]
    endpoint: str

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_SECONDS; waits for it (bounded)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_SECONDS)


def quiet_local_noise() -> None:
    """moto warns about every resource it skips (Cognito, ApiGatewayV2, alarms) and Werkzeug logs
    every request; Powertools warns when an invocation emitted no metric. None of it helps here."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    for name in ("werkzeug", "moto", "botocore", "docker"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def spawn(
    timeout: float = START_SECONDS, data: Path | None = None, gsi_lag_ms: int = 0
) -> MotoProcess:
    """Start the server process (with `data`: serving that data directory; with `gsi_lag_ms`:
    its indexes that far behind the table) and wait (at most `timeout` seconds) until it serves.
    Its stderr is this process's; its stdout carries the ready line only."""
    from leasehold_dev.local.moto.index_lag import LAG_ENVIRONMENT

    command = [sys.executable, "-m", "leasehold_dev.local.moto.process"]
    command += ["--parent-pid", str(os.getpid())]
    if data is not None:
        command += ["--data", str(data)]
    environment = {**os.environ, LAG_ENVIRONMENT: str(gsi_lag_ms)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=environment)
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            process.kill()
            process.wait(timeout=STOP_SECONDS)
            said = line.decode(errors="replace").strip() or "nothing"
            raise MotoProcessError(
                f"the moto server process did not start within {timeout:.0f} s "
                f"(exit code {process.returncode}; it printed {said})"
            )
        readable, _, _ = select.select([process.stdout], [], [], min(remaining, 0.5))
        if readable:
            chunk = os.read(process.stdout.fileno(), 4096)
            line += chunk if chunk else b""
            if not chunk:
                process.wait(timeout=STOP_SECONDS)
    text = line.decode().strip()
    if text.startswith(FAILED):
        process.wait(timeout=STOP_SECONDS)
        raise MotoProcessError(text.removeprefix(FAILED))
    if not text.startswith(READY):
        process.kill()
        process.wait(timeout=STOP_SECONDS)
        raise MotoProcessError(f"the moto server process said {text!r} instead of its endpoint")
    process.stdout.close()
    return MotoProcess(process, text.removeprefix(READY))


def serve(parent_pid: int, data: Path | None = None) -> int:
    """The child: serve until SIGTERM or until `parent_pid` is no longer the parent. SIGINT is
    ignored: Ctrl-C reaches the terminal's whole process group at once, and the workers it stops
    hand their jobs back through this server — `local up` stops it (SIGTERM) after them."""
    from leasehold_dev.local.journal import Journal
    from leasehold_dev.local.journal_format import JournalError
    from leasehold_dev.local.moto.durable import Durability
    from leasehold_dev.local.moto.server import start_moto

    quiet_local_noise()
    stopping = stop_requested_by_signals()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    journal = Journal(data) if data is not None else None
    try:
        durability = None
        if journal is not None:
            journal.lock(owner=parent_pid)
            durability = Durability(journal)
    except JournalError as exc:
        os.write(1, f"{FAILED}{exc}\n".encode())
        return 3
    server, endpoint = start_moto(durability)
    try:
        os.write(1, f"{READY}{endpoint}\n".encode())
        devnull = os.open(os.devnull, os.O_WRONLY)  # nobody reads the pipe after the line
        os.dup2(devnull, 1)
        while not stopping.is_set() and os.getppid() == parent_pid:
            stopping.wait(PARENT_POLL_SECONDS)  # a SIGTERM ends the wait at once
    finally:
        server.stop()
        if journal is not None:
            journal.close(compact=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the local stack's moto server (internal)")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--data", type=Path, help="serve this data directory (journaled)")
    args = parser.parse_args(argv)
    return serve(args.parent_pid, args.data)


if __name__ == "__main__":
    code = main()
    # The journal is synced and closed and the server stopped: what is left is the
    # interpreter's teardown of moto's thousands of objects (most of a second), which keeps
    # nothing — every `local down` waited for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
