"""`make mutants`: break each guarantee the engine rests on, once, in a temporary copy of the
repository, run the suite against it, and print which mutants the suite killed. Every mutant
must be killed: a guarantee whose breaking no test notices is not tested.

Each mutation names the exact text it replaces; if that text is not found exactly once (the
code moved on), the script fails loudly instead of reporting a mutant that was never made."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    also: tuple[tuple[str, str, str], ...] = ()
    """More (path, old, new) edits that belong to the same mutant."""

    def edits(self) -> list[tuple[str, str, str]]:
        return [(self.path, self.old, self.new), *self.also]


MUTANTS = [
    Mutant(
        "drop `epoch` from the worker fence",
        "src/leasehold/store/guards.py",
        "f\"{expr.name('epoch')} = {expr.value(job.epoch)}\"\n        f\" AND {expr.name('state')}",
        "f\"{expr.name('state')}",
    ),
    Mutant(
        "drop `state` from the worker fence",
        "src/leasehold/store/guards.py",
        "f\" AND {expr.name('state')} = {expr.value(JobState.RUNNING.value)}\"\n        f\" AND {expr.name('lease_expires_at')} > {now_v}\"",
        "f\" AND {expr.name('lease_expires_at')} > {now_v}\"",
    ),
    Mutant(
        "drop the lease-expiry check from the worker fence",
        "src/leasehold/store/guards.py",
        "f\" AND {expr.name('lease_expires_at')} > {now_v}\"\n    )",
        '"")',
    ),
    Mutant(
        "let a claim take a live lease",
        "src/leasehold/store/leases.py",
        'f" OR ({state} = {running} AND {lease} < {now_v} AND {deadline} > {now_v}"',
        'f" OR ({state} = {running} AND {deadline} > {now_v}"',
    ),
    Mutant(
        "skip the per-user check",
        "src/leasehold/store/slots.py",
        'f" OR {count} < {expr.value(self.limit)})"',
        'f" OR {count} > {expr.value(-1)})"',
    ),
    Mutant(
        "erase the effect intent on cancel",
        "src/leasehold/service/worker.py",
        'if attempt.job.effect_intent:\n                return self._outcomes.uncertain(attempt, "a cancel interrupted the effect step")',
        "if False:\n                pass",
        also=(
            (
                "src/leasehold/store/leases.py",
                "        if settle_effect:\n",
                "        if settle_effect or target is JobState.CANCELLED:\n",
            ),
        ),
    ),
    Mutant(
        "acknowledge before the outcome is saved",
        "src/leasehold/service/worker.py",
        'return WakeupResult(Disposition.KEEP, "store_unavailable")\n\n    def _run_steps',
        'return WakeupResult(Disposition.ACK, "store_unavailable")\n\n    def _run_steps',
    ),
    Mutant(
        "the local journal skips UpdateItem",
        "src/leasehold_dev/local/moto/durable.py",
        'if operation in WRITES and held.status.startswith("200"):',
        'if operation in WRITES - {"UpdateItem"} and held.status.startswith("200"):',
    ),
    Mutant(
        "the local stack answers before its journal is synced",
        "src/leasehold_dev/local/moto/durable.py",
        "self._item_changes(operation, json.loads(body)))\n            self.journal.wait_durable(sequence)",
        "self._item_changes(operation, json.loads(body)))",
    ),
]


def _copy(destination: Path) -> None:
    """Every file git tracks (as it is in the working tree): the tests read the template, the
    OpenAPI document, the bench and the samples, so a partial copy would fail for the wrong
    reason and count as a kill."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def _collects(copy: Path) -> tuple[bool, str]:
    """The unmutated copy must collect every test cleanly: a kill means a test failed, never
    that the copy could not be imported."""
    env = {**os.environ, "PYTHONPATH": str(copy / "src") + os.pathsep + str(copy)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.returncode == 0, done.stdout.strip().splitlines()[-1] if done.stdout else ""


def _apply(copy: Path, mutant: Mutant) -> None:
    for path, old, new in mutant.edits():
        target = copy / path
        text = target.read_text()
        found = text.count(old)
        if found != 1:
            raise SystemExit(
                f"mutant {mutant.name!r}: its text occurs {found} times in {path} "
                "(expected exactly once) — the code moved; update scripts/mutants.py"
            )
        target.write_text(text.replace(old, new))


def _run(copy: Path, tests: list[str], timeout: int, workers: int) -> tuple[bool, str, float]:
    """(killed, what failed, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(copy / "src") + os.pathsep + str(copy)}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
             "-W", "ignore", *(["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []),
             *tests],
            cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return True, "timed out (counted as killed: the suite hung)", time.monotonic() - started
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    if done.returncode == 0:
        return False, done.stdout.strip()[-110:], time.monotonic() - started
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    # pytest's 1 is "tests failed"; xdist stopping at the first failure says 2 ("interrupted")
    # with the failures listed. Anything else — collection errors, a usage error, nothing
    # collected — says the run broke, which proves nothing about the mutant.
    stopped_at_failure = done.returncode == 2 and "Interrupted: stopping after" in done.stdout
    if (
        not failed
        or re.search(r"\d+ errors?\b", summary)
        or not (done.returncode == 1 or stopped_at_failure)
    ):
        raise SystemExit(f"the run broke (pytest exit {done.returncode}): {done.stdout[-400:]}")
    return True, failed[0].removeprefix("FAILED ")[:110], time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", nargs="*", default=["tests/unit", "tests/integration"])
    parser.add_argument("--only", help="run only mutants whose name contains this")
    parser.add_argument("--timeout", type=int, default=1500)
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (1: serial)")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if not args.only or args.only in m.name]
    rows = []
    with tempfile.TemporaryDirectory(prefix="leasehold-mutants-") as tmp:
        baseline = Path(tmp) / "baseline"
        baseline.mkdir()
        _copy(baseline)
        clean, collected = _collects(baseline)
        print(f"baseline (unmutated copy) collects: {collected}", flush=True)
        if not clean:
            raise SystemExit("the unmutated copy does not collect cleanly; no mutant can count")
        for mutant in mutants:
            copy = Path(tmp) / f"m{len(rows)}"
            copy.mkdir()
            _copy(copy)
            _apply(copy, mutant)
            print(f"mutant: {mutant.name} …", flush=True)
            killed, what, seconds = _run(copy, args.tests, args.timeout, args.workers)
            rows.append((mutant.name, killed, what, seconds))
            print(
                f"  {'killed' if killed else 'SURVIVED'} in {seconds:.0f} s by {what}", flush=True
            )
            shutil.rmtree(copy)
    width = max(len(name) for name, *_ in rows)
    print(f"\n{'mutant'.ljust(width)} | result   | seconds | first failing test")
    print(f"{'-' * width}-|----------|---------|-------------------")
    for name, killed, what, seconds in rows:
        print(
            f"{name.ljust(width)} | {'killed' if killed else 'SURVIVED':8} | {seconds:7.0f} | {what}"
        )
    survived = [name for name, killed, *_ in rows if not killed]
    print(f"\n{len(rows) - len(survived)} of {len(rows)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
