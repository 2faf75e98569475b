"""The work queue: SQS carries wake-ups only. The job item is the authority; every message is
safe to deliver twice, late, or never (the sweeper re-dispatches a lost one)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import LeaseholdError
from leasehold.domain.job import Owner
from leasehold.store.errors import error_code, translate

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

MAX_VISIBILITY_SECONDS = 43_200
DEAD_LETTER_HOLD_SECONDS = 60
"""How long a redrive keeps a DLQ message it received hidden while it moves or sets it aside."""


@dataclass(frozen=True)
class Wakeup:
    """One message: which job to look at, whose slot it uses, and the dispatch it came from."""

    job_id: str
    owner: Owner
    dispatch_id: str
    delay_seconds: int = 0
    kind: str | None = None
    """The job's kind, when the write that dispatched knew it (its concurrency limits, F2)."""

    def body(self) -> str:
        doc = {
            "job_id": self.job_id,
            "tenant": self.owner.tenant,
            "user_id": self.owner.user_id,
            "dispatch_id": self.dispatch_id,
        }
        if self.kind is not None:
            doc["kind"] = self.kind
        return json.dumps(doc, separators=(",", ":"))

    @staticmethod
    def parse(body: str) -> Wakeup:
        """Raises ValueError, saying why, for a body that is not a wake-up: not JSON, not an
        object, or without a non-empty string job_id, tenant and user_id."""
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise ValueError(f"not JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise ValueError(f"not a JSON object but {type(doc).__name__}")
        for name in ("job_id", "tenant", "user_id"):
            if not isinstance(doc.get(name), str) or not doc[name]:
                raise ValueError(f"no {name} (a non-empty string)")
        kind = doc.get("kind")
        return Wakeup(
            job_id=doc["job_id"],
            owner=Owner(tenant=doc["tenant"], user_id=doc["user_id"]),
            dispatch_id=str(doc.get("dispatch_id", "")),
            kind=kind if isinstance(kind, str) and kind else None,
        )


@dataclass(frozen=True)
class DeadLetter:
    """A message received from the DLQ: its id, its body as SQS holds it (perhaps not a wake-up
    at all), and the receipt handle that deletes it."""

    message_id: str
    body: str
    receipt_handle: str


@dataclass(frozen=True)
class QueueStats:
    visible: int
    in_flight: int
    delayed: int
    dead_letter: int


class WakeupQueue:
    def __init__(self, client: SQSClient, queue_url: str, dlq_url: str | None = None) -> None:
        self._sqs = client
        self._url = queue_url
        self._dlq_url = dlq_url

    def send_batch(self, wakeups: list[Wakeup]) -> set[str]:
        """Send up to 10 wake-ups in one request; returns the dispatch ids that failed."""
        if not wakeups:
            return set()
        entries = [
            {
                "Id": str(index),
                "MessageBody": wakeup.body(),
                "DelaySeconds": wakeup.delay_seconds,
            }
            for index, wakeup in enumerate(wakeups)
        ]
        try:
            answer = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)  # type: ignore[arg-type]
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return {wakeups[int(failed["Id"])].dispatch_id for failed in answer.get("Failed", [])}

    def send(self, wakeup: Wakeup) -> None:
        try:
            self._sqs.send_message(
                QueueUrl=self._url, MessageBody=wakeup.body(), DelaySeconds=wakeup.delay_seconds
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def delay(self, receipt_handle: str, seconds: int) -> None:
        """Hide a message that arrived early until its job is due (then it is not deleted)."""
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self._url,
                ReceiptHandle=receipt_handle,
                VisibilityTimeout=max(0, min(MAX_VISIBILITY_SECONDS, seconds)),
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def stats(self) -> QueueStats:
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        try:
            main = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=names)  # type: ignore[arg-type]
            dead: dict[str, Any] = {"Attributes": {}}
            if self._dlq_url:
                dead = dict(
                    self._sqs.get_queue_attributes(
                        QueueUrl=self._dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
                    )
                )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        attrs = cast(dict[str, Any], main["Attributes"])
        return QueueStats(
            visible=int(attrs.get(names[0], 0)),
            in_flight=int(attrs.get(names[1], 0)),
            delayed=int(attrs.get(names[2], 0)),
            dead_letter=int(dead["Attributes"].get("ApproximateNumberOfMessages", 0)),
        )

    def _arn(self, url: str) -> str:
        attributes = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return attributes["Attributes"]["QueueArn"]

    def send_to_dead_letters(self, body: str) -> None:
        """Put a message straight into the DLQ — a local rehearsal of the redrive only (on AWS a
        message reaches the DLQ by being received `maxReceiveCount` times)."""
        try:
            self._sqs.send_message(QueueUrl=self._require_dlq(), MessageBody=body)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def start_dead_letter_move(self) -> bool:
        """Ask SQS to move the whole DLQ back to the work queue itself (StartMessageMoveTask):
        True when it will (asynchronously, nobody here sees the messages), False where the move
        task is not implemented (moto) and the messages must be moved one by one."""
        dlq_url = self._require_dlq()
        try:
            source, destination = self._arn(dlq_url), self._arn(self._url)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        try:
            self._sqs.start_message_move_task(SourceArn=source, DestinationArn=destination)
            return True
        except ClientError as exc:
            # moto has no move task: in-process it raises NotImplementedError, as a server it
            # answers 500. Moving by hand does the same, so falling back is always safe.
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            fallback_codes = {"500", "NotImplemented", "InvalidAction", "UnsupportedOperation"}
            if status not in {500, 501} and error_code(exc) not in fallback_codes:
                raise translate(exc) from exc
        except NotImplementedError:
            pass
        return False

    def receive_dead_letters(self, max_messages: int) -> list[DeadLetter]:
        """Up to `max_messages` (1–10) DLQ messages, hidden for DEAD_LETTER_HOLD_SECONDS while
        they are moved or set aside (one not handled by then is simply visible again)."""
        try:
            batch = self._sqs.receive_message(
                QueueUrl=self._require_dlq(),
                MaxNumberOfMessages=max(1, min(10, max_messages)),
                WaitTimeSeconds=0,
                VisibilityTimeout=DEAD_LETTER_HOLD_SECONDS,
            ).get("Messages", [])
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return [
            DeadLetter(m.get("MessageId", ""), m.get("Body", ""), m["ReceiptHandle"]) for m in batch
        ]

    def requeue_dead_letter(self, letter: DeadLetter) -> None:
        """Send the letter's body to the work queue, then delete it from the DLQ (a failure in
        between leaves a duplicate wake-up, which is harmless: every wake-up may come twice)."""
        try:
            self._sqs.send_message(QueueUrl=self._url, MessageBody=letter.body)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        self.delete_dead_letter(letter)

    def delete_dead_letter(self, letter: DeadLetter) -> None:
        try:
            self._sqs.delete_message(
                QueueUrl=self._require_dlq(), ReceiptHandle=letter.receipt_handle
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def redrive_dead_letters(self, *, max_messages: int = 1000) -> int:
        """Move DLQ messages back to the work queue, unexamined (leasehold.service.redrive is the
        operator's redrive, which examines them). Uses StartMessageMoveTask; where that is not
        implemented (moto) moves them one by one, bounded by `max_messages`. Returns the number
        moved by hand, or -1 when AWS runs the move task asynchronously."""
        if not self._dlq_url:
            return 0
        if self.start_dead_letter_move():
            return -1
        moved = 0
        while moved < max_messages:
            batch = self.receive_dead_letters(max_messages - moved)
            if not batch:
                break
            for letter in batch:
                self.requeue_dead_letter(letter)
                moved += 1
        return moved

    def _require_dlq(self) -> str:
        if not self._dlq_url:
            raise LeaseholdError("this queue has no dead-letter queue")
        return self._dlq_url
