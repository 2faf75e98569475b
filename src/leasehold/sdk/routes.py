"""HTTP routes an application mounts on the API function: a Powertools `Router` with the
engine's rules for identity and input, so an application's route reads the caller exactly as
`/jobs` does (from the authorizer's claims, never the body) and its errors reach the caller in
the same envelope and status table (`LeaseholdError` subclasses: 400, 404, 409, 503)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from leasehold.domain.errors import ForbiddenError, UnauthenticatedError, ValidationError
from leasehold.domain.job import Owner

MAX_BODY_BYTES = 64 * 1024
OPERATORS_GROUP = "operators"


def caller_of(event: Mapping[str, Any]) -> Owner:
    """The caller from an HTTP API event's JWT claims (never from the body)."""
    context = event.get("requestContext", {})
    claims = ((context.get("authorizer") or {}).get("jwt") or {}).get("claims") or {}
    user = claims.get("sub") or claims.get("username") or claims.get("cognito:username")
    tenant = claims.get("custom:tenant")
    if not user or not tenant:
        raise UnauthenticatedError("a signed-in user with a tenant is required")
    groups = claims.get("cognito:groups") or ""
    if isinstance(groups, str):
        groups = groups.strip("[]").replace(",", " ").split()
    return Owner(tenant=str(tenant), user_id=str(user), is_operator=OPERATORS_GROUP in groups)


def body_of(event: Mapping[str, Any], *, required: bool = True) -> Any:
    """The request's JSON body: 400 when it is missing (if required), too large, not JSON, or
    nested too deeply to parse."""
    raw = event.get("body")
    if raw is None or raw == "":
        if required:
            raise ValidationError("a JSON body is required")
        return None
    data = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode()
    if len(data) > MAX_BODY_BYTES:
        raise ValidationError(f"the body is larger than {MAX_BODY_BYTES} bytes", code="too_large")
    try:
        return json.loads(data, parse_constant=_not_json, parse_float=_finite)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError("the body is not valid JSON", code="malformed_json") from exc
    except RecursionError as exc:  # a body nested thousands deep: not one of ours
        raise ValidationError("the body is nested too deeply", code="malformed_json") from exc


def _not_json(constant: str) -> Any:
    """`NaN`, `Infinity` and `-Infinity`: Python's json reads them, JSON has no such values (and
    a NaN passes every `minimum`/`maximum` of a schema)."""
    raise ValueError(f"{constant} is not a JSON value")


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it overflows to infinity (`1e400`)."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:32]} is too large a number")
    return value


def header_of(event: Mapping[str, Any], name: str) -> str | None:
    """A request header, matched without regard to case."""
    headers = event.get("headers") or {}
    for key, value in headers.items():
        if key.lower() == name.lower():
            return str(value)
    return None


def query_of(event: Mapping[str, Any], name: str) -> str | None:
    """A query-string parameter."""
    value = (event.get("queryStringParameters") or {}).get(name)
    return None if value is None else str(value)


def respond(status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON response (`body` None: an empty body, as for 204)."""
    return Response(
        status_code=status,
        content_type="application/json" if body is not None else None,
        body=json.dumps(body) if body is not None else "",
        headers=dict(headers) if headers else None,
    )


class Routes(APIGatewayHttpRouter):
    """An application's routes, mounted on the API function when its module is named in
    `LEASEHOLD_KINDS` (every `Routes` at module level is). Declare them as with any Powertools
    router (`@routes.get("/bookmarks")`); inside a route use the helpers below."""

    def caller(self) -> Owner:
        """The signed-in caller (401 when there is none)."""
        return caller_of(self.current_event.raw_event)

    def operator(self) -> Owner:
        """The caller, who must be an operator (403 otherwise)."""
        owner = self.caller()
        if not owner.is_operator:
            raise ForbiddenError("operators only")
        return owner

    def body(self, *, required: bool = True) -> Any:
        """The JSON body (400 when missing, too large or not JSON)."""
        return body_of(self.current_event.raw_event, required=required)

    def header(self, name: str) -> str | None:
        """A request header (case-insensitive)."""
        return header_of(self.current_event.raw_event, name)

    def query(self, name: str) -> str | None:
        """A query-string parameter."""
        return query_of(self.current_event.raw_event, name)


__all__ = ["Routes", "body_of", "caller_of", "header_of", "query_of", "respond"]
