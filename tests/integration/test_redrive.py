"""The DLQ redrive, audited (arch §4: every redrive records the operator, the time and a note),
and the local rehearsal that puts a wake-up in the DLQ so the redrive can be tried."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.domain.errors import JobNotFoundError, LeaseholdError, ValidationError
from leasehold.service.redrive import DeadLetterService, RedriveReport
from leasehold.store.operator import REDRIVE_HISTORY_CAP
from leasehold.store.set_aside import SetAside
from tests.support.harness import Harness, steps


def _service(harness: Harness) -> DeadLetterService:
    return DeadLetterService(harness.queue, harness.clock, harness.stores)


class Kept(list[SetAside]):
    """The set-aside sink: what the redrive handed over, in order."""


def _redrive(harness: Harness, kept: Kept | None = None, **overrides: Any) -> RedriveReport:
    arguments: dict[str, Any] = {"operator": "ops", "note": "cleanup", "max_messages": 10}
    return _service(harness).redrive(
        **{**arguments, **overrides}, set_aside=(kept if kept is not None else Kept()).append
    )


def _dlq_total(harness: Harness) -> int:
    """Every message in the DLQ, the ones a redrive holds hidden included."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["dlq"],
        AttributeNames=names,  # type: ignore[arg-type]
    )["Attributes"]
    return sum(int(attributes[name]) for name in names)


def _dead_letter(harness: Harness, body: str) -> None:
    harness.sqs.send_message(QueueUrl=harness.queues["dlq"], MessageBody=body)


def test_a_poisoned_wakeup_is_redriven_and_the_job_records_who_when_and_why(
    harness: Harness,
) -> None:
    # Given a job whose wake-up was put in the DLQ (the local rehearsal)
    job_id = harness.submit(payload=steps({}))
    before = harness.store.get(job_id)
    assert before is not None
    service = _service(harness)
    wakeup = service.dead_letter_job(job_id)
    assert (wakeup.job_id, wakeup.owner) == (job_id, before.owner)
    assert harness.queue.stats().dead_letter == 1
    # When an operator redrives the DLQ with a note
    harness.clock.advance(5_000)
    report = _redrive(harness, note="throttling fixed")
    # Then the wake-up is back on the work queue, naming its job, and the DLQ is empty
    assert report.moved == 1 and report.noted_jobs == [job_id] and report.unnoted_jobs == []
    assert report.set_aside == []
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


POISON = [
    "not json",
    "[1, 2]",
    json.dumps({"tenant": "t", "user_id": "u"}),
    json.dumps({"job_id": "", "tenant": "t", "user_id": "u"}),
    json.dumps({"job_id": 7, "tenant": "t", "user_id": "u"}),
]


def test_poison_is_set_aside_once_and_the_good_wakeups_around_it_are_moved(
    harness: Harness,
) -> None:
    # Given a DLQ holding poison of every kind (not a wake-up; a wake-up for a job that does
    # not exist) between two wake-ups of a real job
    job_id = harness.submit(payload=steps({}))
    service = _service(harness)
    service.dead_letter_job(job_id)
    gone = json.dumps({"job_id": "j_gone", "tenant": "t", "user_id": "u", "dispatch_id": "d"})
    for body in [*POISON, gone]:
        _dead_letter(harness, body)
    service.dead_letter_job(job_id)
    # When redriven
    kept = Kept()
    report = _redrive(harness, kept)
    # Then the redrive went through: both real wake-ups are back on the work queue, and only they
    assert report.moved == 2 and report.noted_jobs == [job_id, job_id]
    assert [body["job_id"] for body in harness.bodies()] == [job_id, job_id]
    # And every poison message was handed to the sink whole, with why, then left the DLQ
    assert sorted(poison.body for poison in kept) == sorted([*POISON, gone])
    assert report.set_aside == list(kept)
    reasons = {poison.body: poison.reason for poison in kept}
    assert reasons[gone] == "names a job that does not exist"
    assert all(reasons[body].startswith("not a wake-up") for body in POISON)
    assert _dlq_total(harness) == 0 and harness.store.get("j_gone") is None
    # And a second redrive finds nothing: the poison is not retried
    again = _redrive(harness, kept)
    assert again.moved == 0 and again.set_aside == [] and len(kept) == len(POISON) + 1


def test_poison_that_cannot_be_kept_stays_in_the_dlq(harness: Harness) -> None:
    # Given a poison message, and a sink that fails (a full disk, say)
    _dead_letter(harness, "not json")

    def broken(_: SetAside) -> None:
        raise LeaseholdError("disk full")

    # When redriven, the failure is the redrive's error, and the message is not deleted
    with pytest.raises(LeaseholdError, match="disk full"):
        _service(harness).redrive(operator="ops", note="n", max_messages=10, set_aside=broken)
    assert _dlq_total(harness) == 1  # held for a while, not deleted


def test_without_the_job_table_a_wakeup_is_moved_but_a_non_wakeup_is_still_set_aside(
    harness: Harness,
) -> None:
    # The deployed CLI has no job table: on moto (no move task) it still screens the bodies
    _dead_letter(harness, json.dumps({"job_id": "j_x", "tenant": "t", "user_id": "u"}))
    _dead_letter(harness, "not json")
    kept = Kept()
    report = DeadLetterService(harness.queue, harness.clock).redrive(
        operator="ops", note="n", max_messages=10, set_aside=kept.append
    )
    assert report.moved == 1 and report.unnoted_jobs == ["j_x"]
    assert [poison.body for poison in kept] == ["not json"]


def test_a_job_redriven_again_and_again_keeps_a_bounded_history(harness: Harness) -> None:
    # Given a job (no history yet) whose wake-up reaches the DLQ and is redriven many times
    job_id = harness.submit(payload=steps({}))
    assert harness.store.get(job_id).history == []  # type: ignore[union-attr]
    service = _service(harness)
    noted = 0
    for _ in range(REDRIVE_HISTORY_CAP + 5):
        service.dead_letter_job(job_id)
        noted += len(_redrive(harness, note="again").noted_jobs)
        harness.receive_all()
    # Then the history stops growing at the cap (the log still records every redrive)
    job = harness.store.get(job_id)
    assert job is not None and len(job.history) == REDRIVE_HISTORY_CAP
    assert noted == REDRIVE_HISTORY_CAP


def test_redrive_is_bounded_by_max_messages(harness: Harness) -> None:
    service = _service(harness)
    _dead_letter(harness, "poison")
    for _ in range(12):
        service.dead_letter_job(harness.submit(payload=steps({})))
    report = _redrive(harness, max_messages=5)
    # five handled (moved or set aside); the other eight wait in the DLQ
    assert report.moved is not None and report.moved + len(report.set_aside) == 5
    assert harness.queue.stats().dead_letter == 8


def test_a_redrive_needs_a_note_and_poison_needs_a_job(harness: Harness) -> None:
    service = _service(harness)
    with pytest.raises(ValidationError):
        _redrive(harness, note="")
    with pytest.raises(JobNotFoundError):
        service.dead_letter_job("j_nothing")
    with pytest.raises(ValidationError):
        service.dead_letter_body("")
    assert harness.queue.stats().dead_letter == 0
