"""Local throughput benchmark (`make bench-local`): 1-step synthetic jobs over HTTP against the
embedded local stack (`leasehold local up`, moto) with worker processes, submitted by a couple of
concurrent clients that poll `GET /jobs/{id}` (arch §8), measured in windows as the table
grows; the accept → succeeded latency of single jobs on an idle stack; and the in-process cost of
a 2-item transaction against a PutItem as the table grows, with and without
leasehold_dev.local.moto.transactions. The stack keeps its state in a data directory of the
benchmark's own (decision L15); the same run first times an `--in-memory` stack over
`--compare-jobs` jobs, and ends by killing the stack's process group with `--restart-jobs` jobs in
its data directory and timing the restart. Every figure is the local stack or moto on this
machine — nothing here is an AWS measurement."""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from leasehold.client import ApiError, Client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # transaction_cost.py, beside this file

from local_report import markdown  # noqa: E402
from titles import measure_titles  # noqa: E402
from transaction_cost import measure_transactions  # noqa: E402

ROOT = HERE.parent
JOB = {"kind": "synthetic", "payload": {"steps": [{"name": "s"}]}}
USERS = ("alice", "bob")  # the posters: each its own user, so each has its own per-user slots
TERMINAL = {"succeeded", "failed", "cancelled", "dead", "unknown"}


class BenchError(RuntimeError):
    """The benchmark could not run as asked (the stack did not start, a request was refused)."""


# ---------------------------------------------------------------- the stack and its clients


class StackProcess:
    """`leasehold local up --port 0` in its own process (its own interpreter lock, as a user
    would run it), its output in a log file; stopped with SIGTERM, then killed if it hangs."""

    def __init__(
        self,
        workdir: Path,
        workers: int,
        data: Path | None,
        name: str = "stack",
        parameters: dict[str, str] | None = None,
    ) -> None:
        """`data`: the data directory (`--data`); None: `--in-memory`. In a process group of
        its own (with its moto server and workers), so `kill_group` ends all of it at once."""
        self.log = workdir / f"{name}.log"
        command = [sys.executable, "-m", "leasehold_dev.cli", "local", "up", "--port", "0"]
        command += ["--workers", str(workers), "--state", str(workdir / f"{name}.json")]
        command += ["--template", str(ROOT / "template.yaml")]
        command += ["--data", str(data)] if data is not None else ["--in-memory"]
        for key, value in (parameters or {}).items():
            command += ["--parameter", f"{key}={value}"]
        started = time.monotonic()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self.url = self._wait_ready(timeout=120)
        self.ready_seconds = time.monotonic() - started
        """From the start of `local up` until its ready line was seen (polled every 0.05 s)."""

    def restored_line(self) -> str:
        """What `local up` said it restored (the line, stripped), or ""."""
        for line in self.log.read_text(errors="replace").splitlines():
            if "restored " in line or "nothing to restore" in line:
                return line.strip()
        return ""

    def kill_group(self) -> None:
        """SIGKILL `local up`, its moto server and its workers at once (kill -9 -PGID)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=20)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if "ready at " in line:
                    return line.split("ready at ")[1].split()[0]
            if self.process.poll() is not None:
                raise BenchError(f"the local stack exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        self.stop()
        raise BenchError("the local stack did not become ready in time")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by the stack process (gateway, API, relay, sweeper), by its
        moto server process and, together, by its workers."""
        tick = os.sysconf("SC_CLK_TCK")

        def used(pid: int) -> float:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return 0.0
            return (int(fields[11]) + int(fields[12])) / tick

        def is_moto(pid: int) -> bool:
            try:
                return (
                    b"leasehold_dev.local.moto.process" in Path(f"/proc/{pid}/cmdline").read_bytes()
                )
            except OSError:
                return False

        children: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            try:
                children += [int(pid) for pid in task.read_text().split()]
            except OSError:  # the thread ended between the listing and the read
                continue
        moto = [pid for pid in children if is_moto(pid)]
        return {
            "stack": used(self.process.pid),
            "moto": sum(used(pid) for pid in moto),
            "workers": sum(used(pid) for pid in children if pid not in moto),
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def api_client(url: str, user: str) -> Client:
    """A leasehold.client.Client of its own (its own keep-alive connection pool), as an ordinary
    program keeps one; a read that loses its connection is tried again, a submission is not."""
    return Client(url, user=user, timeout=60, retries=2)


def submit(client: Client) -> tuple[str, float]:
    """POST /jobs (the one-step job) → its id and when the 202 arrived (the client's clock)."""
    try:
        handle = client.submit(JOB["kind"], JOB["payload"])
    except ApiError as error:
        raise BenchError(f"POST /jobs answered {error}") from error
    return handle.job_id, time.time()


def view_of(client: Client, job_id: str) -> dict[str, Any]:
    try:
        return client.get(job_id)
    except ApiError as error:
        raise BenchError(f"GET /jobs/{job_id} answered {error}") from error


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@dataclass(frozen=True)
class Completion:
    job_id: str
    state: str
    created_at: float  # the job's own clock: set by the API as it accepted the job
    updated_at: float  # ... and as the worker saved the outcome
    accepted_seen: float  # the client's clock: 202 received
    outcome_seen: float  # ... first GET that showed a terminal state

    @property
    def latency(self) -> float:
        return self.updated_at - self.created_at


def _completion(job_id: str, view: dict[str, Any], accepted: float) -> Completion:
    return Completion(
        job_id=job_id,
        state=view["state"],
        created_at=_epoch(view["created_at"]),
        updated_at=_epoch(view["updated_at"]),
        accepted_seen=accepted,
        outcome_seen=time.time(),
    )


# ---------------------------------------------------------------- measurements


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def measure_idle(url: str, jobs: int, poll_seconds: float = 0.01) -> dict[str, Any]:
    """Single jobs one at a time on an otherwise idle stack, polled closely."""
    client = api_client(url, USERS[0])
    done: list[Completion] = []
    for _ in range(jobs):
        time.sleep(0.5)  # let the stack settle: nothing in flight
        job_id, accepted = submit(client)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            view = view_of(client, job_id)
            if view["state"] in TERMINAL:
                done.append(_completion(job_id, view, accepted))
                break
            time.sleep(poll_seconds)
        else:
            raise BenchError(f"idle job {job_id} did not finish in 30 s")
    latencies = [c.latency for c in done]
    seen = [c.outcome_seen - c.accepted_seen for c in done]
    return {
        "jobs": jobs,
        "succeeded": sum(c.state == "succeeded" for c in done),
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "client_seen_p50_s": round(statistics.median(seen), 3),
        "poll_seconds": poll_seconds,
    }


class Poster:
    """A client with two connections, as an application that submits from one place and watches
    from another: a submitting thread keeps up to `in_flight` of its jobs outstanding, and a
    polling thread polls each outstanding job every `poll_seconds`, oldest due first. (One
    thread doing both made the instrument the bottleneck: while it waited on a GET no job was
    submitted, and a finished job waited to be seen before its successor was posted.)"""

    def __init__(
        self, url: str, user: str, quota: int, in_flight: int, poll_seconds: float, stop_at: float
    ) -> None:
        self.submitter = api_client(url, user)
        self.poller = api_client(url, user)
        self.quota, self.in_flight, self.poll_seconds = quota, in_flight, poll_seconds
        self.stop_at = stop_at
        self.done: list[Completion] = []
        self.submitted = 0
        self.error: BaseException | None = None
        self._outstanding: dict[str, tuple[float, float]] = {}  # job id → (accepted, next poll)
        self._changed = threading.Condition()
        self._threads = [
            threading.Thread(target=self._guarded, args=(self._submit,), daemon=True),
            threading.Thread(target=self._guarded, args=(self._poll,), daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def is_alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def _guarded(self, work: Any) -> None:
        try:
            work()
        except (BenchError, OSError, ValueError) as exc:
            with self._changed:
                self.error = self.error or exc
                self._changed.notify_all()

    def _submitting(self) -> bool:
        return self.submitted < self.quota and time.monotonic() < self.stop_at

    def _submit(self) -> None:
        while self._submitting():
            with self._changed:
                while len(self._outstanding) >= self.in_flight and self.error is None:
                    self._changed.wait(timeout=1.0)
                    if time.monotonic() >= self.stop_at:
                        break
                if self.error is not None or time.monotonic() >= self.stop_at:
                    break
            job_id, accepted = submit(self.submitter)
            with self._changed:
                self._outstanding[job_id] = (accepted, time.monotonic() + self.poll_seconds)
                self.submitted += 1
                self._changed.notify_all()
        with self._changed:
            self.quota = self.submitted  # nothing more is coming: the poller may finish
            self._changed.notify_all()

    def _poll(self) -> None:
        drain_until = self.stop_at + 60
        while True:
            with self._changed:
                while not self._outstanding and self.error is None and self._submitting():
                    self._changed.wait(timeout=1.0)
                if (
                    self.error is not None
                    or not self._outstanding
                    or (time.monotonic() > drain_until)
                ):
                    if not self._outstanding and self._submitting() and self.error is None:
                        continue
                    return
                job_id, (accepted, due) = min(self._outstanding.items(), key=lambda kv: kv[1][1])
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            view = view_of(self.poller, job_id)
            with self._changed:
                if view["state"] in TERMINAL:
                    self.done.append(_completion(job_id, view, accepted))
                    del self._outstanding[job_id]
                    self._changed.notify_all()
                else:
                    self._outstanding[job_id] = (accepted, time.monotonic() + self.poll_seconds)


def measure_throughput(
    stack: StackProcess,
    *,
    jobs: int,
    window: int,
    in_flight: int,
    poll_seconds: float,
    max_seconds: float,
) -> dict[str, Any]:
    """Jobs that reach succeeded per second, in windows of `window` completions."""
    stop_at = time.monotonic() + max_seconds
    posters = [
        Poster(
            stack.url,
            user,
            jobs // len(USERS) + (i < jobs % len(USERS)),
            in_flight,
            poll_seconds,
            stop_at,
        )
        for i, user in enumerate(USERS)
    ]
    cpu_marks: list[tuple[float, dict[str, float]]] = [(time.time(), stack.cpu_seconds())]
    started = time.time()
    for poster in posters:
        poster.start()
    while any(p.is_alive() for p in posters):
        time.sleep(1)
        cpu_marks.append((time.time(), stack.cpu_seconds()))
    errors = [repr(p.error) for p in posters if p.error]
    done = sorted((c for p in posters for c in p.done), key=lambda c: c.updated_at)
    succeeded = [c for c in done if c.state == "succeeded"]
    windows = []
    previous_end = min((c.created_at for c in done), default=started)
    for start in range(0, len(succeeded), window):
        chunk = succeeded[start : start + window]
        end = chunk[-1].updated_at
        seconds = max(end - previous_end, 1e-9)
        windows.append(
            {
                "jobs": f"{start + 1}-{start + len(chunk)}",
                "seconds": round(seconds, 2),
                "jobs_per_s": round(len(chunk) / seconds, 2),
                "p50_s": round(statistics.median(c.latency for c in chunk), 3),
                "p95_s": round(percentile([c.latency for c in chunk], 0.95), 3),
                "client_seen_p50_s": round(
                    statistics.median(c.outcome_seen - c.accepted_seen for c in chunk), 3
                ),
                **_cpu_share(cpu_marks, previous_end, end, len(chunk)),
            }
        )
        previous_end = end
    elapsed = (succeeded[-1].updated_at - succeeded[0].created_at) if succeeded else 0.0
    return {
        "jobs_asked": jobs,
        "submitted": sum(p.submitted for p in posters),
        "succeeded": len(succeeded),
        "other_outcomes": len(done) - len(succeeded),
        "stopped_by_time_limit": time.monotonic() >= stop_at,
        "errors": errors,
        "seconds": round(elapsed, 1),
        "jobs_per_s": round(len(succeeded) / elapsed, 2) if elapsed else 0.0,
        "clients": len(posters),
        "in_flight_per_client": in_flight,
        "poll_seconds": poll_seconds,
        "windows": windows,
    }


def _cpu_share(
    marks: list[tuple[float, dict[str, float]]], start: float, end: float, jobs: int
) -> dict[str, Any]:
    """Between two wall times: the share of one core the stack process, its moto server process
    and the workers used, and their CPU milliseconds per job (the figure that does not depend on
    the machine's load)."""
    before = max((m for m in marks if m[0] <= start), default=marks[0], key=lambda m: m[0])
    after = min((m for m in marks if m[0] >= end), default=marks[-1], key=lambda m: m[0])
    span = max(after[0] - before[0], 1e-9)
    used = {part: after[1][part] - before[1][part] for part in ("stack", "moto", "workers")}
    return {
        **{f"{part}_cpu": round(seconds / span, 2) for part, seconds in used.items()},
        **{f"{part}_cpu_ms_per_job": round(s * 1000 / jobs, 1) for part, s in used.items()},
    }


def _throughput(stack: StackProcess, args: argparse.Namespace, jobs: int) -> dict[str, Any]:
    return measure_throughput(
        stack,
        jobs=jobs,
        window=args.window,
        in_flight=args.in_flight,
        poll_seconds=args.poll,
        max_seconds=args.max_seconds,
    )


def journal_cost(results: dict[str, Any], jobs: int) -> dict[str, Any]:
    """The in-memory run against the journaled run's first `jobs` completions (the same table
    sizes, minutes apart on the same machine)."""
    memory = results["in_memory"]
    journaled = results["throughput"]
    first = [w for w in journaled["windows"] if int(w["jobs"].split("-")[1]) <= jobs]
    seconds = sum(w["seconds"] for w in first)
    done = sum(int(w["jobs"].split("-")[1]) - int(w["jobs"].split("-")[0]) + 1 for w in first)
    rate = round(done / seconds, 2) if seconds else 0.0
    moto = [w["moto_cpu_ms_per_job"] for w in first]
    return {
        "jobs": done,
        "in_memory_jobs_per_s": memory["jobs_per_s"],
        "journaled_jobs_per_s": rate,
        "ratio": round(rate / memory["jobs_per_s"], 3) if memory["jobs_per_s"] else None,
        "in_memory_moto_ms_per_job": round(
            statistics.mean(w["moto_cpu_ms_per_job"] for w in memory["windows"]), 1
        ),
        "journaled_moto_ms_per_job": round(statistics.mean(moto), 1) if moto else None,
    }


def submit_only(url: str, count: int, clients: int = 2) -> float:
    """`count` more jobs accepted (not waited for), from `clients` connections; seconds taken."""
    started = time.monotonic()
    errors: list[BaseException] = []

    def post(share: int, user: str) -> None:
        client = api_client(url, user)
        try:
            for _ in range(share):
                submit(client)
        except (BenchError, ApiError, OSError) as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=post, args=(count // clients + (i < count % clients), user))
        for i, user in enumerate(USERS[:clients])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=3600)
    if errors:
        raise BenchError(f"submitting the restart's jobs failed: {errors[0]!r}")
    return time.monotonic() - started


def measure_restart(
    stack: StackProcess, args: argparse.Namespace, workdir: Path, data: Path
) -> dict[str, Any]:
    """With `args.restart_jobs` jobs in the data directory (the throughput run's, topped up by
    submissions, the last of them still in flight): SIGKILL the stack's whole process group and
    time a restart until its ready line (the journal replayed, then compacted), then stop it with
    SIGTERM and time a start from the snapshot alone."""
    extra = max(0, args.restart_jobs - args.jobs)
    print(f"restart: {extra} more jobs submitted, then kill -9 of the group", flush=True)
    topped = submit_only(stack.url, extra) if extra else 0.0
    submitted = args.jobs + extra
    stack.kill_group()
    journal = sum(p.stat().st_size for p in data.glob("journal-*.log"))
    snapshot = (data / "snapshot.jsonl").stat().st_size if (data / "snapshot.jsonl").exists() else 0
    after_kill = StackProcess(workdir, args.workers, data, name="after-kill")
    killed = {"ready_s": round(after_kill.ready_seconds, 2), "said": after_kill.restored_line()}
    after_kill.stop()
    after_stop = StackProcess(workdir, args.workers, data, name="after-stop")
    return {
        "jobs_in_data": submitted + args.idle_jobs + 2 * args.title_bookmarks,
        "topped_up_jobs": extra,
        "topped_up_seconds": round(topped, 1),
        "journal_bytes_at_kill": journal,
        "snapshot_bytes_at_kill": snapshot,
        "after_sigkill": killed,
        "after_sigterm": {
            "ready_s": round(after_stop.ready_seconds, 2),
            "said": after_stop.restored_line(),
        },
        "stack": after_stop,
    }


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a list of sizes: {text}") from exc
    if any(size < 0 or size > 200_000 for size in sizes):
        raise argparse.ArgumentTypeError("sizes must be between 0 and 200000")
    return sizes


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs", type=int, default=10_000, help="jobs for the throughput run (0: none)"
    )
    parser.add_argument("--window", type=_positive, default=1_000, help="completions per window")
    parser.add_argument("--workers", type=_positive, default=2)
    parser.add_argument(
        "--in-flight", type=_positive, default=10, help="outstanding jobs per client"
    )
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between polls of a job")
    parser.add_argument(
        "--max-seconds", type=float, default=2700, help="bound on the throughput run"
    )
    parser.add_argument(
        "--compare-jobs",
        type=int,
        default=2_000,
        help="jobs on an --in-memory stack first, against the journaled run's first as many "
        "(0: no comparison)",
    )
    parser.add_argument(
        "--restart-jobs",
        type=int,
        default=10_000,
        help="jobs in the data directory when the restart is timed: the throughput run's, "
        "topped up by submissions (0: no restart)",
    )
    parser.add_argument("--idle-jobs", type=int, default=20)
    parser.add_argument("--title-bookmarks", type=int, default=20)
    parser.add_argument("--tx-sizes", type=_sizes, default=[1_000, 10_000, 50_000])
    parser.add_argument("--unpatched-sizes", type=_sizes, default=[1_000, 10_000])
    parser.add_argument("--tx-repeats", type=_positive, default=40)
    parser.add_argument("--skip-stack", action="store_true", help="only the in-process figures")
    parser.add_argument("--skip-transactions", action="store_true", help="only the stack figures")
    parser.add_argument("--out", type=Path, default=HERE / "local.json")
    args = parser.parse_args(argv)
    if not 0.01 <= args.poll <= 5 or not 1 <= args.max_seconds <= 7200:
        parser.error("--poll must be in [0.01, 5] and --max-seconds in [1, 7200]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, Any] = {
        "measured_on": "the embedded local stack (moto) on this machine; not AWS",
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_at_start": os.getloadavg(),
        },
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    if not args.skip_stack:
        with tempfile.TemporaryDirectory(prefix="leasehold-bench-") as workdir:
            if args.compare_jobs:
                print(f"in memory: {args.compare_jobs} jobs", flush=True)
                memory = StackProcess(Path(workdir), args.workers, None, name="in-memory")
                try:
                    results["in_memory"] = _throughput(memory, args, args.compare_jobs)
                finally:
                    memory.stop()
            data = Path(workdir) / "data"  # the benchmark's own, never the checkout's
            stack = StackProcess(Path(workdir), args.workers, data)
            try:
                print(
                    f"local stack at {stack.url}; idle latency ({args.idle_jobs} jobs)", flush=True
                )
                if args.idle_jobs:
                    results["idle"] = measure_idle(stack.url, args.idle_jobs)
                if args.title_bookmarks:
                    print(f"title latency ({args.title_bookmarks} bookmarks)", flush=True)
                    titles = api_client(stack.url, USERS[0])
                    results["titles"] = measure_titles(titles, args.title_bookmarks)
                if args.jobs:
                    print(f"throughput: {args.jobs} jobs, windows of {args.window}", flush=True)
                    results["throughput"] = run = _throughput(stack, args, args.jobs)
                    if run["errors"]:
                        tail = stack.log.read_text(errors="replace").splitlines()[-40:]
                        print("the stack's log ends:\n" + "\n".join(tail), file=sys.stderr)
                if args.restart_jobs:
                    results["restart"] = measure_restart(stack, args, Path(workdir), data)
                    stack = results["restart"].pop("stack")
            finally:
                stack.stop()
            if "in_memory" in results and "throughput" in results:
                results["journal_cost"] = journal_cost(results, args.compare_jobs)
    if not args.skip_transactions:
        print("in-process transaction cost", flush=True)
        results["transaction_cost"] = measure_transactions(
            args.tx_sizes, set(args.unpatched_sizes), args.tx_repeats
        )
    results["machine"]["load_average_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
