"""The claim-check (DESIGN §20, decisions LD1–LD6, LD16): a value too large to ride on the job
item — a payload, a step output, a result, a kind's saved progress, a ledger entry's receipt or
output — is written to S3 under the job's prefix, and the item keeps only a reference to it,
`{"$blob": {"key", "size", "sha256"}}`.

- A value is inline while its compact JSON as the item stores it is at most its part's limit
  (`INLINE_LIMIT`; progress `KIND_STATE_INLINE`; a receipt `RECEIPT_INLINE`) and its part's
  inline values together stay within the part's share (`OUTPUTS_INLINE`, `LEDGER_INLINE`), so
  no item of a job passes 64,000 bytes whatever the data (LD1, LD16: domain/sizes.py).
- A worker's blob is keyed by the epoch of its lease (`jobs/<id>/e<epoch>/out/<step>`), and is
  written before the fenced write that references it: a stale worker's fenced write fails, so
  its blob is never referenced; a crash between the two leaves an unreferenced blob the retry
  (a new epoch, a new key) never reuses (LD4).
- A blob already referenced is never written again: the outputs a checkpoint carries are
  matched by content hash against those this process read or wrote (LD2).
- A reference is only ever followed inside its own job's prefix, and its hash is checked: a
  payload that names another job's key cannot read it (LD5).

Without a bucket (`DATA_BUCKET` unset: an engine built for a unit test) values stay inline
and the item's size budget (domain/sizes.py) refuses what does not fit, as before."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain import sizes
from leasehold.domain.errors import StoreUnavailableError, ValidationError
from leasehold.domain.job import Job

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

REF = "$blob"
"""The one key of a reference's object."""
INLINE_LIMIT = sizes.INLINE_LIMIT
"""The largest value kept on the item (bytes of compact JSON). See decision LD1 for the sum."""
OUTPUTS_INLINE = sizes.OUTPUTS_INLINE
"""All of a job's inline step outputs together; later large ones go to S3."""
SPILLED = ("receipt", "output")
"""The fields of a ledger entry that may be large (an effect step's output, a provider's
receipt): kept as references with a bucket when large (decision LD16)."""
MAX_BLOB_BYTES = sizes.BLOB_LIMIT
"""The largest value the engine stores in one blob (10 MiB)."""
_CACHE = 4096


def encoded(value: Any) -> bytes:
    """A value as the engine stores it in a blob: compact JSON, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def inline_size(value: Any) -> int:
    """What `value` takes on the item: compact JSON with non-ASCII escaped, as the stores write
    it (`\\uXXXX` is up to twice a character's UTF-8), so an inline share holds on the item."""
    return sizes.json_bytes(value)


def is_ref(value: Any) -> bool:
    """Whether `value` is a reference the engine wrote."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(REF), dict)


def ref_size(value: Any) -> int | None:
    """The size in bytes of the value a reference stands for (None: not a reference)."""
    return int(value[REF]["size"]) if is_ref(value) else None


class Marks(Protocol):
    """How a job with blobs is marked for the sweeper (store/blob_marks.py, LD10)."""

    def ensure(self, job_id: str) -> None: ...

    def note(self, job_id: str) -> None: ...


def job_prefix(job_id: str) -> str:
    """Where every blob of a job lives."""
    return f"jobs/{job_id}/"


def signal_blob(name: str) -> str:
    """Where a large body of signal `name` goes under its job's prefix, content-named
    (`signals/<name>/<sha256[:16]>`): a second send of the name, refused (409) after its blob
    is written, cannot overwrite the first one's body. A name's `..` (allowed in a signal
    name, refused in a key `read` follows) is written `._`; the hash keeps keys apart."""
    return f"signals/{name.replace('..', '._')}/{{sha}}"


class BlobStore:
    """The data bucket, as the engine uses it (one per engine, shared by its stores)."""

    def __init__(self, s3: S3Client, bucket: str, *, inline_limit: int = INLINE_LIMIT) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.inline_limit = inline_limit
        self._known: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        """(job id, sha256) → a reference already on an item (read or committed)."""
        self._mine: OrderedDict[tuple[str, int, str], dict[str, Any]] = OrderedDict()
        """(job id, epoch, sha256) → a reference this process wrote under that epoch."""
        self.puts = 0
        """Blobs written by this store (a test counts them)."""
        self.marks: Marks | None = None
        """The jobs' blob marks (LD10): a job is marked before its first blob is written, so
        the sweeper removes its blobs with its item; None (a unit test's engine): no marks."""

    # ------------------------------------------------------------------ writing

    def keep(self, job_id: str, name: str, value: Any, *, epoch: int | None = None) -> Any:
        """`value` as the item should hold it: itself when small, else a reference to the blob
        `jobs/<job_id>/[e<epoch>/]<name>` (written now unless this content is already stored
        for the job)."""
        if inline_size(value) <= self.inline_limit:
            return value
        return self.spill(job_id, name, encoded(value), epoch=epoch)

    def spill(self, job_id: str, name: str, data: bytes, *, epoch: int | None = None) -> Any:
        """The reference to `data` stored for the job (written unless already stored)."""
        if len(data) > MAX_BLOB_BYTES:
            raise ValidationError(
                f"a value of {len(data)} bytes is over the {MAX_BLOB_BYTES} bytes one job value "
                "may hold",
                code="payload_too_large",
            )
        digest = hashlib.sha256(data).hexdigest()
        known = self._known.get((job_id, digest))
        if known is None and epoch is not None:
            known = self._mine.get((job_id, epoch, digest))
        if known is not None:
            return {REF: dict(known)}
        name = name.replace("{sha}", digest[:16])  # content-named: a reused key cannot clobber
        where = f"e{epoch}/{name}" if epoch is not None else name
        key = f"{job_prefix(job_id)}{where}"
        if self.marks is not None:
            self.marks.ensure(job_id)  # before the blob: a crash after it leaves a mark (LD10)
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType="application/json",
                ChecksumSHA256=_b64(digest),
            )
        except (ClientError, BotoCoreError) as failed:
            raise StoreUnavailableError(f"the data bucket did not take {key}: {failed}") from None
        self.puts += 1
        ref = {"key": key, "size": len(data), "sha256": digest}
        if epoch is not None:
            _remember(self._mine, (job_id, epoch, digest), ref)
        return {REF: ref}

    def adopt(self, job_id: str, source_key: str, size: int, sha256: str) -> Any:
        """The reference to an upload already checked (its size and hash), copied inside the
        bucket to the job's own payload key (`jobs/<id>/payload/<sha16>`, as `keep` names it),
        so every blob a job references lives under its prefix (decision LD8)."""
        return self._copied(source_key, job_id, size, sha256)

    def handed(self, from_job: str, value: Any, to_job: str) -> Any:
        """Job `from_job`'s payload reference as job `to_job`'s own: the blob copied inside the
        bucket (CopyObject: no byte passes through this function) to `to_job`'s payload key
        (`jobs/<to_job>/payload/<sha16>`, content-named as `keep` names it), before any item
        names it, so a job only ever references blobs under its own prefix (LD4, LD19)."""
        ref = value[REF]
        source = str(ref.get("key", ""))
        if not source.startswith(job_prefix(from_job)) or ".." in source:
            raise ValidationError(f"a reference outside job {from_job}'s data")
        sha256, size = str(ref["sha256"]), int(ref["size"])
        if self.marks is not None:
            self.marks.ensure(to_job)  # before the blob, as `spill` (LD10)
        return self._copied(source, to_job, size, sha256)

    def _copied(self, source_key: str, job_id: str, size: int, sha256: str) -> Any:
        """`source_key` copied inside the bucket (CopyObject) to the job's content-named payload
        key, `jobs/<id>/payload/<sha16>`, and the reference to the copy."""
        key = f"{job_prefix(job_id)}payload/{sha256[:16]}"
        try:
            self.s3.copy_object(
                Bucket=self.bucket,
                Key=key,
                CopySource={"Bucket": self.bucket, "Key": source_key},
                ContentType="application/json",
                MetadataDirective="REPLACE",
            )
        except (ClientError, BotoCoreError) as failed:
            raise StoreUnavailableError(f"the data bucket did not copy {key}: {failed}") from None
        self.puts += 1
        ref = {"key": key, "size": size, "sha256": sha256}
        _remember(self._known, (job_id, sha256), ref)
        return {REF: ref}

    def keep_outputs(self, job_id: str, epoch: int, outputs: list[Any]) -> list[Any]:
        """The checkpoint's outputs as the item holds them: small ones inline while together
        within OUTPUTS_INLINE, every other one a reference (each written at most once)."""
        stored: list[Any] = []
        inline = 0
        for index, value in enumerate(outputs):
            if is_ref(value):
                stored.append(value)
                continue
            size = inline_size(value)
            if size <= self.inline_limit and inline + size <= OUTPUTS_INLINE:
                inline += size
                stored.append(value)
            else:
                stored.append(self.spill(job_id, f"out/{index}", encoded(value), epoch=epoch))
        return stored

    def keep_state(self, job_id: str, epoch: int, state: Any) -> Any:
        """A kind's saved progress as the item holds it: itself up to KIND_STATE_INLINE, else a
        reference to `jobs/<id>/e<epoch>/state/<sha>` written now, before the fenced write
        (LD4, LD16)."""
        if inline_size(state) <= sizes.KIND_STATE_INLINE:
            return state
        return self.spill(job_id, "state/{sha}", encoded(state), epoch=epoch)

    def keep_entry(
        self, job_id: str, epoch: int, operation_id: str, entry: Any, ledger: Any
    ) -> dict[str, Any]:
        """A ledger entry as the item holds it: its receipt and output inline while each is at
        most RECEIPT_INLINE and the ledger (`ledger`, with this entry) stays within its share,
        else references to `jobs/<id>/e<epoch>/op/<sha>` written now, before the fenced write
        (LD16). A blob of the same content (the step's output, a receipt read back) is not
        written again."""
        kept = dict(entry)
        for name in SPILLED:
            value = kept.get(name)
            if value is None or is_ref(value):
                continue
            size = inline_size(value)
            room = sizes.LEDGER_INLINE - sizes.json_bytes({**ledger, operation_id: kept})
            if size > sizes.RECEIPT_INLINE or room < 0:
                kept[name] = self.spill(job_id, "op/{sha}", encoded(value), epoch=epoch)
        return kept

    def load_entry(self, job_id: str, entry: Any) -> Any:
        """A ledger entry with its receipt and output whole (read back from S3 when spilled)."""
        if not any(is_ref(entry.get(name)) for name in SPILLED):
            return entry
        return {
            name: self.load(job_id, value) if name in SPILLED else value
            for name, value in entry.items()
        }

    def committed(self, job_id: str, refs: list[Any]) -> None:
        """The references a fenced write just put on the item: known from now on."""
        for value in refs:
            if is_ref(value):
                _remember(self._known, (job_id, value[REF]["sha256"]), value[REF])
                if self.marks is not None:
                    self.marks.note(job_id)  # an item holding a reference is marked (LD10)

    # ------------------------------------------------------------------ reading

    def read(self, job_id: str, value: Any) -> bytes:
        """The bytes a reference of job `job_id` stands for, checked against its hash."""
        ref = value[REF]
        key = str(ref.get("key", ""))
        if not key.startswith(job_prefix(job_id)) or ".." in key:
            raise ValidationError(f"a reference outside job {job_id}'s data")
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as failed:
            raise StoreUnavailableError(f"the data bucket did not give {key}: {failed}") from None
        if hashlib.sha256(body).hexdigest() != ref.get("sha256"):
            raise StoreUnavailableError(f"{key} does not match its reference's sha256")
        _remember(self._known, (job_id, str(ref["sha256"])), ref)
        if self.marks is not None:
            self.marks.note(job_id)  # an item holding a reference is marked (LD10)
        return bytes(body)

    def load(self, job_id: str, value: Any) -> Any:
        """`value` whole: a reference read back, anything else as it is."""
        if not is_ref(value):
            return value
        return json.loads(self.read(job_id, value))

    def resolved(self, job: Job) -> Job:
        """`job` as a step sees it: its payload, its checkpoint's outputs and its kind state
        whole. The stores write references back (`keep_outputs` finds each by its hash), never
        these values."""
        # A new attempt: what an earlier one read may be gone since (an ended job's blobs the
        # item stopped naming are deleted, LD11), so only this attempt's are matched by content
        for known in [key for key in self._known if key[0] == job.job_id]:
            del self._known[known]
        outputs = [self.load(job.job_id, value) for value in job.checkpoint.outputs]
        return replace(
            job,
            payload=self.load(job.job_id, job.payload),
            checkpoint=replace(job.checkpoint, outputs=outputs),
            kind_state=self.load(job.job_id, job.kind_state),
        )

    def presigned(self, value: Any, *, seconds: int = 300) -> str:
        """A URL that reads the blob for `seconds` (deployed: the view's `result_url`)."""
        return str(
            self.s3.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": value[REF]["key"]},
                ExpiresIn=seconds,
            )
        )


def _remember(cache: OrderedDict[Any, dict[str, Any]], key: Any, ref: dict[str, Any]) -> None:
    cache[key] = dict(ref)
    cache.move_to_end(key)
    while len(cache) > _CACHE:
        cache.popitem(last=False)


def _b64(hex_digest: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(hex_digest)).decode()
