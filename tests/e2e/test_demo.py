"""`make demo` is an acceptance test of its own: ten tasks, ten checks, exit 0, no orphans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.resources import TEMPLATE


def test_demo_passes_every_check_and_leaves_no_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "leasehold.cli", "demo", "--template", str(TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "10 passed, 0 failed" in out.stdout
    assert "local stack (moto)" in out.stdout
    rows = [line for line in out.stdout.splitlines() if line.startswith("T") and " | " in line]
    assert sorted(row.split()[0] for row in rows) == sorted(f"T{i}" for i in range(1, 11))
    assert all(row.split(" | ")[1].strip() == "PASS" for row in rows)
    leftovers = subprocess.run(
        ["pgrep", "-f", "local worker --state .leasehold/demo/stack.json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert leftovers.stdout.strip() == ""
