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
    if _lone_surrogate(str(user)) is not None or _lone_surrogate(str(tenant)) is not None:
        raise UnauthenticatedError("the caller's identity is not Unicode text")
    groups = claims.get("cognito:groups") or ""
    if isinstance(groups, str):
        groups = groups.strip("[]").replace(",", " ").split()
    return Owner(tenant=str(tenant), user_id=str(user), is_operator=OPERATORS_GROUP in groups)


def body_of(
    event: Mapping[str, Any], *, required: bool = True, max_bytes: int = MAX_BODY_BYTES
) -> Any:
    """The request's JSON body: 400 when it is missing (if required), too large, not JSON (an
    RFC 8259 document: no `NaN`, no `Infinity`, no number past a double's range), nested too
    deeply to parse, or when a string in it (a value or a key) is not text DynamoDB can store
    and JSON can carry — a lone UTF-16 surrogate, `"\\ud800"`, is valid JSON syntax but not
    Unicode: it cannot be encoded as UTF-8, so no store request or answer could hold it."""
    raw = event.get("body")
    if raw is None or raw == "":
        if required:
            raise ValidationError("a JSON body is required")
        return None
    if event.get("isBase64Encoded"):
        try:
            data = base64.b64decode(raw)
            # JSON between systems is UTF-8 (RFC 8259 §8.1): json.loads(bytes) would take
            # UTF-16 and UTF-32 too, which the local gateway's text path never could
            data.decode("utf-8")
        except ValueError as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise ValidationError("the body is not UTF-8 text", code="malformed_json") from exc
    else:
        text = str(raw)
        if _lone_surrogate(text) is not None:
            raise ValidationError("the body is not UTF-8 text", code="malformed_json")
        data = text.encode()
    if len(data) > max_bytes:
        raise ValidationError(f"the body is larger than {max_bytes} bytes", code="too_large")
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError("the body is not valid JSON", code="malformed_json") from exc
    except RecursionError as exc:  # a body nested thousands deep: not one of ours
        raise ValidationError("the body is nested too deeply", code="malformed_json") from exc
    _check_json_text(value)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):  # 1e999: a double cannot hold it, JSON cannot write it back
        raise ValueError(f"{literal} is out of range")
    return number


def _lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text` (None when it is text)."""
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def require_text(value: str, where: str) -> str:
    """`value` itself, when it is Unicode text (400 naming `where` when it holds a lone
    surrogate, which neither DynamoDB nor a UTF-8 answer can carry)."""
    at = _lone_surrogate(value)
    if at is not None:
        raise ValidationError(
            f"{where} is not Unicode text (a lone surrogate \\u{ord(value[at]):04x} at "
            f"character {at})"
        )
    return value


def check_request_text(owner: Owner, payload: Any, **others: str | None) -> None:
    """A request made in code (`job_writes`, `submit_direct`) holds only Unicode text: the
    owner's ids, every string of the payload (values and keys) and the `others` given by name.
    A lone surrogate — which no UTF-8 request, DynamoDB item or hash can carry — is a
    ValidationError naming where it is (`'payload.items[1].name'`), as `POST /jobs` answers
    a body holding one, never a UnicodeEncodeError from deep in a write."""
    require_text(owner.tenant, "the owner's tenant")
    require_text(owner.user_id, "the owner's user id")
    for name, value in others.items():
        if isinstance(value, str):
            require_text(value, f"'{name}'")
    _check_json_text({"payload": payload})


def _check_json_text(value: Any) -> None:
    """Every string of a parsed body, keys too, is text; the message names the first one that
    is not by its path (`'payload.steps[0].name'`). Iterative: as deep as json.loads went."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            require_text(item, f"'{path}'" if path else "the body")
        elif isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if _lone_surrogate(key) is not None:
                    require_text(key, f"a key in '{path}'" if path else "a key of the body")
                stack.append((child, where))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))


def header_of(event: Mapping[str, Any], name: str) -> str | None:
    """A request header, matched without regard to case."""
    headers = event.get("headers") or {}
    for key, value in headers.items():
        if key.lower() == name.lower():
            return require_text(str(value), f"the {name} header")
    return None


def query_of(event: Mapping[str, Any], name: str) -> str | None:
    """A query-string parameter."""
    value = (event.get("queryStringParameters") or {}).get(name)
    return None if value is None else require_text(str(value), f"'{name}'")


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


__all__ = [
    "Routes",
    "body_of",
    "caller_of",
    "header_of",
    "query_of",
    "require_text",
    "respond",
]
