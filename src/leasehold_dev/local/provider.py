"""The local billable enrichment provider (docs/architecture.md "External effects"): a real HTTP
service on 127.0.0.1 with a
durable charge ledger, so the engine's "never charge twice by accident" can be tested end to end.

Routes (JSON in and out):
- `POST /v1/enrichments` — header `Idempotency-Key` (1–200 of `A-Za-z0-9._:-`), body
  `{"url", "text"?}` → 200 `{"key", "status": "succeeded", "receipt", "summary", "tags"}`. Each
  success is one committed charge, except an `idempotent`-mode repeat of a key, which answers the
  first success again and charges nothing (also when the two requests race).
- `GET /v1/enrichments/{key}` — 200 with the first success's body, or 404 `{"status":
  "not_found"}`. In `none` mode the route answers 501 `{"error": "lookup_not_supported"}`: a
  status distinct from 404, so no client can mistake "cannot look up" for "nothing charged".
- `GET /v1/charges[?key=K]` — `{"count", "charges": [{"key", "amount", "at", "receipt"}]}`,
  oldest first (at most 1000 listed; `count` is the full number).
- `GET /health` — `{"status": "ok", "capability": <mode>}`.

Faults on `POST /v1/enrichments`, header `X-Fault`: `lose_response` (commit the charge, then close
the connection before one byte of the answer), `fail` (500, nothing charged), `slow` (wait
`slow_seconds`, then behave normally). Errors are `{"error": <code>, "message": <text>}`; a 500
from this provider always means nothing was charged.
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from leasehold.domain.clock import Clock, SystemClock
from leasehold.domain.errors import LeaseholdError
from leasehold_apps.reading_list.provider import FAULTS, PROVIDER_MODES, is_valid_provider_key
from leasehold_dev.local.charges import ChargeLedger
from leasehold_dev.local.page_summary import summarize

MAX_BODY_BYTES = 256 * 1024
MAX_URL_CHARS = 2048
MAX_TEXT_CHARS = 100_000
_ENRICHMENTS = "/v1/enrichments"


class ProviderRequestError(LeaseholdError):
    """A request the provider refuses, with the HTTP status and error code to answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _AnswerDroppedError(LeaseholdError):
    """Signals the handler to close the socket without answering (the `lose_response` fault)."""


class ProviderServer:
    """The provider in this process (a ThreadingHTTPServer thread). `start()` binds 127.0.0.1 and
    serves; `stop()` stops accepting, ends idle keep-alive connections, cuts short `slow` waits
    (answered 503, nothing charged) and waits for every request thread. The ledger at `db_path`
    outlives the server: start another on the same file and it knows every charge."""

    def __init__(
        self,
        *,
        port: int = 0,
        capability: str,
        db_path: Path,
        slow_seconds: float = 3.0,
        amount: int = 1,
        clock: Clock | None = None,
    ) -> None:
        if capability not in PROVIDER_MODES:
            raise ValueError(f"capability must be one of {PROVIDER_MODES}, not {capability!r}")
        if not 0 <= slow_seconds <= 600:
            raise ValueError(f"slow_seconds must be in [0, 600], got {slow_seconds}")
        if not 1 <= amount <= 1_000_000:
            raise ValueError(f"amount must be in [1, 1000000], got {amount}")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {port}")
        self.capability = capability
        self.slow_seconds = slow_seconds
        self.amount = amount
        self.ledger = ChargeLedger(Path(db_path), clock or SystemClock())
        self._requested_port = port
        self._server: _ProviderHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the provider is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProviderServer:
        if self._server is not None:
            raise RuntimeError("the provider is already running")
        self._stopping.clear()
        server = _ProviderHTTPServer(("127.0.0.1", self._requested_port), _ProviderHandler)
        server.provider = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="provider",
            daemon=True,  # a host that forgets stop() can still exit
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()  # no new connections
        thread.join()
        with self._connections_lock:
            for connection in self._connections:
                _shut(connection, socket.SHUT_RD)  # an idle keep-alive read sees end of stream
        server.server_close()  # joins every request thread (block_on_close)
        self._server = self._thread = None

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)
            if self._stopping.is_set():
                _shut(connection, socket.SHUT_RD)

    def _untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for one request; raises ProviderRequestError for a refusal and
        _AnswerDroppedError when the answer must be lost."""
        parts = urlsplit(target)
        path = parts.path
        fault = headers.get("x-fault")
        if fault is not None and not (method == "POST" and path == _ENRICHMENTS):
            raise ProviderRequestError(400, "fault_not_supported", "X-Fault applies to POST only")
        if path == "/health" and method == "GET":
            return 200, {"status": "ok", "capability": self.capability}
        if path == _ENRICHMENTS and method == "POST":
            return self._enrich(headers, body, fault)
        if path.startswith(_ENRICHMENTS + "/") and method == "GET":
            return self._lookup(unquote(path.removeprefix(_ENRICHMENTS + "/")))
        if path == "/v1/charges" and method == "GET":
            return self._charges(parts.query)
        if path in ("/health", _ENRICHMENTS, "/v1/charges") or path.startswith(_ENRICHMENTS):
            raise ProviderRequestError(405, "method_not_allowed", f"{method} {path} is not served")
        raise ProviderRequestError(404, "no_such_route", f"no route {path}")

    def _enrich(
        self, headers: dict[str, str], body: bytes, fault: str | None
    ) -> tuple[int, dict[str, Any]]:
        key = headers.get("idempotency-key")
        if key is None:
            raise ProviderRequestError(400, "missing_idempotency_key", "Idempotency-Key is needed")
        if not is_valid_provider_key(key):
            raise ProviderRequestError(
                400, "invalid_idempotency_key", "Idempotency-Key: 1-200 of A-Za-z0-9._:-"
            )
        if fault is not None and fault not in FAULTS:
            raise ProviderRequestError(400, "unknown_fault", f"X-Fault must be one of {FAULTS}")
        url, text = _parse_enrichment(body)
        if fault == "fail":
            raise ProviderRequestError(500, "injected_failure", "failed on request; not charged")
        if fault == "slow" and self._stopping.wait(self.slow_seconds):
            raise ProviderRequestError(503, "shutting_down", "stopped while slow; not charged")
        summary, tags = summarize(url, text)
        outcome = self.ledger.charge(
            key,
            lambda receipt: {
                "key": key,
                "status": "succeeded",
                "receipt": receipt,
                "summary": summary,
                "tags": tags,
            },
            amount=self.amount,
            new_receipt=lambda: f"rcpt_{secrets.token_hex(12)}",
            idempotent=self.capability == "idempotent",
        )
        if fault == "lose_response":
            raise _AnswerDroppedError("the charge is committed; the answer is lost on purpose")
        return 200, outcome.answer

    def _lookup(self, key: str) -> tuple[int, dict[str, Any]]:
        if self.capability == "none":
            raise ProviderRequestError(
                501, "lookup_not_supported", "this provider (capability none) has no lookup"
            )
        if not is_valid_provider_key(key):
            raise ProviderRequestError(400, "invalid_key", "key: 1-200 of A-Za-z0-9._:-")
        answer = self.ledger.first_answer(key)
        return (404, {"status": "not_found", "key": key}) if answer is None else (200, answer)

    def _charges(self, query: str) -> tuple[int, dict[str, Any]]:
        try:
            params = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError as exc:
            raise ProviderRequestError(400, "invalid_query", str(exc)) from exc
        if set(params) - {"key"} or any(len(values) > 1 for values in params.values()):
            raise ProviderRequestError(400, "invalid_query", "only one ?key= is accepted")
        key = params["key"][0] if "key" in params else None
        if key is not None and not is_valid_provider_key(key):
            raise ProviderRequestError(400, "invalid_key", "key: 1-200 of A-Za-z0-9._:-")
        count, charges = self.ledger.list_charges(key)
        return 200, {"count": count, "charges": charges}


def _parse_enrichment(body: bytes) -> tuple[str, str | None]:
    """`{"url": http(s) URL with a host, "text"?: str | null}`, nothing else."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ProviderRequestError(400, "invalid_json", "the body is not JSON") from exc
    if not isinstance(data, dict):
        raise ProviderRequestError(400, "invalid_body", "the body must be a JSON object")
    unknown = sorted(set(data) - {"url", "text"})
    if unknown:
        raise ProviderRequestError(400, "invalid_body", f"unknown fields {unknown}")
    url, text = data.get("url"), data.get("text")
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL_CHARS:
        raise ProviderRequestError(400, "invalid_url", f"url: a string of 1-{MAX_URL_CHARS}")
    try:
        parts = urlsplit(url)
        is_web_url = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unbalanced [ in the host
        is_web_url = False
    if not is_web_url:
        raise ProviderRequestError(400, "invalid_url", "url must be http(s)://host/...")
    if text is not None and (not isinstance(text, str) or len(text) > MAX_TEXT_CHARS):
        raise ProviderRequestError(400, "invalid_text", f"text: a string of ≤ {MAX_TEXT_CHARS}")
    return url, text


class _ProviderHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # the default 5 drops a burst's SYNs: a 1 s connect retry each
    block_on_close = True  # server_close() waits for every request thread
    provider: ProviderServer


class _ProviderHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProviderHTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.provider._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.provider._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def _serve(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            body = self._read_body(headers)
            status, answer = self.server.provider.route(self.command, self.path, headers, body)
        except ProviderRequestError as exc:
            status, answer = exc.status, {"error": exc.code, "message": str(exc)}
        except sqlite3.Error as exc:
            # The charge may or may not have committed: never a 500 ("nothing charged").
            status, answer = 503, {"error": "ledger_unavailable", "message": str(exc)}
        except _AnswerDroppedError:
            self.close_connection = True
            _shut(self.connection, socket.SHUT_RDWR)
            return
        self._reply(status, answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815

    def _read_body(self, headers: dict[str, str]) -> bytes:
        if "transfer-encoding" in headers:
            self.close_connection = True
            raise ProviderRequestError(411, "length_required", "send a Content-Length body")
        declared = headers.get("content-length", "0")
        if not declared.isdigit():
            self.close_connection = True
            raise ProviderRequestError(400, "invalid_content_length", "Content-Length: digits")
        length = int(declared)
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body must not be taken for a request
            raise ProviderRequestError(413, "body_too_large", f"a body of ≤ {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, answer: dict[str, Any]) -> None:
        payload = json.dumps(answer).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout): its loss, not ours


def _shut(connection: socket.socket, how: int) -> None:
    try:
        connection.shutdown(how)
    except OSError:
        return  # already closed by the peer or by us


def serve_provider(port: int, capability: str, db_path: Path) -> int:
    """`leasehold provider serve`: run the provider until SIGINT or SIGTERM. Prints one line,
    `leasehold provider ready at http://127.0.0.1:PORT (...)`, once it accepts requests."""
    stopped = threading.Event()

    def on_signal(*_: object) -> None:
        stopped.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with ProviderServer(port=port, capability=capability, db_path=db_path) as server:
        print(
            f"leasehold provider ready at {server.url} (capability {capability}, ledger {db_path})",
            flush=True,
        )
        while not stopped.wait(0.5):
            pass
    print("leasehold provider stopped", flush=True)
    return 0
