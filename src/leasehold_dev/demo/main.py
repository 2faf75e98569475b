"""`make demo`: everything leasehold is for, on the embedded local stack (moto), as stories in
time order and a table of acceptance checks. Tasks run at once in phases (a phase ends when its
last task does); a phase that kills workers runs apart from the ones that count them."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from leasehold_dev.demo import (
    agent,
    batches,
    debounce,
    delivery,
    effects,
    infrastructure,
    pausing,
    reading,
    synthetic,
    unique,
    workflows,
)
from leasehold_dev.demo.session import Session, Task
from leasehold_dev.demo.story import print_story
from leasehold_dev.local.runner import LocalStack
from leasehold_dev.local.stack import LOCAL_PARAMETERS

TaskRun = Callable[[Session, Task], None]
DEMO_PARAMETERS = {"WorkerBatchSize": "1"}
"""One message per worker at a time: a killed worker takes only the job it was killed for."""
PHASE_SECONDS = 120.0


@dataclass(frozen=True)
class Phase:
    title: str
    workers: int
    tasks: tuple[tuple[Task, TaskRun], ...]


def _t(key: str, title: str, run: TaskRun, *checks: str) -> tuple[Task, TaskRun]:
    return Task(key, title, checks or (key,)), run


def phases() -> list[Phase]:
    return [
        Phase(
            "phase 1: approval, budget, cancel, retry, dead, per-user limit, delays, a concurrency "
            "key, a rate, unique jobs, a schedule; the reading list; the agent; a duplicate "
            "delivery",
            4,
            (
                _t("T1", "approval", synthetic.t1_approval),
                _t("T2", "budget", synthetic.t2_budget),
                _t("T3", "cancel", synthetic.t3_cancel),
                _t("T4", "transient failure", synthetic.t4_transient),
                _t("T5", "attempts exhausted", synthetic.t5_dead),
                _t("T7", "per-user limit", synthetic.t7_limit),
                _t("D1", "delayed jobs", delivery.d1_delayed),
                _t("D2", "a concurrency key", delivery.d2_concurrency),
                _t("D3", "a rate limit", delivery.d3_rate),
                _t("DB1", "debounce", debounce.db1_debounce),
                _t("U1", "unique jobs", unique.u1_unique),
                _t("B1", "a batch with a bad item", batches.b1_batch),
                (
                    Task("S1", "a schedule is made (D4 checks it in phase 5)", ()),
                    delivery.d4_schedule_made,
                ),
                _t("R1", "a bookmark, saved twice, edited", reading.r1_basics, "R1", "R2", "R8"),
                _t("R3", "a page that never answers", reading.r3_dead_and_replay, "R3", "R4"),
                _t("A1", "a supplier document", agent.a1_prepared),
                _t("A2", "a planner that wants to send e-mail", agent.a2_refused),
                _t("F1", "a message delivered twice", infrastructure.f1_duplicate),
            ),
        ),
        Phase(
            "phase 2: workers killed mid-step, mid-effect, mid-fetch, mid-call; an edit mid-fetch",
            6,
            (
                _t("T9", "claimant killed", synthetic.t9_killed),
                _t("T6", "uncertain effect", synthetic.t6_uncertain),
                _t("R5", "a new URL while the title is fetched", reading.r5_edit_mid_fetch),
                _t("R7", "a worker killed mid-fetch", reading.r7_killed_mid_fetch),
                _t("E1", "a lost answer, idempotent provider", effects.e1_idempotent),
                _t("E2", "a lost answer, provider without lookup", effects.e2_unknown),
            ),
        ),
        Phase(
            "phase 3: a frozen claimant's late write; a delete mid-fetch; the agent resumed",
            5,
            (
                _t("T10", "late result", synthetic.t10_late),
                _t("R6", "a delete while the title is fetched", reading.r6_delete_mid_fetch),
                _t("A3", "the agent killed between tools", agent.a3_resumed),
            ),
        ),
        Phase(
            "phase 4: every worker replaced while a job waits",
            4,
            (_t("T8", "restart while paused", synthetic.t8_restart),),
        ),
        Phase(
            "phase 5: a high and a low job behind a backlog; the schedule made in phase 1",
            2,
            (
                _t("D5", "priorities", delivery.d5_priorities),
                _t("D4", "a schedule", delivery.d4_schedule),
            ),
        ),
        Phase(
            "phase 6: workflows: a fan-out and its join, a signal, a callback, a sleep; a kind paused",
            5,
            (
                _t("W1", "a fan-out", workflows.w1_fan_out),
                _t("W2", "a signal", workflows.w2_signal),
                _t("W3", "a callback", workflows.w3_callback),
                _t("W4", "a durable sleep", workflows.w4_sleep),
                _t("P1", "a kind paused and resumed", pausing.p1_pause),
            ),
        ),
        Phase(
            "phase 7: the table stops answering",
            4,
            (_t("F2", "an outage of the table", infrastructure.f2_outage, "F2", "F3"),),
        ),
    ]


def run_phase(session: Session, phase: Phase) -> None:
    session.say(f"— {phase.title}")
    session.ensure_workers(phase.workers)

    def run(task: Task, body: TaskRun) -> None:
        try:
            body(session, task)
        except Exception as failed:  # a task that breaks fails its checks; the others go on
            detail = "".join(traceback.format_exception_only(failed)).strip()
            for key in task.checks:
                if key not in session.checks:
                    session.check(task, key, task.title, f"the task stopped: {detail}", False)
        try:
            print_story(session, task)
        except Exception as failed:  # the story is for reading; a broken one is said, not fatal
            session.say(f"{task.key}: could not tell the story: {failed!r}")

    threads = [
        threading.Thread(target=run, args=pair, name=pair[0].key, daemon=True)
        for pair in phase.tasks
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + PHASE_SECONDS
    for thread in threads:
        thread.join(timeout=max(0.1, deadline - time.monotonic()))
    for (task, _), thread in zip(phase.tasks, threads, strict=True):
        if thread.is_alive():
            session.say(f"{task.key}: still running after {PHASE_SECONDS:.0f} s; counted as failed")


def report(session: Session, all_phases: list[Phase]) -> bool:
    """The table, in the order of the tasks; a check that was never reached is a failure."""
    order = [(task, key) for phase in all_phases for task, _ in phase.tasks for key in task.checks]
    rows = []
    for task, key in order:
        check = session.checks.get(key)
        if check is None:
            rows.append((key, task.title, "FAIL", "not reached"))
        else:
            rows.append((key, check.name, "PASS" if check.passed else "FAIL", check.observed))
    width = max(len(f"{key} {name}") for key, name, _, _ in rows)
    print("\nleasehold demo — local stack (moto); nothing here ran on AWS\n")
    print(f"{'check'.ljust(width)} | result | observed")
    print(f"{'-' * width}-|--------|---------")
    for key, name, result, observed in rows:
        print(f"{f'{key} {name}'.ljust(width)} | {result:6} | {observed}")
    passed = sum(result == "PASS" for _, _, result, _ in rows)
    failed = [(key, name, observed) for key, name, result, observed in rows if result != "PASS"]
    if failed:  # a long table scrolls away: the failures again, last, where a reader looks
        print("\nfailed:")
        for key, name, observed in failed:
            print(f"  {key} {name}: {observed}")
    print(f"\n{passed} passed, {len(rows) - passed} failed")
    return passed == len(rows)


DEMO_APPLICATIONS = (
    "leasehold_apps.synthetic",
    "leasehold_apps.reading_list",
    "leasehold_apps.doc_agent",
)
"""The applications the demo's checks exercise: a `--kinds` list must keep them."""
DEMO_KINDS = "leasehold_dev.demo.kinds"
"""The demo's own kind, always added."""


def run_demo(template: Path, port: int = 0, kinds: str | None = None) -> int:
    if kinds is not None:
        named = {part.strip() for part in kinds.split(",")}
        missing = [app for app in DEMO_APPLICATIONS if app not in named]
        if missing:
            print(
                f"leasehold demo: --kinds must keep the applications the demo exercises: "
                f"add {', '.join(missing)}",
                file=sys.stderr,
            )
            return 2
    workdir = Path(".leasehold/demo")
    workdir.mkdir(parents=True, exist_ok=True)
    for old in [*workdir.glob("*.log"), *workdir.glob("provider-*")]:
        old.unlink()
    # The demo's own kinds (a concurrency key, a rate: D2, D3) are registered beside the apps.
    stack_kinds = f"{kinds or ','.join(DEMO_APPLICATIONS)},{DEMO_KINDS}"
    # The demo's own data directory, new each run: it never reads or writes `make up`'s.
    data = Path(tempfile.mkdtemp(prefix="leasehold-demo-data-"))
    stack = LocalStack(
        template,
        port=port,
        state_path=workdir / "stack.json",
        handler_log=workdir / "functions.log",
        parameters=DEMO_PARAMETERS,
        kinds=stack_kinds,
        data_dir=data,
    )
    session: Session | None = None
    started = time.monotonic()
    ok = False
    try:
        stack.start()
        params = {**LOCAL_PARAMETERS, **DEMO_PARAMETERS}
        print(
            f"leasehold local stack (moto) ready at {stack.url}; function logs in {workdir}/\n"
            f"local parameters: lease {params['LeaseSeconds']} s, backoff "
            f"{params['BackoffBaseMs']}–{params['BackoffCapMs']} ms, per-user limit "
            f"{params['UserConcurrencyLimit']}, worker batch {params['WorkerBatchSize']}, "
            "title fetcher fixture, billable providers on 127.0.0.1",
            flush=True,
        )
        session = Session(stack, workdir)
        all_phases = phases()
        for phase in all_phases:
            run_phase(session, phase)
        ok = report(session, all_phases)
    finally:
        if session is not None:
            stack.workers = session.release_all() + stack.workers
        stack.stop()
        shutil.rmtree(data, ignore_errors=True)
        print(f"demo wall time {time.monotonic() - started:.1f} s (local stack, this machine)")
    return 0 if ok else 1
