"""The `draft` tool: a review note for Alice, with a reply she may send to the supplier herself.

Nothing is sent: the note is text in the job's result. It lists the fields found, the problems,
and, only when there are problems, a suggested reply asking the supplier for exactly what is
missing or wrong. Its JSON encoding is at most vocabulary.DRAFT_MAX_JSON_BYTES.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leasehold_apps.doc_agent.validate import field_label
from leasehold_apps.doc_agent.vocabulary import (
    DRAFT_MAX_JSON_BYTES,
    KNOWN_FIELDS,
    Problem,
    clip_json,
)

_ASKS = {
    "missing": "send us your {label}, which is missing from the invoice",
    "iban_checksum": "check your IBAN: the one on the invoice fails its checksum, so a character "
    "may be wrong",
    "iban_format": "check your IBAN: it does not have the length or form of an IBAN",
    "iban_unrecognised": "confirm your IBAN, which we could not check",
    "vat_format": "check your VAT identification number: it does not match the expected format",
    "vat_checksum": "check your VAT identification number: its check digits do not match",
    "vat_unrecognised": "confirm your VAT identification number, with its country prefix",
    "date_unparsed": "confirm the {label} as a calendar date (for example 31.03.2026)",
    "due_before_invoice": "confirm the due date, which is before the invoice date",
    "amount_unparsed": "confirm the total amount to pay",
    "currency_unknown": "confirm the currency of the invoice",
}


def draft(fields: Mapping[str, str], problems: Sequence[Problem]) -> str:
    """The review note (plain text). Deterministic for the same fields and problems."""
    supplier = fields.get("supplier_name")
    lines = ["Review note: supplier document", f"Supplier: {supplier or '(not found)'}", ""]
    found = [field for field in KNOWN_FIELDS if fields.get(field)]
    absent = [field_label(field) for field in KNOWN_FIELDS if not fields.get(field)]
    lines.append("Fields found:")
    lines.extend(f"- {_capitalised(field_label(field))}: {fields[field]}" for field in found)
    if not found:
        lines.append("- none")
    if absent:
        lines.append(f"Not found: {', '.join(absent)}.")
    lines.append("")
    if not problems:
        lines.append("No problems found: the required fields are present and well-formed.")
        lines.append("No reply to the supplier is needed.")
        return clip_json("\n".join(lines), DRAFT_MAX_JSON_BYTES)
    lines.append(f"Problems ({len(problems)}):")
    lines.extend(f"- {_capitalised(field_label(p.field))}: {p.message}" for p in problems)
    lines.append("")
    lines.append("Suggested reply to the supplier (nothing has been sent; review it and send it")
    lines.append("yourself if you agree):")
    lines.append("")
    lines.extend(_reply(fields, problems))
    return clip_json("\n".join(lines), DRAFT_MAX_JSON_BYTES)


def _reply(fields: Mapping[str, str], problems: Sequence[Problem]) -> list[str]:
    invoice = fields.get("invoice_number")
    subject = f"Invoice {invoice}" if invoice else "Your invoice"
    greeting = fields.get("supplier_name") or "Sir or Madam"
    lines = [
        f"Subject: {subject}: details needed before payment",
        "",
        f"Dear {greeting},",
        "",
        f"thank you for {'invoice ' + invoice if invoice else 'your invoice'}. "
        "Before we can pay it, could you please:",
    ]
    asks: list[str] = []
    for problem in problems:
        ask = _ASKS.get(problem.code, "check the {label}").format(label=field_label(problem.field))
        if ask not in asks:
            asks.append(ask)
    lines.extend(
        f"- {ask}{'.' if index == len(asks) - 1 else ';'}" for index, ask in enumerate(asks)
    )
    lines.extend(["", "Kind regards,", "[your name]"])
    return lines


def _capitalised(label: str) -> str:
    return label[:1].upper() + label[1:]
