"""leasehold.testing in a user's own project: no template.yaml, none of this repository's test
fixtures or moto patches, the plugin named in the project's conftest.py, the kinds named by
`LEASEHOLD_KINDS` — run by a pytest of its own in a fresh directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import leasehold

pytestmark = pytest.mark.integration

SRC = Path(leasehold.__file__).resolve().parents[1]

KINDS = """
from leasehold import Kind, RetryableError, StepContext

greet = Kind("greet", schema={"type": "object", "required": ["name"]})


@greet.step()
def hello(ctx: StepContext, payload: dict) -> str:
    if ctx.attempt == 1:
        raise RetryableError("not yet")
    return f"hello {payload['name']}"
"""

CONFTEST = 'pytest_plugins = ["leasehold.testing.pytest_plugin"]\n'

TESTS = """
import sys

from leasehold.testing import LeaseholdTestbed

FORBIDDEN = ("leasehold.local", "leasehold.demo", "leasehold_dev", "leasehold_apps", "tests")
FORBIDDEN_PACKAGES = tuple(name + "." for name in FORBIDDEN)


def test_greet(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    assert tb.definitions.source == "packaged"
    tb.faults("sqs.SendMessageBatch:InternalError=1@2")  # refused twice, then sent once
    job_id = tb.submit("greet", {"name": "ada"})
    assert tb.run_until_idle().outcomes(job_id) == ["retry_scheduled"]
    assert tb.injected() == {"SendMessageBatch:InternalError": 2}
    tb.advance(tb.next_due_in())
    tb.run_until_idle()
    assert tb.view(job_id)["result"] == "hello ada"
    # leasehold.testing brings none of the development stack, the demo or the apps
    loaded = [m for m in sys.modules if m in FORBIDDEN or m.startswith(FORBIDDEN_PACKAGES)]
    assert loaded == []
"""


def test_a_user_project_runs_its_kinds_with_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "greet_kinds.py").write_text(textwrap.dedent(KINDS))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_greet.py").write_text(textwrap.dedent(TESTS))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "LEASEHOLD_", "PYTEST_"))
    }
    env |= {
        "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp_path)]),
        "LEASEHOLD_KINDS": "greet_kinds",
        "LEASEHOLD_TEMPLATE": "packaged",  # as if installed: no template.yaml beside the code
    }
    answer = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_greet.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    assert "1 passed" in answer.stdout
