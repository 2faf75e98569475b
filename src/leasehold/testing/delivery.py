"""The two event sources Lambda runs for leasehold, done by the testbed in the test's thread:
the table's stream into the relay (`relay_records`, the relay function's own code), and the work
queue into the worker (`WorkerService.handle`, the worker function's). Both read through
clients no fault is injected into: on AWS they are Lambda's pollers, not the functions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leasehold.domain.clock import Clock
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.service.relay import relay_records
from leasehold.service.telemetry import Telemetry
from leasehold.store.items import OUTBOX_PREFIX
from leasehold.store.queue import Wakeup, WakeupQueue
from leasehold.testing import iam

MAX_READS_PER_POLL = 100
"""GetRecords calls per shard per poll at most (a bound, never reached by a test's table)."""


@dataclass
class StreamRelay:
    """The relay's stream mapping (StartingPosition TRIM_HORIZON, ReportBatchItemFailures):
    batches of `batch_size` records; a batch with failures is retried from its lowest failed
    record on the next poll, up to `max_retries` times, then skipped (as Lambda sends it to the
    on-failure destination; the sweeper re-dispatches what it held)."""

    streams: Any
    stream_arn: str
    queue: WakeupQueue
    clock: Clock
    telemetry: Telemetry
    batch_size: int
    max_retries: int
    role: iam.Role | None = None
    """The relay function's role: its sends are judged by it (the stream reads are Lambda's
    poller's, not judged)."""

    def __post_init__(self) -> None:
        self._after: dict[str, str] = {}  # shard id → the last record handled
        self._retries: dict[str, int] = {}  # sequence number → how often it failed
        self.skipped = 0
        """Records given up on after `max_retries` failed tries."""

    def poll(self) -> tuple[int, int]:
        """Read every shard once from where the last poll stopped and relay what is new;
        returns (records read, wake-ups relayed). An iterator is fresh each poll: a moto
        transaction that rolls back replaces the shard an old iterator would read."""
        description = self.streams.describe_stream(StreamArn=self.stream_arn)
        read = relayed = 0
        for shard in description["StreamDescription"]["Shards"]:
            shard_read, shard_relayed = self._poll_shard(shard["ShardId"])
            read, relayed = read + shard_read, relayed + shard_relayed
        return read, relayed

    def _records(self, shard_id: str) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        last = self._after.get(shard_id)
        if last is None:
            params["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            params.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=last)
        iterator = self.streams.get_shard_iterator(**params)["ShardIterator"]
        records: list[dict[str, Any]] = []
        for _ in range(MAX_READS_PER_POLL):
            answer = self.streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(answer["Records"])
            iterator = answer.get("NextShardIterator")
            if not answer["Records"] or not iterator:
                break
        return records

    def _poll_shard(self, shard_id: str) -> tuple[int, int]:
        records = self._records(shard_id)
        relayed = 0
        for start in range(0, len(records), self.batch_size):
            batch = records[start : start + self.batch_size]
            with iam.acting_as(self.role):
                failed = relay_records(batch, self.queue, self.clock, self.telemetry)
            relayed += sum(
                1 for r in batch if _is_outbox(r) and r["dynamodb"]["SequenceNumber"] not in failed
            )
            if not failed:
                self._after[shard_id] = batch[-1]["dynamodb"]["SequenceNumber"]
                continue
            lowest = min(failed, key=int)
            tries = self._retries[lowest] = self._retries.get(lowest, 0) + 1
            if tries > self.max_retries:
                self.skipped += len(failed)
                self._after[shard_id] = batch[-1]["dynamodb"]["SequenceNumber"]
                continue
            done = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) < int(lowest)]
            if done:
                self._after[shard_id] = done[-1]["dynamodb"]["SequenceNumber"]
            break  # the rest waits for the next poll, as a retried batch does
        return len(records), relayed


def _is_outbox(record: dict[str, Any]) -> bool:
    image = record.get("dynamodb", {}).get("NewImage") or {}
    pk = str(image.get("pk", {}).get("S", ""))
    return record.get("eventName") == "INSERT" and pk.startswith(OUTBOX_PREFIX)


@dataclass(frozen=True)
class Message:
    """A wake-up message as the worker's event source received it."""

    message_id: str
    receipt_handle: str
    body: str


@dataclass
class QueueSource:
    """The worker's SQS mapping: receive up to `batch_size` visible messages; delete the ones
    the worker acknowledged, leave the others (they are seen again once their visibility
    timeout, or the delay the worker set, has passed on the testbed's clock)."""

    sqs: Any
    queue_url: str
    batch_size: int
    name: str = ""
    """The queue's key in the testbed's `queue_urls` (`work`, `work_1`, `high`…)."""

    def receive(self) -> list[Message]:
        """The visible messages, up to one batch (each hidden for the visibility timeout)."""
        answer = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max(1, min(10, self.batch_size)),
            WaitTimeSeconds=0,
        )
        return [
            Message(m["MessageId"], m["ReceiptHandle"], m["Body"])
            for m in answer.get("Messages", [])
        ]

    def delete(self, message: Message) -> None:
        """The message is done with."""
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle)


def invocation_clock(clock: Clock, timeout_ms: int) -> Callable[[], int]:
    """Lambda's `get_remaining_time_in_millis` for an invocation that starts now, on `clock`."""
    started = clock.now_ms()
    return lambda: timeout_ms - (clock.now_ms() - started)


def next_event_ms(
    active: list[Job],
    hidden: list[tuple[int, str]],
    *,
    now: int,
    grace_ms: int,
    delayed: list[Job] | None = None,
    due_window_ms: int = 0,
) -> int | None:
    """When something happens next with nobody acting, from the active (queued, running) jobs
    and the hidden messages (time visible, body) of the work queue: a message of an active
    job shows again; a running job's lease runs out (no worker runs between rounds); the
    sweeper re-sends a queued job's wake-up after `grace_ms`; a `delayed` job (the due index)
    gets its wake-up from the sweeper `due_window_ms` before it is due. `now` when all of that
    is overdue, None when no job is active."""
    jobs = {job.job_id: job for job in active}
    times: list[int] = [
        (job.next_attempt_at or now) - due_window_ms
        for job in delayed or []
        if job.state is JobState.QUEUED
    ]
    for job in jobs.values():
        if job.state is JobState.RUNNING:
            times.append((job.lease_expires_at or now) + 1)
        else:
            since = max(job.next_attempt_at or 0, job.last_dispatch_at or 0)
            times.append(since + grace_ms + 1)
    for at, body in hidden:
        try:
            job_id = Wakeup.parse(body).job_id
        except ValueError:
            continue
        if job_id in jobs:
            times.append(at)
    later = [t for t in times if t > now]
    return min(later) if later else (now if times else None)


__all__ = ["Message", "QueueSource", "StreamRelay", "invocation_clock", "next_event_ms"]
