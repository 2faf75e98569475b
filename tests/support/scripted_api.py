"""A scripted HTTP API on 127.0.0.1 (stdlib http.server, port 0) for the client's tests: each
request is answered by the next scripted answer, or by a function of the request, or — past
RUNAWAY requests — by a 599 no client repeats, so a client that never stops fails, not hangs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DROP = "drop"
"""A script entry: read the request, then close the connection without answering."""
RUNAWAY = 30
"""Past this many requests the server answers 599, which no client repeats."""


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


Answer = tuple[int, dict[str, str], Any]
Script = Callable[[Seen], "Answer | str"]


@dataclass
class ScriptedApi:
    """Answers each request with the next entry of `answers` (the last one repeats), or with
    `script(request)` when set; records every request it read."""

    answers: list[Answer | str] = field(default_factory=list)
    script: Script | None = None
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                seen = Seen(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
                api.seen.append(seen)
                if len(api.seen) > RUNAWAY:  # a client that does not stop fails, not hangs
                    answer: Answer | str = (599, {}, envelope("runaway", "too many requests"))
                elif api.script is not None:
                    answer = api.script(seen)
                else:
                    answer = api.answers[min(len(api.seen), len(api.answers)) - 1]
                if answer == DROP:
                    self.close_connection = True
                    return
                assert not isinstance(answer, str)
                status, headers, body = answer
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def envelope(code: str, message: str) -> dict[str, Any]:
    """The API's error body."""
    return {"error": {"code": code, "message": message}}
