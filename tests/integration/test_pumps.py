"""The local event sources keep Lambda's semantics (they are what the e2e tests and the demo
stand on), and the relay reports failures per record."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from leasehold.domain.clock import ManualClock
from leasehold.service.relay import relay_records
from leasehold.service.telemetry import CountingTelemetry
from leasehold.store.queue import WakeupQueue
from leasehold_dev.local.pumps import StreamPump
from tests.conftest import load_event
from tests.support.harness import Harness
from tests.support.resources import relay_mapping


def test_sqs_pump_deletes_all_but_the_messages_reported_failed(harness: Harness) -> None:
    for index in range(4):
        harness.sqs.send_message(
            QueueUrl=harness.queues["work"], MessageBody=json.dumps({"n": index})
        )
    seen: list[list[str]] = []

    def handler(event: dict[str, Any], _: Any) -> dict[str, Any]:
        bodies = [json.loads(r["body"])["n"] for r in event["Records"]]
        seen.append(bodies)
        failed = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["n"] % 2]
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}

    received, deleted = harness.poller(handler).poll_once(wait_seconds=0)
    assert received == 4 and deleted == 2 and sorted(seen[0]) == [0, 1, 2, 3]
    # The two reported failed are still in the queue (in flight until their visibility expires)
    attrs = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["work"], AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "2"


def test_sqs_pump_deletes_nothing_when_the_invocation_fails(harness: Harness) -> None:
    harness.sqs.send_message(QueueUrl=harness.queues["work"], MessageBody="{}")

    def crash(event: dict[str, Any], _: Any) -> dict[str, Any]:
        raise RuntimeError("worker crashed")

    assert harness.poller(crash).poll_once(wait_seconds=0) == (1, 0)


def test_stream_pump_drops_non_outbox_records(harness: Harness) -> None:
    harness.dynamodb.put_item(
        TableName=harness.table, Item={"pk": {"S": "JOB#x"}, "sk": {"S": "JOB"}}
    )
    harness.dynamodb.put_item(
        TableName=harness.table, Item={"pk": {"S": "OUTBOX#x"}, "sk": {"S": "D#1"}}
    )
    harness.dynamodb.update_item(
        TableName=harness.table,
        Key={"pk": {"S": "OUTBOX#x"}, "sk": {"S": "D#1"}},
        UpdateExpression="SET a = :a",
        ExpressionAttributeValues={":a": {"N": "1"}},
    )
    batches: list[list[dict[str, Any]]] = []

    def relay(event: dict[str, Any], _: Any) -> dict[str, Any]:
        batches.append(event["Records"])
        return {"batchItemFailures": []}

    pump = StreamPump("", relay_mapping(harness.stream_arn), relay, "relay")
    pump.poll_once()
    delivered = [r for batch in batches for r in batch]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in delivered] == [
        ("INSERT", "OUTBOX#x")
    ]
    assert pump.dropped_by_filter >= 2


def test_stream_pump_retries_from_the_lowest_failure_then_uses_the_failure_destination(
    harness: Harness,
) -> None:
    for index in range(3):
        harness.dynamodb.put_item(
            TableName=harness.table, Item={"pk": {"S": f"OUTBOX#{index}"}, "sk": {"S": "D"}}
        )
    calls: list[list[str]] = []

    def always_fail_second(event: dict[str, Any], _: Any) -> dict[str, Any]:
        keys = [r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]]
        calls.append(keys)
        failing = [r for r in event["Records"] if r["dynamodb"]["Keys"]["pk"]["S"] == "OUTBOX#1"]
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in failing
            ]
        }

    failure_queue = harness.queues["relay_failures"]
    arn = harness.sqs.get_queue_attributes(QueueUrl=failure_queue, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    mapping = relay_mapping(harness.stream_arn, on_failure_arn=arn)
    pump = StreamPump("", mapping, always_fail_second, "relay")
    pump.poll_once()
    assert calls[0] == ["OUTBOX#0", "OUTBOX#1", "OUTBOX#2"]
    assert all(batch == ["OUTBOX#1", "OUTBOX#2"] for batch in calls[1:])
    assert len(calls) == mapping.max_retries + 1
    note = harness.sqs.receive_message(QueueUrl=failure_queue)["Messages"][0]
    assert json.loads(note["Body"])["DDBStreamBatchInfo"]["batchSize"] == 2


def test_relay_sets_delay_from_next_attempt_and_reports_failed_records(harness: Harness) -> None:
    event = load_event("relay-outbox-insert.json")
    record = event["Records"][0]
    second = json.loads(json.dumps(record))
    second["dynamodb"]["SequenceNumber"] = "1100000000017454423010"
    second["dynamodb"]["NewImage"]["sk"] = {"S": "DISPATCH#0000000002"}
    due_at = int(record["dynamodb"]["NewImage"]["deliver_at"]["N"])
    clock = ManualClock(due_at - 30_500)  # the first wake-up is due in 30.5 s
    queue = WakeupQueue(harness.sqs, harness.queues["work"])
    with Stubber(harness.sqs) as stub:
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [{"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "x"}],
                "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError"}],
            },
        )
        failed = relay_records([record, second], queue, clock, CountingTelemetry())
        sent = stub._queue  # noqa: SLF001 - empty once the expected call was made
    assert failed == ["1100000000017454423010"] and not sent


def test_relay_delay_is_real_on_moto(harness: Harness) -> None:
    record = load_event("relay-outbox-insert.json")["Records"][0]
    due_at = int(record["dynamodb"]["NewImage"]["deliver_at"]["N"])
    queue = WakeupQueue(harness.sqs, harness.queues["work"])
    assert relay_records([record], queue, ManualClock(due_at - 30_500), CountingTelemetry()) == []
    attrs = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queues["work"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"


def test_dlq_redrive_falls_back_to_receive_send_delete_on_moto(harness: Harness) -> None:
    # Given two wake-ups that landed in the DLQ
    for job_id in ("j_a", "j_b"):
        body = json.dumps({"job_id": job_id, "tenant": "t", "user_id": "u", "dispatch_id": "d"})
        harness.sqs.send_message(QueueUrl=harness.queues["dlq"], MessageBody=body)
    # When an operator redrives them (moto has no StartMessageMoveTask)
    moved = harness.queue.redrive_dead_letters()
    # Then both are back on the work queue with their job identity, and the DLQ is empty
    assert moved == 2
    assert sorted(b["job_id"] for b in harness.bodies()) == ["j_a", "j_b"]
    assert harness.queue.stats().dead_letter == 0


def test_stream_pump_keeps_its_iterator_across_a_rolled_back_transaction(
    harness: Harness,
) -> None:
    # Given a pump that has read the stream once (and keeps its shard iterator)
    delivered: list[str] = []

    def relay(event: dict[str, Any], _: Any) -> dict[str, Any]:
        delivered.extend(r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"])
        return {"batchItemFailures": []}

    def outbox(name: str) -> dict[str, Any]:
        return {"pk": {"S": f"OUTBOX#{name}"}, "sk": {"S": "D#1"}}

    pump = StreamPump("", relay_mapping(harness.stream_arn), relay, "relay")
    harness.dynamodb.put_item(TableName=harness.table, Item=outbox("a"))
    pump.poll_once()
    # When a transaction that wrote an outbox item is cancelled, and another item is written
    rolled_back = [
        {"Put": {"TableName": harness.table, "Item": outbox("b")}},
        {
            "ConditionCheck": {
                "TableName": harness.table,
                "Key": {"pk": {"S": "JOB#missing"}, "sk": {"S": "JOB"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
    ]
    with pytest.raises(ClientError, match="TransactionCanceledException"):
        harness.dynamodb.transact_write_items(TransactItems=rolled_back)
    harness.dynamodb.put_item(TableName=harness.table, Item=outbox("c"))
    pump.poll_once()
    pump.poll_once()
    # Then the same pump delivers the later record once, and never the rolled-back one
    assert delivered == ["OUTBOX#a", "OUTBOX#c"]
