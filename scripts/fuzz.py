"""`make fuzz`: schemathesis 4 against the local stack, from docs/openapi.yaml as the stack serves
it, every route, as alice, carol and ops in turn, with the `not_a_server_error` and
`response_schema_conformance` checks (arch §8). Prints the requests sent (by route, status,
user and phase) and the failures found (by check); exits 1 on any failure, server error or run
error.

    python scripts/fuzz.py                       # starts `leasehold local up --port 0` itself
    python scripts/fuzz.py --url http://127.0.0.1:8080   # a stack already running
    python scripts/fuzz.py --max-examples 20     # a smaller budget (examples per operation)

Without `--url` the stack is started in a temporary directory (one worker, so jobs run and their
finished views are fuzzed too) and stopped at the end; its state file gives the URL.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fuzz import USERS, fuzz  # noqa: E402

READY_SECONDS = 120


@contextmanager
def local_stack(workers: int) -> Iterator[tuple[str, Path]]:
    """`leasehold local up --port 0` in a temporary directory; yields its URL (from its "ready
    at" line: the state file names moto's endpoint, not the gateway's) and stops it (SIGTERM,
    then SIGKILL after 20 s). Also yields the directory of its logs (gone once it stops)."""
    with tempfile.TemporaryDirectory(prefix="leasehold-fuzz-") as workdir:
        state = Path(workdir) / "local-stack.json"
        log_path = Path(workdir) / "stack.log"
        command = [sys.executable, "-m", "leasehold_dev.cli", "local", "up", "--port", "0"]
        command += ["--workers", str(workers), "--state", str(state)]
        command += ["--template", str(ROOT / "template.yaml")]
        command += ["--data", str(Path(workdir) / "data")]  # its own, never `make up`'s
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=workdir)
            try:
                yield _wait_for_url(process, log_path), Path(workdir)
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()


def _wait_for_url(process: subprocess.Popen[bytes], log: Path) -> str:
    """The URL from the "ready at" line; from then on a thread copies the stack's stdout (the Api
    function's log lines) into its log file: a pipe nobody reads fills up and stalls the stack."""
    assert process.stdout is not None
    stdout = process.stdout
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        line = stdout.readline().decode()
        if "ready at " in line:
            out = log.with_suffix(".out")
            threading.Thread(target=_drain, args=(stdout, out), daemon=True).start()
            return line.split("ready at ")[1].split()[0]
        if not line and process.poll() is not None:
            raise SystemExit(f"the local stack exited: {log.read_text()[-2000:]}")
    raise SystemExit(f"the local stack was not ready in {READY_SECONDS} s")


def _drain(stream: IO[bytes], path: Path) -> None:
    with path.open("ab") as sink:
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            sink.write(chunk)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running stack's API URL (default: start one)")
    parser.add_argument(
        "--max-examples",
        type=int,
        default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "20")),
        help="examples per operation and phase (the budget; default 20)",
    )
    parser.add_argument("--users", default=",".join(USERS), help="comma-separated demo users")
    parser.add_argument("--seed", type=int, default=None, help="a fixed seed to replay a run")
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the stack")
    args = parser.parse_args(argv)
    users = tuple(u for u in args.users.split(",") if u)
    if args.url:
        report = fuzz(args.url, users=users, max_examples=args.max_examples, seed=args.seed)
        print(report.render())
    else:
        with local_stack(args.workers) as (url, logs):
            report = fuzz(url, users=users, max_examples=args.max_examples, seed=args.seed)
            print(report.render())
            if report.server_errors:  # what the Api function logged about them
                errors = [
                    line
                    for line in (logs / "stack.out").read_text(errors="replace").splitlines()
                    if '"level":"ERROR"' in line
                ]
                print(f"the Api function logged {len(errors)} errors; the first:")
                print("\n".join(line[:3000] for line in errors[:3]))
    failed = sum(report.failures.values()) or report.server_errors or report.errors
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
