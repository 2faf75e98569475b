"""WakeupQueue.send_batch with mixed priorities and partial failures: only what did not go is
reported failed, and a failure on the first queue (nothing went) raises."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.job import Owner
from leasehold.store.queue import Wakeup, WakeupQueue

OWNER = Owner("t", "u")


class FakeSqs:
    def __init__(self, broken: set[str], entry_failures: dict[str, set[str]]) -> None:
        self.broken, self.entry_failures = broken, entry_failures
        self.sent: dict[str, list[str]] = {}

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:  # noqa: N803
        if QueueUrl in self.broken:
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "SendMessageBatch")
        bad = self.entry_failures.get(QueueUrl, set())
        self.sent.setdefault(QueueUrl, []).extend(e["Id"] for e in Entries if e["Id"] not in bad)
        return {"Failed": [{"Id": i} for i in sorted(bad)]}


def wakeups() -> list[Wakeup]:
    return [
        Wakeup("j0", OWNER, "d0", priority="normal"),
        Wakeup("j1", OWNER, "d1", priority="high"),
        Wakeup("j2", OWNER, "d2", priority="low"),
        Wakeup("j3", OWNER, "d3", priority="high"),
        Wakeup("j4", OWNER, "d4", priority="normal"),
    ]


def queue(sqs: FakeSqs) -> WakeupQueue:
    return WakeupQueue(sqs, "N", None, priority_urls={"high": "H", "low": "L"})  # type: ignore[arg-type]


def test_second_queue_down_reports_only_its_wakeups() -> None:
    sqs = FakeSqs(broken={"H"}, entry_failures={})
    assert queue(sqs).send_batch(wakeups()) == {"d1", "d3"}
    assert sqs.sent == {"N": ["0", "4"], "L": ["2"]}


def test_first_queue_down_raises() -> None:
    with pytest.raises(StoreUnavailableError):
        queue(FakeSqs(broken={"N"}, entry_failures={})).send_batch(wakeups())


def test_entry_failures_map_to_their_own_wakeups() -> None:
    sqs = FakeSqs(broken={"L"}, entry_failures={"H": {"3"}, "N": {"0"}})
    assert queue(sqs).send_batch(wakeups()) == {"d0", "d2", "d3"}
