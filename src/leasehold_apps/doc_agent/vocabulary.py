"""The words the agent's parts share: field names, tool names, `Problem`, and the byte caps that
keep everything a tool produces small enough for the checkpoint (≤ 6 KiB, see checkpoint.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

KNOWN_FIELDS: Final = (
    "supplier_name",
    "supplier_address",
    "vat_id",
    "iban",
    "invoice_number",
    "invoice_date",
    "due_date",
    "total_amount",
    "currency",
)
DEFAULT_REQUIRED_FIELDS: Final = ("supplier_name", "vat_id", "iban")

# The only order in which tools may run: each reads what the one before it wrote (validate reads
# extract's fields, draft reads validate's problems), and each runs at most once per job.
TOOL_ORDER: Final = ("extract", "validate", "draft")
MAX_TOOL_STEPS: Final = 3

# JSON-encoded size caps (UTF-8 bytes, quotes and escapes included). Measuring the *encoded*
# size means a value full of quotes, control characters or emoji still fits its cap.
FIELD_MAX_JSON_BYTES: Final = {
    "supplier_name": 128,
    "supplier_address": 240,
    "vat_id": 40,
    "iban": 48,
    "invoice_number": 56,
    "invoice_date": 40,
    "due_date": 40,
    "total_amount": 40,
    "currency": 16,
}
MAX_PROBLEMS: Final = 10
PROBLEM_MESSAGE_MAX_JSON_BYTES: Final = 96
PROBLEM_CODE_MAX_CHARS: Final = 24
# The review note, JSON-encoded; its raw UTF-8 text is then < 3.3 KiB (the note may take 4 KiB).
DRAFT_MAX_JSON_BYTES: Final = 3 * 1024 + 256


@dataclass(frozen=True)
class Problem:
    """One thing Alice must look at: `field` is a known field name, `code` a stable snake_case
    reason (`missing`, `iban_checksum`, …), `message` a short human sentence that never repeats
    the document's text."""

    field: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": self.message}


def json_size(value: Any) -> int:
    """Bytes `value` takes inside a compact UTF-8 JSON document."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def clip_json(text: str, max_json_bytes: int, *, marker: str = "…") -> str:
    """`text`, cut at a character boundary (ending in `marker`) so that its JSON encoding takes at
    most `max_json_bytes`; unchanged when it already fits. Linear in len(text)."""
    if json_size(text) <= max_json_bytes:
        return text
    budget = max_json_bytes - json_size(marker)  # json_size(marker) counts the two quotes once
    kept: list[str] = []
    for char in text:
        cost = json_size(char) - 2
        if cost > budget:
            break
        kept.append(char)
        budget -= cost
    return "".join(kept) + marker
