"""moto's in-process mock, made to behave like the service where tests rely on it.

DynamoDB applies a conditional write atomically; moto's in-process mock does not guard a
condition check and its write against another thread. Tests that race threads serialise DynamoDB
requests, as the real service does per item (the local stack's server does the same).

A fault injected at the client boundary (leasehold.store.faults) answers the request itself; the
mock, being another before-send handler, must then leave the request unapplied."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from moto.core.botocore_stubber import BotocoreStubber

from leasehold.store.faults import INJECTED_MARK

_lock = threading.RLock()


def serialise_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    original = BotocoreStubber.process_request

    def process_request(self: BotocoreStubber, request: Any) -> Any:
        if (getattr(request, "context", None) or {}).get(INJECTED_MARK):
            return None
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        if target.startswith("DynamoDB_"):
            with _lock:
                return original(self, request)
        return original(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", process_request)
