"""The crash matrix's workflow kinds (issue 31 item 7; tests/support/crash_matrix.py): a parent
that fans out to children and gathers them (spawn, each child's end with its fan-in count, the
parent's wake, its next step), and a job that waits for a signal — sent by its owner or through
its callback token, the API's calls crashed as the worker's are. Whatever the crash, each
`Side.after` checks: no child lost, no second set, the parent woken once (its step after the
wait ran once), never left parked; the signal's body reached the next step."""

from __future__ import annotations

from collections import Counter
from typing import Any

from leasehold import Kind, StepContext
from leasehold.domain.errors import ConflictError, JobNotFoundError
from leasehold.domain.waits import fanin_shards
from leasehold.store.waits import WaitStore
from leasehold.testing import LeaseholdTestbed
from tests.support.crash_matrix import MatrixBed, Scenario, Side

CHILDREN = 3
FAULTS = (
    "dynamodb.TransactWriteItems:TransactionConflict=0.25,"
    "dynamodb.UpdateItem:ProvisionedThroughputExceededException=0.1,"
    "dynamodb.GetItem:ThrottlingException=0.05,"
    "sqs.SendMessage:ThrottlingException=0.1"
)
"""The races and throttles the workflow scenarios also run under (`store/faults.py` rules)."""


def _fan_out(name: str = "workflow fan-out (3 children)", faults: str = "") -> Scenario:
    def build() -> tuple[list[Any], Side]:
        runs: Counter[str] = Counter()
        parent, child = Kind("mx_parent"), Kind("mx_child")

        @child.step()
        def fetch(ctx: StepContext, payload: dict[str, Any]) -> int:
            runs[ctx.job_id] += 1
            return int(payload["i"])

        @parent.step()
        def spawn(ctx: StepContext, payload: dict[str, Any]) -> int:
            return len(ctx.map("mx_child", [{"i": i} for i in range(CHILDREN)]))

        @parent.step()
        def gather(ctx: StepContext, payload: dict[str, Any]) -> int:
            runs["gather"] += 1
            return sum(int(c.result) for c in ctx.children() if c.state == "succeeded")

        def after(tb: LeaseholdTestbed, job_id: str) -> list[str]:
            return _one_set(tb, job_id, runs) + _injected(tb, faults)

        return [parent, child], Side(after=after)

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("mx_parent", {})

    def setup(tb: LeaseholdTestbed, side: Side) -> None:
        tb.faults(faults)

    return Scenario(name, build, start, setup=setup, may_rerun=bool(faults))


def _one_set(tb: LeaseholdTestbed, job_id: str, runs: Counter[str]) -> list[str]:
    problems = []
    kids = tb.children(job_id)
    if len(kids) != CHILDREN or len({k["job_id"] for k in kids}) != CHILDREN:
        problems.append(f"{len(kids)} children, {len({k['job_id'] for k in kids})} distinct")
    if any(k["state"] != "succeeded" for k in kids):
        problems.append(f"children {[k['state'] for k in kids]}")
    child_runs = [runs[k["job_id"]] for k in kids]
    if 0 in child_runs or sum(child_runs) > CHILDREN + 1:
        problems.append(f"children's runs {child_runs} (a lost child, or a second set)")
    fan = WaitStore(tb._stores.table).fanin(job_id, 0, fanin_shards(CHILDREN))  # noqa: SLF001
    if (fan.ended, fan.failed) != (CHILDREN, 0):
        problems.append(f"fan-in counted {fan.ended} ends, {fan.failed} failed of {CHILDREN}")
    problems.extend(_resumed_once(tb, runs["gather"]))
    if tb.view(job_id).get("result") != sum(range(CHILDREN)):
        problems.append(f"result {tb.view(job_id).get('result')}")
    return problems


def _injected(tb: LeaseholdTestbed, faults: str) -> list[str]:
    """Under `faults`, some were injected (else the run proved nothing about them)."""
    if faults and not tb.injected():
        return ["no fault was injected"]
    return []


def _resumed_once(tb: LeaseholdTestbed, runs: int) -> list[str]:
    """The step after the wait (step 1) ran once: woken once. A second run only when the worker
    died while running it (the job `running` at step 1), before its result was recorded."""
    crashed = tb.crashed if isinstance(tb, MatrixBed) else None
    inside = crashed is not None and crashed.state == "running" and crashed.next_step == 1
    if runs == 1 or (runs == 2 and inside):
        return []
    return [f"the step after the wait ran {runs} times (woken twice, or never)"]


def _signal(by: str, faults: str = "", name: str = "") -> Scenario:
    tokens: dict[str, str] = {}

    def build() -> tuple[list[Any], Side]:
        runs: Counter[str] = Counter()
        review = Kind("mx_review")

        @review.step()
        def ask(ctx: StepContext, payload: dict[str, Any]) -> str:
            wait = ctx.wait_for_signal("ok", timeout_seconds=1800)
            tokens.setdefault(ctx.job_id, wait.token)  # a re-run's token is a second one
            return "asked"

        @review.step()
        def decide(ctx: StepContext, payload: dict[str, Any]) -> Any:
            runs["decide"] += 1
            return ctx.signal("ok")  # SignalTimeoutError: the job fails, a problem

        def after(tb: LeaseholdTestbed, job_id: str) -> list[str]:
            problems = []
            problems.extend(_resumed_once(tb, runs["decide"]))
            problems.extend(_injected(tb, faults))
            if tb.view(job_id).get("result") != {"approved": True}:
                problems.append(f"result {tb.view(job_id).get('result')}")
            return problems

        return [review], Side(after=after)

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        assert isinstance(tb, MatrixBed)
        tokens.clear()
        job_id = tb.submit("mx_review", {})
        tb.target = job_id  # a crash from now on records the job as it was
        tb.run_until_idle()
        body = {"approved": True}
        if by == "owner":
            send = lambda: tb.signal(job_id, "ok", body)  # noqa: E731
        else:
            for _ in range(3):  # the worker died before it handed out a token: its re-run will
                if job_id in tokens:
                    break
                tb.advance(61)
                tb.run_until_idle()
            send = lambda: tb.callback(tokens[job_id], body)  # noqa: E731
        for _ in range(3):  # the caller retries a request whose function died
            try:
                done, _answer = tb.api(send)
            except (ConflictError, JobNotFoundError):  # stored already, or the token used
                break
            if done:
                break
        return job_id

    def setup(tb: LeaseholdTestbed, side: Side) -> None:
        tb.faults(faults)

    return Scenario(
        name or f"workflow signal ({by})", build, start, setup=setup, may_rerun=bool(faults)
    )


def workflow_scenarios() -> list[Scenario]:
    return [_fan_out(), _signal("owner"), _signal("callback")]


def faulted_scenarios() -> list[Scenario]:
    """The same workflows under injected TransactionConflicts and throttles (no crash)."""
    return [
        _fan_out("workflow fan-out under faults", FAULTS),
        _signal("owner", FAULTS, "workflow signal (owner) under faults"),
        _signal("callback", FAULTS, "workflow signal (callback) under faults"),
    ]


__all__ = ["FAULTS", "faulted_scenarios", "workflow_scenarios"]
