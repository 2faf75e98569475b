"""`Client.submit`'s large inputs (decisions LD7–LD9): a payload whose JSON would not fit a
`POST /jobs` body is PUT first to the URL `POST /uploads` hands out — S3's presigned URL
deployed, the local stack's upload route locally, the same code for both — and the job names
it (`"payload_upload"`). The caller never sees the difference."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from leasehold.client.errors import ApiError, Unreachable, error_for
from leasehold.domain.sizes import API_BODY_LIMIT, UPLOAD_LIMIT
from leasehold.domain.types import JsonObject

if TYPE_CHECKING:
    from leasehold.client.transport import Transport

UPLOAD_PAST = API_BODY_LIMIT - 64 * 1024
"""A payload whose JSON is longer goes by upload: the API's body limit, less room for the
request's other fields."""
_GRANT_FIELDS = ("upload_id", "url", "method", "headers")


def payload_fields(transport: Transport, payload: Any) -> JsonObject:
    """The request's payload field: `{"payload": …}` when it fits a body, else the payload
    uploaded and `{"payload_upload": <upload_id>}`."""
    if len(json.dumps(payload).encode()) <= UPLOAD_PAST:
        return {"payload": payload}
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if len(data) > UPLOAD_LIMIT:
        raise ApiError(
            413,
            "payload_too_large",
            f"the payload is {len(data)} bytes of JSON, over the {UPLOAD_LIMIT} a job may take",
        )
    return {"payload_upload": upload(transport, data)}


def upload(transport: Transport, data: bytes) -> str:
    """Upload `data` (`POST /uploads`, then the PUT it names); its `upload_id`. The PUT is
    repeated after a failure to connect or a 5xx, within the client's `retries` (the same
    bytes to the same URL: nothing to double)."""
    sha256 = hashlib.sha256(data).hexdigest()
    body = {"size": len(data), "sha256": sha256}
    grant = transport._object("POST", "/uploads", body, repeat_safe=True)
    if not all(isinstance(grant.get(name), str | dict) for name in _GRANT_FIELDS):
        from leasehold.client.transport import invalid_answer

        raise invalid_answer(201, json.dumps(grant).encode(), "is not an upload")
    url = str(grant["url"])
    target = transport.base_url + url if url.startswith("/") else url
    headers = {str(k): str(v) for k, v in dict(grant["headers"]).items()}
    attempt = 0
    while True:
        try:
            status, raw = _put(transport, str(grant["method"]), target, data, headers)
        except Unreachable:
            if attempt >= transport.retries:
                raise
        else:
            if status < 300:
                return str(grant["upload_id"])
            if status < 500 or attempt >= transport.retries:
                raise _refusal(status, raw)
        transport._sleep(transport._backoff(attempt))
        attempt += 1


def _put(
    transport: Transport, method: str, url: str, data: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    """One PUT of the upload (no identity headers: the URL is the authority), its status and
    answer; `Unreachable` when no answer came."""
    import urllib3

    try:
        status, _, raw = transport._exchange(method, url, data, headers)
        return status, raw
    except urllib3.exceptions.HTTPError as failed:
        raise Unreachable(f"the upload to its URL failed: {failed}", sent=True) from failed


def _refusal(status: int, raw: bytes) -> ApiError:
    """The PUT's refusal as an ApiError: the local route's envelope as it is, S3's XML
    (`<Code>BadDigest</Code>`, `AccessDenied` for an expired URL) by its code."""
    try:
        parsed: Any = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        text = raw.decode(errors="replace")
        code = text.partition("<Code>")[2].partition("</Code>")[0] or "upload_failed"
        parsed = {"error": {"code": code, "message": f"the upload was refused: {text[:300]}"}}
    return error_for(status, parsed, raw, {})
