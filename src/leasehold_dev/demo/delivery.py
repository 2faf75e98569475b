"""D1–D5: what a caller can ask of when and how often a job runs — a delay, a concurrency key, a
rate limit, a schedule and priorities — each shown on the local stack."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from leasehold_dev.demo.session import TERMINAL, Session, Task
from leasehold_dev.demo.synthetic import settled_counting_running, synthetic_job


def d1_delayed(s: Session, task: Task) -> None:
    """No attempt of a job delayed 3 s starts earlier than 3 s after it was accepted (each
    attempt's `started` in its history: the claim's clock, not a poll's); a job delayed 2 h is
    due 2 h after it was accepted, `queued` with `waiting_for` that time, waits in the due index
    (the operator summary's `delayed`) and is cancelled before it is due. Nothing here depends
    on when a read happens: a view read late on a busy machine says the same."""
    soon = s.submit(task, "a job delayed 3 s", synthetic_job([{"name": "ping"}], delay_seconds=3))
    late = s.submit(
        task, "a job delayed 2 h", synthetic_job([{"name": "ping"}], delay_seconds=7200)
    )
    done = s.wait_settled(soon, "alice", timeout=60)
    # due at acceptance + the delay (a settled job's view no longer says when it was due)
    accepted = str(done.get("created_at") or "")
    due = _ms(accepted) + 3_000 if accepted else None
    starts = attempt_starts(s.ops_job(soon))
    early = [start for start in starts if due is None or _ms(start) < due]
    waiting = s.job(late, "alice")
    late_due = str(waiting.get("next_attempt_at") or "")
    summary = s.call("GET", "/ops/summary", user="ops").body
    delayed = int(summary.get("delayed") or 0) if isinstance(summary, dict) else 0
    cancelled = s.call("POST", f"/jobs/{late}/cancel", user="alice").body
    s.act(task, f"alice cancels the 2-h job → {cancelled.get('state')}")
    s.check(
        task,
        "D1",
        "a delayed job waits, starts no earlier than due; a long delay can be cancelled",
        f"3-s job accepted {accepted or '–'}, attempts started {starts or '–'} (none 3 s "
        f"earlier: {not early}), {done.get('state')}; 2-h job {waiting.get('state')} waiting_for "
        f"{waiting.get('waiting_for')} (accepted {waiting.get('created_at')}), /ops/summary "
        f"delayed {delayed}, then {cancelled.get('state')}",
        bool(starts)
        and not early
        and done.get("state") == "succeeded"
        and delay_ms(waiting) == 7_200_000
        and waiting.get("state") == "queued"
        and waiting.get("waiting_for") == {"time": late_due}
        and delayed >= 1
        and cancelled.get("state") == "cancelled",
    )


def d2_concurrency(s: Session, task: Task) -> None:
    """Six 2.5-s renders of one tenant, a kind limited to two running per tenant over two slot
    items: at most two ran at once (from their histories' attempt starts and ends), a
    waiting one says what it waits for, all succeed with one attempt each."""
    jobs = []
    for i in range(6):
        # 0.3 s apart, so each wake-up goes out alone and an idle worker takes it: six sent
        # together could reach one worker in one batch, run one after another, and never meet
        # the limit at all
        if i:
            time.sleep(0.3)
        jobs.append(
            s.submit(
                task,
                f"render #{i + 1} (2.5 s)",
                {"kind": "demo_render", "payload": {"ms": 2500}},
                user="carol",
            )  # fmt: skip
        )
    waits: set[str] = set()

    def note_waits() -> None:
        for job_id in jobs:
            waiting = s.job(job_id, "carol").get("waiting_for")
            if waiting and "concurrency" in waiting:
                waits.add(waiting["concurrency"])

    results, most = settled_counting_running(
        s, jobs, "carol", sampler="D2-sampler", every=0.2, also=note_waits
    )
    states = {r.get("state") for r in results}
    attempts = sorted(int(r.get("attempts") or 0) for r in results)
    s.check(
        task,
        "D2",
        "a kind limited to 2 running per tenant (2 shards) runs 2 of 6 at a time, the rest wait",
        f"at most {most} of carol's 6 ran at once; waiting_for seen {sorted(waits)}; all "
        f"{states}; attempts {attempts}",
        most == 2
        and waits == {"tenant:other-group"}
        and states == {"succeeded"}
        and attempts == [1] * 6,
    )


def d3_rate(s: Session, task: Task) -> None:
    """Six pings of one tenant, a kind limited to 2 starts a second: never 3 started in any
    second (when each start was taken: its claim's clock), some waited saying so, all succeeded
    on their first attempt."""
    jobs = [
        s.submit(task, f"ping #{i + 1}", {"kind": "demo_ping", "payload": {}}, user="carol")
        for i in range(6)
    ]
    waits: set[str] = set()
    mine = set(jobs)

    def probe() -> bool | None:
        # One read of carol's queued jobs a round: a wait is seen even when it is short (a
        # start due within a second is waited for inside the worker that holds the job)
        queued = s.call("GET", "/jobs?state=queued&limit=100", user="carol")
        rows = queued.body.get("jobs", []) if queued.status == 200 else None
        for view in rows or []:
            waiting = view.get("waiting_for") or {}
            if view.get("job_id") in mine and "rate" in waiting:
                waits.add(waiting["rate"])
        if rows is None or any(view.get("job_id") in mine for view in rows):
            return None
        return all(s.job(j, "carol").get("state") in TERMINAL for j in jobs) or None

    s.wait(probe, timeout=40, every=0.1)
    results = [s.job(j, "carol") for j in jobs]
    # When each start was taken: the claim's clock, kept as its attempt's `started` (the step's
    # own clock reads a few ms later, by a varying amount, so its gaps may look shorter)
    started = sorted(_started_ms(s.ops_job(j)) for j in jobs)
    most = max(sum(1 for t in started if at <= t < at + 1000) for at in started)
    gaps = [b - a for a, b in zip(started, started[1:], strict=False)]
    s.check(
        task,
        "D3",
        "a kind limited to 2 starts a second never starts 3 in a second; the others wait",
        f"at most {most} of carol's 6 started in any second (gaps {gaps} ms); waiting_for seen "
        f"{sorted(waits)}; all { ({r.get('state') for r in results}) }; attempts "
        f"{sorted(int(r.get('attempts') or 0) for r in results)}",
        most == 2
        and min(gaps) >= 500
        and waits == {"tenant:other-group"}
        and {r.get("state") for r in results} == {"succeeded"}
        and all(int(r.get("attempts") or 0) == 1 for r in results),
    )


def d4_schedule_made(s: Session, task: Task) -> None:
    """Phase 1: a `rate(1 minute)` schedule made through `/schedules` (its first tick is the
    next whole minute); D4 checks it a few phases later, so the demo does not wait for it."""
    made = s.call(
        "POST",
        "/schedules",
        {
            "expression": "rate(1 minute)",
            "kind": "synthetic",
            "payload": {"steps": [{"name": "tick"}]},
            "priority": "high",
        },
        user="carol",
    )
    if made.status != 201:
        raise RuntimeError(f"POST /schedules answered {made.status} {made.body}")
    s.shared["D4"] = (str(made.body["schedule_id"]), str(made.body.get("next_tick_at")))
    s.act(
        task,
        f"carol creates {made.body['schedule_id']} rate(1 minute), priority high → 201, first "
        f"tick {made.body.get('next_tick_at')}",
    )


def d4_schedule(s: Session, task: Task) -> None:
    """The schedule made in phase 1: each of its ticks so far made exactly one job (its count of
    jobs made is the number of minutes from its first tick to its last, whatever the sweeper's
    runs every second since, and however late this check comes on a busy machine); the job ran
    (at high priority); the schedule is deleted."""
    made = s.shared.get("D4")
    if made is None:
        raise RuntimeError("phase 1 made no schedule")
    schedule_id, first_tick = made

    def fired() -> dict[str, Any] | None:
        view = s.call("GET", f"/schedules/{schedule_id}", user="carol").body
        return view if isinstance(view, dict) and view.get("last_job_id") else None

    view = s.wait(fired, timeout=75, every=0.5) or {}
    job_id = str(view.get("last_job_id") or "")
    if job_id:
        s.track(task, job_id)
    done = s.wait_settled(job_id, "carol", timeout=30) if job_id else {}
    time.sleep(2)  # two more sweeps: no tick is fired again
    again = s.call("GET", f"/schedules/{schedule_id}", user="carol").body
    gone = s.call("DELETE", f"/schedules/{schedule_id}", user="carol")
    s.act(task, f"carol deletes {schedule_id} → {gone.status}")
    ticks = ticks_from(first_tick, str(again.get("last_tick_at") or ""), period_ms=60_000)
    # a tick after the one seen made its own job; none did: the job seen is still the last
    same_tick = again.get("last_tick_at") == view.get("last_tick_at")
    s.check(
        task,
        "D4",
        "a schedule's tick makes exactly one job, which runs; the schedule can be deleted",
        f"tick {view.get('last_tick_at')} (first tick {first_tick}) made {job_id or '–'} "
        f"({done.get('state')}, priority {done.get('priority')}); sweeps every second since, "
        f"and 2 s more: last tick {again.get('last_tick_at')} ({ticks} ticks from the first), "
        f"ticks_fired {again.get('ticks_fired')}, skipped {again.get('ticks_skipped')}, last job "
        f"{again.get('last_job_id')}, next tick {again.get('next_tick_at')}; DELETE → "
        f"{gone.status}",
        bool(job_id)
        and done.get("state") == "succeeded"
        and done.get("priority") == "high"
        and ticks >= 1
        and again.get("ticks_fired") == ticks
        and again.get("ticks_skipped") == 0
        and (again.get("last_job_id") == job_id) == same_tick
        and str(again.get("next_tick_at")) > str(again.get("last_tick_at"))
        and gone.status in (200, 204),
    )


def d5_priorities(s: Session, task: Task) -> None:
    """40 busy jobs of 400 ms (no concurrency limit) fill every worker; a high and a low job
    submitted after them finish while most of the backlog is still to run: each priority has
    its own queue and pollers (decision F4)."""
    backlog = [s.client("bob").submit("demo_busy", {"ms": 400}).job_id for _ in range(BACKLOG_JOBS)]
    s.act(task, f"bob submits {BACKLOG_JOBS} busy jobs of 400 ms (normal priority)")
    high = s.submit(
        task, "a high-priority job", {**synthetic_job([{"name": "now"}]), "priority": "high"}
    )
    low = s.submit(
        task, "a low-priority job", {**synthetic_job([{"name": "later"}]), "priority": "low"}
    )
    done = {"high": s.wait_settled(high, "alice"), "low": s.wait_settled(low, "alice")}
    views = [s.job(j, "bob") for j in backlog]
    ends = [v.get("updated_at", "") if v.get("state") == "succeeded" else "~" for v in views]
    ahead: dict[str, tuple[int, int]] = {}
    for name, view in done.items():
        accepted, ended = view.get("created_at", ""), view.get("updated_at", "")
        waiting = [end for end in ends if end > accepted]
        ahead[name] = (sum(1 for end in waiting if end < ended), len(waiting))
    s.wait(lambda: all(s.job(j, "bob").get("state") in TERMINAL for j in backlog[-3:]), 60)
    s.check(
        task,
        "D5",
        "a high and a low job do not wait behind a normal backlog",
        "; ".join(
            f"{name} {done[name].get('state')}: {ran} of the {left} backlog jobs still to run "
            f"when it was accepted ran before it ended"
            for name, (ran, left) in ahead.items()
        ),
        all(done[name].get("state") == "succeeded" for name in done)
        and all(left >= 10 and ran < left // 3 for ran, left in ahead.values()),
    )


BACKLOG_JOBS = 40


def _started_ms(view: dict[str, Any]) -> int:
    """When the job's succeeding attempt was claimed (its history's `started`), in ms."""
    for entry in view.get("history") or []:
        if entry.get("state") == "succeeded" and entry.get("started"):
            return _ms(str(entry["started"]))
    return 0


def attempt_starts(view: dict[str, Any]) -> list[str]:
    """When each attempt of the job was claimed: its operator view's history entries' `started`
    (the claim's clock), in order."""
    return [str(e["started"]) for e in view.get("history") or [] if e.get("started")]


def ticks_from(first: str, last: str, *, period_ms: int) -> int:
    """How many ticks of a fixed-rate schedule fall from its `first` tick to its `last` one,
    both included (0 when it has not ticked, or `last` is not on `first`'s grid)."""
    if not first or not last:
        return 0
    span = _ms(last) - _ms(first)
    if span < 0 or span % period_ms:
        return 0
    return span // period_ms + 1


def delay_ms(view: dict[str, Any]) -> int | None:
    """How long after it was accepted the job was first due (its view's `next_attempt_at` less
    its `created_at`); None when either is missing."""
    accepted, due = view.get("created_at"), view.get("next_attempt_at")
    return _ms(str(due)) - _ms(str(accepted)) if accepted and due else None


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)
