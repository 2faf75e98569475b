"""Local event sources with Lambda's own semantics: the stream pump (filters, batches,
ReportBatchItemFailures, bounded retries, on-failure destination), the SQS poller (delete only
what was not reported failed) and the schedule."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from leasehold_dev.local.invoke import Handler, LocalContext
from leasehold_dev.local.stack import REGION, QueueMapping, StreamMapping, client


def matches(pattern: Any, value: Any) -> bool:
    """The subset of Lambda event-filter patterns the template uses: nested objects, lists of
    literals, and {"prefix": ...}."""
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        return all(key in value and matches(sub, value[key]) for key, sub in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, dict) and "prefix" in option:
                if isinstance(value, str) and value.startswith(option["prefix"]):
                    return True
            elif option == value:
                return True
        return False
    return bool(pattern == value)


def lambda_stream_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A DynamoDB stream record as Lambda hands it to a function (JSON-safe)."""
    ddb = dict(record["dynamodb"])
    created = ddb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        ddb["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": ddb,
        "eventSourceARN": stream_arn,
    }


class StreamPump:
    """Reads every shard of the table's stream, drops records the mapping's filter rejects, and
    calls the function with batches; a reported failure re-sends the batch from the lowest failed
    record, up to MaximumRetryAttempts, then the batch goes to the on-failure destination. Each
    shard's iterator is kept between polls (one GetRecords per poll), as Lambda keeps it: the
    transactions of leasehold_dev.local.moto.transactions roll back in place, so the shard an
    iterator reads is never swapped for a copy."""

    def __init__(self, endpoint: str, mapping: StreamMapping, handler: Handler, function_name: str):
        self._streams = client("dynamodbstreams", endpoint)
        self._sqs = client("sqs", endpoint)
        self._endpoint = endpoint
        self._mapping = mapping
        self._handler = handler
        self._function_name = function_name
        self._last_sequence: dict[str, str | None] = {}
        self._iterators: dict[str, str] = {}  # shard id → the iterator the last read returned
        self.delivered = 0
        self.dropped_by_filter = 0
        self.sent_to_failure_destination = 0

    def _open_shards(self) -> None:
        """An iterator for each shard of the stream: after the last record this pump handled,
        or from the oldest record kept (TRIM_HORIZON) the first time."""
        description = self._streams.describe_stream(StreamArn=self._mapping.stream_arn)
        for shard in description["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._fresh_iterator(shard_id)

    def _fresh_iterator(self, shard_id: str) -> str:
        last = self._last_sequence.get(shard_id)
        params: dict[str, Any] = {"StreamArn": self._mapping.stream_arn, "ShardId": shard_id}
        if last is None:
            params["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            params["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
            params["SequenceNumber"] = last
        return str(self._streams.get_shard_iterator(**params)["ShardIterator"])

    def _read(self, shard_id: str) -> list[dict[str, Any]]:
        """One GetRecords with the iterator the last one returned, as Lambda's poller reads a
        shard; an iterator the stream no longer knows is replaced by a fresh one after the last
        record handled (nothing is skipped or read twice)."""
        try:
            answer = self._streams.get_records(ShardIterator=self._iterators[shard_id], Limit=1000)
        except ClientError:
            self._iterators[shard_id] = self._fresh_iterator(shard_id)
            answer = self._streams.get_records(ShardIterator=self._iterators[shard_id], Limit=1000)
        following = answer.get("NextShardIterator")
        if following:
            self._iterators[shard_id] = following
        else:  # the shard was closed: look for its successors on the next poll
            del self._iterators[shard_id]
        raw: list[dict[str, Any]] = answer["Records"]
        if raw:
            self._last_sequence[shard_id] = raw[-1]["dynamodb"]["SequenceNumber"]
        return raw

    def poll_once(self) -> int:
        """Read each shard once and deliver what passed the filter; returns records delivered."""
        if not self._iterators:
            self._open_shards()
        delivered = 0
        for shard_id in list(self._iterators):
            records = [
                lambda_stream_record(r, self._mapping.stream_arn) for r in self._read(shard_id)
            ]
            kept = [r for r in records if self._passes_filter(r)]
            self.dropped_by_filter += len(records) - len(kept)
            for start in range(0, len(kept), self._mapping.batch_size):
                self._deliver(kept[start : start + self._mapping.batch_size])
                delivered += len(kept[start : start + self._mapping.batch_size])
        self.delivered += delivered
        return delivered

    def _passes_filter(self, record: dict[str, Any]) -> bool:
        if not self._mapping.filters:
            return True
        return any(matches(pattern, record) for pattern in self._mapping.filters)

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        retries = self._mapping.max_retries if self._mapping.max_retries >= 0 else 10
        pending = batch
        for _ in range(retries + 1):
            try:
                answer = self._handler({"Records": pending}, LocalContext(self._function_name))
                failed = [f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])]
            except Exception:
                failed = [pending[0]["dynamodb"]["SequenceNumber"]]
            if not failed:
                return
            if not self._mapping.report_item_failures:
                failed = [pending[0]["dynamodb"]["SequenceNumber"]]
            lowest = min(failed, key=int)
            pending = [r for r in pending if int(r["dynamodb"]["SequenceNumber"]) >= int(lowest)]
            time.sleep(0.05)
        self._to_failure_destination(pending)

    def _to_failure_destination(self, records: list[dict[str, Any]]) -> None:
        self.sent_to_failure_destination += len(records)
        if not self._mapping.on_failure_arn:
            return
        queue_name = self._mapping.on_failure_arn.rsplit(":", 1)[1]
        url = self._sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        self._sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {
                    "requestContext": {"condition": "RetryAttemptsExhausted"},
                    "DDBStreamBatchInfo": {
                        "streamArn": self._mapping.stream_arn,
                        "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                        "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
                        "batchSize": len(records),
                    },
                }
            ),
        )


def sqs_event(messages: list[dict[str, Any]], queue_url: str) -> dict[str, Any]:
    """Received SQS messages as Lambda's SQS event."""
    queue_name = queue_url.rsplit("/", 1)[1]
    arn = f"arn:aws:sqs:{REGION}:123456789012:{queue_name}"
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


class QueuePoller:
    """Lambda's SQS poller: receive up to BatchSize, invoke, delete the messages not reported in
    `batchItemFailures`; if the invocation fails, delete none (they return after the visibility
    timeout, as with Lambda)."""

    def __init__(
        self,
        endpoint: str,
        mapping: QueueMapping,
        handler: Handler,
        function_name: str,
        timeout_ms: int = 60_000,
        ends: threading.Event | None = None,
    ):
        """`ends`: once set, every invocation has no time left (see LocalContext.ends)."""
        self._ends = ends
        self._sqs = client("sqs", endpoint)
        self._mapping = mapping
        self._handler = handler
        self._function_name = function_name
        self._timeout_ms = timeout_ms

    def poll_once(self, wait_seconds: int = 1) -> tuple[int, int]:
        """One receive + invoke + delete; returns (received, deleted)."""
        messages = self._sqs.receive_message(
            QueueUrl=self._mapping.queue_url,
            MaxNumberOfMessages=min(10, self._mapping.batch_size),
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0, 0
        return len(messages), self.deliver(messages)

    def deliver(self, messages: list[dict[str, Any]]) -> int:
        try:
            answer = self._handler(
                sqs_event(messages, self._mapping.queue_url),
                LocalContext(self._function_name, timeout_ms=self._timeout_ms, ends=self._ends),
            )
        except Exception:
            return 0
        failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
        if failed and not self._mapping.report_item_failures:
            return 0
        keep = [m for m in messages if m["MessageId"] not in failed]
        if keep:
            self._sqs.delete_message_batch(
                QueueUrl=self._mapping.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(keep)
                ],
            )
        return len(keep)


def scheduled_event(rule: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now().astimezone().isoformat(),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:123456789012:rule/{rule}"],
        "detail": {},
    }


class Repeater(threading.Thread):
    """Calls `action` every `interval` seconds until stopped; an exception is printed, not fatal."""

    def __init__(self, name: str, interval: float, action: Callable[[], object]) -> None:
        super().__init__(name=name, daemon=True)
        self._interval = interval
        self._action = action
        self._stop_event = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self._action()
            except Exception as exc:  # the pump goes on, like Lambda's poller
                self.errors += 1
                print(f"[{self.name}] {type(exc).__name__}: {exc}", flush=True)
            self._stop_event.wait(self._interval)

    def stop(self) -> None:
        self._stop_event.set()
