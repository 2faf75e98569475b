"""How the embedded moto server serves a request: over a kept-alive connection, with the backend
of a host and the methods of a response class remembered.

Werkzeug 3.1's development server, which moto's server runs on, answers every request with
`Connection: close` (http.server cannot drain an unread request body before the next request
line). So every SDK call of the API, the relay, the sweeper and every worker opened a TCP
connection and the server started a thread for it, then tore both down. `KeepAliveRequestHandler`
reads each request's body whole before the application sees it (what the application leaves
unread can no longer be taken for the next request line) and then lets the connection stay open
as HTTP/1.1 intends; a request with a chunked body is still answered with `Connection: close`.

moto 5.2.5's server finds the backend of every request again from scratch:
`DomainDispatcherApplication.get_backend_for_host` lists moto's package directory (`os.listdir`
and an `os.path.isdir` for each of ~200 entries) and then tries the URL pattern of every
service. On the local stack that was a tenth of the embedded server's CPU. The answer depends on
the host string alone (the directory and the patterns do not change while the server runs), so
`install()` remembers it per host. Likewise every request lists the methods of its response
class with `inspect.getmembers`, a function of the class alone: remembered per class. And its
CloudFormation reads every template with PyYAML's pure-Python loader before it tries JSON: the
local stack's template (JSON) is read with json.

The memos change how often moto computes an answer, never the answer;
`tests/integration/test_moto_serving.py` compares them with moto's own and counts the
connections a client opens.
"""

from __future__ import annotations

import io
import json
import re
import socket
from collections.abc import Callable
from typing import Any

from moto.moto_server.werkzeug_app import MotoRequestHandler

from leasehold_dev.local.moto.transactions import require_pinned_moto

_saved: dict[str, Any] = {}  # moto's originals, once install() replaced them


def _backend_for_host(original: Callable[[Any, str | None], Any]) -> Callable[..., Any]:
    answers: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        try:
            return answers[host]
        except KeyError:
            answer = answers[host] = original(self, host)
            return answer

    get_backend_for_host.__wrapped__ = original  # type: ignore[attr-defined]
    return get_backend_for_host


def _method_names(original: Callable[[object], list[str]]) -> Callable[[object], list[str]]:
    names: dict[object, list[str]] = {}

    def method_names_from_class(clazz: object) -> list[str]:
        try:
            return names[clazz]
        except KeyError:
            found = names[clazz] = original(clazz)
            return found

    return method_names_from_class


def _parse_template(original: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """moto parses every template with PyYAML's pure-Python full loader before it tries JSON:
    a third of a second for the local stack's translated template, which is JSON. A template
    that is a JSON object is read with json (YAML reads JSON as the same mapping); any other is
    moto's to parse. So is one where the two differ: YAML 1.1 reads a number with an exponent
    but no dot or sign (`1e5`, `1.5e10`; json.dumps's `1e-05` is one) as a string, and a
    surrogate pair's two escapes as two lone surrogates, where json reads a float and one
    character."""

    def parse_template(template: str) -> dict[str, Any]:
        if template.lstrip().startswith("{") and not _SURROGATE_ESCAPE.search(template):
            try:
                parsed = json.loads(template, parse_float=_plain_float)
            except (ValueError, _YamlReadsItOtherwiseError):
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        return original(template)

    return parse_template


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB]")


class _YamlReadsItOtherwiseError(Exception):
    """A JSON number YAML 1.1 does not read as json does."""


def _plain_float(text: str) -> float:
    if "e" in text.lower():
        raise _YamlReadsItOtherwiseError(text)  # YAML's `1e-05` is the string "1e-05"
    return float(text)


class _BodyRead:
    """The connection's read side once the request's body has been read whole: lines (the next
    request line and headers) read through, but `read()` — which after the body only Werkzeug's
    drain calls, to throw away what it takes for an unread body — finds nothing, so the next
    request stays where http.server reads it."""

    def __init__(self, socket_file: Any) -> None:
        self.socket_file = socket_file

    def readline(self, *args: Any) -> bytes:
        line: bytes = self.socket_file.readline(*args)
        return line

    def read(self, *_: Any) -> bytes:
        return b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.socket_file, name)


class _CountedWrites:
    """The connection's write side, counting the bytes written (headers and body alike)."""

    def __init__(self, socket_file: Any) -> None:
        self.socket_file = socket_file
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        written: int = self.socket_file.write(data)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.socket_file, name)


_NO_BODY = frozenset({204, 304})


class KeepAliveRequestHandler(MotoRequestHandler):
    """moto's request handler on a connection that stays open between requests (see above).

    The connection stays open only after a request whose body was read whole (a plain
    Content-Length) and whose answer was sent whole: a request http.server refuses itself (a
    request line or headers too long), a chunked body, an unreadable Content-Length, or an answer
    whose body is not the length its headers announced (the application failed mid-body) is
    answered as Werkzeug answers it, and the connection closes."""

    _keep_alive = False

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm holds the
        # body back until the client's delayed ACK of the headers (~40 ms a request) on a
        # connection that stays open.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket_file = self.rfile
        self.rfile = _BodyRead(self.socket_file)  # type: ignore[assignment]
        self.wfile = _CountedWrites(self.wfile)  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        self._keep_alive = False  # until make_environ has read this request's body whole
        self._status = 0
        self._length: str | None = None
        self._chunked = False
        self._body_from = -1  # bytes written when the final response's headers ended
        super().handle_one_request()
        if self._body_from >= 0 and not self._chunked:
            sent = self.wfile.written - self._body_from  # type: ignore[attr-defined]
            if self.command == "HEAD" or self._status in _NO_BODY:
                expected: int | None = 0
            else:
                expected = int(self._length) if self._length is not None else None
            if sent != expected:  # a body cut short, or one only its end delimits: close
                self.close_connection = True

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        length = environ.get("CONTENT_LENGTH") or "0"
        framed = not environ.get("wsgi.input_terminated")
        self._keep_alive = framed and length.isascii() and length.isdigit()
        if self._keep_alive:
            body = self.socket_file.read(int(length)) if int(length) > 0 else b""
            environ["wsgi.input"] = io.BytesIO(body)
        elif framed:  # a Content-Length Werkzeug takes as 0: read and drained as Werkzeug does
            self.rfile = self.socket_file
            environ["wsgi.input"] = self.socket_file
        else:  # a chunked body, read as Werkzeug reads it; the connection then closes
            from werkzeug.serving import DechunkedInput

            environ["wsgi.input"] = DechunkedInput(self.socket_file)  # type: ignore[arg-type]
        return environ

    def send_response_only(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response_only(code, message)

    def send_header(self, keyword: str, value: str) -> None:
        name = keyword.lower()
        if name == "content-length":
            self._length = value if value.isascii() and value.isdigit() else None
        elif name == "transfer-encoding":
            self._chunked = "chunked" in value.lower()
        elif self._keep_alive and name == "connection" and value.lower() == "close":
            return  # the body was read whole: the next request line is where http.server looks
        super().send_header(keyword, value)

    def end_headers(self) -> None:
        super().end_headers()
        if self._status >= 200:  # not the interim 100 Continue
            self._body_from = self.wfile.written  # type: ignore[attr-defined]


def installed() -> bool:
    return "dispatch" in _saved


def install() -> None:
    """Remember backends per host and method names per response class in this process's moto.
    Idempotent. Raises MotoVersionError, changing nothing, on any moto but the pinned release."""
    require_pinned_moto("serving", "server dispatcher")
    if installed():
        return
    from moto.cloudformation.models import Stack
    from moto.core import responses
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    _saved["dispatch"] = DomainDispatcherApplication.get_backend_for_host
    _saved["methods"] = responses.method_names_from_class
    _saved["template"] = Stack.__dict__["parse_template"]
    memo = _backend_for_host(_saved["dispatch"])
    setattr(DomainDispatcherApplication, "get_backend_for_host", memo)  # noqa: B010
    setattr(responses, "method_names_from_class", _method_names(_saved["methods"]))  # noqa: B010
    parse = staticmethod(_parse_template(_saved["template"].__func__))
    setattr(Stack, "parse_template", parse)  # noqa: B010


def uninstall() -> None:
    """Put moto's own functions back (tests compare both)."""
    if not installed():
        return
    from moto.cloudformation.models import Stack
    from moto.core import responses
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    setattr(DomainDispatcherApplication, "get_backend_for_host", _saved.pop("dispatch"))  # noqa: B010
    setattr(responses, "method_names_from_class", _saved.pop("methods"))  # noqa: B010
    setattr(Stack, "parse_template", _saved.pop("template"))  # noqa: B010
