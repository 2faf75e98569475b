"""The local worker (leasehold_dev.local.runner.run_worker) calls one worker handler from a
poller thread per queue (decision F4). Two batches in flight at once must each get their own
batchItemFailures: a record kept by one batch must never be dropped because another batch
started meanwhile (its poller would delete a message that had to stay)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from leasehold.handlers import worker as worker_handler
from leasehold.service.telemetry import CountingTelemetry
from leasehold_dev.local.invoke import LocalContext


def _record(message_id: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}",
        "body": "{}",
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1",
    }


def test_two_batches_at_once_keep_their_own_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    b_done = threading.Event()
    a_in_flight = threading.Event()

    def record_handler(record: Any, lambda_context: Any = None) -> str:
        if record.message_id == "a-keep":
            raise worker_handler.KeepMessageError("store_unavailable")
        if record.message_id == "a-slow":
            a_in_flight.set()  # a-keep has failed already
            assert b_done.wait(10)  # batch B starts and ends while A is still in flight
        return "ok"

    monkeypatch.setattr(worker_handler, "record_handler", record_handler)
    # The records never reach an engine here; the batch's outcome counting (OS1) needs one,
    # so it gets a runtime whose telemetry counts in memory.
    counting = SimpleNamespace(telemetry=CountingTelemetry())
    monkeypatch.setattr(worker_handler, "runtime", lambda: counting)
    answers: dict[str, Any] = {}

    def batch_a() -> None:
        event = {"Records": [_record("a-keep"), _record("a-slow")]}
        answers["a"] = worker_handler.handler(event, LocalContext("worker"))

    thread = threading.Thread(target=batch_a)
    thread.start()
    assert a_in_flight.wait(10)
    try:
        answers["b"] = worker_handler.handler(
            {"Records": [_record("b-ok")]}, LocalContext("worker")
        )
    finally:
        b_done.set()
        thread.join(10)
    kept_a = {f["itemIdentifier"] for f in answers["a"]["batchItemFailures"]}
    kept_b = {f["itemIdentifier"] for f in answers["b"]["batchItemFailures"]}
    assert kept_a == {"a-keep"}, answers  # else A's poller deletes a message that must stay
    assert kept_b == set(), answers
