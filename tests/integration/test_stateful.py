"""A hypothesis state machine drives workers, duplicate deliveries, crashes, clock jumps, sweeps,
cancels, approvals and late writes in random interleavings against moto, checking the
invariants of DESIGN §3 after every step; at the end workers stay up and time runs, and every
job must come to rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from moto import mock_aws

from leasehold.domain.errors import ConflictError, StaleEpochError
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState, is_terminal
from leasehold.local import moto_transactions
from tests.support.harness import ALICE, BOB, LEASE_MS, SLOT_LIMIT, Harness, ScriptedKind, steps

PAYLOADS: list[dict[str, Any]] = [
    {"payload": steps({"cost": 1})},
    {"payload": steps({"cost": 2, "fail_times": 1}, {"cost": 2})},
    {"payload": steps({"cost": 1}, {"approval": True, "cost": 1})},
    {"payload": steps({"effect": True, "cost": 1})},
    {"payload": steps({"fatal": True})},
    {"payload": steps({"cost": 3}, {"cost": 3}, {"cost": 3}), "budget": {"max_cost": 5}},
    {"payload": steps({"fail_times": 5}), "max_attempts": 2},
    {"payload": steps({"cost": 1}, {"cost": 1}), "budget": {"max_steps": 1}},
]


RELEASING_OUTCOMES = {
    "succeeded",
    "failed",
    "dead",
    "cancelled",
    "waiting_approval",
    "retry_scheduled",
}


class Crash(BaseException):
    """A worker process dying mid-step (not an Exception: nothing in the worker may swallow it)."""


@dataclass
class Claim:
    job_id: str
    epoch: int
    expires_at: int
    released: bool = False


class LeaseholdMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        moto_transactions.install()
        self.mock = mock_aws()
        self.mock.start()
        self.h = Harness.create()
        self.jobs: list[str] = []
        self.claims: list[Claim] = []
        self.snapshots: list[Job] = []  # what crashed workers last held
        self.terminal: dict[str, tuple[str, int]] = {}
        self.cancelled_steps: dict[str, int] = {}
        self.max_epoch: dict[str, int] = {}
        self._spy_on_claims()

    def _spy_on_claims(self) -> None:
        store = self.h.store
        original = store.claim

        def claim(job_id: str, owner: Owner, **kwargs: Any) -> Job:
            job = original(job_id, owner, **kwargs)
            now = kwargs["now"]
            # No earlier claim of this job may still hold a valid, unreleased lease.
            for earlier in self.claims:
                if earlier.job_id == job_id and not earlier.released:
                    assert earlier.expires_at < now, "two valid leases on one job"
                    earlier.released = True
            self.claims.append(Claim(job_id, job.epoch, job.lease_expires_at or 0))
            self.snapshots.append(job)
            return job

        store.claim = claim  # type: ignore[method-assign]
        original_heartbeat = store.heartbeat

        def heartbeat(job: Job, **kwargs: Any) -> Job:
            beaten = original_heartbeat(job, **kwargs)
            for held in self.claims:
                if held.job_id == job.job_id and held.epoch == beaten.epoch:
                    held.expires_at = beaten.lease_expires_at or held.expires_at
            return beaten

        store.heartbeat = heartbeat  # type: ignore[method-assign]

    def _release(self, job_id: str) -> None:
        for claim in self.claims:
            if claim.job_id == job_id:
                claim.released = True

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            self.mock.stop()

    # ------------------------------------------------------------------ rules

    @rule(choice=st.integers(0, len(PAYLOADS) - 1), bob=st.booleans())
    def submit(self, choice: int, bob: bool) -> None:
        if len(self.jobs) < 6:
            self.jobs.append(self.h.submit(owner=BOB if bob else ALICE, **PAYLOADS[choice]))

    @precondition(lambda self: self.jobs)
    @rule(data=st.data(), worker=st.sampled_from(["w1", "w2", "w3"]), crash=st.booleans())
    def deliver(self, data: st.DataObject, worker: str, crash: bool) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))

        def maybe_crash(index: int, attempt: int, tick: Any) -> None:
            if crash:
                raise Crash

        service = self.h.worker(worker, kinds={"synthetic": ScriptedKind(maybe_crash)})
        try:
            result = service.handle(self.h.wakeup(job_id))
        except Crash:
            return
        if result.outcome in RELEASING_OUTCOMES:
            self._release(job_id)

    @rule(ms=st.sampled_from([100, LEASE_MS // 2, LEASE_MS + 1, 60_000]))
    def advance_clock(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @rule()
    def sweep(self) -> None:
        self.h.sweep()

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        job = self._job(job_id)
        try:
            view = self.h.jobs().cancel(job.owner, job_id)
        except ConflictError:
            assert is_terminal(job.state) or job.state is JobState.UNKNOWN
            return
        if view["state"] == "cancelled":
            self.cancelled_steps[job_id] = view["budget"]["steps_used"]

    @precondition(lambda self: self.jobs)
    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data: st.DataObject, approve: bool) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        job = self._job(job_id)
        decision = {"decision": "approve" if approve else "reject", "version": job.version}
        try:
            self.h.jobs().decide_approval(job.owner, job_id, decision)
        except ConflictError:
            assert job.state is not JobState.WAITING_APPROVAL
        else:
            if not approve:
                self.cancelled_steps[job_id] = job.checkpoint.steps_used

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def late_write(self, data: st.DataObject) -> None:
        """A worker that was thought dead comes back and tries to save its result."""
        held = data.draw(st.sampled_from(self.snapshots))
        current = self._job(held.job_id)
        now = self.h.clock.now_ms()
        try:
            self.h.store.finish(
                held,
                JobState.SUCCEEDED,
                now=now,
                checkpoint=held.checkpoint,
                result={"late": held.epoch},
            )
        except StaleEpochError:
            return
        # The write went through: only the epoch holding a live lease may have written it.
        assert current.state is JobState.RUNNING and current.epoch == held.epoch
        assert (current.lease_expires_at or 0) > now and current.deadline_at > now
        self._release(held.job_id)

    # ------------------------------------------------------------------ invariants

    def _job(self, job_id: str) -> Job:
        job = self.h.store.get(job_id)
        assert job is not None
        return job

    @invariant()
    def invariants_hold(self) -> None:
        now = self.h.clock.now_ms()
        running_per_user: dict[tuple[str, str], int] = {}
        for job_id in self.jobs:
            job = self._job(job_id)
            assert job.epoch >= self.max_epoch.get(job_id, 0), "epochs only grow"
            self.max_epoch[job_id] = job.epoch
            assert job.attempts <= job.max_attempts
            if job.budget.max_cost is not None:
                assert job.checkpoint.cost_used <= job.budget.max_cost
            if job.budget.max_steps is not None:
                assert job.checkpoint.steps_used <= job.budget.max_steps
            if job_id in self.terminal:
                assert (job.state.value, job.version) == self.terminal[job_id], (
                    "a terminal job changed"
                )
            elif is_terminal(job.state):
                self.terminal[job_id] = (job.state.value, job.version)
            if job_id in self.cancelled_steps:
                assert job.checkpoint.steps_used == self.cancelled_steps[job_id], (
                    "a cancelled job ran a step"
                )
            if (
                job.state is JobState.SUCCEEDED
                and isinstance(job.result, dict)
                and "late" in job.result
            ):
                assert job.result["late"] == job.epoch
            if job.state is JobState.RUNNING and (job.lease_expires_at or 0) > now:
                key = (job.owner.tenant, job.owner.user_id)
                running_per_user[key] = running_per_user.get(key, 0) + 1
        assert all(count <= SLOT_LIMIT for count in running_per_user.values())
        for owner in (ALICE, BOB):
            assert len(self.h.store.running_slots(owner)) <= SLOT_LIMIT

    def _drain(self) -> None:
        """Workers stay up and time runs: every job must reach a terminal state, or `unknown`
        (which waits for an operator by design)."""
        worker = self.h.worker("steady")
        for _ in range(40):
            pending = [
                j
                for j in self.jobs
                if not is_terminal(self._job(j).state)
                and self._job(j).state is not JobState.UNKNOWN
            ]
            if not pending:
                return
            self.h.clock.advance(LEASE_MS + 1)
            self.h.sweep()
            for job_id in pending:
                job = self._job(job_id)
                if job.state is JobState.WAITING_APPROVAL:
                    self.h.jobs().decide_approval(
                        job.owner, job_id, {"decision": "approve", "version": job.version}
                    )
                worker.handle(self.h.wakeup(job_id))
        stuck = {
            j: self._job(j).state.value for j in self.jobs if not is_terminal(self._job(j).state)
        }
        assert all(state == "unknown" for state in stuck.values()), (
            f"jobs never came to rest: {stuck}"
        )


LeaseholdMachine.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLeasehold = LeaseholdMachine.TestCase
