"""The application toolkit (leasehold.sdk.apps) as an application uses it: a new job's entries go
straight to boto3 and make a job the worker runs; POST /jobs' checks hold; a key names one job;
and the applications shipped import nothing of leasehold but its public names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import leasehold
import leasehold.apps
import leasehold.client
from leasehold import Kind, StepContext, ValidationError
from leasehold.apps import ConditionFailed, ConflictError, job_states, job_writes
from leasehold.sdk.engine_kind import EngineKind
from tests.support.harness import ALICE, Harness

ROOT = Path(__file__).resolve().parents[2]
quiet = Kind("quiet", submittable=False, schema={"type": "object", "required": ["n"]})


@quiet.step()
def count(ctx: StepContext, payload: dict[str, int]) -> dict[str, int]:
    return {"n": payload["n"] + 1}


def test_the_writes_go_to_boto3_as_they_are_and_make_a_job_that_runs(harness: Harness) -> None:
    new = job_writes(harness.table, quiet, {"n": 1}, ALICE, now_ms=harness.clock.now_ms())
    assert all(next(iter(item.values()))["TableName"] == harness.table for item in new.writes)
    harness.dynamodb.transact_write_items(TransactItems=new.writes)
    assert job_states(harness.stores.table, [new.job_id]) == {new.job_id: "queued"}
    worker = harness.worker(kinds={"quiet": EngineKind(quiet)})
    assert worker.handle(harness.wakeup(new.job_id)).outcome == "succeeded"
    job = harness.store.get(new.job_id)
    assert job is not None and job.result == {"n": 2} and job.max_attempts == 3


@pytest.mark.parametrize(
    ("payload", "extra"),
    [
        ({}, {}),  # the kind's schema
        ({"n": 1, "pad": "x" * 17_000}, {}),  # the payload's size
        ({"n": 1}, {"max_attempts": 11}),
        ({"n": 1}, {"deadline_seconds": 0}),
        ({"n": 1}, {"budget": {"max_cost": -1}}),
        ({"n": 1}, {"idempotency_key": "no spaces"}),
    ],
)
def test_post_jobs_checks_hold(payload: dict[str, object], extra: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        job_writes("t", quiet, payload, ALICE, **extra)


def test_a_key_names_one_job_and_a_reuse_is_a_conflict(harness: Harness) -> None:
    first = job_writes(harness.stores.table, quiet, {"n": 1}, ALICE, idempotency_key="k-1")
    harness.stores.table.transact(first.writes, token=first.token)
    for payload, repeated in (({"n": 1}, True), ({"n": 2}, None)):
        again = job_writes(harness.stores.table, quiet, payload, ALICE, idempotency_key="k-1")
        assert again.job_id == first.job_id
        with pytest.raises(ConditionFailed) as failed:
            harness.stores.table.transact(again.writes)
        if repeated:
            assert again.repeated(failed.value) is True
        else:
            with pytest.raises(ConflictError, match="Idempotency-Key"):
                again.repeated(failed.value)
    elsewhere = job_writes("t", quiet, {"n": 1}, ALICE, idempotency_key="k-1", scope="other")
    assert elsewhere.job_id != first.job_id


def test_applications_import_only_leasehold_s_public_names() -> None:
    """An application imports the public names of `leasehold`, `leasehold.apps` and
    `leasehold.client` (no moved name through its deprecated alias), and nothing else."""
    public = {
        "leasehold": set(leasehold.__all__),
        "leasehold.apps": set(leasehold.apps.__all__),
        "leasehold.client": set(leasehold.client.__all__),
    }
    for path in (ROOT / "src" / "leasehold_apps").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("leasehold"):
                if node.module in public:
                    assert {alias.name for alias in node.names} <= public[node.module], path
                else:
                    assert node.module.startswith("leasehold_apps."), (path, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("leasehold."), (path, alias.name)
