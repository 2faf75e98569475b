"""A project made by `leasehold new`, driven through its own Makefile as its owner drives it:
`make test` passes at once, and `make up` serves its example kind — a job posted to the local
stack succeeds, and so does one sent as the project's sample event.

This reuses the running interpreter's venv (`LEASEHOLD_VENV`), so it stays short; `make
scaffold-check` is the same from nothing (a venv of the project's own, `sam validate --lint`,
`sam build`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.client import Client
from leasehold_dev.cli import main as leasehold_main
from tests.support.resources import ROOT

pytestmark = pytest.mark.e2e

VENV = Path(sys.prefix)


def _environment() -> dict[str, str]:
    """This process's environment without what would steer the project's own commands (a
    pytest-xdist worker's variables, a stack state file, an outer make's flags)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "LEASEHOLD_", "MAKE")) and key != "MFLAGS"
    }
    return env | {"LEASEHOLD_VENV": str(VENV), "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "greeter"
    assert leasehold_main(["new", str(directory)]) == 0
    return directory


def _make(project: Path, *targets: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *targets, f"LEASEHOLD_VENV={VENV}"],
        cwd=project, env=_environment(), capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


@pytest.fixture
def stack(project: Path) -> Iterator[str]:
    """`make up` in the project, on a free port; its URL. `make down` after."""
    process = subprocess.Popen(
        ["make", "--no-print-directory", "up", "PORT=0", "WORKERS=1", f"LEASEHOLD_VENV={VENV}"],
        cwd=project, env=_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 90
    url = None
    while time.monotonic() < deadline and url is None:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        found = re.search(r"ready at (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else None
    try:
        assert url, "".join(seen)[-3000:]
        assert "kinds: greet" in process.stdout.readline()
        yield url
    finally:
        down = _make(project, "down", timeout=60)
        try:
            process.wait(timeout=60)
        finally:
            process.kill()
    assert down.returncode == 0, down.stdout + down.stderr


def test_make_test_passes_in_a_new_project_at_once(project: Path) -> None:
    answer = _make(project, "test")
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    assert re.search(r"\b10 passed\b", answer.stdout), answer.stdout[-2000:]


def test_make_up_serves_the_example_kind(project: Path, stack: str) -> None:
    client = Client(stack, user="alice")
    job = client.submit("greet", {"name": "Ada"})
    assert job.state == "queued"
    view = client.wait(job.job_id, timeout=60)
    assert view["state"] == "succeeded", view
    assert view["result"] == {"greeting": "Hello, Ada!", "attempts": {"compose": 1, "sign": 1}}
    # The project's sample event, through the API function of the running stack
    invoked = _make(project, "--silent", "invoke", "EVENT=events/api-submit-greet.json")
    assert invoked.returncode == 0, invoked.stderr[-2000:]
    answer = json.loads(invoked.stdout)
    assert answer["statusCode"] == 202, answer
    assert client.wait(json.loads(answer["body"])["job_id"], timeout=60)["kind"] == "greet"


def _tutorial_snippet() -> tuple[str, str]:
    """The tutorial's client code (the heredoc of the `<!-- tutorial:client -->` block of
    docs/guide/your-project.md) and the output the tutorial says it prints."""
    readme = (ROOT / "docs" / "guide" / "your-project.md").read_text()
    block = readme.split("<!-- tutorial:client -->")[1].split("<!-- /tutorial -->")[0]
    text = textwrap.dedent(block.split("```sh\n", 1)[1].split("```")[0])
    code = text.split("<<'PY'\n", 1)[1].split("\nPY\n")[0]
    printed = text.split("\nPY\n")[1].strip().removeprefix("# ")
    return code, printed


def test_the_guide_tutorial_submits_and_waits_through_the_client(project: Path, stack: str) -> None:
    code, printed = _tutorial_snippet()
    assert "http://127.0.0.1:8080" in code and "Client(" in code
    env = _environment() | {
        "PYTHONPATH": os.pathsep.join(
            part for part in (str(project / "src"), os.environ.get("PYTHONPATH", "")) if part
        )
    }
    answer = subprocess.run(
        [str(VENV / "bin" / "python"), "-"], input=code.replace("http://127.0.0.1:8080", stack),
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr[-3000:]
    assert answer.stdout.strip() == printed
