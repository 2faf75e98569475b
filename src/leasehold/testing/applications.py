"""What an application's own code sees of a testbed: the running engine (`Engine.current()`:
the testbed's table door, with the faults it injects; its manual clock; its counters), and its
HTTP routes — the `Routes` its modules declare (those the API function mounts when the module is
named in `LEASEHOLD_KINDS`), resolved in the test's thread
from the event API Gateway's HTTP API sends (payload format 2.0), with the caller's JWT claims
as the authorizer puts them there — so a route reads its caller, body, headers and query, and
answers its errors, exactly as deployed.

A job a route makes is in the testbed's table, and `run_until_idle` runs it like any other.

The testbed resolves them through a resolver of its own with the API function's error envelope
(`leasehold.handlers.api.with_error_envelope`), not through the API function's `app`: that one
is process-wide — a router mounted on it stays mounted, and its own `/jobs` routes are bound to
the function's cold start (the system clock, clients built from the environment). Each
router's link to its resolver, and the engine that ran before, are given back when the testbed
closes."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from urllib.parse import parse_qsl

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.domain.clock import Clock
from leasehold.domain.job import Owner
from leasehold.sdk.apps import Engine, engine_started
from leasehold.sdk.routes import OPERATORS_GROUP, Routes

if TYPE_CHECKING:
    from leasehold.service.kinds import JobKind

API_HOST = "testbed.execute-api.us-east-1.amazonaws.com"
"""The host the events name (API Gateway's default domain shape)."""


class Answer(NamedTuple):
    """What a route answered: unpack it as `status, body, headers = tb.request(...)`."""

    status: int
    """The HTTP status."""
    body: Any
    """The body: parsed when it is JSON (`application/json`), None when it is empty, else the
    text."""
    headers: dict[str, str]
    """The response headers (`Location`, `Retry-After`, `Content-Type`, …)."""


def claims_of(owner: Owner) -> dict[str, str]:
    """The JWT claims the authorizer passes for `owner`, as `leasehold.sdk.routes.caller_of`
    reads them: `sub`, `custom:tenant` and, for an operator, `cognito:groups`."""
    claims = {"sub": owner.user_id, "custom:tenant": owner.tenant}
    if owner.is_operator:
        claims["cognito:groups"] = f"[{OPERATORS_GROUP}]"
    return claims


def http_event(
    method: str,
    path: str,
    body: Any,
    *,
    owner: Owner,
    headers: Mapping[str, str] | None,
    now_ms: int,
) -> dict[str, Any]:
    """The HTTP API event (payload 2.0) of one request to a `$default` route. `path` may carry
    a query (`/bookmarks?limit=2`). `body`: None for none, `bytes` sent base64-encoded, `str`
    sent as it is (JSON or not), anything else as its JSON."""
    raw_path, _, raw_query = path.partition("?")
    if not raw_path.startswith("/"):
        raise ValueError(f"a request path starts with '/': {path!r}")
    sent = {"host": API_HOST, "user-agent": "leasehold-testbed"}
    if body is not None:
        sent["content-type"] = "application/json"
    sent.update({name.lower(): str(value) for name, value in (headers or {}).items()})
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": sent,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "testbed",
            "authorizer": {"jwt": {"claims": claims_of(owner), "scopes": None}},
            "domainName": API_HOST,
            "domainPrefix": "testbed",
            "http": {
                "method": method.upper(),
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "leasehold-testbed",
            },
            "requestId": f"testbed-{now_ms}",
            "routeKey": "$default",
            "stage": "$default",
            "timeEpoch": now_ms,
        },
        "isBase64Encoded": False,
    }
    if raw_query:
        query: dict[str, list[str]] = {}
        for name, value in parse_qsl(raw_query, keep_blank_values=True):
            query.setdefault(name, []).append(value)
        # API Gateway joins a repeated parameter's values with commas
        event["queryStringParameters"] = {name: ",".join(v) for name, v in query.items()}
    if isinstance(body, bytes):
        event["body"] = base64.b64encode(body).decode("ascii")
        event["isBase64Encoded"] = True
    elif isinstance(body, str):
        event["body"] = body
    elif body is not None:
        event["body"] = json.dumps(body)
    return event


def answer_of(response: Mapping[str, Any]) -> Answer:
    """The resolver's answer as a test reads it."""
    headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
    raw = response.get("body") or ""
    if response.get("isBase64Encoded") and raw:
        raw = base64.b64decode(raw).decode("utf-8", errors="replace")
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    body: Any = None
    if raw:
        body = json.loads(raw) if content_type.startswith("application/json") else raw
    return Answer(int(response["statusCode"]), body, headers)


class Applications:
    """The testbed's engine as its applications' code sees it, and their routes on a resolver of
    the testbed's own, while the testbed is open."""

    def __init__(self, routes: Sequence[Routes], clock: Clock) -> None:
        self.routes: tuple[Routes, ...] = tuple(routes)
        """The routers mounted (in the order their modules were named)."""
        self._clock = clock
        self._resolver: APIGatewayHttpResolver | None = None
        self._undo = ExitStack()

    def open(self, engine: Engine, kinds: Mapping[str, JobKind]) -> None:
        """Make `engine` the running one and mount every router on a new resolver with the
        API's error envelope."""
        from leasehold.handlers.api import with_error_envelope

        self._undo.enter_context(engine_started(engine, kinds))
        resolver = with_error_envelope(APIGatewayHttpResolver())
        for routes in self.routes:
            self._undo.callback(setattr, routes, "api_resolver", routes.api_resolver)
            resolver.include_router(routes)
        self._resolver = resolver

    def close(self) -> None:
        """Give each router back the resolver it had (the API function's, or none), and
        `Engine.current()` the engine it had."""
        self._resolver = None
        self._undo.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        owner: Owner,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request, resolved now (see `LeaseholdTestbed.request`)."""
        if self._resolver is None:
            raise RuntimeError("the application's routes are not mounted: open the testbed")
        event = http_event(
            method, path, body, owner=owner, headers=headers, now_ms=self._clock.now_ms()
        )
        return answer_of(self._resolver.resolve(event, cast(LambdaContext, _Context())))


class _Context:
    """The Lambda context a route may read (`function_name`, `aws_request_id`)."""

    function_name = "leasehold-testbed-api"
    aws_request_id = "testbed"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:leasehold-testbed-api"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


__all__ = ["API_HOST", "Answer", "Applications", "answer_of", "claims_of", "http_event"]
