"""T1–T10: synthetic jobs that show every control and every failure of the engine itself —
approval, budget, cancel, retry, dead, the per-user limit, and workers killed, frozen and
replaced."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from leasehold_dev.demo.session import TERMINAL, Session, Task
from leasehold_dev.demo.story import log_entries


def synthetic_job(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A `synthetic` job's request: these steps, and `extra` beside them (delay, priority…)."""
    return {"kind": "synthetic", "payload": {"steps": steps}, **extra}


def _events(view: dict[str, Any]) -> list[str]:
    return [f"{e.get('event')}→{e.get('state')}" for e in view.get("history") or []]


def in_order(events: list[str], expected: list[str]) -> bool:
    """Whether `expected` happened in this order (other entries may come between)."""
    remaining = iter(events)
    return all(any(event == wanted for event in remaining) for wanted in expected)


def most_at_once(views: list[dict[str, Any]]) -> int:
    """The most of these jobs that held a lease at once, from each attempt's start (`started`)
    and end (`at`) in its history: exact, where a sampler polling the running list can miss a
    short overlap on a busy machine (it did: the demo's D2 saw "at most 1" under load)."""
    edges: list[tuple[datetime, int]] = []
    for view in views:
        for entry in view.get("history") or []:
            started, ended = entry.get("started"), entry.get("at")
            if started and ended:
                edges += [(datetime.fromisoformat(started), 1), (datetime.fromisoformat(ended), -1)]
    most = held = 0
    for _, change in sorted(edges):  # an end sorts before a start at the same instant
        held += change
        most = max(most, held)
    return most


def settled_counting_running(
    s: Session,
    jobs: list[str],
    user: str,
    *,
    sampler: str,
    every: float,
    also: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Wait for `user`'s `jobs` to settle while a thread runs `also` every `every` s; their
    settled views, and the most that ran at once (`most_at_once`: from their operator views'
    histories)."""
    done = threading.Event()

    def sample() -> None:
        while also is not None and not done.is_set():
            also()
            done.wait(every)

    thread = threading.Thread(target=sample, name=sampler, daemon=True)
    thread.start()
    try:
        results = [s.wait_settled(j, user, timeout=60) for j in jobs]
    finally:
        done.set()
        thread.join(timeout=5)
    # the owner's view has no history: the operator's has every attempt's start and end
    return results, most_at_once([s.ops_job(job_id) for job_id in jobs])


def t1_approval(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a draft-then-publish job (publish needs approval)",
        synthetic_job(
            [{"name": "draft", "cost": 1}, {"name": "publish", "cost": 1, "approval": True}]
        ),
    )
    paused = s.wait_job(job, "alice", lambda v: v.get("state") == "waiting_approval")
    answer = s.call(
        "POST", f"/jobs/{job}/approval", {"decision": "approve", "version": paused.get("version")}
    )
    s.act(task, f"alice approves version {paused.get('version')} → {answer.status}")
    done = s.wait_settled(job, "alice")
    history = s.ops_job(job)
    events = _events(history)
    s.check(
        task,
        "T1",
        "waits for approval, then resumes and succeeds",
        f"history {' · '.join(events)}; steps {done.get('result', {}).get('steps_completed')}",
        in_order(events, ["paused→waiting_approval", "approved→queued", "succeeded→succeeded"])
        and done.get("result", {}).get("steps_completed") == 2,
    )


def t2_budget(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "three calls of cost 4 with max_cost 10",
        synthetic_job(
            [{"name": f"call-{i}", "cost": 4} for i in range(3)], budget={"max_cost": 10}
        ),
    )
    b = s.wait_settled(job, "alice")
    budget = b.get("budget", {})
    s.check(
        task,
        "T2",
        "stops before the step that would pass its budget",
        f"{b.get('state')}/{b.get('stop_reason')}, cost_used {budget.get('cost_used')} of "
        f"max {budget.get('max_cost')}, steps_used {budget.get('steps_used')}",
        b.get("state") == "failed"
        and b.get("stop_reason") == "budget_exhausted"
        and budget.get("cost_used") == 8
        and budget.get("steps_used") == 2,
    )


def t3_cancel(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a 5 s crawl, then index",
        synthetic_job([{"name": "crawl", "duration_ms": 5000}, {"name": "index", "cost": 1}]),
    )
    s.wait_job(job, "alice", lambda v: v.get("state") == "running")
    answer = s.call("POST", f"/jobs/{job}/cancel")
    s.act(
        task,
        f"alice cancels while it runs → cancel_requested={answer.body.get('cancel_requested')}",
    )
    c = s.wait_settled(job, "alice")
    s.check(
        task,
        "T3",
        "cancelled while running stops before its next step",
        f"{c.get('state')}/{c.get('stop_reason')}, "
        f"steps_used {c.get('budget', {}).get('steps_used')}",
        c.get("state") == "cancelled"
        and c.get("stop_reason") == "cancelled_by_user"
        and c.get("budget", {}).get("steps_used") == 0,
    )


def t4_transient(s: Session, task: Task) -> None:
    job = s.submit(
        task, "a call that fails once", synthetic_job([{"name": "flaky-api", "fail_times": 1}])
    )
    f = s.wait_settled(job, "alice")
    events = _events(s.ops_job(job))
    s.check(
        task,
        "T4",
        "fails transiently, retries with backoff, succeeds",
        f"{f.get('state')} after {f.get('attempts')} attempts; history {' · '.join(events)}",
        f.get("state") == "succeeded"
        and f.get("attempts") == 2
        and in_order(events, ["retry→queued", "succeeded→succeeded"]),
    )


def t5_dead(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a step that always fails, max_attempts 2",
        synthetic_job([{"name": "always-fails", "fail_times": 5}], max_attempts=2),
    )
    d = s.wait_settled(job, "alice")
    s.check(
        task,
        "T5",
        "exhausts its attempts and is dead",
        f"{d.get('state')}/{d.get('stop_reason')} after {d.get('attempts')} of "
        f"{d.get('max_attempts')}",
        d.get("state") == "dead"
        and d.get("stop_reason") == "attempts_exhausted"
        and d.get("attempts") == 2,
    )


def t7_limit(s: Session, task: Task) -> None:
    """Running jobs per user are counted from the jobs' own histories (each attempt's start and
    end): exact, where polling each job in turn would count a job seen running, then finishing
    while the next starts, twice."""
    jobs = [
        s.submit(
            task,
            f"render #{i + 1} (2 s)",
            synthetic_job([{"name": "render", "duration_ms": 2000}]),
            user="bob",
        )
        for i in range(4)
    ]
    results, most = settled_counting_running(s, jobs, "bob", sampler="T7-sampler", every=0.25)
    states = {r.get("state") for r in results}
    attempts = sorted(int(r.get("attempts") or 0) for r in results)
    s.check(
        task,
        "T7",
        "one user's jobs are held to the per-user limit (2) on 4+ workers",
        f"at most {most} of bob's 4 ran at once; all {states}; attempts {attempts}",
        most == 2 and states == {"succeeded"} and attempts == [1, 1, 1, 1],
    )


def t9_killed(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a 3 s step, then finish",
        synthetic_job([{"name": "long", "duration_ms": 3000}, {"name": "finish", "cost": 1}]),
    )
    s.wait_job(job, "alice", lambda v: v.get("state") == "running")
    victim = s.signal_holder(task, job, signal.SIGKILL, "the claimant dies mid-step")
    view = s.wait_settled(job, "alice")
    events = _events(s.ops_job(job))
    s.check(
        task,
        "T9",
        "a killed claimant's lease expires and another worker finishes",
        f"{view.get('state')} at epoch {view.get('epoch')} (killed {victim}); "
        f"history {' · '.join(events)}",
        victim is not None and view.get("state") == "succeeded" and view.get("epoch") == 2,
    )


def t6_uncertain(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a 3 s charge-card step with effect: true",
        synthetic_job([{"name": "charge-card", "effect": True, "duration_ms": 3000}]),
    )
    s.wait_job(job, "alice", lambda v: bool(v.get("effect")))
    victim = s.signal_holder(task, job, signal.SIGKILL, "the worker dies inside the effect")
    view = s.wait_job(job, "alice", lambda v: v.get("state") == "unknown")
    time.sleep(2)
    later = s.job(job, "alice")
    message = str(view.get("error", {}).get("message", ""))
    s.check(
        task,
        "T6",
        "a worker killed mid-effect leaves the job unknown, not retried",
        f"{view.get('state')}/{view.get('stop_reason')}; {message[:90]}…; "
        f"2 s later {later.get('state')}, attempts still {later.get('attempts')}",
        victim is not None
        and later.get("state") == "unknown"
        and later.get("attempts") == 1
        and f"{job}:0" in message,
    )


def t10_late(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "a 6 s report",
        synthetic_job([{"name": "slow-report", "duration_ms": 6000, "cost": 1}]),
    )
    s.wait_job(job, "alice", lambda v: v.get("state") == "running")
    frozen = s.signal_holder(task, job, signal.SIGSTOP, "frozen past its lease")
    view = s.wait_job(job, "alice", lambda v: v.get("state") in TERMINAL, timeout=40)
    if frozen:
        s.thaw(task, frozen)

    def refused() -> bool:
        return any(
            who == frozen and e.get("job_id") == job and e.get("message") == "stale write rejected"
            for who, e in log_entries(s.log_dir)
        )

    rejected = bool(frozen) and bool(s.wait(refused, timeout=8, every=0.25))
    time.sleep(0.5)
    after = s.job(job, "alice")
    s.check(
        task,
        "T10",
        "the first claimant's late write is refused by its epoch",
        f"{after.get('state')} at epoch {after.get('epoch')}, version {view.get('version')} → "
        f"{after.get('version')}; {frozen} logged 'stale write rejected': {rejected}",
        frozen is not None
        and after.get("state") == "succeeded"
        and after.get("epoch") == 2
        and after.get("version") == view.get("version")
        and rejected,
    )


def t8_restart(s: Session, task: Task) -> None:
    job = s.submit(
        task,
        "collect, send-invoice (needs approval), archive",
        synthetic_job(
            [
                {"name": "collect", "cost": 1},
                {"name": "send-invoice", "cost": 1, "approval": True},
                {"name": "archive", "cost": 1},
            ]
        ),
    )
    paused = s.wait_job(job, "alice", lambda v: v.get("state") == "waiting_approval")
    old = sorted(s.workers)
    for name in old:
        s.stop_worker(name)
    s.act(task, f"every worker replaced while it waits ({', '.join(old)} stopped)")
    s.ensure_workers(4)
    answer = s.call(
        "POST", f"/jobs/{job}/approval", {"decision": "approve", "version": paused.get("version")}
    )
    s.act(task, f"alice approves version {paused.get('version')} → {answer.status}")
    done = s.wait_settled(job, "alice")
    names = [o.get("step") for o in done.get("result", {}).get("outputs", [])]
    s.check(
        task,
        "T8",
        "a task paused across a worker restart resumes at its step after approval",
        f"{done.get('state')}; steps ran {names}",
        done.get("state") == "succeeded" and names == ["collect", "send-invoice", "archive"],
    )
