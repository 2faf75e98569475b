"""The local enrichment provider for tests: a real server on 127.0.0.1 (port 0) over a ledger in
tmp_path, a client for it, and raw HTTP for requests the client would refuse to send."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import urllib3

from leasehold_apps.reading_list.provider import Capability, EnrichmentProvider
from leasehold_dev.local.provider import ProviderServer

PAGE = "https://example.org/durable-jobs/leases"


def client_for(server: ProviderServer, *, timeout_s: float = 5.0) -> EnrichmentProvider:
    """A client whose declared capability is the one the server runs with."""
    return EnrichmentProvider(server.url, Capability.parse(server.capability), timeout_s=timeout_s)


def charges(server: ProviderServer, key: str | None = None) -> dict[str, Any]:
    """`GET /v1/charges` over HTTP, as an operator would read it."""
    path = "/v1/charges" + (f"?key={key}" if key is not None else "")
    status, body = raw(server, "GET", path)
    assert status == 200, body
    return dict(body)


def raw(
    server: ProviderServer,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, Any]:
    """One request with urllib3 directly (no client-side validation), on a fresh connection."""
    with urllib3.PoolManager(retries=False) as http:
        answer = http.request(
            method, server.url + path, headers=headers or {}, body=body, timeout=5.0
        )
        return answer.status, json.loads(answer.data) if answer.data else None


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(check: Callable[[], bool], *, timeout_s: float = 5.0) -> bool:
    """Polls `check` every 50 ms until it holds or `timeout_s` passes; bounded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
