"""`make demo` is an acceptance test of its own: every check of every phase passes, exit 0, no
orphans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.resources import TEMPLATE

# The demo's checks time real jobs (a table outage answered within the client's timeout, two
# renders seen running at once): it runs by itself, not beside a second stack (decision CI18)
pytestmark = pytest.mark.alone

CHECKS = (
    *(f"T{i}" for i in range(1, 11)),  # the synthetic jobs
    *(f"R{i}" for i in range(1, 9)),  # the reading list
    "A1", "A2", "A3",  # the supplier-document agent
    "E1", "E2",  # billable effects
    "F1", "F2", "F3",  # the infrastructure: a duplicate delivery, a table outage
    "D1", "D2", "D3", "D4", "D5",  # flow control and time: a delay, a concurrency key, a rate,
    # a schedule, priorities
    "DB1",  # debounce: three submissions, one job, the last payload
    "W1", "W2", "W3", "W4",  # workflows: a fan-out, a signal, a callback, a durable sleep
    "P1",  # a kind paused by an operator and resumed
    "U1",  # unique jobs: a duplicate answered with the first job
    "B1",  # a batch of 10 with one bad item: 9 jobs run, one error in its place
)  # fmt: skip


def test_demo_passes_every_check_and_leaves_no_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", "demo", "--template", str(TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    failing = "\n".join(line for line in out.stdout.splitlines() if "| FAIL" in line)
    assert out.returncode == 0, (
        f"failing checks:\n{failing}\n---\n{out.stdout[-3000:]}{out.stderr[-2000:]}"
    )
    assert f"{len(CHECKS)} passed, 0 failed" in out.stdout
    assert "local stack (moto)" in out.stdout
    rows = [
        line for line in out.stdout.splitlines() if line.split(" ")[0] in CHECKS and " | " in line
    ]
    assert sorted(row.split()[0] for row in rows) == sorted(CHECKS)
    assert all(row.split(" | ")[1].strip() == "PASS" for row in rows)
    observed = {row.split()[0]: row.split(" | ")[2] for row in rows}
    # each workflow check says what it saw
    assert "at most 3 running at once" in observed["W1"], observed["W1"]
    assert "signal 202, again 409" in observed["W2"], observed["W2"]
    assert "callback 202, again 404" in observed["W3"], observed["W3"]
    assert "lease holder None" in observed["W4"], observed["W4"]
    assert "3 pings parked: True" in observed["P1"], observed["P1"]
    leftovers = subprocess.run(
        ["pgrep", "-f", "local worker --state .leasehold/demo/stack.json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert leftovers.stdout.strip() == ""
