"""What the property test's state machine (tests/integration/test_stateful.py) is built from:
its faults and payloads, workers' skewed clocks, synthetic steps that take manual-clock time,
a lease store that crashes on its k-th call, and the check of every write a worker made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leasehold.domain.clock import ManualClock
from leasehold.domain.errors import StepInterruptedError
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.sdk.engine_kind import EngineKind
from leasehold_apps.synthetic import synthetic
from tests.support.harness import steps

HEARTBEAT_MS = 3_000
VISIBILITY_MS = 6 * 30_000
SKEW_MS = {"w1": 0, "w2": 250, "w3": -250}  # bounded, below the lease's safety margin (500 ms)
FAULTS = (
    "dynamodb.TransactWriteItems:TransactionConflict=0.04,"
    "dynamodb.TransactWriteItems:ThrottlingError=0.02,"
    "dynamodb.UpdateItem:ThrottlingException=0.03,"
    "dynamodb.GetItem:ProvisionedThroughputExceededException=0.02,"
    "dynamodb.Query:InternalServerError=0.02,"
    # what moto never raises (issue 27): single writes meeting an item inside a transaction, and
    # index reads throttled — often enough that some outlast botocore's retries (0.4⁴ ≈ 2.6 %)
    "dynamodb.UpdateItem:TransactionConflictException=0.04,"
    "dynamodb.PutItem:TransactionConflictException=0.04,"
    "dynamodb.Query[by_state]:ThrottlingException=0.4,"
    "dynamodb.Query[by_owner]:ThrottlingException=0.4"
)

PAYLOADS: list[dict[str, Any]] = [
    {"payload": steps({"cost": 1})},
    {"payload": steps({"cost": 2, "fail_times": 1}, {"cost": 2, "duration_ms": 7_000})},
    {"payload": steps({"cost": 1}, {"approval": True, "cost": 1})},
    {"payload": steps({"effect": True, "cost": 1, "duration_ms": 4_000}, {"cost": 1})},
    {"payload": steps({"fatal": True})},
    {"payload": steps({"cost": 3}, {"cost": 3}, {"cost": 3}), "budget": {"max_cost": 5}},
    {"payload": steps({"fail_times": 5}), "max_attempts": 2},
    {"payload": steps({"cost": 1}, {"cost": 1}), "budget": {"max_steps": 1}},
    {"payload": steps({"duration_ms": 12_000, "cost": 1})},
]

STEP_COUNTER = {"steps": 0}


class Crash(BaseException):
    """A worker process dying (not an Exception: nothing in the worker may swallow it)."""


class SkewedClock:
    """A worker's own clock: the true (manual) clock plus a bounded, fixed skew."""

    def __init__(self, base: ManualClock, skew_ms: int) -> None:
        self._base = base
        self._skew = skew_ms

    def now_ms(self) -> int:
        return self._base.now_ms() + self._skew


class ClockedKind(EngineKind):
    """Synthetic steps that take time on the manual clock, in heartbeat-sized slices, and may
    have something happen in the middle (a cancel) — as a real step would, with no sleeping."""

    def __init__(self, clock: ManualClock, midway: Any = None) -> None:
        super().__init__(synthetic)
        self._clock = clock
        self._midway = midway

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        step = payload["steps"][index]
        remaining = int(step.get("duration_ms", 0))
        if self._midway is not None:
            self._midway()
            self._midway = None
        while remaining > 0:
            slice_ms = min(HEARTBEAT_MS, remaining)
            self._clock.advance(slice_ms)
            remaining -= slice_ms
            if not tick():
                raise StepInterruptedError("interrupted")
        timeless = [
            {**s, "duration_ms": 0} if i == index else s for i, s in enumerate(payload["steps"])
        ]
        return super().run_step({"steps": timeless}, index, attempt, tick)


@dataclass
class Claim:
    job_id: str
    epoch: int
    expires_at: int
    released: bool = False


class CrashingLeases:
    """The real LeaseStore, seen through one worker process that may die on its k-th store
    call — before the call reaches the store, or after it was applied. Every applied write is
    reported to the machine, which checks it was made under the table's current epoch."""

    WRITES = (
        "claim",
        "heartbeat",
        "save_checkpoint",
        "record_effect_intent",
        "finish",
        "hand_back",
        "note_dispatch",
        "submit",
        "settle",
    )

    def __init__(self, real: Any, machine: AppliedWrites, crash_at: int | None, after: bool):
        self._real = real
        self._machine = machine
        self._crash_at = crash_at
        self._after = after
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if name not in self.WRITES:
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            crash_here = self._crash_at == self._calls
            if crash_here and not self._after:
                raise Crash
            answer = method(*args, **kwargs)
            self._machine.applied(name, args, kwargs, answer)
            if crash_here:
                raise Crash
            return answer

        return call


class AppliedWrites:
    """What workers wrote, checked as it lands: at most one valid lease per job, every write
    under the table's current epoch, one visible result per job, no open effect dropped."""

    claims: list[Claim]
    snapshots: list[Job]
    results: dict[str, int]
    open_effects: dict[str, str]

    def _job(self, job_id: str) -> Job:
        raise NotImplementedError

    def applied(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], answer: Any
    ) -> None:
        """Called right after a worker's store call was applied."""
        if name == "claim":
            job: Job = answer
            now = kwargs["now"]
            for earlier in self.claims:
                if earlier.job_id == job.job_id and not earlier.released:
                    assert earlier.expires_at < now, "two valid leases on one job"
                    earlier.released = True
            self.claims.append(Claim(job.job_id, job.epoch, job.lease_expires_at or 0))
            self.snapshots.append(job)
            return
        if name == "note_dispatch":
            return
        if name in {"submit", "settle"}:  # the operation ledger: under the fence like the rest
            held_job: Job = args[0]
            assert answer.epoch == held_job.epoch, f"ledger {name} landed under another epoch"
            return
        held: Job = args[0]
        if name == "finish" and args[1] is JobState.SUCCEEDED:
            self.results[held.job_id] = self.results.get(held.job_id, 0) + 1
        # heartbeat, checkpoint and intent answer with the item they wrote; outcomes are read
        current = answer if isinstance(answer, Job) else self._job(held.job_id)
        assert current.epoch == held.epoch, (
            f"{name} landed under epoch {held.epoch}, not {current.epoch}"
        )
        if name == "heartbeat":
            for claim in self.claims:
                if claim.job_id == held.job_id and claim.epoch == held.epoch:
                    claim.expires_at = answer.lease_expires_at or claim.expires_at
        if name == "record_effect_intent":
            intent = kwargs["intent"] if "intent" in kwargs else args[1]
            self.open_effects[held.job_id] = intent["operation_id"]
        if name == "save_checkpoint":
            self.open_effects.pop(held.job_id, None)
        if name in {"finish", "hand_back"}:
            if kwargs.get("settle_effect"):
                self.open_effects.pop(held.job_id, None)
            self._release(held.job_id)

    def _release(self, job_id: str) -> None:
        for claim in self.claims:
            if claim.job_id == job_id:
                claim.released = True
