"""The enrichment client against a provider that misbehaves in ways the local one never does:
whatever comes back after a request was sent, the client either returns a well-formed receipt
or raises the right ProviderError kind — never crashes, never reads "not found" into a bare 404.
The canned provider is a real HTTP server on 127.0.0.1 that answers a fixed status and body."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from leasehold_apps.reading_list.provider import (
    Capability,
    EnrichmentProvider,
    LookupResult,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
)

GOOD = b'{"key": "k1", "status": "succeeded", "receipt": "rcpt_01", "summary": "s", "tags": ["a"]}'


class CannedProvider:
    """Answers every request with `status` and `body` (set per test) and records the requests."""

    def __init__(self) -> None:
        self.status = 200
        self.body = GOOD
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                canned.requests.append((self.command, self.path, dict(self.headers.items())))
                self.send_response(canned.status)
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            do_GET = do_POST = _answer  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )


@pytest.fixture
def canned() -> Iterator[CannedProvider]:
    provider = CannedProvider()
    provider.thread.start()
    yield provider
    provider.server.shutdown()
    provider.server.server_close()


def client(canned: CannedProvider, capability: Capability = Capability.STATUS_LOOKUP) -> Any:
    return EnrichmentProvider(canned.url, capability, timeout_s=3)


def test_a_well_formed_success_becomes_a_receipt_and_the_request_carries_key_and_body(
    canned: CannedProvider,
) -> None:
    receipt = client(canned).submit("k1", url="https://e.org/p", text="t")
    assert (receipt.key, receipt.receipt, receipt.summary, receipt.tags) == (
        "k1",
        "rcpt_01",
        "s",
        ["a"],
    )
    method, path, headers = canned.requests[0]
    assert (method, path, headers["Idempotency-Key"]) == ("POST", "/v1/enrichments", "k1")
    assert "X-Fault" not in headers


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"",
        b"[]",
        b'{"key": "other", "status": "succeeded", "receipt": "rcpt_1", "summary": "", "tags": []}',
        b'{"key": "k1", "status": "pending", "receipt": "rcpt_1", "summary": "", "tags": []}',
        b'{"key": "k1", "status": "succeeded", "receipt": "", "summary": "", "tags": []}',
        b'{"key": "k1", "status": "succeeded", "receipt": 7, "summary": "", "tags": []}',
        b'{"key": "k1", "status": "succeeded", "receipt": "r 1", "summary": "", "tags": []}',
        b'{"key": "k1", "status": "succeeded", "receipt": "r1", "summary": null, "tags": []}',
        b'{"key": "k1", "status": "succeeded", "receipt": "r1", "summary": "", "tags": "a"}',
        b'{"key": "k1", "status": "succeeded", "receipt": "r1", "summary": "", "tags": [1]}',
        b'{"key": "k1", "status": "succeeded", "receipt": "r1", "summary": "", "tags": ['
        + b'"x", ' * 20_000
        + b'"y"]}',
    ],
    ids=lambda body: body[:40].decode(errors="replace"),
)
def test_a_malformed_success_after_sending_is_an_unknown_outcome(
    canned: CannedProvider, body: bytes
) -> None:
    canned.body = body
    with pytest.raises(ProviderOutcomeUnknown):
        client(canned).submit("k1", url="https://e.org/p")
    with pytest.raises(ProviderOutcomeUnknown):
        client(canned).lookup("k1")


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ProviderRejected),
        (409, ProviderRejected),
        (429, ProviderRejected),
        (500, ProviderRejected),
        (502, ProviderOutcomeUnknown),
        (503, ProviderOutcomeUnknown),
        (504, ProviderOutcomeUnknown),
        (302, ProviderOutcomeUnknown),
    ],
)
def test_status_codes_map_to_what_may_have_happened(
    canned: CannedProvider, status: int, kind: type[ProviderError]
) -> None:
    canned.status, canned.body = status, b'{"error": "some_code", "message": "m"}'
    with pytest.raises(ProviderError) as caught:
        client(canned).submit("k1", url="https://e.org/p")
    assert type(caught.value) is kind
    assert (caught.value.http_status, caught.value.provider_code) == (status, "some_code")


def test_only_an_explicit_not_found_counts_as_not_found(canned: CannedProvider) -> None:
    canned.status, canned.body = 404, b'{"status": "not_found"}'
    assert client(canned).lookup("k1") == LookupResult("not_found")
    # A 404 from a wrong base URL or a proxy would otherwise invite a second charge
    canned.body = b"<html>Not Found</html>"
    with pytest.raises(ProviderRejected):
        client(canned).lookup("k1")


def test_a_lookup_can_report_a_failed_operation(canned: CannedProvider) -> None:
    canned.body = b'{"key": "k1", "status": "failed"}'
    assert client(canned).lookup("k1") == LookupResult("failed")


def test_the_key_travels_quoted_in_the_lookup_path(canned: CannedProvider) -> None:
    canned.body = GOOD.replace(b'"k1"', b'"j_1:enrich:v2"')
    found = client(canned).lookup("j_1:enrich:v2")
    assert found.receipt is not None and found.receipt.key == "j_1:enrich:v2"
    assert canned.requests[0][1] == "/v1/enrichments/j_1%3Aenrich%3Av2"


def test_a_fault_is_sent_as_a_header(canned: CannedProvider) -> None:
    client(canned).submit("k1", url="https://e.org/p", fault="slow")
    assert canned.requests[0][2]["X-Fault"] == "slow"
