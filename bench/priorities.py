"""Priorities on the embedded local stack (moto, local pumps, worker processes; not AWS): how long
20 high-priority jobs wait behind a backlog of 1,000 normal ones, against the same 20 submitted
as normal (what one queue gives every job), and how long 20 low-priority jobs wait meanwhile.

Each run: `leasehold local up --workers 0 --in-memory`, the backlog submitted (nothing runs:
no worker yet), then the workers started and, while the backlog drains, one tagged job of each
kind submitted every `--spacing` seconds. A job's wait is accept → finished, from its view's
`created_at` and `updated_at` (the tagged jobs' step does no work, so that is the wait to be
claimed plus one short step). Writes bench/priorities.json.

    python bench/priorities.py [--backlog 1000] [--tagged 20] [--workers 2]"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_local import StackProcess, api_client, percentile  # noqa: E402

BACKLOG_JOB = {"steps": [{"name": "work", "duration_ms": 40}]}
TAGGED_JOB = {"steps": [{"name": "quick"}]}
BACKLOG_USERS = ("alice", "bob")
TAGGED_USER = "carol"  # another user: the per-user limit never holds a tagged job back
PARAMETERS = {"LostWakeupGraceSeconds": "120"}
"""The deployed default, not the local stack's 5 s: a backlog that waits longer than the grace
gets its wake-ups re-sent by the sweeper (by design), which here would only add load to both
runs alike."""


def _at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _submit_backlog(url: str, count: int) -> list[str]:
    ids: list[list[str]] = [[] for _ in BACKLOG_USERS]
    errors: list[BaseException] = []

    def post(index: int, share: int) -> None:
        client = api_client(url, BACKLOG_USERS[index])
        try:
            for _ in range(share):
                ids[index].append(client.submit("synthetic", BACKLOG_JOB).job_id)
        except Exception as exc:  # reported below: the run is void
            errors.append(exc)

    shares = [count // 2 + count % 2, count // 2]
    threads = [threading.Thread(target=post, args=(i, shares[i])) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=1800)
    if errors:
        raise RuntimeError(f"submitting the backlog failed: {errors[0]!r}")
    return ids[0] + ids[1]


def _workers(state: Path, count: int, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    started = []
    for n in range(1, count + 1):
        with (log_dir / f"worker-{n}.log").open("wb") as log:
            command = [sys.executable, "-m", "leasehold_dev.cli", "local", "worker"]
            started.append(
                subprocess.Popen(
                    [*command, "--state", str(state), "--name", f"bench-w{n}"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return started


def _summary(waits: list[float]) -> dict[str, Any]:
    return {
        "jobs": len(waits),
        "p50_s": round(percentile(waits, 0.50), 3),
        "p95_s": round(percentile(waits, 0.95), 3),
        "max_s": round(max(waits), 3),
    }


def run_once(args: argparse.Namespace, tagged_as: str, workdir: Path) -> dict[str, Any]:
    """One stack: the backlog, then `tagged` jobs submitted as `tagged_as` (and as many low
    ones when it is high) while it drains. Returns each group's waits."""
    stack = StackProcess(
        workdir, workers=0, data=None, name=f"stack-{tagged_as}", parameters=PARAMETERS
    )
    workers: list[subprocess.Popen[bytes]] = []
    try:
        started = time.monotonic()
        backlog = _submit_backlog(stack.url, args.backlog)
        submit_seconds = time.monotonic() - started
        workers = _workers(workdir / f"stack-{tagged_as}.json", args.workers, workdir)
        carol = api_client(stack.url, TAGGED_USER)
        tagged: list[str] = []
        low: list[str] = []
        time.sleep(args.spacing)  # the workers are draining the backlog
        for _ in range(args.tagged):
            tagged.append(carol.submit("synthetic", TAGGED_JOB, priority=tagged_as).job_id)
            if tagged_as == "high":
                low.append(carol.submit("synthetic", TAGGED_JOB, priority="low").job_id)
            time.sleep(args.spacing)
        deadline = time.monotonic() + args.timeout
        views: dict[str, dict[str, Any]] = {}
        # _submit_backlog returns alice's share, then bob's: each job is read as its owner
        owners = dict.fromkeys(backlog[: (args.backlog + 1) // 2], BACKLOG_USERS[0])
        owners |= dict.fromkeys(backlog[(args.backlog + 1) // 2 :], BACKLOG_USERS[1])
        readers = {user: api_client(stack.url, user) for user in (*BACKLOG_USERS, TAGGED_USER)}

        def settled(job_id: str) -> bool:
            view = readers[owners.get(job_id, TAGGED_USER)].get(job_id)
            if view["state"] in {"succeeded", "failed", "dead", "cancelled", "unknown"}:
                views[job_id] = view
                return True
            return False

        # Light polling, so the measurement does not slow the workers: the tagged jobs (a few
        # requests a second), then the backlog's oldest unfinished job, one request at a time.
        pending_ids = tagged + low
        while pending_ids and time.monotonic() < deadline:
            pending_ids = [job_id for job_id in pending_ids if not settled(job_id)]
            if pending_ids:
                time.sleep(0.5)
        oldest = 0
        while oldest < len(backlog) and time.monotonic() < deadline:
            if settled(backlog[oldest]):
                oldest += 1
            else:
                time.sleep(0.5)
        missing = [j for j in tagged + low + backlog if j not in views and not settled(j)]
        if missing:
            raise RuntimeError(f"{len(missing)} jobs did not finish in {args.timeout} s")
        drained = max(_at(views[j]["updated_at"]) for j in backlog)
        first_start = min(_at(views[j]["created_at"]) for j in backlog)

        def waits(ids: list[str]) -> list[float]:
            return [_at(views[j]["updated_at"]) - _at(views[j]["created_at"]) for j in ids]

        tagged_ends = [_at(views[j]["updated_at"]) for j in tagged + low]
        result: dict[str, Any] = {
            "tagged_as": tagged_as,
            "backlog_submit_seconds": round(submit_seconds, 1),
            "backlog_drain_seconds": round(drained - first_start, 1),
            "tagged": _summary(waits(tagged)),
            "normal_backlog": _summary(waits(backlog)),
            "all_tagged_done_before_backlog_drained": max(tagged_ends) < drained,
            "states": sorted({v["state"] for v in views.values()}),
        }
        if low:
            result["low"] = _summary(waits(low))
        return result
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--tagged", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--spacing", type=float, default=1.0, help="seconds between tagged jobs")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, default=HERE / "priorities.json")
    args = parser.parse_args(argv)
    if not (1 <= args.backlog <= 10_000 and 1 <= args.tagged <= 200 and 1 <= args.workers <= 8):
        parser.error("--backlog 1–10000, --tagged 1–200, --workers 1–8")
    with tempfile.TemporaryDirectory(prefix="leasehold-priorities-") as tmp:
        runs = {}
        for tagged_as in ("high", "normal"):
            workdir = Path(tmp) / tagged_as
            workdir.mkdir()
            print(f"run: {args.tagged} jobs as {tagged_as} behind {args.backlog}", flush=True)
            runs[tagged_as] = run_once(args, tagged_as, workdir)
            print(json.dumps(runs[tagged_as], indent=2), flush=True)
    high, one_queue = runs["high"]["tagged"], runs["normal"]["tagged"]
    doc = {
        "what": "embedded local stack (moto server, local pumps, worker processes) - not AWS",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {
            "parameters": PARAMETERS,
            "backlog": args.backlog,
            "tagged": args.tagged,
            "workers": args.workers,
            "spacing_seconds": args.spacing,
            "backlog_step_ms": BACKLOG_JOB["steps"][0]["duration_ms"],
        },
        "mechanism": "a queue and an event source mapping per priority (decision F4)",
        "runs": runs,
        "target": {
            "high_p50_under_s": 2.0,
            "high_p50_s": high["p50_s"],
            "met": high["p50_s"] < 2.0,
            "one_queue_p50_over_high_p50": round(one_queue["p50_s"] / max(high["p50_s"], 1e-3), 1),
        },
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}: high p50 {high['p50_s']} s (one queue: {one_queue['p50_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
