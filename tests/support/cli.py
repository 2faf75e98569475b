"""Running the `leasehold` command as a user would: a subprocess of this interpreter, in a given
directory, without `LEASEHOLD_STATE` leaking in from the caller's environment (so each test
finds the stack the way a user's shell would: from the state file above its directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "LEASEHOLD_STATE"}
    return subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
        env={**environment, **(env or {})},
    )
