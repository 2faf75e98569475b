"""The local stack's worker process acts as WorkerRole, read from the stack's state file: with
an action struck from the recorded role the same process fails its claim as AWS would, and with
the role as the template deploys it the job runs (docs/decisions.md IAM3, IAM4)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leasehold.domain.job import Owner
from leasehold.sdk.direct import submit_direct
from leasehold.store.items import deserialize_item, job_key
from leasehold_apps.synthetic import synthetic
from leasehold_dev.local.moto.server import start_moto
from leasehold_dev.local.runner import spawn_worker_process
from leasehold_dev.local.stack import StackInfo, client, create_stack
from tests.support.resources import TEMPLATE
from tests.support.worker_process import reset_backends

ALICE = Owner("study-group", "alice")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[StackInfo, Path]]:
    server, endpoint = start_moto()
    try:
        reset_backends(endpoint)  # another module's stack may still be in this process's moto
        yield create_stack(endpoint, TEMPLATE), tmp_path / "stack.json"
    finally:
        server.stop()


def _submit_and_wake(info: StackInfo) -> str:
    """A job written as the test's own hands (no role), its wake-up sent to the work queue."""
    dynamodb = client("dynamodb", info.endpoint)
    table = info.outputs["JobsTable"]
    job_id = submit_direct(
        table, synthetic, {"steps": [{"name": "only"}]}, ALICE, client=dynamodb
    ).job_id
    body = {"job_id": job_id, "tenant": ALICE.tenant, "user_id": ALICE.user_id}
    client("sqs", info.endpoint).send_message(
        QueueUrl=info.outputs["WorkQueue"], MessageBody=json.dumps({**body, "dispatch_id": "t"})
    )
    return job_id


def _state(info: StackInfo, job_id: str) -> str:
    item = client("dynamodb", info.endpoint).get_item(
        TableName=info.outputs["JobsTable"], Key=job_key(job_id), ConsistentRead=True
    )["Item"]
    return str(deserialize_item(item)["state"])


def _until(check: Any, timeout: float = 40) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _worker(state: Path, name: str) -> subprocess.Popen[bytes]:
    return spawn_worker_process(state, name, state.parent)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    worker.wait(timeout=15)


def test_the_worker_process_judges_its_calls_by_the_recorded_worker_role(
    stack: tuple[StackInfo, Path],
) -> None:
    info, state = stack
    # Given the stack's state file with dynamodb:UpdateItem struck from WorkerRole (a claim is
    # one conditional UpdateItem)
    recorded = json.loads(json.dumps(info.roles["WorkerFunction"]))
    for document in info.roles["WorkerFunction"]["documents"]:
        for statement in document["Statement"]:
            if "dynamodb:UpdateItem" in statement["Action"]:
                statement["Action"].remove("dynamodb:UpdateItem")
    info.save(state)
    job_id = _submit_and_wake(info)
    # When a worker process takes the wake-up
    worker = _worker(state, "w-struck")
    log = state.parent / "w-struck.log"
    try:
        denied = _until(lambda: log.is_file() and "AccessDeniedException" in log.read_text())
    finally:
        _stop(worker)
    # Then its claim failed as AWS fails it, and the job is still queued
    assert denied, log.read_text()
    assert _state(info, job_id) == "queued"
    # And with WorkerRole as the template deploys it, a new worker process runs the job
    info.roles["WorkerFunction"] = recorded
    info.save(state)
    worker = _worker(state, "w-deployed")
    try:
        assert _until(lambda: _state(info, job_id) == "succeeded"), (
            state.parent / "w-deployed.log"
        ).read_text()
    finally:
        _stop(worker)
