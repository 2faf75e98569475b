"""P1: an operator pauses a kind and resumes it — its jobs wait, queued, saying so, and all run
after the resume; a non-operator cannot pause."""

from __future__ import annotations

import time

from leasehold_dev.demo.session import TERMINAL, Session, Task

KIND = "demo_ping"  # used by D3 in phase 1 only: pausing it here holds back no other check
PAUSE_REACHES_WORKERS_S = 5.5  # a warm worker reads the paused kinds once per 5 s


def p1_pause(s: Session, task: Task) -> None:
    """Pause `demo_ping` with a note, submit three pings: each stays `queued` with
    `waiting_for.paused` (checked over two more seconds); resume: all three succeed."""
    refused = s.call("POST", f"/ops/kinds/{KIND}/pause", {"note": "x"}, user="alice").status
    paused = s.call("POST", f"/ops/kinds/{KIND}/pause", {"note": "demo: provider down"}, user="ops")
    s.act(task, f"ops pauses {KIND} → {paused.status}; alice tries → {refused}")
    time.sleep(PAUSE_REACHES_WORKERS_S)
    jobs = [
        s.submit(task, f"ping #{i + 1} while paused", {"kind": KIND, "payload": {}}, user="carol")
        for i in range(3)
    ]

    def all_parked() -> bool | None:
        views = [s.job(j, "carol") for j in jobs]
        parked = all("paused" in (v.get("waiting_for") or {}) for v in views)
        return parked or None

    parked = bool(s.wait(all_parked, timeout=20))
    time.sleep(2)
    still = [s.job(j, "carol").get("state") for j in jobs]
    resumed = s.call("POST", f"/ops/kinds/{KIND}/resume", {"note": "demo: back"}, user="ops")
    woken = resumed.body.get("woken") if resumed.status == 200 else None
    s.act(task, f"ops resumes {KIND} → {resumed.status}, {woken} parked job(s) woken")
    ends = [s.wait_job(j, "carol", lambda v: v.get("state") in TERMINAL).get("state") for j in jobs]
    s.check(
        task,
        "P1",
        "a paused kind's jobs wait, queued, and all run after the resume",
        f"pause {paused.status} (alice {refused}); 3 pings parked: {parked}, 2 s later {still}; "
        f"resume {resumed.status} woke {woken}; then {ends}",
        paused.status == 200
        and refused == 403
        and parked
        and still == ["queued"] * 3
        and resumed.status == 200
        and ends == ["succeeded"] * 3,
    )
