"""Workflows (DESIGN §19) on the local stack: a fan-out and its join (W1), a signal (W2), a
third party's callback (W3) and a durable sleep (W4), each with the demo's own kinds
(demo/kinds.py) over the HTTP API. The Client has no `signal` or `children` yet: the signal,
the callback and the children's page go through its transport (`Session.call`)."""

from __future__ import annotations

import threading
from typing import Any

from leasehold_dev.demo.session import Session, Task
from leasehold_dev.demo.story import iso_ms, log_entries
from leasehold_dev.demo.synthetic import most_at_once

FAN_CHILDREN = 12
FAN_AT_ONCE = 3
FAN_MS = 400
NAP_SECONDS = 3


def _children(s: Session, job_id: str) -> list[dict[str, Any]]:
    answer = s.call("GET", f"/jobs/{job_id}/children?limit=100")
    return list(answer.body.get("items") or []) if answer.status == 200 else []


def w1_fan_out(s: Session, task: Task) -> None:
    """Twelve 0.4-s children, at most three at once, with more workers than that: the most that
    held a lease at once (from their histories) is the cap; the parent's join ran after the
    last child ended; its progress was seen counting up."""
    job = s.submit(
        task,
        f"a fan-out of {FAN_CHILDREN} children, at most {FAN_AT_ONCE} at once",
        {
            "kind": "demo_fan",
            "payload": {"children": FAN_CHILDREN, "ms": FAN_MS, "at_once": FAN_AT_ONCE},
        },
    )
    seen: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            children = (s.job(job, "alice").get("waiting_for") or {}).get("children") or {}
            if "done" in children and (not seen or seen[-1] != children["done"]):
                seen.append(int(children["done"]))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, name="W1-sampler", daemon=True)
    sampler.start()
    try:
        view = s.wait_settled(job, "alice", timeout=60)
    finally:
        done.set()
        sampler.join(timeout=5)
    children = _children(s, job)
    most = most_at_once([s.ops_job(child["job_id"]) for child in children])
    ended = [int((child.get("result") or {}).get("ended_ms", 0)) for child in children]
    result = view.get("result") or {}
    joined = int(result.get("joined_ms", 0))
    states = {child.get("state") for child in children}
    last_end = max(ended, default=0)
    s.check(
        task,
        "W1",
        f"fan-out: {FAN_CHILDREN} children, at most {FAN_AT_ONCE} at once, the join after the last",
        f"{len(children)} children {sorted(map(str, states))}, at most {most} running at once "
        f"(cap {FAN_AT_ONCE}, 5 workers); progress seen {seen}; the parent resumed "
        f"{joined - last_end} ms after the last child ended; parent {view.get('state')}",
        view.get("state") == "succeeded"
        and len(children) == FAN_CHILDREN
        and states == {"succeeded"}
        and most == FAN_AT_ONCE
        and result.get("succeeded") == FAN_CHILDREN
        and 0 < last_end <= joined
        and any(0 < n < FAN_CHILDREN for n in seen),
    )


def _waiting_for_go(s: Session, job: str) -> dict[str, Any]:
    return s.wait_job(
        job, "alice", lambda v: (v.get("waiting_for") or {}).get("signal") == "go", timeout=30
    )


def w2_signal(s: Session, task: Task) -> None:
    """The owner's signal resumes a waiting job with its body; a second one is 409."""
    job = s.submit(
        task, "a job that waits for the signal 'go'", {"kind": "demo_wait", "payload": {}}
    )
    waiting = _waiting_for_go(s, job)
    body = {"approved": True}
    first = s.call("POST", f"/jobs/{job}/signals/go", body)
    s.act(task, f"alice signals 'go' → {first.status}")
    second = s.call("POST", f"/jobs/{job}/signals/go", body)
    s.act(task, f"alice signals 'go' again → {second.status}")
    view = s.wait_settled(job, "alice", timeout=30)
    result = view.get("result") or {}
    resumed = (iso_ms(view.get("updated_at")) or 0) - int(result.get("asked_ms", 0))
    s.check(
        task,
        "W2",
        "a signal resumes a waiting job with its body; a second signal is 409",
        f"waited queued for {waiting.get('waiting_for')}; signal {first.status}, again "
        f"{second.status}; job {view.get('state')} with {result.get('go')} "
        f"{resumed} ms after it began to wait",
        (waiting.get("waiting_for") or {}).get("until") is not None
        and first.status == 202
        and second.status == 409
        and view.get("state") == "succeeded"
        and result.get("go") == body,
    )


def _token(s: Session, job: str) -> str | None:
    for _, entry in log_entries(s.log_dir):
        if entry.get("message") == "callback token" and entry.get("job_id") == job:
            return str(entry.get("token"))
    return None


def w3_callback(s: Session, task: Task) -> None:
    """A third party holding the wait's token completes it with no identity; used, it is 404."""
    job = s.submit(task, "a job that waits for a callback", {"kind": "demo_wait", "payload": {}})
    _waiting_for_go(s, job)
    token = s.wait(lambda: _token(s, job), timeout=10)
    body = {"shipped": "1Z999"}
    first = s.call("POST", f"/callbacks/{token}", body, user="courier")
    s.act(task, f"a courier (no account of alice's) posts the callback → {first.status}")
    again = s.call("POST", f"/callbacks/{token}", body, user="courier")
    s.act(task, f"the same token again → {again.status}")
    view = s.wait_settled(job, "alice", timeout=30)
    result = view.get("result") or {}
    s.check(
        task,
        "W3",
        "a callback token completes the wait once, without the owner",
        f"token found in the worker's log: {token is not None}; callback {first.status}, "
        f"again {again.status}; job {view.get('state')} with {result.get('go')}",
        token is not None
        and first.status == 202
        and again.status == 404
        and view.get("state") == "succeeded"
        and result.get("go") == body,
    )


def w4_sleep(s: Session, task: Task) -> None:
    """A durable sleep: the job waits `queued` with no lease, then its next step runs after."""
    job = s.submit(
        task,
        f"a job that sleeps {NAP_SECONDS} s between two steps",
        {"kind": "demo_nap", "payload": {"seconds": NAP_SECONDS}},
    )
    waiting = s.wait_job(job, "alice", lambda v: "time" in (v.get("waiting_for") or {}), 30)
    ops = s.ops_job(job)
    view = s.wait_settled(job, "alice", timeout=30)
    result = view.get("result") or {}
    slept = int(result.get("woke_ms", 0)) - int(result.get("slept_at_ms", 0))
    holder = (ops.get("lease") or {}).get("holder")
    s.check(
        task,
        "W4",
        f"a {NAP_SECONDS}-s sleep holds no lease, and the next step runs after it",
        f"waited {waiting.get('state')} until {(waiting.get('waiting_for') or {}).get('time')}, "
        f"lease holder {holder}; the next step ran {slept} ms after the first; "
        f"job {view.get('state')}",
        waiting.get("state") == "queued"
        and bool(ops)
        and holder is None
        and view.get("state") == "succeeded"
        and NAP_SECONDS * 1000 <= slept <= NAP_SECONDS * 1000 + 15_000,
    )
