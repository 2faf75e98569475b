"""U1: unique jobs (DESIGN §21, decisions UQ1–UQ6) on the local stack — a request's `unique`
rule makes one job of two submissions with one key, answers the second with the first (200,
`duplicate`), and makes a new job once the first was cancelled (a state that no longer counts)."""

from __future__ import annotations

from leasehold_dev.demo.session import Session, Task
from leasehold_dev.demo.synthetic import synthetic_job


def u1_unique(s: Session, task: Task) -> None:
    """Alice submits one nightly report (delayed an hour) twice and Bob (her tenant) once, all
    with `unique: {by: [payload.steps], period_seconds: 600}`: one job, the others its
    duplicates; after she cancels it a fourth submission (not delayed) makes a new job, which
    runs."""
    unique = {"by": ["payload.steps"], "period_seconds": 600}
    steps = [{"name": f"nightly_{s.started_ms}"}]
    body = synthetic_job(steps, unique=unique, delay_seconds=3600)
    first = s.submit(task, "a nightly report in an hour, unique for 10 min", body)
    again = s.call("POST", "/jobs", body, user="alice")
    by_bob = s.call("POST", "/jobs", body, user="bob")
    for who, answer in (("alice", again), ("bob", by_bob)):
        s.act(
            task,
            f"{who} submits it again → {answer.status} {answer.body.get('job_id')} "
            f"duplicate={answer.body.get('duplicate')}",
        )
    cancelled = s.call("POST", f"/jobs/{first}/cancel", user="alice").body
    s.act(task, f"alice cancels {first} → {cancelled.get('state')}")
    after = s.call("POST", "/jobs", synthetic_job(steps, unique=unique), user="alice")
    second = str(after.body.get("job_id"))
    s.track(task, second)
    s.act(task, f"alice submits it once more → {after.status} {second}")
    done = s.wait_settled(second, "alice", timeout=60)
    duplicates = [again, by_bob]
    s.check(
        task,
        "U1",
        "unique jobs: one job per key in the window; a cancelled one no longer counts",
        f"first 202 {first}; again: alice {again.status} duplicate="
        f"{again.body.get('duplicate')}, bob {by_bob.status} same job="
        f"{by_bob.body.get('job_id') == first}; after the cancel: {after.status}, a new job "
        f"{second != first}, {done.get('state')}",
        all(a.status == 200 and a.body.get("duplicate") is True for a in duplicates)
        and all(a.body.get("job_id") == first for a in duplicates)
        and cancelled.get("state") == "cancelled"
        and after.status == 202
        and second != first
        and done.get("state") == "succeeded",
    )
