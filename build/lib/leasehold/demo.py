"""`make demo`: ten synthetic tasks on the embedded local stack (moto) that show every control
and every failure leasehold is built for, with a live trace and a table of acceptance checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasehold.local.runner import LocalStack

TERMINAL = {"succeeded", "failed", "cancelled", "dead"}


@dataclass
class Check:
    name: str
    observed: str
    passed: bool


@dataclass
class Tracked:
    label: str
    user: str
    states: list[str] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)


class Demo:
    def __init__(self, stack: LocalStack, log_dir: Path) -> None:
        self.stack = stack
        self.log_dir = log_dir
        self.started = time.monotonic()
        self.jobs: dict[str, Tracked] = {}
        self.checks: list[Check] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.stopped_workers: set[str] = set()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._log_offsets: dict[str, int] = {}
        self._worker_count = 0
        self.max_running: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)

    def request(
        self, method: str, path: str, body: Any = None, user: str = "alice"
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "X-Demo-User": user}
        req = urllib.request.Request(
            self.stack.url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(req, timeout=15) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def start_worker(self) -> str:
        self._worker_count += 1
        name = f"worker-{self._worker_count}"
        self.workers[name] = self.stack.spawn_worker(name, self.log_dir)
        self.say(f"started {name} (pid {self.workers[name].pid})")
        return name

    def stop_worker(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        process = self.workers[name]
        process.send_signal(sig)
        if sig is not signal.SIGSTOP:
            process.wait(timeout=15)
            del self.workers[name]
        self.say(f"sent {sig.name} to {name} (pid {process.pid})")

    def submit(
        self, label: str, steps: list[dict[str, Any]], user: str = "alice", **extra: Any
    ) -> str:
        status, body = self.request(
            "POST", "/jobs", {"kind": "synthetic", "payload": {"steps": steps}, **extra}, user
        )
        if status != 202:
            raise RuntimeError(f"submit {label} failed: {status} {body}")
        with self._lock:
            self.jobs[body["job_id"]] = Tracked(label, user, ["queued"])
        self.say(f"{label}: submitted {body['job_id']} as {user} → queued")
        return str(body["job_id"])

    def view(self, job_id: str) -> dict[str, Any]:
        """The job as its owner sees it; any state change seen here goes into the trace."""
        view = self.request("GET", f"/jobs/{job_id}", user=self.jobs[job_id].user)[1]
        with self._lock:
            info = self.jobs[job_id]
            state = view.get("state", "?")
            if state != info.states[-1]:
                info.states.append(state)
                detail = f"epoch {view.get('epoch')}, attempt {view.get('attempts')}"
                if view.get("effect"):
                    detail += f", operation {view['effect']['operation_id']}"
                if view.get("stop_reason"):
                    detail += f", {view['stop_reason']}"
                self.say(f"{info.label}: {job_id} {info.states[-2]} → {state} ({detail})")
            info.last = view
        return view

    def wait_for(self, job_id: str, predicate: Any, timeout: float = 40) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            view = self.view(job_id)
            if predicate(view):
                return view
            time.sleep(0.2)
        return view

    def holder(self, job_id: str, timeout: float = 20) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, running = self.request("GET", "/ops/jobs?state=running&limit=100", user="ops")
            for row in running.get("jobs", []):
                holder = str(row["lease_owner"] or "").partition("@")[0]
                if row["job_id"] == job_id and holder in self.workers:
                    return holder
            time.sleep(0.1)
        return None

    def check(self, name: str, observed: str, passed: bool) -> None:
        self.checks.append(Check(name, observed, passed))
        self.say(f"{'PASS' if passed else 'FAIL'} {name}: {observed}")

    # ------------------------------------------------------------------ live trace

    def watch(self) -> None:
        """Poll tracked jobs for state changes and tail worker logs for claims, effects and
        rejected late writes."""
        while not self._done.is_set():
            with self._lock:
                tracked = dict(self.jobs)
            for job_id in tracked:
                try:
                    self.view(job_id)
                except OSError:
                    continue
            self._sample_running(tracked)
            self._tail_worker_logs(tracked)
            self._done.wait(0.25)

    def _sample_running(self, tracked: dict[str, Tracked]) -> None:
        """Running jobs per user from one query of the `running` state index: a single
        DynamoDB request, so a point-in-time snapshot. (Polling each job in turn is not one:
        a job seen running, then finishing while the next one starts, would be counted twice.)"""
        try:
            status, answer = self.request("GET", "/ops/jobs?state=running&limit=100", user="ops")
        except OSError:
            return
        if status != 200:
            return
        running_by_user: dict[str, int] = {}
        for row in answer.get("jobs", []):
            info = tracked.get(row["job_id"])
            if info is not None:
                running_by_user[info.user] = running_by_user.get(info.user, 0) + 1
        for user, count in running_by_user.items():
            self.max_running[user] = max(self.max_running.get(user, 0), count)

    def _tail_worker_logs(self, tracked: dict[str, Tracked]) -> None:
        for path in sorted(self.log_dir.glob("worker-*.log")):
            offset = self._log_offsets.get(path.name, 0)
            with path.open() as log:
                log.seek(offset)
                lines = log.readlines()
                self._log_offsets[path.name] = log.tell()
            for line in lines:
                if not line.startswith("{"):
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                job_id = entry.get("job_id")
                message = entry.get("message")
                if job_id not in tracked or message not in {
                    "claimed",
                    "stale write rejected",
                    "effect intent recorded",
                    "retry scheduled",
                }:
                    continue
                extra = f"epoch {entry.get('epoch')}, attempt {entry.get('attempt')}"
                if entry.get("operation_id"):
                    extra += f", operation {entry['operation_id']}"
                self.say(f"   {path.stem}: {message} {job_id} ({extra})")

    # ------------------------------------------------------------------ the ten tasks

    def run(self) -> None:
        watcher = threading.Thread(target=self.watch, name="trace", daemon=True)
        watcher.start()
        try:
            self.phase_one()
            self.phase_two()
        finally:
            self._done.set()
            watcher.join(timeout=5)

    def phase_one(self) -> None:
        self.say("— phase 1: approval, budget, cancel, retry, dead, per-user limit (4 workers)")
        helpers = [self.start_worker(), self.start_worker()]
        approval = self.submit(
            "T1 approval",
            [{"name": "draft", "cost": 1}, {"name": "publish", "cost": 1, "approval": True}],
        )
        budget = self.submit(
            "T2 budget",
            [{"name": f"call-{i}", "cost": 4} for i in range(3)],
            budget={"max_cost": 10},
        )
        cancel = self.submit(
            "T3 cancel", [{"name": "crawl", "duration_ms": 5000}, {"name": "index", "cost": 1}]
        )
        flaky = self.submit("T4 transient", [{"name": "flaky-api", "fail_times": 1, "cost": 1}])
        dead = self.submit(
            "T5 exhausted", [{"name": "always-fails", "fail_times": 5}], max_attempts=2
        )
        bobs = [
            self.submit(f"T7 limit #{i + 1}", [{"name": "render", "duration_ms": 2000}], user="bob")
            for i in range(4)
        ]

        view = self.wait_for(approval, lambda v: v.get("state") == "waiting_approval")
        self.say(f"T1 approval: approving version {view.get('version')} of {approval}")
        self.request(
            "POST",
            f"/jobs/{approval}/approval",
            {"decision": "approve", "version": view.get("version")},
        )

        self.wait_for(cancel, lambda v: v.get("state") == "running")
        _, answer = self.request("POST", f"/jobs/{cancel}/cancel")
        self.say(
            f"T3 cancel: cancel requested while running (cancel_requested={answer.get('cancel_requested')})"
        )

        results = {
            j: self.wait_for(j, lambda v: v.get("state") in TERMINAL, timeout=60)
            for j in [approval, budget, cancel, flaky, dead, *bobs]
        }
        a = results[approval]
        self.check(
            "T1 waits for approval, then resumes and succeeds",
            f"states {' → '.join(self.jobs[approval].states)}; steps {a.get('result', {}).get('steps_completed')}",
            "waiting_approval" in self.jobs[approval].states
            and a.get("state") == "succeeded"
            and a.get("result", {}).get("steps_completed") == 2,
        )
        b = results[budget]
        self.check(
            "T2 stops before the step that would pass its budget",
            f"{b.get('state')}/{b.get('stop_reason')}, cost_used {b['budget']['cost_used']} of max {b['budget']['max_cost']}",
            b.get("stop_reason") == "budget_exhausted"
            and b["budget"]["cost_used"] == 8
            and b["budget"]["steps_used"] == 2,
        )
        c = results[cancel]
        self.check(
            "T3 cancelled while running stops before its next step",
            f"{c.get('state')}/{c.get('stop_reason')}, steps_used {c['budget']['steps_used']}",
            c.get("state") == "cancelled"
            and c.get("stop_reason") == "cancelled_by_user"
            and c["budget"]["steps_used"] == 0,
        )
        f = results[flaky]
        self.check(
            "T4 fails transiently, retries with backoff, succeeds",
            f"{f.get('state')} after {f.get('attempts')} attempts",
            f.get("state") == "succeeded" and f.get("attempts") == 2,
        )
        d = results[dead]
        self.check(
            "T5 exhausts its attempts and is dead",
            f"{d.get('state')}/{d.get('stop_reason')} after {d.get('attempts')} of {d.get('max_attempts')}",
            d.get("state") == "dead"
            and d.get("stop_reason") == "attempts_exhausted"
            and d.get("attempts") == 2,
        )
        bob_states = [results[j].get("state") for j in bobs]
        self.check(
            "T7 one user's jobs are held to the per-user limit (2) on 4 workers",
            f"at most {self.max_running.get('bob', 0)} of bob's 4 ran at once; all {set(bob_states)}; "
            f"attempts {sorted(int(results[j].get('attempts') or 0) for j in bobs)}",
            self.max_running.get("bob", 0) == 2
            and bob_states == ["succeeded"] * 4
            and all(results[j].get("attempts") == 1 for j in bobs),
        )
        for name in helpers:
            self.stop_worker(name)

    def phase_two(self) -> None:
        self.say("— phase 2: killed claimant, uncertain effect, late result, restart while paused")
        # T9: the claimant dies; its lease expires; another worker finishes the task.
        long_job = self.submit(
            "T9 claimant killed",
            [{"name": "long", "duration_ms": 3000}, {"name": "finish", "cost": 1}],
        )
        victim = self.holder(long_job)
        if victim:
            self.stop_worker(victim, signal.SIGKILL)
            self.start_worker()
        view = self.wait_for(long_job, lambda v: v.get("state") in TERMINAL)
        self.check(
            "T9 a killed claimant's lease expires and another worker finishes",
            f"{view.get('state')} at epoch {view.get('epoch')} (killed {victim})",
            victim is not None and view.get("state") == "succeeded" and view.get("epoch") == 2,
        )
        # T6: the worker dies inside an external effect: the outcome is unknown, never retried.
        charge = self.submit(
            "T6 uncertain effect", [{"name": "charge-card", "effect": True, "duration_ms": 3000}]
        )
        self.wait_for(charge, lambda v: bool(v.get("effect")))
        victim = self.holder(charge)
        if victim:
            self.stop_worker(victim, signal.SIGKILL)
            self.start_worker()
        view = self.wait_for(charge, lambda v: v.get("state") == "unknown")
        time.sleep(2)
        later = self.view(charge)
        self.check(
            "T6 a worker killed mid-effect leaves the job unknown, not retried",
            f"{view.get('state')}/{view.get('stop_reason')}; {view.get('error', {}).get('message')}; "
            f"attempts still {later.get('attempts')}",
            victim is not None
            and later.get("state") == "unknown"
            and later.get("attempts") == 1
            and charge in view.get("error", {}).get("message", ""),
        )
        # T10: the first claimant is frozen past its lease, the task finishes elsewhere, and the
        # first claimant's late result is rejected by its epoch.
        report = self.submit(
            "T10 late result", [{"name": "slow-report", "duration_ms": 6000, "cost": 1}]
        )
        frozen = self.holder(report)
        if frozen:
            self.stop_worker(frozen, signal.SIGSTOP)
            self.stopped_workers.add(frozen)
            self.start_worker()
        view = self.wait_for(report, lambda v: v.get("state") in TERMINAL, timeout=40)
        if frozen:
            self.workers[frozen].send_signal(signal.SIGCONT)
            self.say(f"sent SIGCONT to {frozen}: it wakes up still holding epoch 1")
        time.sleep(3)
        after = self.view(report)
        log = (self.log_dir / f"{frozen}.log").read_text() if frozen else ""
        rejected = any(
            report in line and "stale write rejected" in line for line in log.splitlines()
        )
        self.check(
            "T10 the first claimant's late result is rejected by its epoch",
            f"{after.get('state')} at epoch {after.get('epoch')}, version {view.get('version')} → {after.get('version')}; "
            f"{frozen} logged 'stale write rejected': {rejected}",
            frozen is not None
            and after.get("state") == "succeeded"
            and after.get("epoch") == 2
            and after.get("version") == view.get("version")
            and rejected,
        )
        # T8: every worker restarts while a task is paused; after approval it resumes from its checkpoint.
        invoice = self.submit(
            "T8 restart while paused",
            [
                {"name": "collect", "cost": 1},
                {"name": "send-invoice", "cost": 1, "approval": True},
                {"name": "archive", "cost": 1},
            ],
        )
        paused = self.wait_for(invoice, lambda v: v.get("state") == "waiting_approval")
        for name in list(self.workers):
            if name in self.stopped_workers:
                self.stop_worker(name, signal.SIGTERM)
        for name in [n for n in list(self.workers) if n not in self.stopped_workers]:
            self.stop_worker(name)
        self.start_worker()
        self.start_worker()
        self.request(
            "POST",
            f"/jobs/{invoice}/approval",
            {"decision": "approve", "version": paused.get("version")},
        )
        done = self.wait_for(invoice, lambda v: v.get("state") in TERMINAL)
        names = [o.get("step") for o in done.get("result", {}).get("outputs", [])]
        self.check(
            "T8 a task paused across a worker restart resumes at its step after approval",
            f"{done.get('state')}; steps ran {names}",
            done.get("state") == "succeeded" and names == ["collect", "send-invoice", "archive"],
        )

    def report(self) -> bool:
        width = max(len(c.name) for c in self.checks)
        print("\nleasehold demo — local stack (moto); nothing here ran on AWS\n")
        print(f"{'check'.ljust(width)} | result | observed")
        print(f"{'-' * width}-|--------|---------")
        for c in self.checks:
            print(f"{c.name.ljust(width)} | {'PASS' if c.passed else 'FAIL':6} | {c.observed}")
        passed = sum(c.passed for c in self.checks)
        print(f"\n{passed} passed, {len(self.checks) - passed} failed")
        return passed == len(self.checks) == 10


def run_demo(template: Path, port: int = 0) -> int:
    workdir = Path(".leasehold/demo")
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("*.log"):
        old.unlink()
    stack = LocalStack(
        template,
        port=port,
        state_path=workdir / "stack.json",
        handler_log=workdir / "functions.log",
    )
    demo: Demo | None = None
    try:
        stack.start()
        print(
            f"leasehold local stack (moto) ready at {stack.url}; function logs in {workdir}/",
            flush=True,
        )
        demo = Demo(stack, workdir)
        demo.start_worker()
        demo.start_worker()
        demo.run()
        ok = demo.report()
    finally:
        if demo is not None:
            for process in demo.workers.values():
                if process.poll() is None:
                    os.kill(process.pid, signal.SIGCONT)
            stack.workers = list(demo.workers.values()) + stack.workers
        stack.stop()
    return 0 if ok else 1
