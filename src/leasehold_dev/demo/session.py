"""What every demo task works with: the local stack's HTTP API as a person or an operator calls
it, the worker processes (started, killed, frozen, replaced), and the record of the run — the
demo's own acts and the checks — that the story and the table are made from.

Tasks of a phase run in threads at once, so everything shared here is behind a lock, and every
wait is bounded: a task that cannot see what it waits for records a failing check, never hangs."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import urllib3

from leasehold.client import ApiError, Client
from leasehold_dev.local.runner import LocalStack

T = TypeVar("T")

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "dead"})
SETTLED = TERMINAL | {"unknown"}


@dataclass
class Check:
    key: str
    name: str
    observed: str
    passed: bool


@dataclass
class Act:
    """Something the demo itself did (a request, a signal), placed in the story by its time."""

    at_ms: int
    text: str


@dataclass
class Task:
    """One story of the demo: its checks (keys in table order), the jobs it made and its acts."""

    key: str
    title: str
    checks: tuple[str, ...]
    jobs: list[str] = field(default_factory=list)
    acts: list[Act] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def now_ms() -> int:
    return int(time.time() * 1000)


class Session:
    def __init__(self, stack: LocalStack, log_dir: Path) -> None:
        self.stack = stack
        self.log_dir = log_dir
        self.started_ms = now_ms()
        self._started = time.monotonic()
        self.checks: dict[str, Check] = {}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.frozen: set[str] = set()
        self._worker_count = 0
        self._lock = threading.RLock()
        self.print_lock = threading.Lock()
        self.shared: dict[str, Any] = {}
        """What one phase's task leaves for a later phase's (the schedule D4 checks later)."""
        self._clients: dict[tuple[str, str], Client] = {}
        self._pool = urllib3.PoolManager(maxsize=16, retries=False)

    # ------------------------------------------------------------------ saying and recording

    def say(self, text: str) -> None:
        with self.print_lock:
            print(f"[{time.monotonic() - self._started:6.1f}s] {text}", flush=True)

    def act(self, task: Task, text: str) -> None:
        """A step the demo took, told now and kept for the task's story."""
        with self._lock:
            task.acts.append(Act(now_ms(), text))
        self.say(f"{task.key}: {text}")

    def check(self, task: Task, key: str, name: str, observed: str, passed: bool) -> None:
        with self._lock:
            self.checks[key] = Check(key, name, observed, passed)
        self.say(f"{'PASS' if passed else 'FAIL'} {key} {name}: {observed}")

    def track(self, task: Task, job_id: str) -> str:
        with self._lock:
            if job_id not in task.jobs:
                task.jobs.append(job_id)
        return job_id

    # ------------------------------------------------------------------ the HTTP API

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        user: str = "alice",
        headers: dict[str, str] | None = None,
        base: str | None = None,
    ) -> Answer:
        """One request as `user` (the local gateway's `X-Demo-User`) through leasehold.client.Client;
        any HTTP status is an answer. `base` sends it elsewhere (a local provider)."""
        reply = self.client(user, base).request(method, path, body, headers=headers)
        parsed = reply.body
        if parsed is None:
            parsed = {"raw": reply.raw.decode(errors="replace")[:200]} if reply.raw else {}
        return Answer(reply.status, parsed, dict(reply.headers))

    def client(self, user: str, base: str | None = None) -> Client:
        """The API's client as `user` (or `base`'s); every client shares one connection pool."""
        key = (user, base or self.stack.url)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = Client(key[1], user=user, timeout=20, pool=self._pool)
            return self._clients[key]

    def job(self, job_id: str, user: str) -> dict[str, Any]:
        """The job as its owner sees it ({} when the API did not answer 200)."""
        answer = self.call("GET", f"/jobs/{job_id}", user=user)
        return answer.body if answer.status == 200 else {}

    def ops_job(self, job_id: str) -> dict[str, Any]:
        """The operator's whole view of one job: history, ledger, lease holder."""
        answer = self.call("GET", f"/ops/jobs/{job_id}", user="ops")
        return answer.body if answer.status == 200 else {}

    def wait(self, probe: Callable[[], T | None], timeout: float, every: float = 0.2) -> T | None:
        """The first truthy answer of `probe` within `timeout` seconds, else None."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = probe()
            except (OSError, ApiError):  # no answer (yet): the probe is tried again
                found = None
            if found:
                return found
            if time.monotonic() >= deadline:
                return None
            time.sleep(every)

    def wait_job(
        self,
        job_id: str,
        user: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 40,
    ) -> dict[str, Any]:
        """The job view once `predicate` holds, or the last view seen when time ran out."""
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            view = self.job(job_id, user)
            if view:
                last = view
            return view if view and predicate(view) else None

        return self.wait(probe, timeout) or last

    def wait_settled(self, job_id: str, user: str, timeout: float = 40) -> dict[str, Any]:
        return self.wait_job(job_id, user, lambda v: v.get("state") in SETTLED, timeout)

    def submit(self, task: Task, what: str, body: dict[str, Any], *, user: str = "alice") -> str:
        """POST /jobs; the job is the task's. A refusal ends the task (it is not the story)."""
        answer = self.call("POST", "/jobs", body, user=user)
        if answer.status != 202:
            raise RuntimeError(f"{what}: POST /jobs answered {answer.status} {answer.body}")
        job_id = self.track(task, str(answer.body["job_id"]))
        self.act(task, f"{user} submits {what} → 202, {job_id} queued")
        return job_id

    # ------------------------------------------------------------------ worker processes

    def start_worker(self) -> str:
        with self._lock:
            self._worker_count += 1
            name = f"worker-{self._worker_count}"
            self.workers[name] = self.stack.spawn_worker(name, self.log_dir)
            pid = self.workers[name].pid
        self.say(f"started {name} (pid {pid})")
        return name

    def ensure_workers(self, count: int) -> None:
        """At least `count` live, unfrozen workers."""
        with self._lock:
            live = [n for n, p in self.workers.items() if p.poll() is None and n not in self.frozen]
        for _ in range(count - len(live)):
            self.start_worker()

    def stop_worker(self, name: str) -> None:
        """SIGTERM: the worker finishes the message in hand, then exits (bounded wait)."""
        with self._lock:
            process = self.workers.pop(name)
            self.frozen.discard(name)
        process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.say(f"stopped {name} (pid {process.pid}) with SIGTERM")

    def holder(self, job_id: str, timeout: float = 20) -> tuple[str, int] | None:
        """The worker process of ours holding `job_id`'s lease now (name, pid), read from the
        operator view's `lease` (`worker-N@pid`)."""

        def probe() -> tuple[str, int] | None:
            lease = self.ops_job(job_id).get("lease") or {}
            name, pid = lease.get("worker"), lease.get("pid")
            with self._lock:
                process = self.workers.get(str(name))
            if process is not None and process.pid == pid and process.poll() is None:
                return str(name), int(pid)
            return None

        return self.wait(probe, timeout, every=0.1)

    def signal_holder(self, task: Task, job_id: str, sig: signal.Signals, why: str) -> str | None:
        """Send `sig` to the worker holding `job_id` and start a replacement; SIGKILL is waited
        for (the process is gone when this returns), SIGSTOP leaves it frozen."""
        found = self.holder(job_id)
        if found is None:
            self.act(task, f"no worker of ours held {job_id}: nothing to {sig.name}")
            return None
        name, pid = found
        with self._lock:
            process = self.workers[name]
            process.send_signal(sig)
            if sig is signal.SIGSTOP:
                self.frozen.add(name)
        if sig is signal.SIGKILL:
            process.wait(timeout=10)
            with self._lock:
                self.workers.pop(name, None)
        self.act(task, f"{sig.name} {name} (pid {pid}) holding {job_id}: {why}")
        self.start_worker()
        return name

    def thaw(self, task: Task, name: str) -> None:
        with self._lock:
            self.workers[name].send_signal(signal.SIGCONT)
            self.frozen.discard(name)
        self.act(task, f"SIGCONT {name}: it wakes up still holding its old epoch")

    def release_all(self) -> list[subprocess.Popen[bytes]]:
        """Every worker process, thawed, for the stack to stop."""
        with self._lock:
            processes = list(self.workers.values())
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)
            self.workers.clear()
            self.frozen.clear()
        return processes
