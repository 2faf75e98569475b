"""Presigned uploads, the caller's side (DESIGN §20, decisions LD7–LD9): `POST /uploads` hands
out an owner-scoped, expiring PUT for an input too large for a `POST /jobs` body, and a job that
names it (`"payload_upload"`) takes the upload, checked, as its payload."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Protocol

from leasehold.domain import sizes
from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import ValidationError
from leasehold.domain.ids import IdFactory
from leasehold.domain.job import JobSpec, Owner
from leasehold.domain.options import Submission
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject
from leasehold.service.kinds import JobKind
from leasehold.store.batch import Accepted
from leasehold.store.blobs import BlobStore
from leasehold.store.items import unpacked_traceparent
from leasehold.store.keys import derived_id, fingerprint_hash, keyed_repeat
from leasehold.store.table import Table
from leasehold.store.uploads import (
    UPLOAD_URL_SECONDS,
    UPLOAD_USE_SECONDS,
    Grant,
    UploadStore,
    upload_key,
)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
UPLOAD_FIELDS = frozenset({"size", "sha256"})


class AcceptPath(Protocol):
    """What a job naming an upload needs of the one accept path (`service.jobs.Intake`)."""

    def kind_for(self, submission: Submission, *, submittable_only: bool = True) -> JobKind: ...

    def spec_of(self, submission: Submission) -> JobSpec: ...

    def accept(
        self,
        table: Table,
        owner: Owner,
        submission: Submission,
        *,
        uploaded: UploadedPayload | None = None,
        fingerprint: str | None = None,
    ) -> Accepted: ...


@dataclass(frozen=True)
class UploadedPayload:
    """An upload that passed every check: the payload it holds, where, its size and hash."""

    payload: JsonObject
    key: str
    size: int
    sha256: str


class UploadService:
    """`POST /uploads`, and the reading of an upload a job names."""

    def __init__(self, uploads: UploadStore, clock: Clock, new_id: IdFactory) -> None:
        self._uploads = uploads
        self._clock = clock
        self._new_id = new_id

    def create(self, owner: Owner, body: Any) -> JsonObject:
        """`{"size": bytes, "sha256": hex}` → the upload's id and the PUT to make: 201's body.
        A size past UPLOAD_LIMIT is a 413 `payload_too_large`; anything else malformed a 400."""
        if not isinstance(body, dict) or set(body) != UPLOAD_FIELDS:
            raise ValidationError('the body must be {"size": bytes, "sha256": "<64 hex digits>"}')
        size, sha256 = body["size"], body["sha256"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValidationError("'size' must be the upload's length in bytes (an integer ≥ 1)")
        if size > sizes.UPLOAD_LIMIT:
            raise ValidationError(
                f"an upload of {size} bytes is over the {sizes.UPLOAD_LIMIT} bytes a payload "
                "may be",
                code="payload_too_large",
            )
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise ValidationError("'sha256' must be the body's SHA-256 as 64 lowercase hex digits")
        now = self._clock.now_ms()
        upload_id = "u_" + self._new_id().partition("_")[2]
        grant = Grant(
            key=upload_key(owner, upload_id),
            size=size,
            sha256=sha256,
            expires_at=now + UPLOAD_URL_SECONDS * 1000,
            use_by=now + UPLOAD_USE_SECONDS * 1000,
        )
        return {
            "upload_id": upload_id,
            "url": self._uploads.url_for(grant),
            "method": "PUT",
            "headers": grant.headers(),
            "expires_at": iso(grant.expires_at),
            "use_by": iso(grant.use_by),
        }

    def read(self, owner: Owner, upload_id: str, max_bytes: int) -> UploadedPayload:
        """The caller's own upload `upload_id`, checked: it exists under the caller's prefix
        (another caller's id names a key of the caller's own, which does not exist), it is
        still usable, its size is within `max_bytes`, its bytes hash to what was declared, and
        they are a JSON object. Each refusal is a 4xx with its own code."""
        found = self._uploads.read(upload_key(owner, upload_id))
        if self._clock.now_ms() > found.use_by:
            raise ValidationError(
                f"upload {upload_id} has expired: a job must name it within "
                f"{UPLOAD_USE_SECONDS // 60} minutes of POST /uploads",
                code="upload_expired",
            )
        if len(found.body) > max_bytes:
            raise ValidationError(
                f"'payload_upload' holds {len(found.body)} bytes, over the kind's {max_bytes}",
                code="payload_too_large",
            )
        digest = hashlib.sha256(found.body).hexdigest()
        if digest != found.declared_sha256:
            raise ValidationError(
                f"upload {upload_id}'s bytes do not match the sha256 declared for it",
                code="upload_mismatch",
            )
        try:
            payload = json.loads(found.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ValidationError(
                f"upload {upload_id} is not a JSON object (UTF-8): a payload must be one",
                code="upload_not_json",
            )
        return UploadedPayload(payload, found.key, len(found.body), digest)

    def used(self, uploaded: UploadedPayload) -> None:
        """The job that took the upload is committed: the upload goes (best effort)."""
        self._uploads.delete(uploaded.key)


def upload_fingerprint(spec_fingerprint: str, upload_id: str) -> str:
    """What a keyed request naming an upload is compared by: its options with the upload's id
    in the payload's place, so a retry after the upload is gone is still the same request."""
    doc = json.loads(spec_fingerprint)
    doc["payload"] = {"payload_upload": upload_id}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def accept_uploaded(
    intake: AcceptPath,
    uploads: UploadService,
    table: Table,
    owner: Owner,
    submission: Submission,
) -> Accepted:
    """`POST /jobs` with `"payload_upload"`: a keyed repeat is answered from the job alone (the
    upload may be gone), else the upload is read and checked, and the job accepted through the
    one accept path with the upload copied in as its payload blob; the upload is deleted only
    once the job is committed, so a refused or failed accept can be retried with it."""
    upload_id = str(submission.payload_upload)
    kind = intake.kind_for(submission)
    key = submission.options.idempotency_key
    fingerprint: str | None = None
    if key is not None:
        shape = replace(submission, payload={}, payload_upload=None)
        fingerprint = upload_fingerprint(intake.spec_of(shape).fingerprint(), upload_id)
        job_id = derived_id("j", owner, key, "")
        old = keyed_repeat(table, job_id, fingerprint_hash(fingerprint))
        if old is not None:  # the same request again: answered as the accept path answers it
            state = str(old.get("state", JobState.QUEUED.value))
            return Accepted(job_id, False, state, unpacked_traceparent(old.get("tp")))
    found = uploads.read(owner, upload_id, kind.max_payload_bytes)
    loaded = replace(submission, payload=found.payload, payload_upload=None)
    accepted = intake.accept(table, owner, loaded, uploaded=found, fingerprint=fingerprint)
    uploads.used(found)
    return accepted


def adopt_payload(blobs: BlobStore, job_id: str, found: UploadedPayload) -> Any:
    """The uploaded payload as the job item holds it: inline when small, else the upload copied
    to the job's payload key."""
    if found.size <= blobs.inline_limit:
        return found.payload
    return blobs.adopt(job_id, found.key, found.size, found.sha256)


__all__ = ["UploadService", "UploadedPayload", "accept_uploaded", "adopt_payload"]
