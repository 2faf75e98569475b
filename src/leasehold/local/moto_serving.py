"""How the embedded moto server serves a request: over a kept-alive connection, with the backend
of a host and the parse of an UpdateExpression remembered.

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
`install()` remembers it per host.

Every UpdateItem parses its UpdateExpression twice (the handler, to find the names and values it
uses; the backend, to apply it) with moto's tokenizer and recursive-descent parser. The parse is a
function of the expression string alone — names and values are bound later, by the validator,
which works on its own deep copy of the tree (`Validator.__init__`), and the handler only reads
the tree (`find_clauses`). `install()` remembers the tree per expression string (bounded; an
expression that fails to parse raises every time, as before). The workers send a handful of
distinct expressions, so the memo stays small.

Likewise every ConditionExpression is lexed again — seven regular expressions tried at each
token — although the tokens depend on the string alone (names and values are looked up after
lexing): `install()` remembers the tokens per string and hands each parse fresh nodes. And every
request lists the methods of its response class with `inspect.getmembers`, a function of the
class alone: remembered per class.

The memos change how often moto computes an answer, never the answer; `tests/integration/
test_moto_serving.py` runs the same requests through patched and unpatched moto, and counts the
connections a client opens.
"""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Callable
from typing import Any

from moto.moto_server.werkzeug_app import MotoRequestHandler

from leasehold.local.moto_transactions import PINNED_MOTO_VERSION, MotoVersionError

MAX_EXPRESSIONS = 512
"""Distinct expressions remembered (of each kind); past this a memo is cleared and starts again."""

_saved: dict[str, Any] = {}  # moto's originals, once install() replaced them
_expressions: dict[str, Any] = {}
_tokens: dict[str, tuple[tuple[str, str, str, str], ...]] = {}
_expressions_lock = threading.Lock()


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


def _make_update_expression(original: Callable[[str], Any]) -> Callable[..., Any]:
    def make(expression_str: str) -> Any:
        with _expressions_lock:
            tree = _expressions.get(expression_str)
        if tree is not None:
            return tree
        tree = original(expression_str)  # raises for a bad expression: nothing remembered
        _remember(_expressions, expression_str, tree)
        return tree

    make.__wrapped__ = original  # type: ignore[attr-defined]
    return make


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


class KeepAliveRequestHandler(MotoRequestHandler):
    """moto's request handler on a connection that stays open between requests (see above)."""

    _keep_alive = False

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm holds the
        # body back until the client's delayed ACK of the headers (~40 ms a request) on a
        # connection that stays open.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket_file = self.rfile
        self.rfile = _BodyRead(self.socket_file)  # type: ignore[assignment]

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        self._keep_alive = not environ.get("wsgi.input_terminated")
        if self._keep_alive:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = self.socket_file.read(length) if length > 0 else b""
            environ["wsgi.input"] = io.BytesIO(body)
        else:  # a chunked body, read as Werkzeug reads it; the connection then closes
            from werkzeug.serving import DechunkedInput

            environ["wsgi.input"] = DechunkedInput(self.socket_file)  # type: ignore[arg-type]
        return environ

    def send_header(self, keyword: str, value: str) -> None:
        if self._keep_alive and keyword.lower() == "connection" and value.lower() == "close":
            return  # the body was read whole: the next request line is where http.server looks
        super().send_header(keyword, value)


def _remember(memo: dict[str, Any], key: str, value: Any) -> None:
    with _expressions_lock:
        if len(memo) >= MAX_EXPRESSIONS:
            memo.clear()
        memo[key] = value


def _lex_condition_expression(original: Callable[[Any], Any]) -> Callable[..., Any]:
    from collections import deque

    def lex(self: Any) -> Any:
        tokens = _tokens.get(self.condition_expression)
        if tokens is None:
            nodes = original(self)  # raises for a bad expression: nothing remembered
            if any(node.children for node in nodes):  # not moto 5.2.5's lexer: do not keep
                return nodes
            tokens = tuple((n.nonterminal, n.kind, n.text, n.value) for n in nodes)
            _remember(_tokens, self.condition_expression, tokens)
        return deque(self.Node(kind_, kind, text, value, []) for kind_, kind, text, value in tokens)

    lex.__wrapped__ = original  # type: ignore[attr-defined]
    return lex


def _method_names(original: Callable[[object], list[str]]) -> Callable[[object], list[str]]:
    names: dict[object, list[str]] = {}

    def method_names_from_class(clazz: object) -> list[str]:
        try:
            return names[clazz]
        except KeyError:
            found = names[clazz] = original(clazz)
            return found

    return method_names_from_class


def _update_expression_parser() -> Any:
    from moto.dynamodb.parsing import expressions

    return getattr(expressions, "UpdateExpressionParser")  # noqa: B009 (moto's module is untyped)


def installed() -> bool:
    return "dispatch" in _saved


def install() -> None:
    """Remember backends per host and UpdateExpression trees per string in this process's moto.
    Idempotent. Raises MotoVersionError, changing nothing, on any moto but the pinned release."""
    import moto

    if moto.__version__ != PINNED_MOTO_VERSION:
        raise MotoVersionError(
            f"leasehold.local.moto_dispatch relies on moto {PINNED_MOTO_VERSION}'s dispatcher "
            f"and expression parser, but moto {moto.__version__} is installed"
        )
    if installed():
        return
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    parser = _update_expression_parser()
    _saved["dispatch"] = DomainDispatcherApplication.get_backend_for_host
    _saved["parse"] = parser.__dict__["make"]  # a classmethod
    memo = _backend_for_host(_saved["dispatch"])
    setattr(DomainDispatcherApplication, "get_backend_for_host", memo)  # noqa: B010
    setattr(parser, "make", staticmethod(_make_update_expression(parser.make)))  # noqa: B010
    from moto.core import responses
    from moto.dynamodb.comparisons import ConditionExpressionParser

    _saved["lex"] = ConditionExpressionParser._lex_condition_expression
    _saved["methods"] = responses.method_names_from_class
    lex = _lex_condition_expression(_saved["lex"])
    setattr(ConditionExpressionParser, "_lex_condition_expression", lex)  # noqa: B010
    setattr(responses, "method_names_from_class", _method_names(_saved["methods"]))  # noqa: B010


def uninstall() -> None:
    """Put moto's own methods back (tests compare both)."""
    if not installed():
        return
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    setattr(DomainDispatcherApplication, "get_backend_for_host", _saved.pop("dispatch"))  # noqa: B010
    setattr(_update_expression_parser(), "make", _saved.pop("parse"))  # noqa: B010
    from moto.core import responses
    from moto.dynamodb.comparisons import ConditionExpressionParser

    setattr(ConditionExpressionParser, "_lex_condition_expression", _saved.pop("lex"))  # noqa: B010
    setattr(responses, "method_names_from_class", _saved.pop("methods"))  # noqa: B010
    with _expressions_lock:
        _expressions.clear()
        _tokens.clear()
