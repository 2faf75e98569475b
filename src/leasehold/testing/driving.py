"""How a testbed runs and moves time: rounds of relay and delivery until idle, worker
invocations over a batch, the clock's advance with the sweeper's pass, time-skipping `drain`,
and planned crashes and injected faults — the part of `LeaseholdTestbed` that drives the
engine rather than calls it."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING

from leasehold.domain.clock import ManualClock
from leasehold.service.sweeper import DUE_WINDOW_MS, sweep_passes
from leasehold.service.telemetry import CountingTelemetry
from leasehold.service.worker import Disposition, WorkerService
from leasehold.store import Stores
from leasehold.store.queue import Wakeup
from leasehold.testing import iam
from leasehold.testing.config import TestbedSettings
from leasehold.testing.crashes import Crashes, CrashPlan, CrashPoint, WorkerCrashed
from leasehold.testing.delivery import (
    Message,
    QueueSource,
    StreamRelay,
    invocation_clock,
    next_event_ms,
)
from leasehold.testing.mocking import InjectedFaults, hidden_messages
from leasehold.testing.report import Delivery, NotIdleError, RunReport
from leasehold.testing.waits import expire_wait

if TYPE_CHECKING:
    from leasehold.handlers.wiring import Runtime
    from leasehold.service.kinds import JobKind


class TestbedDriving:
    """Running and time for `LeaseholdTestbed` (which builds what these read)."""

    __test__ = False  # not a pytest test class

    clock: ManualClock
    settings: TestbedSettings
    telemetry: CountingTelemetry
    kinds: dict[str, JobKind]
    runtime: Runtime
    roles: dict[str, iam.Role]
    queue_urls: dict[str, str]
    _stores: Stores
    _reads: Stores
    _relay: StreamRelay
    _sources: list[QueueSource]
    _worker: WorkerService
    _worker_rng: random.Random
    _crashes: Crashes
    _faults: InjectedFaults
    _generation: int
    _busy: bool

    def _ready(self) -> None:
        raise NotImplementedError

    def _new_worker(self) -> WorkerService:
        raise NotImplementedError

    # ------------------------------------------------------------------ time and running

    def run_until_idle(self, max_rounds: int = 100) -> RunReport:
        """Relay the outbox and deliver every visible wake-up to a worker, round after round,
        until a round finds nothing: no new stream record, no visible message. Time does not
        move: a retry whose backoff has not passed stays `queued` (its wake-up is delayed on
        the testbed's clock, and the worker would refuse it early). Raises NotIdleError after
        `max_rounds` rounds that all found work."""
        self._ready()
        if self._busy:
            raise RuntimeError("run_until_idle/drain called from inside a step")
        self._busy = True
        try:
            deliveries: list[Delivery] = []
            relayed = 0
            for rounds in range(1, max_rounds + 1):
                read, sent = self._relay.poll()
                relayed += sent
                delivered = False
                for source in self._sources:
                    messages = source.receive()
                    if messages:
                        delivered = True
                        deliveries.extend(self._invoke(messages, source))
                if not read and not delivered:
                    return RunReport(rounds, relayed, tuple(deliveries))
        finally:
            self._busy = False
        raise NotIdleError(f"still busy after {max_rounds} rounds (raise max_rounds?)")

    def _invoke(self, messages: list[Message], source: QueueSource) -> list[Delivery]:
        """One worker invocation over a batch. As with Lambda's partial batch response, the
        acknowledged messages are deleted when the invocation returns; a crash deletes none."""
        remaining = invocation_clock(self.clock, self.settings.worker_timeout_seconds * 1000)
        worker_id = f"testbed-worker-{self._generation}"
        done: list[Delivery] = []
        acknowledged: list[Message] = []
        for message in messages:
            try:
                wakeup = Wakeup.parse(message.body)
            except ValueError:
                acknowledged.append(message)
                done.append(Delivery("", "malformed", worker_id, self.clock.now_ms(), source.name))
                continue
            at = self.clock.now_ms()
            try:
                result = self._worker.handle(wakeup, message.receipt_handle, remaining)
            except WorkerCrashed:
                done.append(Delivery(wakeup.job_id, "crashed", worker_id, at, source.name))
                self._worker = self._new_worker()
                return done
            done.append(Delivery(wakeup.job_id, result.outcome, worker_id, at, source.name))
            if result.disposition is Disposition.ACK:
                acknowledged.append(message)
        self._crashes.forget()
        for message in acknowledged:
            source.delete(message)
        return done

    def advance(self, seconds: float, *, sweep: bool = True) -> dict[str, int]:
        """Move the clock `seconds` forward, then run the sweeper once (as its schedule would):
        a lease that ran out is rescued (or its job goes `unknown` when an effect without a
        way to learn its outcome was open), a lost wake-up is sent again. Runs no job: call
        `run_until_idle` next. Called from inside a step, it makes the step take that long
        (its lease may run out under it). Returns the sweeper's counts."""
        self._ready()
        if seconds < 0:
            raise ValueError("time only moves forward")
        self.clock.advance(round(seconds * 1000))
        return self.sweep() if sweep else {}

    def sweep(self) -> dict[str, int]:
        """One pass of the sweeper, now: `{"rescued": 1, "unknown": 1, …}`."""
        self._ready()
        with iam.acting_as(self.roles["SweeperFunction"]):
            result = sweep_passes(
                self._stores, self.clock, self.runtime.sweep_settings(), self.telemetry, self.kinds
            )
        return dict(result.report)

    def next_due_in(self) -> float | None:
        """Seconds until something will happen without the test acting: a delayed wake-up
        becomes visible, a lease runs out, the sweeper re-sends a lost wake-up. None when every
        job is at rest (finished, `unknown`, or waiting for approval)."""
        due = self._next_event_ms()
        return None if due is None else max(0, due - self.clock.now_ms()) / 1000

    def _next_event_ms(self) -> int | None:
        self._ready()
        # Not from the by_state index: an index may lag (a GSI is eventually consistent), and
        # a job it does not list yet would look like nothing left to do
        active, delayed = self._reads.jobs.unfinished_consistent()
        return next_event_ms(
            active,
            [hidden for source in self._sources for hidden in hidden_messages(source.queue_url)],
            now=self.clock.now_ms(),
            grace_ms=self.settings.lost_wakeup_grace_seconds * 1000,
            delayed=delayed,
            due_window_ms=DUE_WINDOW_MS,
        )

    def drain(self, max_seconds: float = 24 * 3600, max_rounds: int = 100) -> RunReport:
        """Time-skipping: `run_until_idle`, then jump the clock to the next thing due
        (`next_due_in`) and run again, until every job is at rest. Raises NotIdleError when
        jobs are still active after `max_seconds` of virtual time."""
        report = self.run_until_idle(max_rounds)
        start = self.clock.now_ms()
        for _ in range(max_rounds):
            due = self._next_event_ms()
            if due is None:
                return report
            if due - start > max_seconds * 1000:
                break
            skipped = max(0, due - self.clock.now_ms())
            self.advance(skipped / 1000)
            step = self.run_until_idle(max_rounds)
            report = report + replace(step, advanced_seconds=skipped / 1000)
        raise NotIdleError(
            f"jobs still active after {max_rounds} skips or {max_seconds:g} s of virtual time"
        )

    # ------------------------------------------------------------------ faults and crashes

    def crash(
        self,
        *,
        after_step: str | None = None,
        in_step: str | None = None,
        at: CrashPoint | None = None,
        job_id: str | None = None,
        times: int = 1,
    ) -> CrashPlan:
        """Plan a worker crash (see CrashPlan): `after_step="a"` dies once step `a` is
        recorded; `in_step="charge"` dies inside that step after its function returned,
        before anything of it is recorded (an effect's ledger entry stays `submitted`). The
        job keeps its lease until it runs out: `advance` past `lease_seconds` and the sweeper
        takes it on (a new attempt resumes from the last checkpoint), or makes it `unknown`
        when the open effect's capability is `none`. `at=` names a point between a parent's
        and its children's writes (`CrashPoint`): `"children_chunk"` (after one transaction
        of a step's children, before the next), `"children_written"` (every child written,
        the parent not parked yet), `"child_ended"` (the child that completes a set ended and
        was counted, its parent not woken); `job_id` there is the parent's."""
        return self._crashes.plan(
            CrashPlan(after_step=after_step, in_step=in_step, at=at, job_id=job_id, times=times)
        )

    def expire_wait(self, job_id: str) -> None:
        """End a waiting job's wait now, without moving the clock: a signal wait times out (its
        next step's `ctx.signal(name)` raises `SignalTimeoutError`; a late signal, or its
        callback, is 409 `signal_exists`), a sleep (`continue_after`/`continue_at`) is over.
        The job is due at once: `run_until_idle` runs its next step. Raises ValueError for a
        job that waits for no signal and no time (children end by running them)."""
        self._ready()
        expire_wait(self._stores.table, job_id, self.clock.now_ms())

    def faults(self, spec: str) -> None:
        """Inject faults into the functions' DynamoDB and SQS clients from now on, as
        `LEASEHOLD_FAULTS` does: `"dynamodb.TransactWriteItems:TransactionConflict=0.2"`
        (rules `service.Operation:ErrorCode=probability[@limit]`, comma-separated); `""`
        switches them off. Raises FaultSpecError for a rule that cannot be read."""
        self._ready()
        self._faults.use(spec)

    def injected(self) -> dict[str, int]:
        """How many faults were injected, by `Operation:ErrorCode`."""
        self._ready()
        return self._faults.counts()
