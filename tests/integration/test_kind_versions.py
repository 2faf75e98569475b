"""Kind versions (issue 28 item 4, arch §23, decisions KV1–KV4), on moto through the harness: a
kind `steady` v1 runs a job to a checkpoint mid-way (its step fails once and is retried), a
deploy swaps in v2 under the same name, and the job resumes under v2. It never runs a step of
one list on a checkpoint of the other: a change inside the finished part stops it `failed` /
`kind_changed`, a change after it runs on, a declared migration maps it, and an operator's
replay from the start runs v2 from step 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from leasehold import (
    Checkpoint,
    Effect,
    Kind,
    Migration,
    RetryableError,
    StepContext,
    ValidationError,
)
from leasehold.domain.options import Submission
from leasehold.domain.states import JobState
from leasehold.domain.versions import StepList
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.service.kinds import JobKind, step_list_of
from leasehold.service.ops import OpsService
from leasehold.store.history import expand
from leasehold.testing import LeaseholdTestbed
from tests.support.harness import ALICE, OPS, Harness

pytestmark = pytest.mark.integration

RETRY_WAIT_MS = 10_000  # over the harness's retry cap (8 s)


class Deploy:
    """One kind name, deployed as successive versions; every step run is logged in `calls`."""

    def __init__(self, harness: Harness) -> None:
        self.h = harness
        self.calls: list[str] = []
        self.fail_once: set[str] = set()

    def version(
        self,
        *names: str,
        migrations: Mapping[str, Migration] | None = None,
        approval: str = "",
        effect: str = "",
    ) -> EngineKind:
        kind = Kind("steady", migrations=migrations)
        for name in names:
            kind.step(
                name,
                approval=name == approval,
                effect=Effect("acme-pay", "idempotent_key") if name == effect else None,
            )(self._step(name))
        return EngineKind(kind)

    def _step(self, name: str) -> Any:
        def run(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            self.calls.append(name)
            if name in self.fail_once:
                self.fail_once.discard(name)
                raise RetryableError(f"{name} is not ready yet")
            return {"step": name, "saw": sorted(ctx.outputs)}

        return run

    def kinds(self, kind: EngineKind) -> dict[str, JobKind]:
        return {"steady": kind}

    def jobs(self, kind: EngineKind) -> JobService:
        return JobService(
            self.h.stores, self.kinds(kind), self.h.clock, self.h.new_id, self.h.telemetry
        )

    def submit(self, kind: EngineKind, payload: dict[str, Any] | None = None) -> str:
        body = {"kind": "steady", "payload": payload or {}}
        return self.jobs(kind).accept(ALICE, Submission.from_body(body)).job_id

    def deliver(self, kind: EngineKind, job_id: str) -> str:
        self.h.clock.advance(RETRY_WAIT_MS)
        worker = self.h.worker(kinds=self.kinds(kind))
        return worker.handle(self.h.wakeup(job_id)).outcome

    def to_checkpoint(self, kind: EngineKind, failing: str) -> str:
        """A job of `kind` run until `failing` fails once: queued, its checkpoint before it."""
        self.fail_once = {failing}
        job_id = self.submit(kind)
        assert self.deliver(kind, job_id) == "retry_scheduled"
        return job_id


@pytest.fixture
def deploy(harness: Harness) -> Deploy:
    return Deploy(harness)


def test_a_job_records_its_step_list_at_accept(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.submit(v1)
    job = deploy.h.store.get(job_id)
    assert job is not None and job.step_list is not None
    recorded = StepList.decode(job.step_list)
    assert recorded is not None and len(recorded.digests) == 3
    assert recorded.fingerprint == v1.kind.fingerprint()
    # the recorded list is on the item the accept already writes (no write of its own)
    assert deploy.h.raw(job_id)["step_list"] == job.step_list


def test_a_planned_kind_records_the_list_planned_for_that_job(deploy: Deploy) -> None:
    kind = Kind("steady")

    @kind.planner
    def plan(payload: dict[str, Any]) -> Sequence[Any]:
        from leasehold import Step

        return [Step(f"part_{i}", lambda ctx, p: None) for i in range(payload["parts"])]

    engine = EngineKind(kind)
    two, three = deploy.submit(engine, {"parts": 2}), deploy.submit(engine, {"parts": 3})
    lists = [deploy.h.store.get(job_id).step_list for job_id in (two, three)]  # type: ignore[union-attr]
    assert lists[0] == step_list_of(kind.plan({"parts": 2})).encode()
    assert lists[1] == step_list_of(kind.plan({"parts": 3})).encode()
    assert lists[0] != lists[1]
    assert kind.fingerprint({"parts": 2}) != kind.fingerprint({"parts": 3})


def test_a_step_inserted_before_the_checkpoint_stops_the_job_kind_changed(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    assert deploy.h.store.get(job_id).checkpoint.next_step == 2  # type: ignore[union-attr]
    v2 = deploy.version("a", "x", "b", "c")

    assert deploy.deliver(v2, job_id) == "failed"

    # b is not run again, x never runs on a checkpoint that has no x, c never sees b as x
    assert deploy.calls == ["a", "b", "c"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.state is JobState.FAILED
    assert job.stop_reason == "kind_changed"
    assert job.error is not None and job.error["code"] == "kind_changed"
    message = job.error["message"]
    assert v1.kind.fingerprint() in message and v2.kind.fingerprint() in message
    assert "step 1 differs (now 'x')" in message
    assert job.error["recorded"] == v1.kind.fingerprint()
    assert job.error["current"] == v2.kind.fingerprint()
    assert job.checkpoint.next_step == 2  # what it did is kept for the replay


def test_a_step_removed_before_the_checkpoint_never_lets_the_job_succeed(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version("a", "c")

    assert deploy.deliver(v2, job_id) == "failed"

    assert deploy.calls == ["a", "b", "c"]  # c only its one failed try: no success without it
    job = deploy.h.store.get(job_id)
    assert job is not None and job.state is JobState.FAILED
    assert job.error is not None and job.error["code"] == "kind_changed"
    assert "step 1 differs (now 'c')" in job.error["message"]


def test_a_reordered_finished_part_stops_the_job(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    assert deploy.deliver(deploy.version("b", "a", "c"), job_id) == "failed"
    assert deploy.calls == ["a", "b", "c"]
    assert deploy.h.state(job_id) == "failed"


def test_a_step_appended_after_the_checkpoint_runs_on(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b")
    job_id = deploy.to_checkpoint(v1, "b")
    v2 = deploy.version("a", "b", "c")
    deploy.fail_once = {"c"}  # to see the job between its steps under v2

    assert deploy.deliver(v2, job_id) == "retry_scheduled"
    job = deploy.h.store.get(job_id)
    assert job is not None and job.checkpoint.next_step == 2
    assert job.step_list == step_list_of(v2.plan({})).encode()  # it goes on under v2 now
    assert job.steps_total == 3  # the view's progress counts the new list

    assert deploy.deliver(v2, job_id) == "succeeded"

    assert deploy.calls == ["a", "b", "b", "c", "c"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    assert job.result == {"step": "c", "saw": ["a", "b"]}
    assert "step_list" not in deploy.h.raw(job_id)  # a finished job keeps no list (C6)


def test_the_next_step_changed_runs_on_when_the_job_holds_nothing_of_it(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version("a", "b", "d")

    assert deploy.deliver(v2, job_id) == "succeeded"

    assert deploy.calls == ["a", "b", "c", "d"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.result == {"step": "d", "saw": ["a", "b"]}


def test_a_migration_maps_the_old_checkpoint_and_the_job_runs_on(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")

    def insert_x(old: Checkpoint) -> Checkpoint:
        a, *rest = old.outputs
        return Checkpoint(old.next_step + 1, (a, {"step": "x", "migrated": True}, *rest))

    v2 = deploy.version("a", "x", "b", "c", migrations={v1.kind.fingerprint(): insert_x})

    assert deploy.deliver(v2, job_id) == "succeeded"

    assert deploy.calls == ["a", "b", "c", "c"]  # only c, the step the job had not finished
    job = deploy.h.store.get(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    assert job.result == {"step": "c", "saw": ["a", "b", "x"]}


@pytest.mark.parametrize(
    ("migration", "why"),
    [
        (lambda old: 1 / 0, "raised ZeroDivisionError"),
        (lambda old: {"next_step": 3}, "returned dict, not a leasehold.Checkpoint"),
        (lambda old: Checkpoint(3, old.outputs), "2 outputs for next_step 3"),
        (lambda old: Checkpoint(9, (1,) * 9), "next_step 9 is not between 0 and 4"),
        (lambda old: Checkpoint(1, (float("nan"),)), "not JSON"),
    ],
)
def test_a_migration_that_fails_stops_the_job_once(
    deploy: Deploy, migration: Migration, why: str
) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version("a", "x", "b", "c", migrations={v1.kind.fingerprint(): migration})

    assert deploy.deliver(v2, job_id) == "failed"

    assert deploy.calls == ["a", "b", "c"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.stop_reason == "kind_changed"
    assert job.error is not None and job.error["code"] == "migration_failed"
    assert why in job.error["message"]
    assert v1.kind.fingerprint() in job.error["message"]
    assert v2.kind.fingerprint() in job.error["message"]
    assert job.attempts == 2  # stopped at once: no retry spent on it


def test_a_migration_from_another_version_is_not_applied(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version(
        "a", "x", "b", "c", migrations={"0123456789ab": lambda old: Checkpoint(0, ())}
    )
    assert deploy.deliver(v2, job_id) == "failed"
    job = deploy.h.store.get(job_id)
    assert job is not None and job.error is not None and job.error["code"] == "kind_changed"


def test_replay_from_the_start_runs_the_new_steps_from_step_zero(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version("a", "x", "b", "c")
    assert deploy.deliver(v2, job_id) == "failed"
    ops = OpsService(
        deploy.h.stores, deploy.h.queue, deploy.h.clock, deploy.h.telemetry, {"steady": v2}
    )

    view = ops.replay(job_id, OPS, {"from": "start", "note": "steady v2 deployed"})

    assert view["state"] == "queued"
    raw = deploy.h.raw(job_id)
    assert raw["next_step"] == 0 and raw["outputs"] == "[]" and "step_list" not in raw
    assert raw["cost_used"] == 0 and raw["steps_used"] == 0
    assert "from the start" in expand(raw["history"][-1])["reason"]
    deploy.calls.clear()
    deploy.fail_once = {"c"}  # to see the job between its steps

    assert deploy.deliver(v2, job_id) == "retry_scheduled"
    job = deploy.h.store.get(job_id)
    assert job is not None and job.checkpoint.next_step == 3
    assert job.step_list == step_list_of(v2.plan({})).encode()  # recorded at its claim
    assert job.steps_total == 4

    assert deploy.deliver(v2, job_id) == "succeeded"

    assert deploy.calls == ["a", "x", "b", "c", "c"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.result == {"step": "c", "saw": ["a", "b", "x"]}


def test_replay_from_the_checkpoint_stops_the_job_again_without_running_a_step(
    deploy: Deploy,
) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    v2 = deploy.version("a", "x", "b", "c")
    assert deploy.deliver(v2, job_id) == "failed"
    ops = OpsService(
        deploy.h.stores, deploy.h.queue, deploy.h.clock, deploy.h.telemetry, {"steady": v2}
    )
    ops.replay(job_id, OPS, {})  # the default: from the checkpoint
    assert deploy.deliver(v2, job_id) == "failed"
    assert deploy.calls == ["a", "b", "c"]


def test_replay_refuses_an_unknown_from(deploy: Deploy) -> None:
    v1 = deploy.version("a", "b", "c")
    job_id = deploy.to_checkpoint(v1, "c")
    assert deploy.deliver(deploy.version("a", "x", "b", "c"), job_id) == "failed"
    ops = OpsService(deploy.h.stores, deploy.h.queue, deploy.h.clock, deploy.h.telemetry, {})
    with pytest.raises(ValidationError, match="'from' must be"):
        ops.replay(job_id, OPS, {"from": "step 2"})
    assert deploy.h.state(job_id) == "failed"


def approved_at_b(deploy: Deploy) -> str:
    """A job of [a, b (asks approval)] paused before b, then approved: queued again."""
    v1 = deploy.version("a", "b", approval="b")
    job_id = deploy.submit(v1)
    assert deploy.deliver(v1, job_id) == "waiting_approval"
    job = deploy.h.store.get(job_id)
    assert job is not None
    deploy.jobs(v1).decide_approval(ALICE, job_id, {"decision": "approve", "version": job.version})
    return job_id


def test_an_approval_given_to_a_step_that_changed_is_not_used_by_the_new_one(
    deploy: Deploy,
) -> None:
    job_id = approved_at_b(deploy)
    v2 = deploy.version("a", "b2", approval="b2")

    assert deploy.deliver(v2, job_id) == "failed"

    assert deploy.calls == ["a"]  # b2 never runs on b's approval
    job = deploy.h.store.get(job_id)
    assert job is not None and job.error is not None and job.error["code"] == "kind_changed"


def test_an_approved_step_that_did_not_change_runs_on_after_an_append(deploy: Deploy) -> None:
    job_id = approved_at_b(deploy)
    v2 = deploy.version("a", "b", "c", approval="b")

    assert deploy.deliver(v2, job_id) == "succeeded"

    assert deploy.calls == ["a", "b", "c"]  # b's approval is used once, not asked again


def test_the_testbed_deploys_a_changed_kind_under_a_job_in_flight() -> None:
    """What a user's own test of a changed kind looks like (docs/sdk.md): leasehold.testing's
    testbed, a job waiting for its retry, `deploy` of v2, then a replay from the start."""
    calls: list[str] = []
    tries: dict[str, int] = {}

    def make(*names: str, migrations: Mapping[str, Migration] | None = None) -> Kind:
        kind = Kind("steady", migrations=migrations)
        for name in names:

            def run(ctx: StepContext, payload: dict[str, Any], name: str = name) -> str:
                calls.append(name)
                tries[name] = tries.get(name, 0) + 1
                if name == "c" and tries[name] == 1:
                    raise RetryableError("c is not ready yet")
                return name

            kind.step(name)(run)
        return kind

    with LeaseholdTestbed([make("a", "b", "c")]) as tb:
        job_id = tb.submit("steady", {})
        tb.run_until_idle()
        assert tb.state(job_id) == "queued" and calls == ["a", "b", "c"]

        tb.deploy(make("a", "x", "b", "c"))
        tb.drain()

        view = tb.view(job_id)
        assert view["state"] == "failed" and view["error"]["code"] == "kind_changed"
        assert calls == ["a", "b", "c"]

        tb.replay(job_id, note="v2 is out", from_start=True)
        tb.drain()
        assert tb.view(job_id)["state"] == "succeeded"
        assert calls == ["a", "b", "c", "a", "x", "b", "c"]


def test_a_changed_step_with_its_effect_open_leaves_the_job_unknown(deploy: Deploy) -> None:
    v1 = deploy.version("a", "pay", effect="pay")
    job_id = deploy.to_checkpoint(v1, "pay")  # the provider's answer was lost: still open
    job = deploy.h.store.get(job_id)
    assert job is not None and job.effect_intent is not None
    v2 = deploy.version("a", "charge", effect="charge")

    assert deploy.deliver(v2, job_id) == "unknown"

    assert deploy.calls == ["a", "pay"]  # charge never runs on pay's open operation
    job = deploy.h.store.get(job_id)
    assert job is not None and job.state is JobState.UNKNOWN
    assert job.error is not None and "changed under this job" in job.error["message"]
    assert job.effect_intent is not None  # kept for the operator to reconcile


def test_the_api_takes_from_in_a_replay_body(call: Any) -> None:
    """Through the API function: a bad `from` is a 400 naming it; `{"from": "start"}` reaches
    the replay (a queued job is not replayable: 409, nothing changes)."""
    status, made, _ = call("api-submit-job.json")
    assert status == 202
    job_id = made["job_id"]
    status, body, _ = call("api-ops-replay.json", path_id=job_id, user="ops", body={"from": 2})
    assert status == 400 and "'from' must be" in body["error"]["message"]
    status, body, _ = call(
        "api-ops-replay.json", path_id=job_id, user="ops", body={"from": "start"}
    )
    assert status == 409 and body["error"]["code"] == "not_replayable"
    assert call("api-get-job.json", path_id=job_id)[1]["state"] == "queued"


def test_replay_from_the_start_keeps_the_old_ledger_apart_from_the_new_run(
    deploy: Deploy,
) -> None:
    v1 = deploy.version("pay", "b", effect="pay")
    job_id = deploy.to_checkpoint(v1, "b")  # pay confirmed its operation, b failed once
    old_id = f"{job_id}:0"
    assert deploy.h.store.get(job_id).operations[old_id]["state"] == "confirmed"  # type: ignore[union-attr]
    v2 = deploy.version("charge", "b", effect="charge")
    assert deploy.deliver(v2, job_id) == "failed"  # step 0 is another step now
    ops = OpsService(
        deploy.h.stores, deploy.h.queue, deploy.h.clock, deploy.h.telemetry, {"steady": v2}
    )
    ops.replay(job_id, OPS, {"from": "start", "note": "charge replaces pay"})
    deploy.calls.clear()

    assert deploy.deliver(v2, job_id) == "succeeded"

    # charge ran: it did not take pay's confirmed operation at index 0 for its own
    assert deploy.calls == ["charge", "b"]
    job = deploy.h.store.get(job_id)
    assert job is not None and job.result == {"step": "b", "saw": ["charge"]}
    kept = job.operations[f"{old_id}~1"]
    assert kept["state"] == "confirmed" and kept["receipt"]["step"] == "pay"
    assert "superseded_at" in kept
    shown = {row["operation_id"]: row for row in ops.show(job_id)["operations"]}
    assert shown[f"{old_id}~1"]["superseded_at"].endswith("Z")  # a time, as the others
    assert job.operations[old_id]["receipt"]["step"] == "charge"
