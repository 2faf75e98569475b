"""Kind versions, pure (decisions KV1–KV3): what a step's identity is, and how a claimed job
goes on under the list its kind plans now — the cases the integration tests do not walk (an
approval, an open effect or an operation of the next step; a job with no list recorded)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasehold import Checkpoint, Effect, Kind, KindDefinitionError
from leasehold.domain.job import Checkpoint as Saved
from leasehold.domain.job import Job, Owner, new_job
from leasehold.domain.versions import StepList
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.kinds import StepPlan, step_list_of
from leasehold.service.versions import Changed, RunOn, on_resume

pytestmark = pytest.mark.unit

ALICE = Owner("t", "alice")


def kind(*names: str, approval: str = "", effect: str = "", **options: Any) -> Kind:
    declared = Kind("k", **options)
    for name in names:
        declared.step(
            name,
            approval=name == approval,
            effect=Effect("pay", "idempotent_key") if name == effect else None,
        )(lambda ctx, payload: None)
    return declared


def job_at(recorded: Kind, next_step: int, **fields: Any) -> Job:
    plan = recorded.plan({})
    job = new_job(
        "j_1",
        "k",
        ALICE,
        {},
        now=0,
        steps_total=len(plan),
        step_list=step_list_of(plan).encode(),
    )
    job.checkpoint = Saved(next_step=next_step, outputs=[{"n": i} for i in range(next_step)])
    return replace(job, **fields)


def resume(job: Job, now: Kind) -> RunOn | Changed:
    engine = EngineKind(now)
    return on_resume(job, "k", engine.plan({}), engine.migrate)


def test_a_steps_identity_is_its_name_approval_and_effect_not_its_cost_or_timeout() -> None:
    base = Kind("k")
    base.step("a", cost=1, timeout_seconds=5)(lambda ctx, p: None)
    tuned = Kind("k")
    tuned.step("a", cost=9, timeout_seconds=60)(lambda ctx, p: None)
    assert base.fingerprint() == tuned.fingerprint()
    assert kind("a").fingerprint() != kind("b").fingerprint()
    assert kind("a").fingerprint() != kind("a", approval="a").fingerprint()
    assert kind("a").fingerprint() != kind("a", effect="a").fingerprint()
    assert kind("a", "b").fingerprint() != kind("b", "a").fingerprint()
    bare = StepPlan("a", 0, 1000, False, True)
    assert bare.digest() != StepPlan("a", 0, 1000, False, False).digest()


def test_the_same_list_goes_on_without_a_write() -> None:
    verdict = resume(job_at(kind("a", "b"), 1), kind("a", "b"))
    assert isinstance(verdict, RunOn) and not verdict.write


def test_a_job_with_no_list_recorded_takes_the_current_one() -> None:
    job = job_at(kind("a", "b"), 1, step_list=None)
    verdict = resume(job, kind("x", "b"))
    assert isinstance(verdict, RunOn) and verdict.write
    assert verdict.step_list == step_list_of(kind("x", "b").plan({})).encode()
    assert verdict.checkpoint == job.checkpoint


def test_a_changed_next_step_the_job_holds_nothing_of_runs_on_with_its_tries_reset() -> None:
    job = job_at(kind("a", "b"), 1)
    job.checkpoint.step_failures = 2
    verdict = resume(job, kind("a", "c"))
    assert isinstance(verdict, RunOn) and verdict.write
    assert verdict.checkpoint.step_failures == 0 and verdict.checkpoint.next_step == 1


@pytest.mark.parametrize(
    "held",
    [
        {"approved": True},
        {"operations": {"j_1:1": {"state": "confirmed", "provider": "pay"}}},
    ],
    ids=["approval", "operation"],
)
def test_a_changed_next_step_the_job_holds_something_of_stops_it(held: dict[str, Any]) -> None:
    job = job_at(kind("a", "b"), 1, operations=held.get("operations", {}))
    if held.get("approved"):
        job.checkpoint.approved_step = 1
    verdict = resume(job, kind("a", "c"))
    assert isinstance(verdict, Changed) and not verdict.effect_open
    assert verdict.error["code"] == "kind_changed" and verdict.error["step"] == "1"


def test_an_open_effect_makes_a_changed_job_unknown_not_failed() -> None:
    intent = {"operation_id": "j_1:1", "step": 1, "capability": "idempotent_key"}
    job = job_at(kind("a", "b", effect="b"), 1, effect_intent=intent)
    verdict = resume(job, kind("a", "c", effect="c"))
    assert isinstance(verdict, Changed) and verdict.effect_open


def test_an_open_effect_is_never_mapped_by_a_migration() -> None:
    intent = {"operation_id": "j_1:1", "step": 1, "capability": "idempotent_key"}
    old = kind("a", "b", effect="b")
    job = job_at(old, 1, effect_intent=intent)
    now = kind("x", "a", "b", effect="b", migrations={old.fingerprint(): lambda c: c})
    verdict = resume(job, now)
    assert isinstance(verdict, Changed) and verdict.effect_open
    assert (
        verdict.error["code"] == "migration_failed" and "effect is open" in verdict.error["message"]
    )


def test_a_migration_never_hands_a_step_an_operation_of_the_old_list() -> None:
    old = kind("a", "b", effect="a")
    job = job_at(old, 1, operations={"j_1:0": {"state": "confirmed"}})
    # the effect step moved to index 1 and the migration puts the job back before it
    now = kind("x", "a", "b", effect="a", migrations={old.fingerprint(): lambda c: Checkpoint(0)})
    verdict = resume(job, now)
    assert isinstance(verdict, Changed)
    assert "operation j_1:0 of the old list" in verdict.error["message"]


def test_a_migration_keeps_budget_use_and_drops_the_old_approval() -> None:
    old = kind("a", "b", approval="b")
    job = job_at(old, 1)
    job.checkpoint.cost_used, job.checkpoint.steps_used, job.checkpoint.approved_step = 7, 1, 1
    shift = {old.fingerprint(): lambda c: Checkpoint(2, (None, *c.outputs))}
    verdict = resume(job, kind("x", "a", "b", approval="b", migrations=shift))
    assert isinstance(verdict, RunOn) and verdict.migrated_from == old.fingerprint()
    assert verdict.checkpoint.next_step == 2 and verdict.checkpoint.outputs == [None, {"n": 0}]
    assert (verdict.checkpoint.cost_used, verdict.checkpoint.steps_used) == (7, 1)
    assert verdict.checkpoint.approved_step is None


def test_an_unreadable_recorded_list_is_taken_as_none() -> None:
    assert StepList.decode("") is None and StepList.decode("xyz.12") is None
    verdict = resume(job_at(kind("a"), 0, step_list="garbage"), kind("b"))
    assert isinstance(verdict, RunOn) and verdict.write


@pytest.mark.parametrize(
    ("migrations", "why"),
    [
        ({"not-a-print": lambda c: c}, "is not a fingerprint"),
        ({"0123456789ab": "not callable"}, "is not callable"),
        ([("0123456789ab", lambda c: c)], "is a mapping"),
    ],
)
def test_a_bad_migration_is_refused_where_it_is_declared(migrations: Any, why: str) -> None:
    with pytest.raises(KindDefinitionError, match=why):
        Kind("k", migrations=migrations)


NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
LISTS = st.lists(NAMES, min_size=1, max_size=6, unique=True)


@given(old=LISTS, new=LISTS, data=st.data())
@settings(max_examples=300, deadline=None)
def test_a_job_never_runs_on_under_a_list_whose_done_part_differs(
    old: list[str], new: list[str], data: st.DataObject
) -> None:
    """Whatever the two lists and the checkpoint: the job runs on only when the steps it
    finished (and the one it holds an approval of) are the same steps at the same places, and
    then always."""
    done = data.draw(st.integers(0, len(old) - 1), label="next_step")
    approved = data.draw(st.booleans(), label="approved")
    job = job_at(kind(*old), done)
    if approved:
        job.checkpoint.approved_step = done
    verdict = resume(job, kind(*new))
    upto = done + 1 if approved else done
    same = old[:upto] == new[:upto] and len(new) >= upto
    assert isinstance(verdict, RunOn) is same, (old, new, done, approved, verdict)
    if isinstance(verdict, RunOn):
        assert verdict.write is (old != new)
        assert verdict.checkpoint.outputs == job.checkpoint.outputs
    else:
        first = next(i for i in range(upto) if i >= len(new) or old[i] != new[i])
        assert verdict.error["step"] == str(first)
