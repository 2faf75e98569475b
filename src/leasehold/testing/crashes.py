"""Crashing a worker where it hurts: right after a step's work was recorded, or inside a step
before it was. The worker "dies" by a `WorkerCrashed` raised at that point — a BaseException,
so nothing in the engine (which turns any `Exception` of a step into a retry) can catch it —
and the testbed then treats the invocation as lost: its message is not deleted (SQS shows it
again after the visibility timeout) and the job keeps its lease until it runs out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from leasehold.domain.job import Job
from leasehold.sdk.engine_kind import EngineKind
from leasehold.sdk.kind import Kind
from leasehold.service.kinds import OperationLedger
from leasehold.store.waits import WaitStore

CrashPoint = Literal["children_chunk", "children_written", "child_ended"]
"""The named points between a parent's and its children's writes (`LeaseholdTestbed.crash(at=)`):

- `children_chunk`: a step's children are written 49 to a transaction; the worker dies after
  one such transaction committed, before the next (`job_id`: the parent's).
- `children_written`: every child of the step is written, the parent's checkpoint and wait
  (its park) are not (`job_id`: the parent's).
- `child_ended`: a child's end and its fan-in count are written and it completes its set (or
  fails it); the worker dies before it wakes the parent (`job_id`: the parent's), which finds
  the set over at its own next check (decision WF5)."""
CRASH_POINTS: tuple[str, ...] = get_args(CrashPoint)


class WorkerCrashed(BaseException):  # noqa: N818 - a process dying, not an error to handle
    """The worker process died at a planned point (`LeaseholdTestbed.crash`). A test's own code
    inside a step (a fake client, a reader, a provider) may raise it too: the worker dies right
    there, and the testbed treats the invocation as lost as for a planned crash."""


@dataclass
class CrashPlan:
    """One planned crash, as returned by `LeaseholdTestbed.crash`.

    - `after_step`: the worker dies right after the write that recorded that step — its
      checkpoint, or for a job's last step the job's outcome — before it goes on.
    - `in_step`: the worker dies inside that step after its function returned, before the
      engine recorded anything of it: in an effect step (`Effect`) the ledger entry opened
      before the function ran stays `submitted` (the provider was called, its answer is
      lost); in any other step the output is lost and the step runs again.

    - `at`: a named point between a parent's and its children's writes (`CrashPoint`).

    It fires for the first matching step or point of any job (or only of `job_id`), `times`
    times."""

    after_step: str | None = None
    in_step: str | None = None
    at: CrashPoint | None = None
    job_id: str | None = None
    times: int = 1
    fired: list[str] = field(default_factory=list)
    """The ids of the jobs it crashed, in order."""

    @property
    def armed(self) -> bool:
        """Whether it will fire again."""
        return len(self.fired) < self.times

    def matches(self, job_id: str, step: str, *, inside: bool) -> bool:
        """Whether this plan fires for `step` of `job_id` (`inside`: an `in_step` point)."""
        wanted = self.in_step if inside else self.after_step
        return self.armed and wanted == step and self.job_id in (None, job_id)

    def matches_point(self, job_id: str, point: str) -> bool:
        """Whether this plan fires at the named `point` for `job_id`."""
        return self.armed and self.at == point and self.job_id in (None, job_id)


class Crashes:
    """The testbed's planned crashes, and the points in the engine where they fire."""

    def __init__(self) -> None:
        self.plans: list[CrashPlan] = []
        self._pending: dict[str, CrashPlan] = {}  # job id → an after_step plan due to fire

    def plan(self, plan: CrashPlan) -> CrashPlan:
        """Add a plan (exactly one of `after_step`, `in_step` and `at`, `times` ≥ 1)."""
        named = [w for w in (plan.after_step, plan.in_step, plan.at) if w is not None]
        if len(named) != 1:
            raise ValueError("crash(): name exactly one of after_step=, in_step= and at=")
        if plan.at is not None and plan.at not in CRASH_POINTS:
            raise ValueError(f"crash(): at= is one of {', '.join(CRASH_POINTS)}")
        if plan.times < 1:
            raise ValueError("crash(): times must be at least 1")
        self.plans.append(plan)
        return plan

    def _fire(self, plan: CrashPlan, job_id: str, where: str) -> None:
        plan.fired.append(job_id)
        raise WorkerCrashed(f"planned crash of the worker {where} (job {job_id})")

    def inside(self, job_id: str, step: str) -> None:
        """A step's result is about to be recorded: fire an `in_step` plan for it."""
        for plan in self.plans:
            if plan.matches(job_id, step, inside=True):
                self._fire(plan, job_id, f"inside step '{step}'")

    def finished(self, job_id: str, step: str) -> None:
        """A step returned: an `after_step` plan for it fires after the next worker write."""
        for plan in self.plans:
            if plan.matches(job_id, step, inside=False):
                self._pending[job_id] = plan
                return

    def written(self, job_id: str) -> None:
        """A worker write for `job_id` committed: fire the `after_step` plan waiting for it."""
        plan = self._pending.pop(job_id, None)
        if plan is not None:
            self._fire(plan, job_id, f"after step '{plan.after_step}' was recorded")

    def point(self, job_id: str, point: CrashPoint) -> None:
        """The worker reached the named `point` for `job_id`: fire a plan waiting there."""
        for plan in self.plans:
            if plan.matches_point(job_id, point):
                self._fire(plan, job_id, f"at {point}")

    def forget(self) -> None:
        """A worker died or finished its invocation: nothing waits for its next write."""
        self._pending.clear()


class _CrashingLedger(OperationLedger):
    """The step's operation ledger, with the crash point before a confirm is written."""

    def __init__(self, inner: OperationLedger, before_confirm: Callable[[], None]) -> None:  # noqa: PLW0231 - shares the inner ledger's state
        self.__dict__.update(vars(inner))
        self._before_confirm = before_confirm

    def confirm(
        self,
        operation_id: str,
        receipt: dict[str, Any],
        *,
        reconciled: bool,
        returned: str | None = None,
    ) -> None:
        self._before_confirm()
        super().confirm(operation_id, receipt, reconciled=reconciled, returned=returned)


class WatchedKind(EngineKind):
    """A user's kind as the testbed's workers run it: the same steps, with the crash points."""

    def __init__(self, kind: Kind, crashes: Crashes, *, max_step_ms: int | None = None) -> None:
        super().__init__(kind, max_step_ms=max_step_ms)
        self._crashes = crashes

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, ctx: Any) -> Any:
        """The kind's step, with an `in_step` crash before its result is recorded and an
        `after_step` crash armed for the write that records it."""
        job_id, step = ctx.job.job_id, ctx.step_name
        ctx.ledger = _CrashingLedger(ctx.ledger, lambda: self._crashes.inside(job_id, step))
        output = super().run_step(payload, index, attempt, ctx)
        self._crashes.inside(job_id, step)
        self._crashes.finished(job_id, step)
        return output


class WatchedLeases:
    """The worker's lease store, telling `Crashes` after each write that names a job."""

    def __init__(self, inner: Any, crashes: Crashes) -> None:
        self._inner = inner
        self._crashes = crashes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            answer = value(*args, **kwargs)
            job_id = getattr(args[0], "job_id", None) if args else None
            if isinstance(job_id, str):
                self._crashes.written(job_id)
            return answer

        return call


class WatchedWaits(WaitStore):
    """The worker's wait store, with the named crash points between a parent's and its
    children's writes (`CrashPoint`)."""

    def __init__(self, inner: WaitStore, crashes: Crashes) -> None:
        super().__init__(inner._table)  # noqa: SLF001 - the same table, watched
        self._crashes = crashes

    def write_children(self, parent: Job, children: list[Job], *, now: int) -> int:
        written = super().write_children(parent, children, now=now)
        self._crashes.point(parent.job_id, "children_written")
        return written

    def _write_chunk(self, parent: Job, chunk: list[Job], now: int, shards: int) -> int:
        written = super()._write_chunk(parent, chunk, now, shards)
        self._crashes.point(parent.job_id, "children_chunk")
        return written


class WatchedEnds(WaitStore):
    """The wait store a worker's outcomes use after a child's end: the parent's wake is the
    `child_ended` crash point."""

    def __init__(self, inner: WaitStore, crashes: Crashes) -> None:
        super().__init__(inner._table)  # noqa: SLF001 - the same table, watched
        self._crashes = crashes

    def wake(self, job_id: str, step: int, now: int) -> bool:
        self._crashes.point(job_id, "child_ended")
        return super().wake(job_id, step, now)


__all__ = [
    "CRASH_POINTS",
    "CrashPlan",
    "CrashPoint",
    "Crashes",
    "WatchedEnds",
    "WatchedKind",
    "WatchedLeases",
    "WatchedWaits",
    "WorkerCrashed",
]
