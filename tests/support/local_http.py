"""A raw HTTP server on 127.0.0.1 whose every answer a test writes by hand.

http.server cannot misbehave on purpose (never answer, drip bytes, send 20 MiB); this one hands
each connection to a test function that writes whatever bytes it wants. Everything is bounded:
the accept loop polls a stop flag, request heads are capped, and `close()` joins every thread
with a timeout.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_HEAD_BYTES = 64 * 1024
IO_TIMEOUT_SECONDS = 5.0


@dataclass
class Request:
    """One request head as received: the request line and the headers (lower-case names)."""

    method: str
    target: str
    headers: dict[str, str]


Handler = Callable[["Connection"], None]


@dataclass
class Connection:
    sock: socket.socket
    request: Request
    server: LocalServer
    sent: int = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent += len(data)

    def respond(
        self,
        status: int = 200,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str | None = "text/html; charset=utf-8",
    ) -> None:
        lines = [f"HTTP/1.1 {status} {'OK' if status < 300 else 'X'}"]
        all_headers = {"Content-Length": str(len(body)), "Connection": "close"}
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        lines += [f"{name}: {value}" for name, value in all_headers.items()]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


@dataclass
class LocalServer:
    """Serves `handler` on 127.0.0.1:<port> (optionally TLS) until `close()`."""

    handler: Handler
    tls: ssl.SSLContext | None = None
    requests: list[Request] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept_loop, daemon=True)
        self._accepting.start()

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket) -> None:
        sock = raw
        try:
            raw.settimeout(IO_TIMEOUT_SECONDS)
            if self.tls is not None:
                sock = self.tls.wrap_socket(raw, server_side=True)
            request = _read_head(sock)
            self.requests.append(request)
            connection = Connection(sock=sock, request=request, server=self)
            self.connections.append(connection)
            self.handler(connection)
        except (OSError, ValueError) as exc:  # the client went away, or TLS failed: recorded
            self.errors.append(exc)
        finally:
            sock.close()

    def close(self) -> None:
        self.stop.set()
        self._accepting.join(timeout=2)
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=IO_TIMEOUT_SECONDS + 1)


def _read_head(sock: socket.socket) -> Request:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            raise ValueError("request head too large")
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("connection closed before the request head ended")
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    request_line, *header_lines = head.split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Request(method=method, target=target, headers=headers)
