"""A local HTTP gateway: requests → API Gateway HTTP API payload-v2 events for the Api handler.
Local only: the header X-Demo-User stands in for a Cognito JWT (docs/architecture.md "HTTP API")."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from leasehold.domain.sizes import UPLOAD_LIMIT
from leasehold.service.trace_links import LOCAL_TRACE_ROUTE
from leasehold.store.uploads import LOCAL_UPLOAD_ROUTE
from leasehold_dev.local.invoke import Handler, LocalContext
from leasehold_dev.local.listen import LISTEN_BACKLOG
from leasehold_dev.local.template import Route
from leasehold_dev.local.trace_route import answer_trace
from leasehold_dev.local.uploads import LocalUploads

DEMO_USERS: dict[str, dict[str, str]] = {
    "alice": {"sub": "alice", "custom:tenant": "study-group"},
    "bob": {"sub": "bob", "custom:tenant": "study-group"},
    "carol": {"sub": "carol", "custom:tenant": "other-group"},
    "ops": {"sub": "ops", "custom:tenant": "study-group", "cognito:groups": "[operators]"},
}
MAX_REQUEST_BYTES = 10 * 1024 * 1024  # API Gateway's own payload limit
OPENAPI_ROUTE = "/openapi.yaml"
OPENAPI_DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml"
"""The HTTP contract in the repository (src/leasehold_dev/local/ → the checkout's docs/)."""


def build_event(
    route: Route,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: dict[str, str],
    body: bytes,
    path_parameters: dict[str, str],
) -> dict[str, Any]:
    now = time.time()
    route_key = f"{route.method} {route.path}"
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": headers.get("host", "127.0.0.1"),
        "http": {
            "method": method,
            "path": raw_path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": str(uuid.uuid4()),
        "routeKey": route_key,
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }
    user = headers.get("x-demo-user")
    if route.needs_identity and user in DEMO_USERS:
        request_context["authorizer"] = {"jwt": {"claims": dict(DEMO_USERS[user]), "scopes": None}}
    query = dict(parse_qsl(raw_query, keep_blank_values=True))
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": request_context,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = path_parameters
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            # Bytes that are not UTF-8 cannot be a JSON string of the event: API Gateway hands
            # a binary body over base64-encoded, and so does this gateway — the handler decodes
            # it and answers what the deployed API answers (400 malformed_json). Decoding with
            # replacement characters made a stray byte valid JSON, and a job.
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG


class Gateway:
    def __init__(
        self,
        port: int,
        routes: list[Route],
        handlers: dict[str, Handler],
        *,
        openapi: Path = OPENAPI_DOCUMENT,
        traces: Path | None = None,
        uploads: LocalUploads | None = None,
    ) -> None:
        self._openapi = openapi
        self._uploads = uploads  # PUT /local/uploads/<token>: what S3's presigned PUT is (LD7)
        self._traces = traces  # `local up --traces FILE`: served by GET /local/traces/{id}
        self._routes = routes
        self._handlers = handlers
        self._lock = threading.Lock()  # one handler instance, one request at a time (as one Lambda)
        gateway = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _serve(self) -> None:
                gateway.serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815

            def __getattr__(self, name: str) -> Any:
                # Any other method (OPTIONS, HEAD, TRACE, QUERY, …) meets no route: the 404 API
                # Gateway answers, in the error envelope — not http.server's 501 HTML page.
                if name.startswith("do_"):
                    return self._serve
                raise AttributeError(name)

        self.server = _Server(("127.0.0.1", port), _RequestHandler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 0.1},  # shutdown() waits for a poll: 0.5 s by default
            name="gateway",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _reply(
        self, request: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        request.send_response(status)
        for key, value in headers.items():
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":  # a HEAD answer has headers only
            request.wfile.write(body)

    def _serve_openapi(self, request: BaseHTTPRequestHandler) -> None:
        """`GET /openapi.yaml`: the document as it is in the repository now (read per request,
        so an edit shows at once), no identity needed. Not an API route: deployed, the document
        is published with the repository, not by API Gateway."""
        try:
            document = self._openapi.read_bytes()
        except OSError:
            missing = json.dumps(
                {"error": {"code": "not_found", "message": f"{self._openapi} is not here"}}
            )
            self._reply(request, 404, {"Content-Type": "application/json"}, missing.encode())
            return
        self._reply(request, 200, {"Content-Type": "application/yaml"}, document)

    def serve(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        raw_length = request.headers.get("Content-Length") or "0"
        if not raw_length.isascii() or not raw_length.isdigit():
            bad = json.dumps(
                {"error": {"code": "invalid_request", "message": "Content-Length is not a number"}}
            )
            request.close_connection = True
            self._reply(request, 400, {"Content-Type": "application/json"}, bad.encode())
            return
        length = int(raw_length)
        uploading = request.command == "PUT" and parts.path.startswith(LOCAL_UPLOAD_ROUTE)
        if length > (UPLOAD_LIMIT if uploading and self._uploads else MAX_REQUEST_BYTES):
            # the same envelope and code as the API's own 413 (a deployed API Gateway answers
            # a body past its 10 MB with a bare 413 of its own)
            limit = UPLOAD_LIMIT if uploading else MAX_REQUEST_BYTES
            message = f"a request body may be at most {limit} bytes; this one is {length}"
            if not uploading:
                message += " (a larger payload goes through POST /uploads)"
            too_large = json.dumps({"error": {"code": "payload_too_large", "message": message}})
            self._reply(request, 413, {"Content-Type": "application/json"}, too_large.encode())
            return
        body = request.rfile.read(length) if length else b""
        if request.command == "GET" and parts.path == OPENAPI_ROUTE:
            self._serve_openapi(request)
            return
        if uploading and self._uploads is not None:
            token = parts.path[len(LOCAL_UPLOAD_ROUTE) :]
            status, doc = self._uploads.answer(token, dict(request.headers.items()), body)
            answer = json.dumps(doc).encode() if doc else b""
            self._reply(request, status, {"Content-Type": "application/json"}, answer)
            return
        if request.command == "GET" and parts.path.startswith(LOCAL_TRACE_ROUTE):
            claims = DEMO_USERS.get(request.headers.get("X-Demo-User") or "")
            trace_id = parts.path[len(LOCAL_TRACE_ROUTE) :]
            status, doc = answer_trace(self._traces, trace_id, claims)
            headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
            self._reply(request, status, headers, json.dumps(doc).encode())
            return
        for route in self._routes:
            params = route.match(request.command, parts.path)
            if params is None:
                continue
            headers = {k.lower(): v for k, v in request.headers.items()}
            event = build_event(
                route, request.command, parts.path, parts.query, headers, body, params
            )
            with self._lock:
                answer = self._handlers[route.function](event, LocalContext("api"))
            out_headers = {k: str(v) for k, v in (answer.get("headers") or {}).items()}
            payload = answer.get("body") or ""
            self._reply(request, int(answer.get("statusCode", 200)), out_headers, payload.encode())
            return
        body_out = json.dumps({"error": {"code": "not_found", "message": "no such route"}})
        self._reply(request, 404, {"Content-Type": "application/json"}, body_out.encode())
