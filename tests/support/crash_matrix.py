"""The crash matrix's driver: a job of one kind, run once on the testbed to record every AWS
call its worker makes (`service.Operation` #n), then once per call and side — a fresh testbed,
the same job, the worker dying right before that call is sent or right after the store applied
it (`leasehold.store.faults`' crash rules, raising `WorkerCrashed` instead of exiting: the
testbed loses that invocation, its message stays, the job keeps its lease) — then recovery
(`drain`: a fresh worker, the sweeper once the lease ran out) and the checks of `Outcome`.

Only the worker's calls are counted and crashed: the rules are armed on the functions' clients
only while a worker invocation runs (the API, relay and sweeper share those clients)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from leasehold.store.faults import FaultInjector, FaultPlan
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.crashes import WatchedKind, WorkerCrashed
from leasehold.testing.delivery import Message, QueueSource
from leasehold.testing.report import Delivery
from tests.support.index_lag import lagging_index

TERMINAL = {"succeeded", "failed", "cancelled", "dead", "unknown"}


@dataclass(frozen=True)
class Point:
    """A crash point: the `nth` call of `operation` (`service.Operation`), `before` or after."""

    operation: str
    nth: int
    before: bool

    @property
    def rule(self) -> str:
        return f"{self.operation}:crash-{'before' if self.before else 'after'}@{self.nth}"

    def __str__(self) -> str:
        return f"{'before' if self.before else 'after'} {self.operation} #{self.nth}"


@dataclass
class AtCrash:
    """The job as the table held it when the worker died."""

    state: str
    next_step: int
    kind_state: dict[str, Any] | None


class MatrixBed(LeaseholdTestbed):
    """The testbed with a recorder and a crash injector on the worker's side of its clients."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        self.crashed: AtCrash | None = None
        self.target: str | None = None
        self._gate = False
        self._injectors: list[FaultInjector] = []

    def open(self) -> None:
        super().open()
        for client in (self._dynamodb, self._sqs):
            service = client.meta.service_model.service_name
            injector = FaultInjector(FaultPlan(()), service, crash=self._die)
            self._injectors.append(injector)
            client.meta.events.register_first(f"before-call.{service}", self._before(injector))
            client.meta.events.register(f"after-call.{service}", self._after(injector))

    def _before(self, injector: FaultInjector) -> Callable[..., None]:
        def before(model: Any, context: Any = None, **kwargs: Any) -> None:
            if self._gate:
                self.calls.append(f"{injector._service}.{model.name}")  # noqa: SLF001
                injector.before_call(model, context)

        return before

    def _after(self, injector: FaultInjector) -> Callable[..., None]:
        def after(**kwargs: Any) -> None:
            if self._gate:
                injector.after_call(**kwargs)

        return after

    def arm(self, point: Point | None) -> None:
        """Count the worker's calls from now on; crash at `point` (None: just record)."""
        plan = FaultPlan.parse(point.rule if point else "")
        for injector in self._injectors:
            injector.use(plan)
        self.calls = []

    def _die(self, where: str) -> None:
        self._gate = False  # what the dying worker does next is not the store's business
        if self.target is not None:
            job = self._reads.jobs.get(self.target)
            if job is not None:
                self.crashed = AtCrash(
                    job.state.value, job.checkpoint.next_step, dict(job.kind_state or {}) or None
                )
        raise WorkerCrashed(f"injected {where}")

    def api(self, call: Callable[[], Any]) -> tuple[bool, Any]:
        """An API request whose store calls are counted and crashed as the worker's are:
        (False, None) when the function died in it (its caller saw a 5xx), else (True, answer)."""
        self._gate = True
        try:
            return True, call()
        except WorkerCrashed:
            return False, None
        finally:
            self._gate = False

    def _invoke(self, messages: list[Message], source: QueueSource) -> list[Delivery]:
        self._gate = True
        try:
            return super()._invoke(messages, source)
        finally:
            self._gate = False


@contextlib.contextmanager
def counting_steps() -> Iterator[list[tuple[str, int]]]:
    """Every step run by a testbed worker: (job id, step index)."""
    runs: list[tuple[str, int]] = []
    real = WatchedKind.run_step

    def run_step(self: WatchedKind, payload: Any, index: int, attempt: int, ctx: Any) -> Any:
        runs.append((ctx.job.job_id, index))
        return real(self, payload, index, attempt, ctx)

    with mock.patch.object(WatchedKind, "run_step", run_step):
        yield runs


@dataclass
class Scenario:
    """One kind's job: `build()` gives the testbed's kinds and a fresh `Side` (its counters);
    `setup(tb, side)` runs before the worker is watched; `start(tb, side)` makes the job."""

    name: str
    build: Callable[[], tuple[list[Any], Side]]
    start: Callable[[LeaseholdTestbed, Side], str]
    setup: Callable[[LeaseholdTestbed, Side], None] = lambda tb, side: None
    may_end_unknown: bool = False
    """The job's effect has no way to learn a lost outcome (capability `none`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    """Template resources the scenario makes itself (LeaseholdTestbed's `resources`)."""
    effect_steps: frozenset[int] = frozenset()
    """Steps whose every run is a side effect no provider can deduplicate (a bare effect)."""
    may_rerun: bool = False
    """Steps may run again without a crash: under injected faults a step whose checkpoint
    write failed past its retries runs again (the scenario's own checks say what may not)."""
    may_fail: Callable[[AtCrash | None, dict[str, Any]], bool] = lambda crashed, view: False
    """Whether ending `failed` is the kind's right answer to this crash (the job's view)."""


@dataclass
class Side:
    """What the job did outside the store: `effects()` counts executions (fetches, reads,
    sends by key), `charges()` the provider's charges by key."""

    effects: Callable[[], int] = lambda: 0
    charges: Callable[[], dict[str, int]] = dict
    visible: Callable[[LeaseholdTestbed, str], int] | None = None
    """How many results of the job a reader sees (default: 1 if it succeeded with one)."""
    after: Callable[[LeaseholdTestbed, str], list[str]] = lambda tb, job_id: []
    """A kind's own check once the job is at rest: what is wrong, if anything."""


@dataclass
class Outcome:
    point: Point | None
    state: str = ""
    fired: bool = False
    step_runs: int = 0
    effects: int = 0
    charges: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def record(scenario: Scenario) -> tuple[list[Point], Outcome]:
    """The job run without faults: every worker call as a crash point (each before and after)."""
    outcome, calls = run(scenario, None)
    seen: dict[str, int] = {}
    points: list[Point] = []
    for call in calls:
        seen[call] = seen.get(call, 0) + 1
        points.append(Point(call, seen[call], True))
        points.append(Point(call, seen[call], False))
    return points, outcome


def run(scenario: Scenario, point: Point | None) -> tuple[Outcome, list[str]]:
    """One job, crashed at `point`, recovered, checked."""
    kinds, side = scenario.build()
    outcome = Outcome(point)
    with (
        mock.patch.dict(os.environ, scenario.env),
        counting_steps() as runs,
        MatrixBed(kinds, settings=scenario.settings or None, resources=scenario.resources) as tb,
        lagging_index(tb.clock),
    ):
        scenario.setup(tb, side)
        tb.drain()
        baseline_effects = side.effects()
        tb.arm(point)
        job_id = scenario.start(tb, side)
        tb.target = job_id
        try:
            tb.drain(max_seconds=3600)
        except Exception as stuck:  # noqa: BLE001 - a stuck job is a finding, said in the table
            outcome.problems.append(f"stuck: {stuck}")
        calls = list(tb.calls)
        outcome.state = tb.state(job_id)
        outcome.fired = tb.crashed is not None
        mine = [(index, i) for i, (job, index) in enumerate(runs) if job == job_id]
        outcome.step_runs = len(mine)
        outcome.effects = side.effects() - baseline_effects
        charges = side.charges()
        outcome.charges = sum(charges.values())
        _check(scenario, side, tb, job_id, outcome, mine, charges)
    return outcome, calls


def _check(
    scenario: Scenario,
    side: Side,
    tb: LeaseholdTestbed,
    job_id: str,
    outcome: Outcome,
    mine: list[tuple[int, int]],
    charges: dict[str, int],
) -> None:
    problems = outcome.problems
    point = outcome.point
    if point is not None and not outcome.fired:
        problems.append("the crash point was never reached")
    if outcome.state not in TERMINAL:
        problems.append(f"not at rest: {outcome.state}")
    if outcome.state == "unknown" and not scenario.may_end_unknown:
        problems.append("unknown, though the effect could be recovered")
    view = tb.view(job_id)
    crashed = tb.crashed if isinstance(tb, MatrixBed) else None
    if outcome.state == "failed" and scenario.may_fail(crashed, view):
        outcome.state = f"failed ({view.get('stop_reason')})"
    elif outcome.state not in {"succeeded", "unknown"}:
        problems.append(f"ended {outcome.state}")
    problems.extend(side.after(tb, job_id))
    visible = side.visible(tb, job_id) if side.visible else int(view.get("result") is not None)
    if outcome.state == "succeeded" and visible != 1:
        problems.append(f"{visible} visible results")
    if outcome.state == "unknown" and visible:
        problems.append("a result is visible on an unknown job")
    # No step ran again once its checkpoint had landed: each step ran once, and only the step
    # the worker was inside when it died (not yet checkpointed) may have run a second time.
    done_at_crash = crashed.next_step if crashed else 0
    finished_at_crash = crashed is not None and crashed.state in TERMINAL
    by_step: dict[int, int] = {}
    for index, _ in mine:
        by_step[index] = by_step.get(index, 0) + 1
    for index, count in sorted(by_step.items()):
        if count > 1 and (index < done_at_crash or finished_at_crash):
            problems.append(f"step {index} ran {count} times though it was checkpointed")
    reruns = sum(count - 1 for count in by_step.values())
    if not scenario.may_rerun and reruns > (1 if point is not None else 0):
        problems.append(f"steps re-ran: {by_step}")
    for index in scenario.effect_steps:
        if by_step.get(index, 0) > 1:
            problems.append(f"effect step {index} ran {by_step[index]} times")
    if any(count > 1 for count in charges.values()):
        problems.append(f"charged more than once: {charges}")
    if outcome.effects > outcome.step_runs and outcome.effects > 1:
        problems.append(f"{outcome.effects} side effects for {outcome.step_runs} step runs")
