"""The documents bucket (docs/architecture.md "The document-preparation agent"): the one place that
knows S3. A doc_prep job's `extract`
reads its document here, once, bounded in size; nothing else reads or writes it.

The worker's role may only `s3:GetObject` under `tenants/*/documents/*` (no `s3:ListBucket`),
so S3 answers a missing key with 403 AccessDenied, not 404: both mean "not there for you" and
no retry changes that. Throttling, 5xx and a connection that did not answer are worth a retry.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from leasehold import LeaseholdError

# Bounded like the engine's own clients: a bucket (or Secrets Manager) that does not answer
# fails the call in seconds, inside the tool's bound, and the job retries with backoff.
CLIENT_CONFIG: Final = Config(
    connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"}
)
_NOT_THERE: Final = frozenset({"NoSuchKey", "AccessDenied", "NoSuchBucket", "404", "403"})
_RETRYABLE: Final = frozenset(
    {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "503", "500"}
)


class DocumentNotFoundError(LeaseholdError):
    """No readable object at that key (absent, or not ours to read): a retry cannot help."""

    code = "document_not_found"


class DocumentUnavailableError(LeaseholdError):
    """S3 did not answer or throttled past the client's retries: worth a retry later."""

    code = "document_unavailable"


class DocumentReader(Protocol):
    def read(self, key: str, max_bytes: int) -> bytes:
        """At most `max_bytes + 1` bytes of the object at `key` (one more than allowed, so the
        caller can tell "too large" from "exactly the limit")."""


class S3Documents:
    """Reads documents from one bucket with a ranged GET (never more than the limit + 1 byte
    crosses the wire, whatever the object's size)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self._bucket = bucket

    @staticmethod
    def for_bucket(bucket: str) -> S3Documents:
        import boto3

        return S3Documents(
            boto3.session.Session().client("s3", config=CLIENT_CONFIG),
            bucket,
        )

    def read(self, key: str, max_bytes: int) -> bytes:
        try:
            answer = self._s3.get_object(Bucket=self._bucket, Key=key, Range=f"bytes=0-{max_bytes}")
            body = answer["Body"]
            try:
                data: bytes = body.read(max_bytes + 1)
            finally:
                body.close()
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "InvalidRange":  # a zero-byte object has no byte 0
                return b""
            if code in _NOT_THERE:
                raise DocumentNotFoundError(
                    "the document is not in the documents bucket (or not readable there)"
                ) from exc
            if code in _RETRYABLE:
                raise DocumentUnavailableError(
                    f"the documents bucket is unavailable ({code})"
                ) from exc
            raise LeaseholdError(f"unexpected documents bucket error {code}") from exc
        except BotoCoreError as exc:
            raise DocumentUnavailableError(
                f"the documents bucket did not answer ({type(exc).__name__})"
            ) from exc
        return data
