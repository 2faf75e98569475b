"""The property test (arch §3, §10). A hypothesis state machine interleaves submissions, the
relay (outbox → stream → relay → queue, with delays and early messages), workers whose clocks
are skewed and whose steps take time (so they heartbeat), crashes before and after any store
write, cancels mid-step, approvals, sweeps, operator replays and resolves, late writes from
workers thought dead, store faults injected at the client boundary, and indexes that lag up to
3 s behind the table (leasehold_dev.local.moto.index_lag) — against moto, and
checks every invariant from the table after every step:

- at most one valid lease (no claim while an earlier claim's lease is live by its clock);
- epochs only grow; a write lands only under the table's current epoch (a result only from the
  lease holder); one visible result per job;
- terminal states absorb (succeeded and cancelled never change; dead and failed only by an
  operator replay);
- attempts ≤ max_attempts; budget never passed; per-user running ≤ the limit;
- an open effect is never silently dropped;
- liveness: at the end, with workers up and time running, every job comes to rest.

`test_the_machine_runs_a_thousand_interleaved_steps` runs it and counts the steps."""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from moto import mock_aws

from leasehold.domain.errors import (
    ConflictError,
    LeaseholdError,
    StaleEpochError,
    ValidationError,
)
from leasehold.domain.ids import time_ordered_ids
from leasehold.domain.job import Job
from leasehold.domain.states import JobState, is_terminal
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.relay import relay_records
from leasehold.service.worker import Disposition
from leasehold.store.items import deserialize_item, job_from_item, job_key, slots_key
from leasehold.store.slots import holders_of
from leasehold_apps.reading_list.enrich import EnrichKind
from leasehold_apps.reading_list.provider import Capability
from leasehold_apps.reading_list.service import BookmarkService
from leasehold_dev.local.moto import index_lag as moto_index_lag
from leasehold_dev.local.moto import transactions as moto_transactions
from tests.support.clockqueue import ClockQueue
from tests.support.fake_provider import FakeProvider
from tests.support.harness import ALICE, BOB, LEASE_MS, SLOT_LIMIT, Harness
from tests.support.index_lag import lag_off, lag_on
from tests.support.kinds import registry
from tests.support.stateful import (
    FAULTS,
    HEARTBEAT_MS,
    PAYLOADS,
    SKEW_MS,
    STEP_COUNTER,
    VISIBILITY_MS,
    AppliedWrites,
    Claim,
    ClockedKind,
    Crash,
    CrashingLeases,
    SkewedClock,
)

INDEX_LAG_MS = 3_000
STALE_INDEX_READS = {"reads": 0}  # index reads that answered from a past unlike the table


class LeaseholdMachine(AppliedWrites, RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        moto_transactions.install()
        self.mock = mock_aws()
        self.mock.start()
        self.h = Harness.create(seed=11)
        # Index reads lag up to 3 s behind the table (a GSI is eventually consistent; longer
        # than most of the machine's clock steps, so the sweeper meets it): no reader may act
        # on what the index says without the item agreeing
        lag_on(self.h.clock, INDEX_LAG_MS, random_up_to=True, seed=11)
        # The billable provider: recoverable capabilities only, so the invariant is strict —
        # at most one charge per operation, whatever crashes and lost answers happen
        self.provider = FakeProvider(Capability.IDEMPOTENT_KEY, lose_rate=0.25)
        self.lookup_provider = FakeProvider(Capability.STATUS_LOOKUP, lose_rate=0.25)
        self.queue = ClockQueue(self.h.clock, VISIBILITY_MS, send_failure_rate=0.02)
        self.pump = self.h.relay_pump()
        self.jobs: list[str] = []
        self.claims: list[Claim] = []
        self.snapshots: list[Job] = []  # what crashed or stalled workers last held
        self.absorbed: dict[str, tuple[str, int]] = {}
        self.replayable_terminal: dict[str, tuple[str, int]] = {}
        self.max_epoch: dict[str, int] = {}
        self.open_effects: dict[str, str] = {}
        self.results: dict[str, int] = {}
        self.operator_acts = 0
        self.fault_spec = ""
        self.max_jobs = 7
        self.lookup_jobs: set[str] = set()

    @initialize()
    def faults_on(self) -> None:
        self.fault_spec = FAULTS
        self.h.faults(FAULTS)

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            self.stop()

    def stop(self) -> None:
        STALE_INDEX_READS["reads"] += moto_index_lag.stale_reads()
        lag_off()
        self.mock.stop()

    # ------------------------------------------------------------------ rules

    @rule(choice=st.integers(0, len(PAYLOADS) - 1), bob=st.booleans())
    def submit(self, choice: int, bob: bool) -> None:
        if len(self.jobs) >= self.max_jobs:
            return
        with contextlib.suppress(LeaseholdError):  # a 503: nothing was promised
            self.jobs.append(self.h.submit(owner=BOB if bob else ALICE, **PAYLOADS[choice]))

    def _kinds_for(self, received: list[Any], midway: Any) -> dict[str, Any]:
        kinds = self._kinds(midway)
        # One batch, one provider per kind: a lookup-provider job is handled by its own kind
        if any(wakeup.job_id in self.lookup_jobs for _, wakeup in received):
            kinds["enrich"] = kinds["enrich_lookup"]
        return kinds

    def _kinds(self, midway: Any = None) -> dict[str, Any]:
        return {
            **registry(),
            "synthetic": ClockedKind(self.h.clock, midway),
            "title": EngineKind(self.h.title_kind()),
            "enrich": EngineKind(EnrichKind("http://fake", "idempotent_key", client=self.provider)),
            "enrich_lookup": EngineKind(
                EnrichKind("http://fake", "status_lookup", client=self.lookup_provider)
            ),
        }

    @rule(bob=st.booleans(), lookup=st.booleans())
    def save_and_enrich(self, bob: bool, lookup: bool) -> None:
        """A bookmark (with its title job) and an enrich job: a paid call."""
        if len(self.jobs) >= self.max_jobs - 1:
            return
        owner = BOB if bob else ALICE
        provider = self.lookup_provider if lookup else self.provider
        capability = "status_lookup" if lookup else "idempotent_key"
        service = BookmarkService(
            self.h.engine(),
            title=self.h.title_kind(),
            enrich=EnrichKind("http://fake", capability, client=provider),
            new_bookmark_id=time_ordered_ids(self.h.clock, "b"),
            new_job_id=self.h.new_id,
        )
        try:
            view, _ = service.create(owner, {"url": f"https://example.org/{len(self.jobs)}"}, None)
            self.jobs.append(view["title_job"]["job_id"])
            job_id = service.enrich(owner, view["id"], {}, None).job_id
        except LeaseholdError:
            return  # a 503: nothing was promised
        self.jobs.append(job_id)
        if lookup:
            self.lookup_jobs.add(job_id)

    @rule()
    def relay(self) -> None:
        def handler(event: dict[str, Any], _: Any) -> dict[str, Any]:
            failed = relay_records(event["Records"], self.queue, self.h.clock, self.h.telemetry)
            return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}

        self.pump._handler = handler  # noqa: SLF001 - the relay, fed into the clock queue
        self.pump.poll_once()

    @rule(
        worker=st.sampled_from(sorted(SKEW_MS)),
        batch=st.integers(1, 3),
        crash_at=st.one_of(st.none(), st.integers(1, 6)),
        crash_after=st.booleans(),
        cancel_midway=st.booleans(),
        short_invocation=st.booleans(),
    )
    def deliver(
        self,
        worker: str,
        batch: int,
        crash_at: int | None,
        crash_after: bool,
        cancel_midway: bool,
        short_invocation: bool,
    ) -> None:
        """One worker invocation: receive a batch, handle each record, delete what was acked."""
        received = self.queue.receive(batch)
        if not received:
            return
        leases = CrashingLeases(self.h.stores.leases, self, crash_at, crash_after)
        midway = None
        if cancel_midway:
            target = received[0][1]

            def midway() -> None:
                with contextlib.suppress(ConflictError, LeaseholdError):
                    self.h.jobs().cancel(target.owner, target.job_id)

        service = self.h.worker(
            worker,
            kinds=self._kinds_for(received, midway),
            heartbeat_every_ms=HEARTBEAT_MS,
            clock=SkewedClock(self.h.clock, SKEW_MS[worker]),
            stores=replace(
                self.h.stores,
                leases=leases,
                ledger=CrashingLeases(self.h.stores.ledger, self, None, False),
            ),
            queue=self.queue,
        )
        budget_ms = (LEASE_MS + 3_000) if short_invocation else 60_000
        started = self.h.clock.now_ms()

        def remaining() -> int:
            return budget_ms - (self.h.clock.now_ms() - started)

        for receipt, wakeup in received:
            try:
                result = service.handle(wakeup, receipt, remaining_ms=remaining)
            except Crash:
                return  # the process died: nothing more is deleted
            if result.disposition is Disposition.ACK:
                self.queue.delete(receipt)

    @rule(ms=st.sampled_from([100, 1_000, LEASE_MS // 2, LEASE_MS + 1, 60_000]))
    def advance_clock(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @rule()
    def sweep(self) -> None:
        self.h.sweep()

    @rule(on=st.booleans())
    def toggle_faults(self, on: bool) -> None:
        self.fault_spec = FAULTS if on else ""
        self.h.faults(self.fault_spec)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        job = self._job(job_id)
        try:
            self.h.jobs().cancel(job.owner, job_id)
        except ConflictError:
            # Only a job that is done (or waits for an operator) refuses a cancel; the state
            # read before may have moved on meanwhile, so the table is read again.
            now_state = self._job(job_id).state
            assert is_terminal(now_state) or now_state is JobState.UNKNOWN, now_state
        except LeaseholdError:
            pass

    @precondition(lambda self: self.jobs)
    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data: st.DataObject, approve: bool) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        job = self._job(job_id)
        decision = {"decision": "approve" if approve else "reject", "version": job.version}
        try:
            self.h.jobs().decide_approval(job.owner, job_id, decision)
        except ConflictError:
            assert self._job(job_id).version != job.version or job.state is not (
                JobState.WAITING_APPROVAL
            ), "an approval at the current version of a waiting job was refused"
        except LeaseholdError:
            pass

    @precondition(lambda self: self.jobs)
    @rule(data=st.data(), succeeded=st.booleans())
    def operator(self, data: st.DataObject, succeeded: bool) -> None:
        """Replay a dead/failed/unknown job, or resolve an unknown one."""
        job_id = data.draw(st.sampled_from(self.jobs))
        job = self._job(job_id)
        try:
            if job.state is JobState.UNKNOWN and succeeded:
                self.h.ops().resolve(
                    job_id, self.h.operator, {"outcome": "succeeded", "note": "provider checked"}
                )
            else:
                self.h.ops().replay(
                    job_id, self.h.operator, {"note": "checked", "checked_provider": True}
                )
        except (ConflictError, ValidationError):
            return
        except LeaseholdError:
            return
        self.open_effects.pop(job_id, None)
        self.replayable_terminal.pop(job_id, None)
        self.operator_acts += 1

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def late_write(self, data: st.DataObject) -> None:
        """A worker that was thought dead comes back and tries to save its result."""
        held = data.draw(st.sampled_from(self.snapshots))
        now = self.h.clock.now_ms()
        before = self._job(held.job_id)
        try:
            self.h.stores.leases.finish(
                held,
                JobState.SUCCEEDED,
                now=now,
                checkpoint=held.checkpoint,
                result={"late": held.epoch},
                settle_effect=True,
                history={"ev": "late", "t": now},
            )
        except (StaleEpochError, LeaseholdError):
            return
        # The write went through: only the epoch holding a live lease may have written it.
        assert before.state is JobState.RUNNING and before.epoch == held.epoch
        assert (before.lease_expires_at or 0) > now and before.deadline_at > now
        self.results[held.job_id] = self.results.get(held.job_id, 0) + 1
        self.open_effects.pop(held.job_id, None)
        self._release(held.job_id)

    # ------------------------------------------------------------------ invariants

    def _job(self, job_id: str) -> Job:
        self.h.faults("")  # the checks read the table itself, never through injected faults
        try:
            for _ in range(5):  # a check must not fail for the SDK's own reasons (retry quota)
                with contextlib.suppress(LeaseholdError):
                    job = self.h.store.get(job_id)
                    break
            else:
                raise AssertionError(f"the table could not be read for {job_id}")
        finally:
            self.h.faults(self.fault_spec)
        assert job is not None
        return job

    def _table_now(self) -> tuple[dict[str, Job], dict[tuple[str, str], dict[str, str]]]:
        """Every job and both slot items, in one BatchGetItem (faults off for the check)."""
        keys = [job_key(job_id) for job_id in self.jobs] + [slots_key(o) for o in (ALICE, BOB)]
        self.h.faults("")
        try:
            items = self.h.stores.table.batch_get(keys)
        finally:
            self.h.faults(self.fault_spec)
        jobs: dict[str, Job] = {}
        slots: dict[tuple[str, str], dict[str, str]] = {}
        for item in items:
            if item["pk"]["S"].startswith("JOB#"):
                job = job_from_item(item)
                jobs[job.job_id] = job
            else:
                doc = deserialize_item(item)
                _, tenant, user = doc["pk"].split("#", 2)
                holders = holders_of(item)
                assert doc.get("n", 0) == len(holders), f"slot count drifted: {doc}"
                slots[(tenant, user)] = holders
        assert set(jobs) == set(self.jobs), "a job vanished"
        return jobs, slots

    @invariant()
    def invariants_hold(self) -> None:
        STEP_COUNTER["steps"] += 1
        running_per_user: dict[tuple[str, str], int] = {}
        table_jobs, slots = self._table_now()
        for job_id in self.jobs:
            job = table_jobs[job_id]
            assert job.epoch >= self.max_epoch.get(job_id, 0), "epochs only grow"
            self.max_epoch[job_id] = job.epoch
            assert job.attempts <= job.max_attempts
            if job.budget.max_cost is not None:
                assert job.checkpoint.cost_used <= job.budget.max_cost, "budget passed"
            if job.budget.max_steps is not None:
                assert job.checkpoint.steps_used <= job.budget.max_steps, "steps passed"
            assert self.results.get(job_id, 0) <= 1 + self.operator_acts, "two visible results"
            state = (job.state.value, job.version)
            if job_id in self.absorbed:
                assert state == self.absorbed[job_id], "a succeeded or cancelled job changed"
            elif job.state in {JobState.SUCCEEDED, JobState.CANCELLED}:
                self.absorbed[job_id] = state
            if job_id in self.replayable_terminal:
                assert state == self.replayable_terminal[job_id], "dead/failed changed by itself"
            elif job.state in {JobState.DEAD, JobState.FAILED}:
                self.replayable_terminal[job_id] = state
            if job_id in self.open_effects:
                assert job.effect_intent is not None, (
                    f"an open effect was dropped: {job_id} {job.state} e{job.epoch} "
                    f"{job.history[-3:]} {self.open_effects[job_id]}"
                )
                assert job.effect_intent["operation_id"] == self.open_effects[job_id]
            if job.state is JobState.RUNNING:
                key = (job.owner.tenant, job.owner.user_id)
                running_per_user[key] = running_per_user.get(key, 0) + 1
                # a running job holds its slot, under the token its claim took (or adopted)
                assert slots.get(key, {}).get(job_id) == job.slot_token, (job_id, slots)
        assert all(count <= SLOT_LIMIT for count in running_per_user.values()), running_per_user
        for provider in (self.provider, self.lookup_provider):
            twice = {key: c for key, c in provider.charges.items() if len(c) > 1}
            assert not twice, f"an operation was charged twice: {twice}"
        assert all(len(holders) <= SLOT_LIMIT for holders in slots.values()), slots

    def _drain(self) -> None:
        """Faults off, workers up and time running: every job comes to rest — terminal, or
        `unknown` (which waits for an operator by design)."""
        self.fault_spec = ""
        self.h.faults("")
        self.queue.send_failure_rate = 0.0
        self.provider.lose_rate = self.lookup_provider.lose_rate = 0.0
        steady = {
            kind: self.h.worker(
                "steady",
                kinds={**self._kinds(), "enrich": self._kinds()[kind]},
                heartbeat_every_ms=HEARTBEAT_MS,
                queue=self.queue,
            )
            for kind in ("enrich", "enrich_lookup")
        }
        for _ in range(60):
            states = {j: self._job(j) for j in self.jobs}
            pending = [
                j
                for j, job in states.items()
                if not is_terminal(job.state) and job.state is not JobState.UNKNOWN
            ]
            if not pending:
                return
            for job_id in pending:
                job = states[job_id]
                if job.state is JobState.WAITING_APPROVAL:
                    self.h.jobs().decide_approval(
                        job.owner, job_id, {"decision": "approve", "version": job.version}
                    )
            self.h.clock.advance(LEASE_MS + 1)
            self.h.sweep()
            self.relay()
            self.queue.redrive()
            for receipt, wakeup in self.queue.receive(100):
                worker = steady["enrich_lookup" if wakeup.job_id in self.lookup_jobs else "enrich"]
                if worker.handle(wakeup, receipt).disposition is Disposition.ACK:
                    self.queue.delete(receipt)
        stuck = {j: self._job(j).state.value for j in self.jobs}
        raise AssertionError(f"jobs never came to rest: {stuck}")


def test_the_machine_runs_a_thousand_interleaved_steps() -> None:
    STEP_COUNTER["steps"] = 0
    STALE_INDEX_READS["reads"] = 0
    run_state_machine_as_test(
        LeaseholdMachine,
        settings=settings(
            max_examples=12,
            stateful_step_count=100,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    assert STEP_COUNTER["steps"] >= 1_000, STEP_COUNTER
    assert STALE_INDEX_READS["reads"] > 0  # the lagging index was met, not merely switched on


def test_with_only_store_and_queue_faults_every_job_succeeds_once() -> None:
    """arch §3.9: with only store and queue faults injected, every job that would succeed
    without faults still ends `succeeded`, with one visible result."""
    machine = LeaseholdMachine()
    try:
        rng = random.Random(5)
        machine.max_jobs = 10
        for index in range(10):
            payload = rng.choice([PAYLOADS[0], PAYLOADS[1], PAYLOADS[8]])
            machine.submit(PAYLOADS.index(payload), bob=index % 2 == 0)
        machine.faults_on()
        for _ in range(300):
            states = [machine._job(j).state for j in machine.jobs]  # noqa: SLF001
            if all(state is JobState.SUCCEEDED for state in states):
                break
            machine.relay()
            machine.deliver("w1", 3, None, False, False, False)
            machine.deliver("w2", 3, None, False, False, False)
            machine.advance_clock(1_000)
            if rng.random() < 0.2:
                machine.sweep()
            machine.invariants_hold()
        assert [machine._job(j).state for j in machine.jobs] == [JobState.SUCCEEDED] * 10  # noqa: SLF001
        assert machine.results == dict.fromkeys(machine.jobs, 1)
        injected = sum(
            count for injector in machine.h.injectors for count in injector.injected.values()
        )
        assert injected > 0
        # the faults moto never raises were among them
        assert machine.h.injected("UpdateItem:TransactionConflictException") > 0
        assert machine.h.injected("Query:ThrottlingException") > 0

        assert moto_index_lag.stale_reads() > 0  # the sweeper met the lagging index
    finally:
        machine.stop()
