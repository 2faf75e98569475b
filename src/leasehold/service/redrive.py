"""The operator's DLQ redrive, audited, and proof against poison: every redrive records who did
it, when and why (docs/architecture.md "HTTP API": every replay, resolve and redrive records the
operator's id, the
time and a note), and a message that cannot wake a job is set aside, never sent round again.

A dead letter is *poison* when its body is not a wake-up (not JSON, not an object, no job id,
tenant or user) or, where the job table is at hand, names a job that does not exist. Moving it
back would only feed the worker something it drops or fails on; so the redrive hands it to the
caller's `set_aside` sink (which keeps it: the CLI appends it to a file) and only then deletes it
from the DLQ, and reports it. A redrive therefore never stops at a bad message, and a bad message
never returns: it is set aside once.

Where SQS moves the messages itself (StartMessageMoveTask, on AWS, when the job table is not at
hand) nobody here sees the messages: the record is the redrive's log line, and the worker drops a
poison wake-up on its own (handlers.worker: `malformed`; a missing job is acknowledged). Where the
messages are moved one by one (always when the job table is at hand; on moto), each moved
wake-up's job also gets a `redriven` entry in its history."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import JobNotFoundError, LeaseholdError, ValidationError
from leasehold.domain.types import JsonObject
from leasehold.store import Stores
from leasehold.store.queue import DeadLetter, Wakeup, WakeupQueue
from leasehold.store.set_aside import SetAside

MAX_NOTE = 500
MAX_BODY_BYTES = 256 * 1024
"""SQS's largest message: the most a rehearsal may put in the DLQ."""


SetAsideSink = Callable[[SetAside], None]
"""Keeps a poison message before the redrive deletes it from the DLQ; raises (a LeaseholdError)
when it cannot, and then the message stays in the DLQ and the redrive stops."""


@dataclass
class RedriveReport:
    """What a redrive did and the audit it leaves: `by`, `at` (ISO), `note`."""

    by: str
    at: str
    note: str
    how: str = ""
    moved: int | None = None
    noted_jobs: list[str] = field(default_factory=list)
    unnoted_jobs: list[str] = field(default_factory=list)
    """Moved, but the job's history could not take the entry (gone meanwhile, or at the cap)."""
    set_aside: list[SetAside] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        answer: JsonObject = {
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
                set_aside=[poison.as_dict() for poison in self.set_aside],
            )
        return answer


class DeadLetterService:
    """The DLQ's redrive. `stores`: the job table's, where it is at hand (then each message is
    examined and each moved job's history names the redrive); without them SQS may move the
    messages itself."""

    def __init__(self, queue: WakeupQueue, clock: Clock, stores: Stores | None = None) -> None:
        self._queue = queue
        self._clock = clock
        self._stores = stores

    def redrive(
        self, *, operator: str, note: str, max_messages: int, set_aside: SetAsideSink
    ) -> RedriveReport:
        """Move the DLQ's wake-ups back to the work queue (a wake-up names its job, so each
        finds the same job; one that finished meanwhile is simply acknowledged) and set the
        poison aside. At most `max_messages` are handled (moved or set aside)."""
        if not 1 <= len(note) <= MAX_NOTE:
            raise ValidationError(f"the note must be 1 to {MAX_NOTE} characters")
        if not operator:
            raise ValidationError("a redrive needs the operator's identity")
        if not 1 <= max_messages <= 100_000:
            raise ValidationError("max_messages must be between 1 and 100000")
        now = self._clock.now_ms()
        report = RedriveReport(by=operator, at=iso(now) or "", note=note)
        if self._stores is None and self._queue.start_dead_letter_move():
            report.how = "StartMessageMoveTask (SQS moves the messages itself)"
            return report
        report.how = "one by one (receive, examine, send or set aside, delete)"
        report.moved = 0
        handled = 0
        while handled < max_messages:
            batch = self._queue.receive_dead_letters(max_messages - handled)
            if not batch:
                break
            for letter in batch:
                handled += 1
                poison = self._examine(letter)
                if poison is not None:
                    set_aside(poison)  # kept first: a failure here leaves it in the DLQ
                    self._queue.delete_dead_letter(letter)
                    report.set_aside.append(poison)
                    continue
                self._queue.requeue_dead_letter(letter)
                report.moved += 1
                job_id = Wakeup.parse(letter.body).job_id
                noted = self._note(job_id, operator=operator, note=note, now=now)
                (report.noted_jobs if noted else report.unnoted_jobs).append(job_id)
        return report

    def _examine(self, letter: DeadLetter) -> SetAside | None:
        """The reason `letter` must not go back to the work queue, or None when it is a wake-up
        for a job that exists (or the job table is not at hand to say otherwise)."""
        try:
            wakeup = Wakeup.parse(letter.body)
        except ValueError as exc:
            return SetAside(letter.message_id, f"not a wake-up: {exc}", letter.body)
        if self._stores is not None and self._stores.jobs.get(wakeup.job_id) is None:
            return SetAside(
                letter.message_id, "names a job that does not exist", letter.body, wakeup.job_id
            )
        return None

    def _note(self, job_id: str, *, operator: str, note: str, now: int) -> bool:
        if self._stores is None:
            return False
        try:
            return self._stores.operator.note_redrive(job_id, operator=operator, note=note, now=now)
        except LeaseholdError:  # the message has moved: the redrive goes on, the log has it
            return False

    def dead_letter_job(self, job_id: str) -> Wakeup:
        """Local rehearsal only: put a wake-up for `job_id` straight into the DLQ, as if it had
        been received `maxReceiveCount` times, so that the redrive can be tried."""
        if self._stores is None:
            raise ValidationError("no job store to read the job's owner from")
        job = self._stores.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        wakeup = Wakeup(
            job_id=job.job_id,
            owner=job.owner,
            dispatch_id=f"dlq-rehearsal-{job_id}",
            kind=job.kind,
            priority=job.priority,
        )
        self._queue.send_to_dead_letters(wakeup.body())
        return wakeup

    def dead_letter_body(self, body: str) -> None:
        """Local rehearsal only: put any message (a poison one, say) straight into the DLQ."""
        size = len(body.encode())
        if not 1 <= size <= MAX_BODY_BYTES:
            raise ValidationError(f"a message body is 1 to {MAX_BODY_BYTES} bytes, not {size}")
        self._queue.send_to_dead_letters(body)
