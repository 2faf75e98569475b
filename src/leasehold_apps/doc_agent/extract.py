"""The `extract` tool: supplier fields from the plain text of an invoice.

Two sources, in this order of trust: *labelled values* ("Supplier:", "USt-IdNr.:", "IBAN",
"Amount due" …, in English and German, in one column or side by side) and, when no supplier
label exists, the *letterhead* (the first block of lines: name, then address up to a contact
line). Dates, amounts and ids are returned as found (ids without spaces); deciding whether they
are valid is `validate`'s job. Only fields found are returned, each cut to its byte cap.

Every pattern here is anchored or bounded, and the text is cut to `MAX_TEXT_CHARS` first, so the
tool runs in time linear in the document (it must finish inside its bound, guard.TOOL_BOUND_MS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from leasehold_apps.doc_agent.formats import (
    CURRENCY_SYMBOLS,
    DATE_SEARCH,
    IBAN_LENGTHS,
    ISO_CURRENCIES,
    compact_code,
)
from leasehold_apps.doc_agent.spec import MAX_DOCUMENT_BYTES
from leasehold_apps.doc_agent.vocabulary import FIELD_MAX_JSON_BYTES, KNOWN_FIELDS, clip_json

MAX_TEXT_CHARS: Final = MAX_DOCUMENT_BYTES
"""A document is at most this many bytes (spec.py), so never more characters: all of it is read
(supplier fields may be near the end of a long one)."""
MAX_ADDRESS_LINES: Final = 4


@dataclass(frozen=True)
class _Label:
    field: str  # a known field name, or "total" (amount and currency together)
    pattern: re.Pattern[str]
    rank: int  # lower wins when a field is labelled more than once
    needs_colon: bool  # short, common words ("Date", "From") count only as "Date:"


def _label(field: str, pattern: str, rank: int = 0, *, needs_colon: bool = False) -> _Label:
    # A label starts its segment and ends at a separator, so "Date" never matches "Datenschutz"
    # and "Total" never matches "Subtotal".
    return _Label(field, re.compile(rf"(?:{pattern})(?![\w])", re.IGNORECASE), rank, needs_colon)


_LABELS: Final = (
    # Address labels first: "Supplier address:" must not read as "Supplier:" + "address: …".
    _label("supplier_address", r"(?:supplier|vendor)\s+address|anschrift", 0),
    _label("supplier_address", r"address|adresse", 1, needs_colon=True),
    _label("supplier_name", r"supplier\s+name|supplier|vendor(?:\s+name)?|lieferant"),
    _label("supplier_name", r"seller|from|company(?:\s+name)?|rechnungssteller", needs_colon=True),
    _label(
        "vat_id",
        r"vat\s*(?:id|reg(?:istration)?\.?)?\s*(?:no\.?|number|nr\.?)|vat\s*id"
        r"|ust[\s.\-]*id[\s.\-]*nr\.?|umsatzsteuer[\s\-]*id(?:entifikationsnummer)?"
        r"|n°\s*tva|tva\s+intracommunautaire|btw(?:[\s\-]*(?:nummer|id))?"
        r"|partita\s+iva|p\.\s*iva|uid(?:[\s\-]*nr\.?)?",
    ),
    _label("vat_id", r"vat", 1, needs_colon=True),
    _label("iban", r"iban(?:[\s\-]*nummer)?"),
    _label(
        "invoice_number",
        r"invoice\s*(?:no\.?|number|nr\.?|#)|inv\.?\s*(?:no\.?|#)"
        r"|rechnungs(?:nummer|[\s\-]*nr\.?)|rechnung\s+nr\.?|facture\s+n°",
    ),
    _label("invoice_date", r"invoice\s+date|date\s+of\s+invoice|rechnungsdatum|issue\s+date"),
    _label("invoice_date", r"date|datum", 1, needs_colon=True),
    _label(
        "due_date",
        r"due\s+date|payment\s+due(?:\s+date)?|pay\s+by|fällig\s+am|fälligkeitsdatum"
        r"|zahlbar\s+bis",
    ),
    _label("due_date", r"due(?:\s+by)?|fällig", 1, needs_colon=True),
    _label("total", r"amount\s+due|balance\s+due|total\s+due|zu\s+zahlen|zahlbetrag", 0),
    _label(
        "total",
        r"grand\s+total|total\s+payable|gesamtbetrag|rechnungsbetrag|endbetrag"
        r"|total\s*(?:\(incl[^)]{0,24}\)|incl(?:\.|uding)?\s*(?:vat|tax))",
        1,
    ),
    # "Total VAT", "Total excl. VAT", "Total net" are not what Alice pays.
    _label(
        "total",
        r"(?:invoice\s+)?total(?:\s+amount)?(?!\s*(?:\(?excl|net|before|vat|tax|mwst|ust))"
        r"|summe(?!\s*netto)",
        2,
    ),
    _label("currency", r"currency|währung"),
)
# An IBAN often sits mid-line ("Bank: Commerzbank, IBAN DE89 …").
_INLINE_IBAN: Final = re.compile(r"(?<![A-Za-z])iban(?:[\s\-]*nummer)?(?!\w)", re.IGNORECASE)
_IBAN_LABEL: Final = next(label for label in _LABELS if label.field == "iban")
# Any label at a segment's start, in one pass, group `l<n>` naming the first that matches (the
# labels hold no groups of their own): a segment none starts is skipped at once, and one that a
# label starts is tried from that label on — the same answer as trying each in order, with a
# fraction of the work on a long document (decision LD14).
_ANY_LABEL: Final = re.compile(
    "|".join(f"(?P<l{n}>{label.pattern.pattern})" for n, label in enumerate(_LABELS)),
    re.IGNORECASE,
)

_SEGMENT_SPLIT: Final = re.compile(r"\t+| {3,}|\s+[|·•]\s+")
# After a label: an optional qualifier ("Total (EUR)"), then a separator.
_LABEL_TAIL: Final = re.compile(r"(?:\s*\([^)]{0,24}\))?\s*(?::|#|-(?=\s))?\s*")
_TITLE_LINE: Final = re.compile(
    r"(?:tax\s+)?invoice|rechnung|facture|fattura|[-=_*\s]+", re.IGNORECASE
)
_CONTACT_LINE: Final = re.compile(
    r"\b(?:tel|phone|fax|e-?mail|mail|www|web|http)\b|@|\+\d", re.IGNORECASE
)
_RECIPIENT_LINE: Final = re.compile(
    r"(?:bill(?:ed)?\s+to|invoice\s+to|ship\s+to|sold\s+to|customer|client|kunde"
    r"|rechnungsempfänger)\b|(?:an|to)\s*:",
    re.IGNORECASE,
)
_CODE_TOKEN: Final = re.compile(r"[A-Za-z0-9.\-]{1,34}")
_VAT_SUFFIXES: Final = frozenset({"MWST", "TVA", "IVA", "MVA"})
_AMOUNT: Final = re.compile(
    r"(?:(?P<before>\b[A-Z]{3}\b|[€£$¥])\s?)?"
    r"(?P<number>\d(?:[\d.,']|[ \u00a0\u202f](?=\d{3}(?!\d))){0,24})"
    r"(?:\s?(?P<after>[€£$¥]|\b[A-Z]{3}\b))?"
)
_CURRENCY_TOKEN: Final = re.compile(r"\b[A-Z]{3}\b|[€£$¥]")
_AMOUNT_LIKE: Final = re.compile(r"\d[.,]\d{2}(?!\d)")  # "80.00": a table row, not a name
_OTHER_LABEL: Final = re.compile(r"[^:\d]{1,30}:(?:\s|$)")  # "Notes: …", "Bill to:" in a block
_INVOICE_NUMBER_TOKEN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9/_.\-]{0,47}")


@dataclass(frozen=True)
class _Hit:
    field: str
    value: str
    rank: int


def extract(text: str) -> dict[str, str]:
    """The supplier fields found in `text` (a subset of vocabulary.KNOWN_FIELDS, in that order),
    each value JSON-bounded by vocabulary.FIELD_MAX_JSON_BYTES. Never raises on odd text."""
    lines = [line.replace("\u00a0", " ").rstrip() for line in text[:MAX_TEXT_CHARS].splitlines()]
    segmented = [_segments(line) if line else [] for line in lines]
    best: dict[str, _Hit] = {}
    supplier_line: int | None = None
    for index, segments in enumerate(segmented):
        for position, segment in enumerate(segments):
            labelled = _match_label(segment)
            if labelled is None:
                continue
            label, value = labelled
            if not value:
                value = _value_after(segmented, index, position)
            for hit in _interpret(label, value, segment):
                if _better(hit, best.get(hit.field)):
                    best[hit.field] = hit
                    if hit.field == "supplier_name":
                        supplier_line = index
    fields = {field: hit.value for field, hit in best.items()}
    if "supplier_name" not in fields:
        name, address = _letterhead(segmented)
        if name:
            fields["supplier_name"] = name
        if address and "supplier_address" not in fields:
            fields["supplier_address"] = address
    elif "supplier_address" not in fields and supplier_line is not None:
        address = _address_block(segmented, supplier_line + 1)
        if address:
            fields["supplier_address"] = address
    return {
        field: clip_json(fields[field], FIELD_MAX_JSON_BYTES[field])
        for field in KNOWN_FIELDS
        if fields.get(field)
    }


def _segments(line: str) -> list[str]:
    """A line cut into its columns: runs of 3+ spaces, tabs, or ` | ` / ` · ` separators."""
    return [part.strip() for part in _SEGMENT_SPLIT.split(line) if part.strip()]


def _match_label(segment: str) -> tuple[_Label, str] | None:
    """The label a segment starts with (or an IBAN label inside it) and the text after it."""
    first = _ANY_LABEL.match(segment)
    for label in _LABELS[int(first.lastgroup[1:]) :] if first and first.lastgroup else ():
        match = label.pattern.match(segment)
        if match is None:
            continue
        tail = _LABEL_TAIL.match(segment, match.end())
        assert tail is not None  # the tail pattern matches the empty string
        if label.needs_colon and ":" not in tail.group():
            continue
        if match.end() < len(segment) and tail.end() == match.end():
            continue  # "IBAN/BIC" or "Date.": punctuation this label does not take
        return label, segment[tail.end() :].strip()
    inline = _INLINE_IBAN.search(segment)
    if inline is not None:
        tail = _LABEL_TAIL.match(segment, inline.end())
        assert tail is not None
        return _IBAN_LABEL, segment[tail.end() :].strip()
    return None


def _value_after(segmented: list[list[str]], index: int, position: int) -> str:
    """The value of a bare label: the next column on its line when that is not a label; else,
    for a label ending in a colon ("IBAN:"), the first column of the next non-blank line."""
    segments = segmented[index]
    if position + 1 < len(segments):
        following = segments[position + 1]
        return "" if _match_label(following) else following
    if not segments[position].endswith(":"):
        return ""  # a table header ("Qty  Price  Total"), not a label waiting for a value
    for next_segments in segmented[index + 1 : index + 3]:
        if next_segments:
            return "" if _match_label(next_segments[0]) else next_segments[0]
    return ""


def _interpret(label: _Label, value: str, segment: str) -> list[_Hit]:
    """The field value(s) a labelled `value` gives; [] when it holds nothing of that kind.
    `segment` is the whole column, label included ("Total (EUR): …" names the currency)."""
    field, rank = label.field, label.rank
    if field == "iban":
        iban = _iban_run(value)
        return [_Hit(field, iban, rank)] if iban else []
    if field == "vat_id":
        vat = _vat_run(value)
        return [_Hit(field, vat, rank)] if sum(char.isdigit() for char in vat) >= 2 else []
    if field == "invoice_number":
        token = _INVOICE_NUMBER_TOKEN.match(value)
        return [_Hit(field, token.group().rstrip(".-"), rank)] if token else []
    if field in {"invoice_date", "due_date"}:
        found = DATE_SEARCH.search(value)
        return [_Hit(field, found.group() if found else value, rank)] if value else []
    if field == "total":
        return _total_hits(value, rank, segment)
    if field == "currency":
        token = _CURRENCY_TOKEN.match(value)
        return (
            [_Hit(field, CURRENCY_SYMBOLS.get(token.group(), token.group()), rank)] if token else []
        )
    return [_Hit(field, value, rank)] if value else []


def _total_hits(value: str, rank: int, segment: str) -> list[_Hit]:
    match = _AMOUNT.search(value)
    if match is None:
        # "Total: to be confirmed" is worth showing Alice: validate reports it unparsed.
        return [_Hit("total_amount", value, rank)] if value else []
    hits = [_Hit("total_amount", match.group("number").rstrip(".,' "), rank)]
    # A code or symbol next to the number is taken as written (validate judges it); one
    # elsewhere in the column counts only if it is a real ISO code ("incl. VAT" is not).
    currency = match.group("before") or match.group("after") or _known_currency_in(segment)
    if currency:
        hits.append(_Hit("currency", CURRENCY_SYMBOLS.get(currency, currency), rank))
    return hits


def _known_currency_in(text: str) -> str | None:
    for token in _CURRENCY_TOKEN.finditer(text):
        code = CURRENCY_SYMBOLS.get(token.group(), token.group())
        if code in ISO_CURRENCIES:
            return code
    return None


def _better(hit: _Hit, current: _Hit | None) -> bool:
    """Lower rank wins; among equal ranks the first wins, except totals, where the last one
    ("TOTAL" under the line items) is the amount to pay."""
    if current is None or hit.rank < current.rank:
        return True
    return hit.rank == current.rank and hit.field in {"total_amount", "currency"}


def _code_tokens(value: str) -> list[tuple[str, bool]]:
    """(compact token, closes the code) for the leading tokens that can be part of an id;
    a token ending in `,;)` closes it ("DE136695976, Finanzamt")."""
    tokens: list[tuple[str, bool]] = []
    for raw in value.split()[:12]:
        token = raw.rstrip(",;)")
        if not _CODE_TOKEN.fullmatch(token):
            break
        tokens.append((compact_code(token), token != raw))
        if token != raw:
            break
    return tokens


def _iban_run(value: str) -> str:
    """An IBAN printed in groups ("DE89 3704 0044 0532 0130 00 BIC COBADEFF"): groups of at most
    4 characters are joined up to the country's IBAN length (34 when unknown), so the BIC that
    often follows is left out."""
    code = ""
    for part, closes in _code_tokens(value):
        if code and len(part) > 4:
            break
        candidate = code + part
        limit = IBAN_LENGTHS.get(candidate[:2], 34)
        if len(candidate) > limit:
            break
        code = candidate
        if closes or len(code) == limit:
            break
    return code


def _vat_run(value: str) -> str:
    """A VAT id printed in groups ("GB 980 7806 84", "CHE-123.456.789 MWST"): after the first
    token, only tokens with a digit (or a Swiss/Norwegian suffix) belong to it, up to 16
    characters, so "DE136695976 Bank" stays "DE136695976"."""
    code = ""
    for part, closes in _code_tokens(value):
        if code and not (any(char.isdigit() for char in part) or part in _VAT_SUFFIXES):
            break
        if len(code + part) > 16:
            break
        code += part
        if closes:
            break
    return code


def _letterhead(segmented: list[list[str]]) -> tuple[str, str]:
    """(name, address) from the first block of the document: skip blank and title lines
    ("INVOICE", "Rechnung"), take the first line's first column as the name, and the following
    lines, up to a blank, contact or labelled line, as the address."""
    index = 0
    while index < len(segmented) and (
        not segmented[index] or _TITLE_LINE.fullmatch(" ".join(segmented[index]))
    ):
        index += 1
    if index == len(segmented):
        return "", ""
    first = segmented[index][0]
    if (
        _match_label(first)
        or _RECIPIENT_LINE.match(first)
        or _CONTACT_LINE.search(first)
        or _AMOUNT_LIKE.search(first)
        or _OTHER_LABEL.match(first)
    ):
        return "", ""
    return first, _address_block(segmented, index + 1)


def _address_block(segmented: list[list[str]], start: int) -> str:
    parts: list[str] = []
    for segments in segmented[start : start + MAX_ADDRESS_LINES]:
        if not segments:
            break
        first = segments[0]
        if _match_label(first) or _CONTACT_LINE.search(first) or _TITLE_LINE.fullmatch(first):
            break
        if _RECIPIENT_LINE.match(first) or _OTHER_LABEL.match(first):
            break
        parts.append(first)
    return ", ".join(parts)
