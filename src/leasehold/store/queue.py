"""The work queue: SQS carries wake-ups only. The job item is the authority; every message is
safe to deliver twice, late, or never (the sweeper re-dispatches a lost one)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import LeaseholdError
from leasehold.domain.job import Owner
from leasehold.store.errors import error_code, translate

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

MAX_VISIBILITY_SECONDS = 43_200


@dataclass(frozen=True)
class Wakeup:
    """One message: which job to look at, whose slot it uses, and the dispatch it came from."""

    job_id: str
    owner: Owner
    dispatch_id: str
    delay_seconds: int = 0

    def body(self) -> str:
        return json.dumps(
            {
                "job_id": self.job_id,
                "tenant": self.owner.tenant,
                "user_id": self.owner.user_id,
                "dispatch_id": self.dispatch_id,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def parse(body: str) -> Wakeup:
        """Raises ValueError (or KeyError) for a body that is not a wake-up."""
        doc = json.loads(body)
        return Wakeup(
            job_id=str(doc["job_id"]),
            owner=Owner(tenant=str(doc["tenant"]), user_id=str(doc["user_id"])),
            dispatch_id=str(doc.get("dispatch_id", "")),
        )


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

    def send_to_dead_letters(self, wakeup: Wakeup) -> None:
        """Put a wake-up straight into the DLQ — a local rehearsal of the redrive only (on AWS a
        message reaches the DLQ by being received `maxReceiveCount` times)."""
        if not self._dlq_url:
            raise LeaseholdError("this queue has no dead-letter queue")
        try:
            self._sqs.send_message(QueueUrl=self._dlq_url, MessageBody=wakeup.body())
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def redrive_dead_letters(
        self, *, max_messages: int = 1000, on_moved: Callable[[str], None] | None = None
    ) -> int:
        """Move DLQ messages back to the work queue. Uses StartMessageMoveTask; where that is not
        implemented (moto) falls back to receive/send/delete, bounded by `max_messages`, calling
        `on_moved(body)` after each message is moved. Returns the number moved by the fallback,
        or -1 when AWS runs the move task asynchronously (then nobody here sees the messages)."""
        if not self._dlq_url:
            return 0
        try:
            source, destination = self._arn(self._dlq_url), self._arn(self._url)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        try:
            self._sqs.start_message_move_task(SourceArn=source, DestinationArn=destination)
            return -1
        except ClientError as exc:
            # moto has no move task: in-process it raises NotImplementedError, as a server it
            # answers 500. The fallback below does the same move by hand, so it is always safe.
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            fallback_codes = {"500", "NotImplemented", "InvalidAction", "UnsupportedOperation"}
            if status not in {500, 501} and error_code(exc) not in fallback_codes:
                raise translate(exc) from exc
        except NotImplementedError:
            pass
        moved = 0
        try:
            while moved < max_messages:
                batch = self._sqs.receive_message(
                    QueueUrl=self._dlq_url,
                    MaxNumberOfMessages=min(10, max_messages - moved),
                    WaitTimeSeconds=0,
                ).get("Messages", [])
                if not batch:
                    break
                for message in batch:
                    self._sqs.send_message(QueueUrl=self._url, MessageBody=message["Body"])
                    self._sqs.delete_message(
                        QueueUrl=self._dlq_url, ReceiptHandle=message["ReceiptHandle"]
                    )
                    moved += 1
                    if on_moved is not None:
                        on_moved(message["Body"])
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return moved
