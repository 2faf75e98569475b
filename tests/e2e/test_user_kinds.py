"""A kind a user writes in a module of their own, outside this repository, registered with
`--kinds` and run end to end on the local stack by worker processes: the contract of the kinds
SDK as a newcomer meets it."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.localstack import ROOT, LocalStackProcess, local_up_command

pytestmark = pytest.mark.e2e

USER_MODULE = """
import os

from leasehold import FatalError, Kind, RetryableError, StepContext

shout = Kind(
    "shout",
    schema={
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": {"type": "string", "maxLength": 100},
            "fail": {"enum": ["fatal"]},
            "succeed_on_attempt": {"type": "integer", "minimum": 1, "maximum": 5},
        },
        "additionalProperties": False,
    },
)


@shout.step()
def upper(ctx: StepContext, payload: dict) -> dict:
    with open(os.environ["SHOUT_CALLS"], "a") as calls:  # the test counts this step's runs
        calls.write(payload["text"] + "\\n")
    return {"text": payload["text"].upper()}


@shout.step(cost=1)
def exclaim(ctx: StepContext, payload: dict) -> dict:
    if payload.get("fail") == "fatal":
        raise FatalError("asked to fail")
    if ctx.attempt < payload.get("succeed_on_attempt", 1):
        raise RetryableError("not yet")
    return {"text": ctx.outputs["upper"]["text"] + "!"}
"""

TERMINAL = {"succeeded", "failed", "dead", "cancelled", "unknown"}


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A directory outside the repository holding the user's package `myjobs`."""
    project = tmp_path / "project"
    (project / "myjobs").mkdir(parents=True)
    (project / "myjobs" / "__init__.py").write_text("")
    (project / "myjobs" / "kinds.py").write_text(textwrap.dedent(USER_MODULE))
    assert ROOT not in project.parents
    return project


@pytest.fixture
def stack(
    tmp_path: Path, user_project: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalStackProcess]:
    workdir = tmp_path / "stack"
    workdir.mkdir()
    monkeypatch.setenv("SHOUT_CALLS", str(tmp_path / "upper-calls.txt"))
    running = LocalStackProcess(
        workdir,
        workers=2,
        kinds="leasehold_apps.synthetic,myjobs.kinds",
        python_path=user_project,
    )
    try:
        yield running
    finally:
        running.stop()
    assert running.process.returncode == 0, running.log.read_text()[-2000:]


def _submit(stack: LocalStackProcess, payload: dict[str, object]) -> tuple[int, dict]:
    return stack.request("POST", "/jobs", {"kind": "shout", "payload": payload})


def test_a_users_kind_runs_succeeds_retries_fails_and_is_checked(
    stack: LocalStackProcess,
) -> None:
    # Given the user's two-step kind registered with --kinds
    # When a job succeeds on its first attempt
    status, accepted = _submit(stack, {"text": "hello"})
    assert status == 202
    done = stack.wait_for(accepted["job_id"], TERMINAL, timeout=60)
    # Then the second step read the first one's output, and the result is the last output
    assert done["state"] == "succeeded", done
    assert done["result"] == {"text": "HELLO!"}
    assert (done["attempts"], done["budget"]["cost_used"], done["progress"]["steps_total"]) == (
        1,
        1,
        2,
    )

    # When the second step raises RetryableError on attempt 1
    status, accepted = _submit(stack, {"text": "again", "succeed_on_attempt": 2})
    assert status == 202
    retried = stack.wait_for(accepted["job_id"], TERMINAL, timeout=60)
    # Then it succeeds at attempt 2, and the finished first step was not run again
    assert retried["state"] == "succeeded", retried
    assert retried["attempts"] == 2 and retried["result"] == {"text": "AGAIN!"}
    _, whole = stack.request("GET", f"/ops/jobs/{accepted['job_id']}", user="ops")
    events = [(entry["event"], entry.get("attempt")) for entry in whole["history"]]
    assert events == [("retry", 1), ("succeeded", 2)], events
    assert whole["history"][0]["reason"] == "transient_error"
    calls = Path(stack.env["SHOUT_CALLS"]).read_text().split()
    assert calls.count("again") == 1, calls

    # When the step raises FatalError
    status, accepted = _submit(stack, {"text": "no", "fail": "fatal"})
    failed = stack.wait_for(accepted["job_id"], TERMINAL, timeout=60)
    # Then the job fails for good with the step's message
    assert (failed["state"], failed["stop_reason"]) == ("failed", "handler_error"), failed
    assert failed["error"]["message"] == "asked to fail" and failed["attempts"] == 1

    # When the payload breaks the kind's schema
    status, refused = _submit(stack, {"text": 42})
    # Then it is a 400 that names the field, and no job is made
    assert status == 400, refused
    assert "payload.text" in refused["error"]["message"], refused
    status, refused = _submit(stack, {"words": "x"})
    assert status == 400 and "text" in refused["error"]["message"], refused

    # And a kind nobody registered is unknown
    status, refused = stack.request("POST", "/jobs", {"kind": "whisper", "payload": {}})
    assert (status, refused["error"]["code"]) == (400, "unknown_kind")


def test_a_kinds_module_that_cannot_be_imported_stops_the_stack_at_start(
    tmp_path: Path, user_project: Path
) -> None:
    # Given --kinds naming a module that does not exist beside the user's real one
    out = subprocess.run(
        local_up_command(tmp_path / "stack.json", kinds="myjobs.kinds,myjobs.missing"),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=user_project,
    )
    # Then `local up` refuses to start, naming the module, with no traceback
    assert out.returncode != 0
    assert "myjobs.missing" in out.stderr and "cannot be imported" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert "ready at" not in out.stdout
