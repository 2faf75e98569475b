"""The DLQ redrive, audited (DESIGN §4: every redrive records the operator, the time and a note),
and the local rehearsal that puts a wake-up in the DLQ so the redrive can be tried."""

from __future__ import annotations

import json

import pytest

from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.service.redrive import DeadLetterService
from leasehold.store.operator import REDRIVE_HISTORY_CAP
from tests.support.harness import Harness, steps


def _service(harness: Harness) -> DeadLetterService:
    return DeadLetterService(
        harness.queue,
        harness.clock,
        operator_store=harness.stores.operator,
        jobs=harness.stores.jobs,
    )


def test_a_poisoned_wakeup_is_redriven_and_the_job_records_who_when_and_why(
    harness: Harness,
) -> None:
    # Given a job whose wake-up was put in the DLQ (the local rehearsal)
    job_id = harness.submit(payload=steps({}))
    before = harness.store.get(job_id)
    assert before is not None
    service = _service(harness)
    wakeup = service.poison(job_id)
    assert (wakeup.job_id, wakeup.owner) == (job_id, before.owner)
    assert harness.queue.stats().dead_letter == 1
    # When an operator redrives the DLQ with a note
    harness.clock.advance(5_000)
    report = service.redrive(operator="ops", note="throttling fixed", max_messages=10)
    # Then the wake-up is back on the work queue, naming its job, and the DLQ is empty
    assert report.moved == 1 and report.noted_jobs == [job_id] and report.unnoted_jobs == []
    assert [body["job_id"] for body in harness.bodies()] == [job_id]
    assert harness.queue.stats().dead_letter == 0
    # And the job's history says who, when and why; its version moved (a replay that read the
    # job before cannot write over the entry)
    after = harness.store.get(job_id)
    assert after is not None
    assert after.history[-1] == {
        "ev": "redriven",
        "t": harness.clock.now_ms(),
        "by": "ops",
        "n": "throttling fixed",
    }
    assert after.history[:-1] == before.history
    assert after.version == before.version + 1 and after.state is before.state
    assert report.as_dict()["by"] == "ops" and report.as_dict()["note"] == "throttling fixed"


def test_messages_for_a_missing_job_or_not_wakeups_are_moved_and_no_job_is_made(
    harness: Harness,
) -> None:
    # Given a DLQ holding a wake-up for a job that does not exist, and a foreign message
    gone = json.dumps({"job_id": "j_gone", "tenant": "t", "user_id": "u", "dispatch_id": "d"})
    harness.sqs.send_message(QueueUrl=harness.queues["dlq"], MessageBody=gone)
    harness.sqs.send_message(QueueUrl=harness.queues["dlq"], MessageBody="not json")
    # When redriven
    report = _service(harness).redrive(operator="ops", note="cleanup", max_messages=10)
    # Then both are moved, the missing job is reported without a history, and nothing is created
    assert report.moved == 2 and report.not_wakeups == 1
    assert report.noted_jobs == [] and report.unnoted_jobs == ["j_gone"]
    assert harness.store.get("j_gone") is None


def test_a_job_redriven_again_and_again_keeps_a_bounded_history(harness: Harness) -> None:
    # Given a job (no history yet) whose wake-up reaches the DLQ and is redriven many times
    job_id = harness.submit(payload=steps({}))
    assert harness.store.get(job_id).history == []  # type: ignore[union-attr]
    service = _service(harness)
    noted = 0
    for _ in range(REDRIVE_HISTORY_CAP + 5):
        service.poison(job_id)
        noted += len(service.redrive(operator="ops", note="again", max_messages=10).noted_jobs)
        harness.receive_all()
    # Then the history stops growing at the cap (the log still records every redrive)
    job = harness.store.get(job_id)
    assert job is not None and len(job.history) == REDRIVE_HISTORY_CAP
    assert noted == REDRIVE_HISTORY_CAP


def test_redrive_is_bounded_by_max_messages(harness: Harness) -> None:
    for index in range(12):
        body = json.dumps({"job_id": f"j_{index}", "tenant": "t", "user_id": "u"})
        harness.sqs.send_message(QueueUrl=harness.queues["dlq"], MessageBody=body)
    report = _service(harness).redrive(operator="ops", note="some", max_messages=5)
    assert report.moved == 5 and harness.queue.stats().dead_letter == 7


def test_a_redrive_needs_a_note_and_poison_needs_a_job(harness: Harness) -> None:
    service = _service(harness)
    with pytest.raises(ValidationError):
        service.redrive(operator="ops", note="", max_messages=10)
    with pytest.raises(JobNotFoundError):
        service.poison("j_nothing")
    assert harness.queue.stats().dead_letter == 0
