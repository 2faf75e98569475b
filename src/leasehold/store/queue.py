"""The work queue: SQS carries wake-ups only. The job item is the authority; every message is
safe to deliver twice, late, or never (the sweeper re-dispatches a lost one)."""

from __future__ import annotations

import hashlib
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
PRIORITY_QUEUES = ("high", "normal", "low")
"""Each priority has its own queue and event-source mapping (decision F4); `normal` is the
work queue itself."""
MAX_QUEUE_SHARDS = 16
"""The most normal-priority queues a deployment has (template.yaml's `QueueShards`)."""
DEAD_LETTER_HOLD_SECONDS = 60
"""How long a redrive keeps a DLQ message it received hidden while it moves or sets it aside."""


def queue_shard(job_id: str, shards: int) -> int:
    """The normal-priority queue (0 … shards - 1) a job's wake-ups travel on (decision QS1): a
    stable hash of its id, the same in every function, process and Python (never `hash()`,
    which each interpreter salts)."""
    if shards <= 1:
        return 0
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


@dataclass(frozen=True)
class Wakeup:
    """One message: which job to look at, whose slot it uses, and the dispatch it came from."""

    job_id: str
    owner: Owner
    dispatch_id: str
    delay_seconds: int = 0
    kind: str | None = None
    """The job's kind, when the write that dispatched knew it (its concurrency limits, F2)."""
    priority: str = "normal"
    """The job's priority: the queue this wake-up travels on (decision F4)."""
    traceparent: str | None = None
    """The job's trace, as the relay's span passes it on: the parent of the attempt's span
    (decision TR3). None: a message from before traces, or a redriven one."""
    cascade: str | None = None
    """`<step>:<index>`: not a wake-up of the job but the cancel of its children of set `step`
    from `index` on (its end came while they ran, WF6)."""
    cap: str | None = None
    """A child's share of its set's `max_concurrency`: `<slot item>|<max>` (WF7)."""

    def body(self) -> str:
        doc = {
            "job_id": self.job_id,
            "tenant": self.owner.tenant,
            "user_id": self.owner.user_id,
            "dispatch_id": self.dispatch_id,
        }
        if self.kind is not None:
            doc["kind"] = self.kind
        if self.priority != "normal":
            doc["priority"] = self.priority
        if self.traceparent is not None:
            doc["tp"] = self.traceparent
        if self.cascade is not None:
            doc["cascade"] = self.cascade
        if self.cap is not None:
            doc["cap"] = self.cap
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
        priority = doc.get("priority")
        traceparent = doc.get("tp")
        return Wakeup(
            job_id=doc["job_id"],
            owner=Owner(tenant=doc["tenant"], user_id=doc["user_id"]),
            dispatch_id=str(doc.get("dispatch_id", "")),
            kind=kind if isinstance(kind, str) and kind else None,
            priority=priority if priority in PRIORITY_QUEUES else "normal",
            traceparent=traceparent if isinstance(traceparent, str) else None,
            cascade=doc["cascade"] if isinstance(doc.get("cascade"), str) else None,
            cap=doc["cap"] if isinstance(doc.get("cap"), str) else None,
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
    """The work queues: `queue_url` (normal priority) and, where the deployment has them, a
    queue for each other priority (`priority_urls`: {"high": url, "low": url}) and the normal
    queue's other shards (`shard_urls`, decision QS1). Without a priority's queue, a wake-up
    of that priority goes to the work queue: it still runs, only not ahead of (or behind) the
    normal backlog. With shards, a normal wake-up goes to `queue_shard(job_id, n)`: [queue_url,
    *shard_urls][that], so every wake-up of one job lands on the same queue."""

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        dlq_url: str | None = None,
        *,
        priority_urls: dict[str, str] | None = None,
        shard_urls: tuple[str, ...] | list[str] = (),
    ) -> None:
        self._sqs = client
        self._url = queue_url
        self._dlq_url = dlq_url
        self._urls = {"normal": queue_url}
        for priority, url in (priority_urls or {}).items():
            if priority not in PRIORITY_QUEUES:
                raise ValueError(f"no such priority {priority!r} (high, normal, low)")
            if url:
                self._urls[priority] = url
        self._shards = (queue_url, *(url for url in shard_urls if url))
        if len(self._shards) > MAX_QUEUE_SHARDS or len(set(self._shards)) != len(self._shards):
            raise ValueError(
                f"{len(self._shards)} normal queue shards, some the same: at most "
                f"{MAX_QUEUE_SHARDS}, each its own queue"
            )

    def url_for(self, priority: str, job_id: str = "") -> str:
        """The queue a wake-up of this priority (and, for normal, of this job) travels on."""
        if priority not in self._urls or priority == "normal":
            return self._shards[queue_shard(job_id, len(self._shards))]
        return self._urls[priority]

    @property
    def urls(self) -> dict[str, str]:
        """Priority → queue URL, for each queue this deployment has (normal always: its first
        shard, the work queue)."""
        return dict(self._urls)

    @property
    def shard_urls(self) -> tuple[str, ...]:
        """The normal queue's shards, the work queue first."""
        return self._shards

    def _all_urls(self) -> list[str]:
        return [*self._shards, *(url for p, url in self._urls.items() if p != "normal")]

    def send_batch(self, wakeups: list[Wakeup]) -> set[str]:
        """Send up to 10 wake-ups, one request per queue they go to; returns the dispatch ids
        that failed (a request that fails as a whole raises, as one would)."""
        if not wakeups:
            return set()
        by_url: dict[str, list[tuple[int, Wakeup]]] = {}
        for index, wakeup in enumerate(wakeups):
            by_url.setdefault(self.url_for(wakeup.priority, wakeup.job_id), []).append(
                (index, wakeup)
            )
        failed_ids: set[str] = set()
        first_url = next(iter(by_url))
        for url, batch in by_url.items():
            entries = [
                {
                    "Id": str(index),
                    "MessageBody": wakeup.body(),
                    "DelaySeconds": wakeup.delay_seconds,
                }
                for index, wakeup in batch
            ]
            try:
                answer = self._sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
            except (ClientError, BotoCoreError) as exc:
                if url == first_url:  # nothing went: the caller treats it as one failure
                    raise translate(exc) from exc
                # an earlier queue's messages went: report only this queue's as failed
                failed_ids |= {wakeup.dispatch_id for _, wakeup in batch}
                continue
            failed_ids |= {
                wakeups[int(failed["Id"])].dispatch_id for failed in answer.get("Failed", [])
            }
        return failed_ids

    def send(self, wakeup: Wakeup) -> None:
        try:
            self._sqs.send_message(
                QueueUrl=self.url_for(wakeup.priority, wakeup.job_id),
                MessageBody=wakeup.body(),
                DelaySeconds=wakeup.delay_seconds,
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def delay(
        self, receipt_handle: str, seconds: int, priority: str = "normal", job_id: str = ""
    ) -> None:
        """Hide a message that arrived early until its job is due (then it is not deleted); it
        is on the queue of its wake-up's priority (and, for normal, its job's shard)."""
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self.url_for(priority, job_id),
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
        totals = dict.fromkeys(names, 0)
        try:
            for url in self._all_urls():  # every priority's queue and shard, summed
                got = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)  # type: ignore[arg-type]
                for name in names:
                    totals[name] += int(cast(dict[str, Any], got["Attributes"]).get(name, 0))
            dead: dict[str, Any] = {"Attributes": {}}
            if self._dlq_url:
                dead = dict(
                    self._sqs.get_queue_attributes(
                        QueueUrl=self._dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
                    )
                )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return QueueStats(
            visible=totals[names[0]],
            in_flight=totals[names[1]],
            delayed=totals[names[2]],
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
        # With a queue per priority or shard, no destination: SQS returns each message to the
        # queue it came from (a high job's wake-up to the high queue, a job's to its shard).
        try:
            if len(self._all_urls()) > 1:
                self._sqs.start_message_move_task(SourceArn=source)
            else:
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
        """Send the letter's body to its priority's work queue (the work queue for a body that
        is not a wake-up), then delete it from the DLQ (a failure in between leaves a duplicate
        wake-up, which is harmless: every wake-up may come twice)."""
        try:
            parsed = Wakeup.parse(letter.body)
            priority, job_id = parsed.priority, parsed.job_id
        except ValueError:
            priority, job_id = "normal", ""
        try:
            self._sqs.send_message(QueueUrl=self.url_for(priority, job_id), MessageBody=letter.body)
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
