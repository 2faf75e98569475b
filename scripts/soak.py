"""`make soak`: a thousand jobs over HTTP on the local stack while workers die.

Synthetic jobs (some with an approval, some cancelled, some failing once) and reading-list title
jobs, from several users, on 4 worker processes; every few seconds a random worker is killed
with SIGKILL and a new one started; store and queue faults are injected at a few percent. At
the end every job must be at rest, none lost, none with two visible results (from the table:
history; and from the workers' logs: one `succeeded` line per job at most), and the per-user
limit never exceeded (sampled from the `running` state and each user's slot item). Throughput
and accept → terminal latency go to bench/soak.json. Bounded in time; not part of `make test`.
Figures are the local stack's (moto on this machine), not AWS's."""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from leasehold.client import ApiError, Client  # noqa: E402
from leasehold.domain.job import Owner  # noqa: E402
from leasehold.store.items import slots_key  # noqa: E402
from leasehold_dev.local.runner import LocalStack  # noqa: E402
from leasehold_dev.local.stack import client  # noqa: E402

TERMINAL = {"succeeded", "failed", "cancelled", "dead"}
AT_REST = TERMINAL | {"unknown"}
USERS = ["alice", "bob"]
FAULTS = (
    "dynamodb.TransactWriteItems:TransactionConflict=0.03,"
    "dynamodb.UpdateItem:ThrottlingException=0.02,"
    "sqs.SendMessageBatch:InternalError=0.02"
)


class SoakApi:
    """The stack's API as each soak user: one leasehold.client.Client per user over one connection
    pool, every request retried (bounded, honouring Retry-After) — a submission always carries
    its key, and cancel and approval are conditional, so a repeat does nothing twice."""

    def __init__(self, url: str) -> None:
        self._base = Client(url, timeout=20, retries=5, max_retry_after=5)
        self._clients: dict[str, Client] = {}

    def call(
        self, method: str, path: str, body: Any = None, user: str = "alice", key: str | None = None
    ) -> tuple[int, Any]:
        """One request as `user` (with `key` as its Idempotency-Key): its status and body."""
        if user not in self._clients:
            self._clients[user] = self._base.with_identity(user=user)
        headers = {"Idempotency-Key": key} if key else None
        try:
            reply = self._clients[user].request(
                method, path, body, headers=headers, retry=True, repeat_safe=True
            )
        except ApiError as error:
            raise RuntimeError(f"{method} {path}: no answer ({error.message})") from error
        return reply.status, reply.body if reply.body is not None else {}


def job_body(rng: random.Random) -> tuple[str, dict[str, Any]]:
    roll = rng.random()
    if roll < 0.10:
        return "approval", {
            "kind": "synthetic",
            "payload": {
                "steps": [
                    {"name": "prepare", "cost": 1},
                    {"name": "publish", "approval": True, "cost": 1},
                ]
            },
        }
    if roll < 0.25:
        return "flaky", {
            "kind": "synthetic",
            "payload": {"steps": [{"name": "call", "fail_times": 1, "cost": 1}]},
        }
    if roll < 0.35:
        return "long", {
            "kind": "synthetic",
            "payload": {
                "steps": [{"name": "render", "duration_ms": 1500}, {"name": "save", "cost": 1}]
            },
        }
    return "plain", {"kind": "synthetic", "payload": {"steps": [{"name": "work", "cost": 1}]}}


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    workdir = ROOT / ".leasehold" / "soak"
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("*.log"):
        old.unlink()
    stack = LocalStack(
        ROOT / "template.yaml",
        port=0,
        state_path=workdir / "stack.json",
        handler_log=workdir / "functions.log",
        faults=args.faults,
        data_dir=workdir / "data",  # the soak's own, new each run (never `make up`'s)
        fresh=True,
    )
    started = time.monotonic()
    stack.start()
    api = SoakApi(stack.url)
    workers: dict[str, Any] = {}
    counter = iter(range(1, 10**6))
    kills = 0

    def start_worker() -> None:
        name = f"worker-{next(counter)}"
        workers[name] = stack.spawn_worker(name, workdir)

    for _ in range(args.workers):
        start_worker()
    jobs: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    stop = threading.Event()
    max_running: Counter[str] = Counter()
    max_slots: Counter[str] = Counter()

    def submit_all(poster: int) -> None:
        local = random.Random(args.seed * 100 + poster)
        for index in range(poster, args.jobs, args.posters):
            if stop.is_set():  # the time limit: accept no more
                return
            user = USERS[index % len(USERS)]
            key = f"soak-{args.seed}-{index}"
            if local.random() < args.title_share:
                mode = "flaky" if local.random() < 0.2 else "ok"
                status, view = api.call(
                    "POST",
                    "/bookmarks",
                    {"url": f"https://example.org/soak/{index}", "title_mode": mode},
                    user,
                    key,
                )
                if status != 201:
                    raise RuntimeError(f"POST /bookmarks: {status} {view}")
                job_id, label = view["title_job"]["job_id"], f"title-{mode}"
            else:
                label, body = job_body(local)
                status, answer = api.call("POST", "/jobs", body, user, key)
                if status != 202:
                    raise RuntimeError(f"POST /jobs: {status} {answer}")
                job_id = answer["job_id"]
            with lock:
                jobs[job_id] = {
                    "user": user,
                    "label": label,
                    "accepted": time.monotonic(),
                    "done": None,
                    "state": "queued",
                }
            if label == "plain" and local.random() < args.cancel_share:
                api.call("POST", f"/jobs/{job_id}/cancel", user=user)

    def watch() -> None:
        """Poll every job until it rests; approve paused ones; sample the running jobs."""
        while not stop.is_set():
            with lock:
                pending = [j for j, info in jobs.items() if info["done"] is None]
            for job_id in pending[: args.poll_batch]:
                info = jobs[job_id]
                status, view = api.call("GET", f"/jobs/{job_id}", user=info["user"])
                if status != 200:
                    continue
                info["state"] = view["state"]
                if view["state"] == "waiting_approval":
                    api.call(
                        "POST",
                        f"/jobs/{job_id}/approval",
                        {"decision": "approve", "version": view["version"]},
                        info["user"],
                    )
                if view["state"] in AT_REST:
                    info["done"] = time.monotonic()
            status, running = api.call("GET", "/ops/jobs?state=running&limit=100", user="ops")
            if status == 200:
                per_user = Counter(row["user_id"] for row in running["jobs"])
                for user, count in per_user.items():
                    max_running[user] = max(max_running[user], count)
            sample_slots()
            stop.wait(0.2)

    dynamodb = client("dynamodb", stack.info.endpoint) if stack.info else None
    table = stack.info.outputs["JobsTable"] if stack.info else ""

    def sample_slots() -> None:
        if dynamodb is None:
            return
        for user in USERS:
            item = dynamodb.get_item(
                TableName=table,
                Key=slots_key(Owner("study-group", user)),
                ConsistentRead=True,
            ).get("Item")
            if item:
                max_slots[user] = max(max_slots[user], int(item.get("n", {}).get("N", "0")))

    posters = [
        threading.Thread(target=submit_all, args=(i,), daemon=True) for i in range(args.posters)
    ]
    watcher = threading.Thread(target=watch, daemon=True)
    for thread in [*posters, watcher]:
        thread.start()
    deadline = started + args.max_seconds
    next_kill = time.monotonic() + args.kill_every
    next_progress = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if time.monotonic() >= next_kill and workers:
                victim = workers.pop(rng.choice(sorted(workers)))
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=10)  # reaped, not left a zombie
                kills += 1
                start_worker()
                next_kill = time.monotonic() + args.kill_every
            with lock:
                done = sum(1 for info in jobs.values() if info["done"] is not None)
                accepted = len(jobs)
            if time.monotonic() >= next_progress:
                print(
                    f"[{time.monotonic() - started:6.0f} s] accepted {accepted} of {args.jobs},"
                    f" at rest {done}, workers killed {kills}",
                    flush=True,
                )
                next_progress = time.monotonic() + 10
            if not any(p.is_alive() for p in posters) and done == len(jobs) == args.jobs:
                break
        stop.set()
        for thread in [*posters, watcher]:
            thread.join(timeout=30)
        with lock:
            accepted_jobs = dict(jobs)
        report = verify(
            args,
            stack,
            dynamodb,
            table,
            accepted_jobs,
            workdir,
            kills,
            max_running,
            max_slots,
            time.monotonic() - started,
        )
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.terminate()
        stack.workers = list(workers.values())
        stack.stop()
    out = ROOT / "bench" / "soak.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"\nsoak: {'PASS' if report['passed'] else 'FAIL'} — written to {out}")
    return 0 if report["passed"] else 1


def verify(
    args: argparse.Namespace,
    stack: LocalStack,
    dynamodb: Any,
    table: str,
    jobs: dict[str, dict[str, Any]],
    workdir: Path,
    kills: int,
    max_running: Counter[str],
    max_slots: Counter[str],
    seconds: float,
) -> dict[str, Any]:
    """From the table and the workers' logs: at rest, none lost, one visible result each."""
    states: Counter[str] = Counter()
    twice_in_table = []
    missing = []
    for job_id in jobs:
        item = dynamodb.get_item(
            TableName=table,
            Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            missing.append(job_id)
            continue
        states[item["state"]["S"]] += 1
        history = item.get("history", {}).get("L", [])
        succeeded = sum(1 for e in history if e["M"].get("ev", {}).get("S") == "succeeded")
        if succeeded > 1:
            twice_in_table.append(job_id)
    logged: Counter[str] = Counter()
    for log in workdir.glob("worker-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"message":"succeeded"' in line.replace(" ", ""):
                try:
                    logged[json.loads(line)["job_id"]] += 1
                except (ValueError, KeyError):
                    continue
    twice_in_logs = sorted(job for job, count in logged.items() if count > 1)
    latencies = sorted(info["done"] - info["accepted"] for info in jobs.values() if info["done"])
    at_rest = sum(count for state, count in states.items() if state in AT_REST)
    limit = int(stack.info.functions["WorkerFunction"].environment["USER_CONCURRENCY_LIMIT"])
    succeeded = states.get("succeeded", 0)
    report = {
        "environment": "local stack (moto server on this machine), not AWS",
        "jobs_asked": args.jobs,
        "jobs": len(jobs),
        "kills": kills,
        "workers": args.workers,
        "faults": args.faults,
        "seconds": round(seconds, 1),
        "states": dict(states),
        "lost": len(missing),
        "not_at_rest": len(jobs) - at_rest - len(missing),
        "duplicate_results_in_table": len(twice_in_table),
        "duplicate_results_in_logs": len(twice_in_logs),
        "per_user_limit": limit,
        "max_running_per_user_seen": dict(max_running),
        "max_slots_taken_per_user_seen": dict(max_slots),
        "throughput_jobs_per_second": round(succeeded / seconds, 2) if seconds else 0,
        "latency_seconds": {
            "p50": round(statistics.quantiles(latencies, n=100)[49], 2)
            if len(latencies) > 2
            else None,
            "p95": round(statistics.quantiles(latencies, n=100)[94], 2)
            if len(latencies) > 2
            else None,
            "p99": round(statistics.quantiles(latencies, n=100)[98], 2)
            if len(latencies) > 2
            else None,
        },
    }
    report["passed"] = (
        len(jobs) == args.jobs
        and not missing
        and report["not_at_rest"] == 0
        and not twice_in_table
        and not twice_in_logs
        and all(count <= limit for count in max_running.values())
        and all(count <= limit for count in max_slots.values())
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--posters", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=4.0, help="seconds between kills")
    parser.add_argument("--faults", default=FAULTS)
    parser.add_argument("--title-share", type=float, default=0.25)
    parser.add_argument("--cancel-share", type=float, default=0.05)
    parser.add_argument("--poll-batch", type=int, default=60)
    parser.add_argument("--max-seconds", type=float, default=1200)
    parser.add_argument("--seed", type=int, default=7)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
