"""A kind's bad data on the embedded stack (arch §23): a lone surrogate in an effect step's
output and in a `FatalError`'s message end their jobs promptly, leave every list and the
operators' summary answering, and — the stack stopped and started again from its data
directory — the shown `failed` and `unknown` stay what they were, each step run once."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.localstack import LocalStackProcess

ROOT = Path(__file__).resolve().parents[2]
KINDS = "leasehold_apps.synthetic,tests.support.contained_kinds"
TERMINAL = {"succeeded", "failed", "dead", "cancelled", "unknown"}


def _submit(stack: LocalStackProcess, kind: str, payload: dict[str, object]) -> str:
    status, accepted = stack.request("POST", "/jobs", {"kind": kind, "payload": payload})
    assert status == 202, accepted
    return str(accepted["job_id"])


def test_unstorable_data_ends_its_job_and_a_restart_keeps_what_was_shown(tmp_path: Path) -> None:
    stack = LocalStackProcess(tmp_path, workers=1, kinds=KINDS, python_path=ROOT)
    restarted: LocalStackProcess | None = None
    try:
        effect = _submit(stack, "effectful", {"output": "surrogate"})
        error = _submit(stack, "plain", {"fail": True})
        shown = {job: stack.wait_for(job, TERMINAL, timeout=30) for job in (effect, error)}
        assert shown[effect]["state"] == "unknown", shown[effect]
        assert "cannot be stored" in shown[effect]["error"]["message"]
        assert shown[error]["state"] == "failed", shown[error]
        assert shown[error]["error"]["message"] == "bad \ufffd text"
        for path, user in (("/jobs", "alice"), ("/ops/summary", "ops")):
            status, body = stack.request("GET", path, user=user)
            assert status == 200, (path, body)
        stack.stop()
        restarted = LocalStackProcess(tmp_path, workers=1, kinds=KINDS, python_path=ROOT)
        for job in (effect, error):
            status, view = restarted.request("GET", f"/jobs/{job}")
            assert status == 200, view
            assert (view["state"], view["error"], view["attempts"]) == (
                shown[job]["state"],
                shown[job]["error"],
                1,
            ), view
        time.sleep(3)  # the restarted sweeper's passes (one a second): nothing runs again
        status, ops = restarted.request("GET", f"/ops/jobs/{error}", user="ops")
        assert status == 200 and ops["attempts"] == 1, ops
    finally:
        if restarted is not None:
            restarted.stop()
        else:
            stack.stop()
