"""What the client raises: the API's error envelope as exceptions, one root and one class per
status the API promises (docs/openapi.yaml), and the two things that are not an answer — no
answer at all (`Unreachable`) and a job still not settled when `wait` gave up (`WaitTimeout`).

The status classes hang off the root (`ApiError.NotFound`, as a Django model carries its own
`DoesNotExist`) so that `leasehold` exports one error name for the client, not seven beside the
engine's own `NotFoundError` and `ConflictError` (docs/decisions.md CL3)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

from leasehold.domain.errors import LeaseholdError

_CODE_BY_STATUS = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    429: "throttled",
    503: "unavailable",
}
"""The code of an answer without the API's envelope (API Gateway's own `{"message"}` bodies)."""


class ApiError(LeaseholdError):
    """An error answer of the leasehold API, or no answer at all: the root of every error the
    client raises for a request. `status` is the HTTP status (0: no answer), `code` the
    envelope's snake_case code, `message` its human text; `body` and `headers` are the answer
    as received. Catch a subclass for one status: `ApiError.InvalidInput` (400),
    `ApiError.Unauthenticated` (401), `ApiError.Forbidden` (403), `ApiError.NotFound` (404),
    `ApiError.Conflict` (409), `ApiError.Unavailable` (503, with `retry_after`),
    `ApiError.Unreachable` (no answer); any other status is an `ApiError` itself, and so is
    a success answer that is not the JSON its route promises (code `invalid_response`)."""

    InvalidInput: ClassVar[type[InvalidInput]]
    Unauthenticated: ClassVar[type[Unauthenticated]]
    Forbidden: ClassVar[type[Forbidden]]
    NotFound: ClassVar[type[NotFound]]
    Conflict: ClassVar[type[Conflict]]
    Unavailable: ClassVar[type[Unavailable]]
    Unreachable: ClassVar[type[Unreachable]]

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.headers: Mapping[str, str] = dict(headers or {})

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class InvalidInput(ApiError):
    """400: the request is wrong (a bad field, an unknown kind, an oversized body); sending it
    again unchanged gets the same answer."""


class Unauthenticated(ApiError):
    """401: no identity, an unknown one, or an expired token (`leasehold login` again)."""


class Forbidden(ApiError):
    """403: a known caller who may not do this (a non-operator on `/ops`)."""


class NotFound(ApiError):
    """404: no such job — or not the caller's: the API gives both the same answer."""


class Conflict(ApiError):
    """409: the job's state or version does not allow this, or an idempotency key was reused
    with another body."""


class Unavailable(ApiError):
    """503: a dependency failed and nothing is promised. `retry_after` is the server's
    `Retry-After` in seconds (None when it sent none). A submission answered 503 may still have
    been accepted: repeat it with the same idempotency key, never without one."""

    @property
    def retry_after(self) -> float | None:
        """The answer's `Retry-After`, in seconds from now (None without one)."""
        return retry_after_seconds(self.headers)


class Unreachable(ApiError):
    """No answer: the connection could not be made, broke, or timed out (status 0). `sent`
    says whether the request may have reached the server — if it may, a submission without
    an idempotency key may have been accepted, and repeating it could make a second job."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(0, "unreachable", message)
        self.sent = sent


ApiError.InvalidInput = InvalidInput
ApiError.Unauthenticated = Unauthenticated
ApiError.Forbidden = Forbidden
ApiError.NotFound = NotFound
ApiError.Conflict = Conflict
ApiError.Unavailable = Unavailable
ApiError.Unreachable = Unreachable

ERROR_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidInput,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    503: Unavailable,
}


class WaitTimeout(LeaseholdError, TimeoutError):
    """`Client.wait` gave up: the job was not settled within `timeout` seconds. `view` is the
    last view it read (None if no read succeeded); the job itself goes on. Still a
    `TimeoutError`, as before it joined the tree."""

    code = "wait_timeout"

    def __init__(self, job_id: str, timeout: float, view: Mapping[str, Any] | None) -> None:
        state = (view or {}).get("state", "not read")
        super().__init__(f"job {job_id} is not settled after {timeout:g} s (state: {state})")
        self.job_id = job_id
        self.timeout = timeout
        self.view = dict(view) if view is not None else None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3);
    None when absent or unreadable."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def error_for(status: int, body: Any, raw: bytes, headers: Mapping[str, str]) -> ApiError:
    """The exception for an error answer: the envelope's code and message, else (an answer from
    API Gateway itself, or a proxy) a code named for the status and whatever text it sent."""
    code, message = "", ""
    if isinstance(body, dict):
        envelope = body.get("error")
        if isinstance(envelope, dict):
            code = str(envelope.get("code") or "")
            message = str(envelope.get("message") or "")
        elif isinstance(body.get("message"), str):
            message = body["message"]
    if not message:
        message = raw[:200].decode(errors="replace").strip() or f"HTTP {status}"
    code = code or _CODE_BY_STATUS.get(status, f"http_{status}")
    cls = ERROR_BY_STATUS.get(status, ApiError)
    return cls(status, code, message, body=body, headers=headers)
