"""DB1: debounce (DESIGN §21, decisions DB1-DB6) on the local stack — three submissions with one
key 0.5 s apart collapse into one job that runs once, 2 s after the last, with its payload."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from leasehold_dev.demo.session import TERMINAL, Session, Task
from leasehold_dev.demo.synthetic import synthetic_job

WINDOW = {"by": [], "seconds": 2, "keep": "last"}


def iso_now() -> str:
    """Now as the API writes times (ISO 8601 UTC, milliseconds, `Z`): comparable as text."""
    return datetime.now(tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def db1_debounce(s: Session, task: Task) -> None:
    """Submit 1-, 2- and 3-step synthetic jobs 0.5 s apart, debounced 2 s (keep the last): every
    answer names one job (the later two `"debounced": true`), it is never seen out of `queued`
    before 2 s after the last submission, and it succeeds once with the last payload's three
    steps; a submission after it ran makes a new job."""
    answers: list[dict[str, Any]] = []
    for n in (1, 2, 3):
        if n > 1:
            time.sleep(0.5)
        steps = [{"name": f"v{n}-{i}"} for i in range(n)]
        answer = s.call("POST", "/jobs", synthetic_job(steps, debounce=WINDOW), user="alice")
        answers.append({"status": answer.status, **answer.body})
        job_id = str(answer.body.get("job_id"))
        s.track(task, job_id)
        s.act(
            task,
            f"alice submits {n} step(s), debounced 2 s → {answer.status} {job_id}"
            f"{' debounced' if answer.body.get('debounced') else ''}",
        )
    last_at = iso_now()
    job_id = str(answers[0].get("job_id"))
    seen_started = ""

    def probe() -> dict[str, Any] | None:
        nonlocal seen_started
        view = s.job(job_id, "alice")
        if view.get("state") != "queued" and not seen_started:
            seen_started = iso_now()
        return view if view.get("state") in TERMINAL else None

    done = s.wait(probe, timeout=30) or {}
    again = s.call("POST", "/jobs", synthetic_job([{"name": "v4"}], debounce=WINDOW), user="alice")
    s.track(task, str(again.body.get("job_id")))
    s.act(task, f"alice submits once more after it ran → {again.status} {again.body.get('job_id')}")
    one_job = {a.get("job_id") for a in answers} == {job_id}
    flags = [bool(a.get("debounced")) for a in answers]
    quiet_ms = _ms_between(last_at, seen_started) if seen_started else -1
    progress = done.get("progress") or {}
    s.check(
        task,
        "DB1",
        "debounced submissions run once, after the window is quiet, with the last payload",
        f"answers {[a.get('status') for a in answers]} naming {len({a.get('job_id') for a in answers})}"
        f" job(s), debounced {flags}; first seen out of queued {quiet_ms} ms after the last "
        f"submission; {done.get('state')} with {progress.get('steps_total')} steps in "
        f"{done.get('attempts')} attempt(s); a submission after it: "
        f"{'a new job' if again.body.get('job_id') not in (None, job_id) else 'the same job'}",
        all(a.get("status") == 202 for a in answers)
        and one_job
        and flags == [False, True, True]
        and quiet_ms >= 1_500  # 2 s after the last submission (its accept came a little later)
        and done.get("state") == "succeeded"
        and progress.get("steps_total") == 3
        and done.get("attempts") == 1
        and again.status == 202
        and again.body.get("job_id") not in (None, job_id)
        and not again.body.get("debounced"),
    )


def _ms_between(earlier: str, later: str) -> int:
    """Milliseconds from one ISO 8601 UTC time to another (as `iso_now` writes them)."""
    return int(
        (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds() * 1000
    )
