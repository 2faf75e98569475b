"""The operator's DLQ redrive, audited: every redrive records who did it, when and why (DESIGN
§4: every replay, resolve and redrive records the operator's id, the time and a note).

Where SQS moves the messages itself (StartMessageMoveTask, on AWS) nobody here sees which jobs
they wake, so the record is the redrive's log line. Where the messages are moved one by one (the
fallback, on moto), each moved wake-up's job also gets a `redriven` entry in its history."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import JobNotFoundError, LeaseholdError, ValidationError
from leasehold.store.jobs import JobStore
from leasehold.store.operator import OperatorStore
from leasehold.store.queue import Wakeup, WakeupQueue

MAX_NOTE = 500


@dataclass
class RedriveReport:
    """What a redrive did and the audit it leaves: `by`, `at` (ISO), `note`."""

    by: str
    at: str
    note: str
    how: str
    moved: int | None = None
    noted_jobs: list[str] = field(default_factory=list)
    unnoted_jobs: list[str] = field(default_factory=list)
    """Jobs whose history could not take the entry (gone, or at the cap): the log has them."""
    not_wakeups: int = 0

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "redrive": "started" if self.moved is None else "done",
            "how": self.how,
            "by": self.by,
            "at": self.at,
            "note": self.note,
        }
        if self.moved is not None:
            answer.update(
                moved=self.moved,
                history_recorded=self.noted_jobs,
                history_not_recorded=self.unnoted_jobs,
                not_wakeups=self.not_wakeups,
            )
        return answer


class DeadLetterService:
    def __init__(
        self,
        queue: WakeupQueue,
        clock: Clock,
        *,
        operator_store: OperatorStore | None = None,
        jobs: JobStore | None = None,
    ) -> None:
        self._queue = queue
        self._clock = clock
        self._operator_store = operator_store
        self._jobs = jobs

    def redrive(self, *, operator: str, note: str, max_messages: int) -> RedriveReport:
        """Move the DLQ's wake-ups back to the work queue (a wake-up names its job, so each finds
        the same job; one that finished meanwhile is simply acknowledged)."""
        if not 1 <= len(note) <= MAX_NOTE:
            raise ValidationError(f"the note must be 1 to {MAX_NOTE} characters")
        if not operator:
            raise ValidationError("a redrive needs the operator's identity")
        if not 1 <= max_messages <= 100_000:
            raise ValidationError("max_messages must be between 1 and 100000")
        now = self._clock.now_ms()
        report = RedriveReport(by=operator, at=iso(now) or "", note=note, how="")

        def record(body: str) -> None:
            try:
                job_id = Wakeup.parse(body).job_id
            except (ValueError, KeyError):
                report.not_wakeups += 1
                return
            noted = False
            if self._operator_store is not None:
                try:
                    noted = self._operator_store.note_redrive(
                        job_id, operator=operator, note=note, now=now
                    )
                except LeaseholdError:  # the message has moved: the redrive goes on
                    noted = False
            (report.noted_jobs if noted else report.unnoted_jobs).append(job_id)

        moved = self._queue.redrive_dead_letters(max_messages=max_messages, on_moved=record)
        if moved < 0:
            report.how = "StartMessageMoveTask (SQS moves the messages itself)"
        else:
            report.how = "receive/send/delete (no move task here)"
            report.moved = moved
        return report

    def poison(self, job_id: str) -> Wakeup:
        """Local rehearsal only: put a wake-up for `job_id` straight into the DLQ, as if it had
        been received `maxReceiveCount` times, so that the redrive can be tried."""
        if self._jobs is None:
            raise ValidationError("no job store to read the job's owner from")
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        wakeup = Wakeup(job_id=job.job_id, owner=job.owner, dispatch_id=f"dlq-rehearsal-{job_id}")
        self._queue.send_to_dead_letters(wakeup)
        return wakeup
