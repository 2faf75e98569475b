"""`make scaffold-check`: a project made by `leasehold new`, checked from nothing, as its owner
meets it on a fresh machine. In a temporary directory:

1. `leasehold new` (leasehold from this checkout's path, the default in a checkout);
2. `make test` — which builds the project's own `.venv` (pip installs `leasehold-jobs[project]` from
   this checkout) and runs the project's tests;
3. `make validate` (`sam validate --lint`) and `make build` (`sam build` for python3.13/arm64),
   then a look inside each function's build: the engine and the project's package, no
   `leasehold.testing`, and the handlers import from the build alone;
4. `make up`, a job of the example kind posted over HTTP and waited for until it succeeds,
   `make down`.

Heavy (a venv from nothing: a few minutes) and so not part of `make test`; the short version,
on the current venv, is tests/e2e/test_scaffold.py. Run it one at a time with the other
local-stack runs (`flock /tmp/leasehold-stack.lock make scaffold-check`)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PY313 = "3.13"


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    started = time.monotonic()
    print(f"$ {' '.join(command)}", flush=True)
    answer = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    took = time.monotonic() - started
    if answer.returncode != 0:
        print(answer.stdout[-4000:], answer.stderr[-4000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"scaffold-check: {' '.join(command)} failed ({took:.0f} s)")
    print(f"  ok ({took:.0f} s)", flush=True)
    return answer.stdout


def _check_build(project: Path, package: str) -> None:
    """Every function's build holds the engine and the package, not leasehold.testing, and
    its handler and kinds import from the build alone (with the runtime's python3.13)."""
    build = project / ".aws-sam" / "build"
    functions = sorted(p.name for p in build.iterdir() if p.is_dir())
    assert functions == ["ApiFunction", "RelayFunction", "SweeperFunction", "WorkerFunction"], (
        functions
    )
    python = next(
        (
            str(candidate)
            for candidate in sorted(Path.home().glob(f".pyenv/versions/{PY313}*/bin/python3.13"))
        ),
        "python3.13",
    )
    for name in functions:
        code = build / name
        assert (code / "leasehold" / "handlers").is_dir() and (code / package).is_dir(), name
        assert not (code / "leasehold" / "testing").exists(), name
        assert not (code / "moto").exists() and not (code / "leasehold_dev").exists(), name
        handler = name.removesuffix("Function").lower()
        probe = (
            f"import leasehold.handlers.{handler}, sys\n"
            "from leasehold.sdk.loading import load_kinds\n"
            f"assert sorted(load_kinds('{package}.kinds').kinds) == ['greet']\n"
            "assert not [m for m in sys.modules if m.startswith(('moto', 'leasehold_dev'))]\n"
        )
        alone = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"}
        command = [python, "-I", "-c", f"import sys; sys.path.insert(0, {str(code)!r})\n{probe}"]
        subprocess.run(command, check=True, timeout=60, env=alone)
    print(f"  builds of {', '.join(functions)}: engine + {package}, no leasehold.testing")


def _serve_and_submit(project: Path, env: dict[str, str], port: int) -> None:
    log = project / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen(
            ["make", "--no-print-directory", "up", f"PORT={port}", "WORKERS=1"],
            cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline and url is None and up.poll() is None:
            found = re.search(r"ready at (http://127\.0\.0\.1:\d+)", log.read_text())
            url = found.group(1) if found else None
            time.sleep(0.5)
        if url is None:
            raise SystemExit(f"scaffold-check: make up never got ready:\n{log.read_text()[-3000:]}")
        from leasehold.client import Client

        client = Client(url, user="alice")
        job = client.submit("greet", {"name": "Ada"}, idempotency_key="scaffold-check")
        view = client.wait(job.job_id, timeout=60)
        if view.get("state") != "succeeded":
            raise SystemExit(f"scaffold-check: the greet job did not succeed: {view}")
        print(f"  make up: greet job {job.job_id} succeeded: {view['result']}")
    finally:
        _run(["make", "--no-print-directory", "down"], project, env, 60)
        up.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18390)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "LEASEHOLD_", "MAKE", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="leasehold-scaffold-"))
    project = base / "check-jobs"
    leasehold = [sys.executable, "-m", "leasehold_dev.cli"]
    _run([*leasehold, "new", str(project)], base, {**env, "PYTHONPATH": str(ROOT / "src")}, 60)
    _run(["make", "--no-print-directory", "test"], project, env, 1800)
    _run(["make", "--no-print-directory", "validate"], project, env, 300)
    _run(["make", "--no-print-directory", "build"], project, env, 1200)
    _check_build(project, "check_jobs")
    _serve_and_submit(project, env, args.port)
    print(f"scaffold-check: passed in {time.monotonic() - started:.0f} s ({project})")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
