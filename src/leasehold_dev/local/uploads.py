"""The local stack's upload route, `PUT /local/uploads/<token>` (decision LD7): what an S3
presigned PutObject is deployed. S3 checks a presigned URL's signature, its expiry, the signed
`Content-Length` and the `x-amz-checksum-sha256` against the body; the embedded moto server
checks none of them, so this route does, then writes the object as the API's role (a presigned
URL acts with its signer's permissions). Local only: deployed, the URL is S3's own."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from leasehold.store.uploads import META_SHA, META_USE_BY, checksum_b64, verify_token

Answer = tuple[int, dict[str, Any]]


def _refused(status: int, code: str, message: str) -> Answer:
    return status, {"error": {"code": code, "message": message}}


class LocalUploads:
    """Checks and stores what a caller PUTs to a token `POST /uploads` handed out."""

    def __init__(
        self,
        secret: str,
        bucket: str,
        put_object: Callable[..., Any],
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self._secret = secret.encode()
        self._bucket = bucket
        self._put_object = put_object
        """S3's PutObject, as the API's role (the signer's permissions)."""
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))

    def answer(self, token: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """S3's answers, in the API's error envelope: 403 for a token that is not ours or has
        expired, 400 for a body whose length or hash is not the signed one, 200 once stored."""
        grant = verify_token(self._secret, token)
        if grant is None:
            return _refused(403, "upload_forbidden", "this upload URL is not one we signed")
        if self._now_ms() > grant.expires_at:
            return _refused(403, "upload_expired", "this upload URL has expired: ask again")
        lower = {k.lower(): v for k, v in headers.items()}
        if lower.get("x-amz-checksum-sha256") != checksum_b64(grant.sha256):
            return _refused(400, "upload_mismatch", "x-amz-checksum-sha256 is not the signed one")
        if len(body) != grant.size:
            said = f"the body is {len(body)} bytes, not the {grant.size} signed"
            return _refused(400, "upload_mismatch", said)
        if hashlib.sha256(body).hexdigest() != grant.sha256:
            said = "the body does not match its signed sha256 (S3's BadDigest)"
            return _refused(400, "upload_mismatch", said)
        self._put_object(
            Bucket=self._bucket,
            Key=grant.key,
            Body=body,
            ChecksumSHA256=checksum_b64(grant.sha256),
            Metadata={META_SHA: grant.sha256, META_USE_BY: str(grant.use_by)},
        )
        return 200, {}


def local_uploads(stack: Any, api: str) -> LocalUploads | None:
    """The upload route of a running stack (`stack`: its StackInfo; `api`: the API function's
    logical id), writing as the API's role — None when the API signs no local tokens."""
    from leasehold.testing import iam
    from leasehold_dev.local.stack import client

    environment = stack.environment(api)
    secret = environment.get("LEASEHOLD_LOCAL_UPLOADS", "")
    bucket = environment.get("DATA_BUCKET", "")
    if not secret or not bucket:
        return None
    s3 = client("s3", stack.endpoint)
    role = stack.role(api)

    def put_object(**params: Any) -> Any:
        with iam.acting_as(role):
            return s3.put_object(**params)

    return LocalUploads(secret, bucket, put_object)
