"""Presigned uploads (DESIGN §20, decisions LD7–LD9): an input too large for a `POST /jobs` body
is PUT to the data bucket under the caller's own prefix, `uploads/<tenant>/<user>/<upload_id>`,
and a job then names it (`"payload_upload"`).

- Deployed, the URL is an S3 presigned PutObject (SigV4, `UPLOAD_URL_SECONDS`): the size, the
  SHA-256 checksum and the upload's metadata (the declared hash, the time it may be used by)
  are signed headers, so S3 refuses a body of another size or hash, and an expired URL.
- Locally (`LEASEHOLD_LOCAL_UPLOADS` set: the embedded stack and the tests) the URL is the
  local stack's own route, `PUT /local/uploads/<token>`, where the token carries the same
  facts under an HMAC the gateway checks (`verify_token`) before it writes the object.

The API never trusts the object for what it was declared to be: at accept it reads it back,
checks its size, its hash against the declared one and its `use_by`, and only then copies it
into the job's own prefix (`BlobStore.adopt`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import StoreUnavailableError, ValidationError
from leasehold.domain.job import Owner

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

UPLOADS = "uploads/"
"""The bucket's prefix of every upload (a lifecycle rule expires it after a day)."""
UPLOAD_URL_SECONDS = 15 * 60
"""How long an upload's URL may be used (the PUT must start by then)."""
UPLOAD_USE_SECONDS = 60 * 60
"""How long after `POST /uploads` a job may name the upload (`use_by`)."""
LOCAL_UPLOAD_ROUTE = "/local/uploads/"
"""The local stack's upload route (leasehold_dev/local/uploads.py serves it)."""
META_SHA = "sha256"
META_USE_BY = "use-by"


def upload_key(owner: Owner, upload_id: str) -> str:
    """Where `owner`'s upload lives: every identity part encoded, never joined raw (a tenant
    holding a `/` cannot reach into another's prefix; DESIGN §23)."""
    return f"{owner_prefix(owner)}{quote(upload_id, safe='')}"


def owner_prefix(owner: Owner) -> str:
    return f"{UPLOADS}{quote(owner.tenant, safe='')}/{quote(owner.user_id, safe='')}/"


def checksum_b64(sha256_hex: str) -> str:
    """S3's form of a SHA-256 checksum (`x-amz-checksum-sha256`): base64 of the digest."""
    return base64.b64encode(bytes.fromhex(sha256_hex)).decode()


@dataclass(frozen=True)
class Grant:
    """What the caller may upload: one object, of this size and hash, until `expires_at`."""

    key: str
    size: int
    sha256: str
    expires_at: int
    """ms: the URL's end."""
    use_by: int
    """ms: the last moment a job may name the upload."""

    def metadata(self) -> dict[str, str]:
        return {META_SHA: self.sha256, META_USE_BY: str(self.use_by)}

    def headers(self) -> dict[str, str]:
        """The headers the PUT must carry (S3 checks each against the signature)."""
        return {
            "Content-Length": str(self.size),
            "x-amz-checksum-sha256": checksum_b64(self.sha256),
            **{f"x-amz-meta-{name}": value for name, value in self.metadata().items()},
        }


@dataclass(frozen=True)
class Uploaded:
    """An upload read back: its bytes and what was declared for it when its URL was made."""

    key: str
    body: bytes
    declared_sha256: str
    use_by: int


class UploadStore:
    """The data bucket's `uploads/` prefix, as the API uses it."""

    def __init__(self, s3: S3Client, bucket: str, *, local_key: str = "") -> None:
        self.s3 = s3
        self.bucket = bucket
        self._local_key = local_key.encode()
        """LEASEHOLD_LOCAL_UPLOADS: when set, URLs are the local stack's route, signed by it."""

    def url_for(self, grant: Grant) -> str:
        """The URL the caller PUTs to: S3's presigned one, or the local route (a path on the
        API's own base URL) when this store signs local tokens."""
        if self._local_key:
            return LOCAL_UPLOAD_ROUTE + make_token(self._local_key, grant)
        try:
            return str(
                self.s3.generate_presigned_url(
                    "put_object",
                    Params={
                        "Bucket": self.bucket,
                        "Key": grant.key,
                        "ContentLength": grant.size,
                        "ChecksumSHA256": checksum_b64(grant.sha256),
                        "Metadata": grant.metadata(),
                    },
                    ExpiresIn=UPLOAD_URL_SECONDS,
                )
            )
        except (ClientError, BotoCoreError) as failed:
            raise StoreUnavailableError(f"no upload URL could be signed: {failed}") from None

    def read(self, key: str) -> Uploaded:
        """The upload at `key` (a ValidationError `upload_not_found` when there is none)."""
        try:
            answer = self.s3.get_object(Bucket=self.bucket, Key=key)
            body = answer["Body"].read()
        except ClientError as failed:
            code = failed.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise ValidationError(
                    "no such upload: it was never completed, was already used by a job, or "
                    "has expired (POST /uploads again)",
                    code="upload_not_found",
                ) from None
            raise StoreUnavailableError(f"the data bucket did not give {key}: {failed}") from None
        except BotoCoreError as failed:
            raise StoreUnavailableError(f"the data bucket did not give {key}: {failed}") from None
        meta = {k.lower(): v for k, v in (answer.get("Metadata") or {}).items()}
        try:
            use_by = int(meta.get(META_USE_BY, ""))
        except ValueError:
            use_by = 0  # not written through a URL of ours: never usable
        return Uploaded(key, bytes(body), str(meta.get(META_SHA, "")), use_by)

    def delete(self, key: str) -> bool:
        """Remove a used upload; best effort (the lifecycle rule removes it in a day anyway)."""
        try:
            self.s3.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError):
            return False
        return True


# ------------------------------------------------------------------ the local route's tokens


def make_token(secret: bytes, grant: Grant) -> str:
    """`<grant as base64url JSON>.<HMAC-SHA256 of it>`: what a presigned URL's signature is to
    S3, to the local stack's upload route."""
    doc = {"k": grant.key, "n": grant.size, "h": grant.sha256, "e": grant.expires_at}
    doc["u"] = grant.use_by
    body = base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode()
    body = body.rstrip("=")
    return f"{body}.{_mac(secret, body)}"


def verify_token(secret: bytes, token: str) -> Grant | None:
    """The grant a token signed with `secret` carries (None: forged, altered or malformed)."""
    body, _, mac = token.partition(".")
    if not body or not hmac.compare_digest(mac.encode(), _mac(secret, body).encode()):
        return None
    try:
        doc: Any = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        return Grant(str(doc["k"]), int(doc["n"]), str(doc["h"]), int(doc["e"]), int(doc["u"]))
    except (ValueError, KeyError, TypeError):
        return None


def _mac(secret: bytes, body: str) -> str:
    digest = hmac.new(secret, body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
