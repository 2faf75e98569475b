"""The `doc_prep` job input (docs/architecture.md "The document-preparation agent"), parsed once at
accept and immutable after.

`parse_doc_prep_input` refuses, with a ValidationError (HTTP 400) that names the field, anything
the job could never run with: both or neither of `document.text` / `document.s3_key`, a key
outside the caller's tenant, an unknown required field, a `hosted` planner with no endpoint, an
unknown field anywhere. `tenant_of_key` lets the guard check the tenant again at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from leasehold import LeaseholdError, ValidationError
from leasehold_apps.doc_agent.planner import PlannerError, Proposal, parse_proposal
from leasehold_apps.doc_agent.vocabulary import DEFAULT_REQUIRED_FIELDS, KNOWN_FIELDS

MAX_DOCUMENT_BYTES: Final = 512 * 1024
"""A document, inline or stored: 512 KiB of UTF-8 text (decision LD14: extract's time on an
adversarial document of this size, measured, stays within a third of its 2 s bound; 1 MiB took
half of it). An inline one is kept in the data bucket by the engine (DESIGN §20); the step
reads it whole as `payload`."""
MAX_REQUIRED_FIELDS: Final = 10
MAX_PROPOSALS: Final = 10
MAX_STEP_DELAY_MS: Final = 3_000
"""`planner.step_delay_ms` (fixture and scripted planners only): the planner "thinks" this long
before each proposal, heartbeating, so a demo can stop a worker between two tools. Bounded so
four delays and the tools' bounds still fit in one step (≤ 20 s, the local MAX_STEP_SECONDS)."""
MAX_KEY_CHARS: Final = 512
PLANNER_KINDS: Final = ("fixture", "scripted", "hosted")
# AWS's "safe characters" for object keys, and "/" between segments.
_KEY_CHARS: Final = re.compile(r"[A-Za-z0-9!_.*'()/\-]+")
_TENANT: Final = re.compile(r"[A-Za-z0-9._\-]{1,128}")
_DOCUMENT_KEY: Final = re.compile(r"tenants/(?P<tenant>[^/]+)/documents/.+")


class DocumentUnreadableError(LeaseholdError):
    """The stored document is not UTF-8 text of 1 byte to 512 KiB: no retry can fix it."""

    code = "document_unreadable"


@dataclass(frozen=True)
class PlannerSpec:
    kind: str  # one of PLANNER_KINDS
    proposals: tuple[Proposal, ...] = ()
    step_delay_ms: int = 0


@dataclass(frozen=True)
class DocPrepInput:
    """Exactly one of `text` / `s3_key` is set."""

    text: str | None
    s3_key: str | None
    required_fields: tuple[str, ...]
    planner: PlannerSpec


def parse_doc_prep_input(payload: Any, *, tenant: str, hosted_configured: bool) -> DocPrepInput:
    """The validated input of a `doc_prep` job submitted by `tenant`."""
    if not isinstance(payload, dict):
        raise ValidationError("'payload' must be an object")
    _refuse_unknown(payload, {"document", "required_fields", "planner"}, "payload")
    text, s3_key = _document(payload.get("document"), tenant)
    return DocPrepInput(
        text=text,
        s3_key=s3_key,
        required_fields=_required_fields(payload.get("required_fields")),
        planner=_planner(payload.get("planner"), hosted_configured),
    )


def document_prefix(tenant: str) -> str:
    return f"tenants/{tenant}/documents/"


def tenant_of_key(key: str) -> str | None:
    """The tenant a well-formed document key belongs to (`tenants/<tenant>/documents/<name>`),
    or None for any key that is not a well-formed document key."""
    if not _key_is_well_formed(key):
        return None
    match = _DOCUMENT_KEY.fullmatch(key)
    if match is None or not _TENANT.fullmatch(match["tenant"]):
        return None
    return match["tenant"]


def decode_document(data: bytes) -> str:
    """The text of a document read from the documents bucket: UTF-8 (a BOM is dropped), 1 byte
    to 512 KiB, not blank; else DocumentUnreadableError."""
    if not 1 <= len(data) <= MAX_DOCUMENT_BYTES:
        raise DocumentUnreadableError(f"the document must be 1 to {MAX_DOCUMENT_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentUnreadableError("the document is not UTF-8 text") from exc
    if not text.strip():
        raise DocumentUnreadableError("the document is blank")
    return text


def _refuse_unknown(value: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(value) - allowed)
    if extra:
        raise ValidationError(f"'{where}' has unknown field(s): {', '.join(extra)[:200]}")


def _document(value: Any, tenant: str) -> tuple[str | None, str | None]:
    if not isinstance(value, dict):
        raise ValidationError("'payload.document' must be an object with 'text' or 's3_key'")
    _refuse_unknown(value, {"text", "s3_key"}, "payload.document")
    if ("text" in value) == ("s3_key" in value):
        raise ValidationError("'payload.document' takes exactly one of 'text' or 's3_key'")
    if "text" in value:
        return _text(value["text"]), None
    return None, _s3_key(value["s3_key"], tenant)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError("'payload.document.text' must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError("'payload.document.text' is not valid Unicode text") from exc
    if not 1 <= size <= MAX_DOCUMENT_BYTES or not value.strip():
        raise ValidationError(
            f"'payload.document.text' must be 1 to {MAX_DOCUMENT_BYTES} bytes of UTF-8, not blank"
        )
    return value


def _s3_key(value: Any, tenant: str) -> str:
    where = "'payload.document.s3_key'"
    if not isinstance(value, str) or not _key_is_well_formed(value):
        raise ValidationError(
            f"{where} must be an object key of 1 to {MAX_KEY_CHARS} characters from "
            "A-Z a-z 0-9 ! _ . * ' ( ) - /, with no leading '/', empty or '..' segment"
        )
    if tenant_of_key(value) != tenant:
        raise ValidationError(f"{where} must name a document under {document_prefix(tenant)}")
    return value


def _key_is_well_formed(key: str) -> bool:
    if not 1 <= len(key) <= MAX_KEY_CHARS or not _KEY_CHARS.fullmatch(key):
        return False
    segments = key.split("/")
    return all(segment not in {"", ".", ".."} for segment in segments)


def _required_fields(value: Any) -> tuple[str, ...]:
    where = "'payload.required_fields'"
    if value is None:
        return DEFAULT_REQUIRED_FIELDS
    if not isinstance(value, list) or len(value) > MAX_REQUIRED_FIELDS:
        raise ValidationError(f"{where} must be a list of at most {MAX_REQUIRED_FIELDS} names")
    for name in value:
        if not isinstance(name, str) or name not in KNOWN_FIELDS:
            raise ValidationError(f"{where} may name only: {', '.join(KNOWN_FIELDS)}")
    if len(set(value)) != len(value):
        raise ValidationError(f"{where} names a field more than once")
    return tuple(value)


def _planner(value: Any, hosted_configured: bool) -> PlannerSpec:
    if value is None:
        return PlannerSpec(kind="fixture")
    if not isinstance(value, dict):
        raise ValidationError("'payload.planner' must be an object")
    _refuse_unknown(value, {"kind", "proposals", "step_delay_ms"}, "payload.planner")
    kind = value.get("kind")
    if kind not in PLANNER_KINDS:
        raise ValidationError(f"'payload.planner.kind' must be one of: {', '.join(PLANNER_KINDS)}")
    delay = _step_delay_ms(value, kind)
    if kind != "scripted":
        if "proposals" in value:
            raise ValidationError("'payload.planner.proposals' is only for kind 'scripted'")
        if kind == "hosted" and not hosted_configured:
            raise ValidationError(
                "'payload.planner.kind' 'hosted' needs a model endpoint, and none is configured"
            )
        return PlannerSpec(kind=kind, step_delay_ms=delay)
    proposals = value.get("proposals")
    if not isinstance(proposals, list) or not 1 <= len(proposals) <= MAX_PROPOSALS:
        raise ValidationError(
            f"'payload.planner.proposals' must be a list of 1 to {MAX_PROPOSALS} proposals"
        )
    return PlannerSpec(kind="scripted", proposals=tuple(_proposals(proposals)), step_delay_ms=delay)


def _step_delay_ms(value: dict[str, Any], kind: str) -> int:
    if "step_delay_ms" not in value:
        return 0
    if kind == "hosted":
        raise ValidationError("'payload.planner.step_delay_ms' is only for 'fixture' or 'scripted'")
    delay = value["step_delay_ms"]
    if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_STEP_DELAY_MS:
        raise ValidationError(
            f"'payload.planner.step_delay_ms' must be an integer from 0 to {MAX_STEP_DELAY_MS}"
        )
    return delay


def _proposals(items: list[Any]) -> list[Proposal]:
    parsed: list[Proposal] = []
    for index, item in enumerate(items):
        where = f"'payload.planner.proposals[{index}]'"
        try:
            proposal = parse_proposal(item)
        except PlannerError as exc:
            raise ValidationError(f"{where}: {exc}") from exc
        if not isinstance(proposal.args, dict):
            raise ValidationError(f"{where}.args must be an object")
        parsed.append(proposal)
    return parsed
