"""The `validate` tool: what Alice must check before paying, as a list of `Problem`s.

Reports (docs/architecture.md "The document-preparation agent"): required fields that are missing,
an IBAN that is malformed or fails its
ISO 13616 mod-97 checksum, a VAT id that does not match its country's format (or whose prefix is
unknown: `vat_unrecognised`, never a silent pass), dates and amounts that do not parse, a due
date before the invoice date, and a currency that is not an ISO 4217 code. Each field yields at
most one problem, in vocabulary.KNOWN_FIELDS order, so the list is short and stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from leasehold_apps.doc_agent.formats import (
    iban_problem,
    is_known_currency,
    parse_amount,
    parse_date,
    vat_problem,
)
from leasehold_apps.doc_agent.vocabulary import KNOWN_FIELDS, MAX_PROBLEMS, Problem

_LABELS = {
    "supplier_name": "supplier name",
    "supplier_address": "supplier address",
    "vat_id": "VAT id",
    "iban": "IBAN",
    "invoice_number": "invoice number",
    "invoice_date": "invoice date",
    "due_date": "due date",
    "total_amount": "total amount",
    "currency": "currency",
}


def field_label(field: str) -> str:
    """How a field is named in a message to a person."""
    return _LABELS.get(field, field)


def validate(fields: Mapping[str, str], required: Iterable[str]) -> list[Problem]:
    """Problems with `fields` (extract's output) given the `required` field names; [] when
    everything required is present and every present value is well-formed."""
    required_set = set(required)
    problems: list[Problem] = []
    for field in KNOWN_FIELDS:
        value = fields.get(field)
        if not value:
            if field in required_set:
                problems.append(
                    Problem(
                        field, "missing", f"The {field_label(field)} is required but not found."
                    )
                )
            continue
        found = _format_problem(field, value, fields)
        if found is not None:
            problems.append(Problem(field, found[0], found[1]))
    return problems[:MAX_PROBLEMS]


def _format_problem(field: str, value: str, fields: Mapping[str, str]) -> tuple[str, str] | None:
    if field == "iban":
        return iban_problem(value)
    if field == "vat_id":
        return vat_problem(value)
    if field in {"invoice_date", "due_date"}:
        parsed = parse_date(value)
        if parsed is None:
            return "date_unparsed", f"The {field_label(field)} is not a date that can be read."
        if field == "due_date":
            invoice_date = parse_date(fields.get("invoice_date", ""))
            if invoice_date is not None and parsed < invoice_date:
                return "due_before_invoice", "The due date is before the invoice date."
        return None
    if field == "total_amount":
        if parse_amount(value) is None:
            return "amount_unparsed", "The total amount is not a number that can be read."
        return None
    if field == "currency" and not is_known_currency(value):
        return "currency_unknown", "The currency is not an ISO 4217 currency code."
    return None
