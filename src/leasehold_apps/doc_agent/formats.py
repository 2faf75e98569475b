"""Formats of supplier fields: IBAN (ISO 13616), VAT ids, dates, amounts, ISO 4217 currencies.

Pure parsers and checkers used by `validate`. Each returns a *reason* (a short problem code and
sentence) or None, never raises on bad data: a document is untrusted text, and a malformed value
is a finding for Alice, not an error of the job.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Final

# ISO 13616 IBAN lengths for the countries a European small business meets most often (SWIFT
# IBAN registry). A country not in this table is reported, not silently accepted.
IBAN_LENGTHS: Final = {
    "AD": 24,
    "AE": 23,
    "AL": 28,
    "AT": 20,
    "AZ": 28,
    "BA": 20,
    "BE": 16,
    "BG": 22,
    "BH": 22,
    "BR": 29,
    "CH": 21,
    "CR": 22,
    "CY": 28,
    "CZ": 24,
    "DE": 22,
    "DK": 18,
    "DO": 28,
    "EE": 20,
    "EG": 29,
    "ES": 24,
    "FI": 18,
    "FO": 18,
    "FR": 27,
    "GB": 22,
    "GE": 22,
    "GI": 23,
    "GL": 18,
    "GR": 27,
    "GT": 28,
    "HR": 21,
    "HU": 28,
    "IE": 22,
    "IL": 23,
    "IS": 26,
    "IT": 27,
    "JO": 30,
    "KW": 30,
    "KZ": 20,
    "LB": 28,
    "LI": 21,
    "LT": 20,
    "LU": 20,
    "LV": 21,
    "MC": 27,
    "MD": 24,
    "ME": 22,
    "MK": 19,
    "MR": 27,
    "MT": 31,
    "MU": 30,
    "NL": 18,
    "NO": 15,
    "PK": 24,
    "PL": 28,
    "PS": 29,
    "PT": 25,
    "QA": 29,
    "RO": 24,
    "RS": 22,
    "SA": 24,
    "SE": 24,
    "SI": 19,
    "SK": 24,
    "SM": 27,
    "TN": 24,
    "TR": 26,
    "UA": 29,
    "VG": 24,
    "XK": 20,
}

# VAT identification number shapes after removing spaces, dots and hyphens (EU VIES formats,
# plus GB/XI, CH and NO). The country prefix is part of the pattern.
VAT_PATTERNS: Final = {
    "AT": r"ATU\d{8}",
    "BE": r"BE[01]\d{9}",
    "BG": r"BG\d{9,10}",
    "CH": r"CHE\d{9}(?:MWST|TVA|IVA)?",
    "CY": r"CY\d{8}[A-Z]",
    "CZ": r"CZ\d{8,10}",
    "DE": r"DE\d{9}",
    "DK": r"DK\d{8}",
    "EE": r"EE\d{9}",
    "EL": r"EL\d{9}",
    "ES": r"ES(?!\d{9}$)[A-Z0-9]\d{7}[A-Z0-9]",  # first and last not both digits
    "FI": r"FI\d{8}",
    "FR": r"FR[0-9A-HJ-NP-Z]{2}\d{9}",
    "GB": r"GB(?:\d{9}|\d{12}|GD[0-4]\d{2}|HA[5-9]\d{2})",
    "HR": r"HR\d{11}",
    "HU": r"HU\d{8}",
    "IE": r"IE(?:\d{7}[A-W][A-I]?|\d[A-Z+*]\d{5}[A-W])",
    "IT": r"IT\d{11}",
    "LT": r"LT(?:\d{9}|\d{12})",
    "LU": r"LU\d{8}",
    "LV": r"LV\d{11}",
    "MT": r"MT\d{8}",
    "NL": r"NL\d{9}B\d{2}",
    "NO": r"NO\d{9}(?:MVA)?",
    "PL": r"PL\d{10}",
    "PT": r"PT\d{9}",
    "RO": r"RO\d{2,10}",
    "SE": r"SE\d{10}01",
    "SI": r"SI\d{8}",
    "SK": r"SK\d{10}",
    "XI": r"XI(?:\d{9}|\d{12}|GD[0-4]\d{2}|HA[5-9]\d{2})",
}
_VAT_RE: Final = {prefix: re.compile(pattern) for prefix, pattern in VAT_PATTERNS.items()}

# Active ISO 4217 currency codes (plus the two replaced in 2024-2025 that invoices still carry).
_ISO_CURRENCY_TABLE: Final = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP
    BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP
    GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR
    KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK
    MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR
    SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS
    UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL
"""
ISO_CURRENCIES: Final = frozenset(_ISO_CURRENCY_TABLE.split())
CURRENCY_SYMBOLS: Final = {"€": "EUR", "£": "GBP", "$": "USD", "¥": "JPY"}

MONTHS: Final = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan", "januar", "jänner"),
            ("february", "feb", "februar"),
            ("march", "mar", "märz", "maerz", "mär"),
            ("april", "apr"),
            ("may", "mai"),
            ("june", "jun", "juni"),
            ("july", "jul", "juli"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct", "oktober", "okt"),
            ("november", "nov"),
            ("december", "dec", "dezember", "dez"),
        ),
        start=1,
    )
    for name in names
}
_MONTH_WORD = r"[A-Za-zÄÖÜäöü]{3,9}\.?"
_DATE_SHAPES: Final = (
    re.compile(r"(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"),
    re.compile(r"(?P<d>\d{1,2})[./-](?P<m>\d{1,2})[./-](?P<y>\d{4}|\d{2})"),
    re.compile(rf"(?P<d>\d{{1,2}})\.?[ -](?P<mon>{_MONTH_WORD})[ -](?P<y>\d{{4}})"),
    re.compile(rf"(?P<mon>{_MONTH_WORD}) (?P<d>\d{{1,2}}),? (?P<y>\d{{4}})"),
)
# Where a date may sit inside a longer value ("1 March 2026 (net 30)"): used by extract.
DATE_SEARCH: Final = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}"
    r"|\d{1,2}[./-]\d{1,2}[./-](?:\d{4}|\d{2})(?!\d)"
    rf"|\d{{1,2}}\.?[ -]{_MONTH_WORD}[ -]\d{{4}}"
    rf"|{_MONTH_WORD} \d{{1,2}},? \d{{4}}"
)


def compact_code(value: str) -> str:
    """An IBAN or VAT id as printed ("DE89 3704 0044…", "NL 8001.23.456.B01") → upper-case,
    without spaces, dots and hyphens."""
    return re.sub(r"[\s.\-]", "", value).upper()


def iban_problem(value: str) -> tuple[str, str] | None:
    """None when `value` is a well-formed IBAN of a known country whose ISO 13616 mod-97
    checksum holds; else (code, message)."""
    iban = compact_code(value)
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", iban):
        return "iban_format", "The IBAN is not shaped like one (country, 2 check digits, account)."
    country = iban[:2]
    expected = IBAN_LENGTHS.get(country)
    if expected is None:
        return "iban_unrecognised", f"IBANs from country code {country} are not checked here."
    if len(iban) != expected:
        return "iban_format", f"A {country} IBAN has {expected} characters; this has {len(iban)}."
    if iban_mod97(iban) != 1:
        return "iban_checksum", "The IBAN's check digits do not match (ISO 13616 mod-97)."
    return None


def iban_mod97(iban: str) -> int:
    """ISO 13616: move the first four characters to the end, letters to 10..35, then mod 97 (1
    for a valid IBAN). Computed piecewise so no huge integer is built."""
    rearranged = iban[4:] + iban[:4]
    remainder = 0
    for char in rearranged:
        digits = str(int(char, 36))
        for digit in digits:
            remainder = (remainder * 10 + int(digit)) % 97
    return remainder


def vat_problem(value: str) -> tuple[str, str] | None:
    """None when `value` matches its country's VAT id format (and, for DE, FR, GB and IT, its
    check digits); else (code, message). An unknown prefix is `vat_unrecognised`."""
    vat = compact_code(value)
    prefix = vat[:2]
    pattern = _VAT_RE.get(prefix)
    if pattern is None or not prefix.isalpha():
        return "vat_unrecognised", "The VAT id has no country prefix this check knows."
    if not pattern.fullmatch(vat):
        return "vat_format", f"The VAT id is not in the {prefix} format."
    if not _vat_check_digits_ok(vat):
        return "vat_checksum", f"The {prefix} VAT id's check digits do not match."
    return None


def _vat_check_digits_ok(vat: str) -> bool:
    prefix, body = vat[:2], vat[2:]
    if prefix == "DE":
        return _iso7064_mod11_10(body[:8]) == int(body[8])
    if prefix == "IT":
        return _luhn_ok(body)
    if prefix == "FR" and body[:2].isdigit():
        return int(body[:2]) == (12 + 3 * (int(body[2:]) % 97)) % 97
    if prefix in {"GB", "XI"} and len(body) in (9, 12) and body.isdigit():
        total = sum(int(d) * w for d, w in zip(body[:7], range(8, 1, -1), strict=True))
        total += int(body[7:9])
        return total % 97 == 0 or (total + 55) % 97 == 0
    return True


def _iso7064_mod11_10(digits: str) -> int:
    product = 10
    for digit in digits:
        total = (int(digit) + product) % 10 or 10
        product = (2 * total) % 11
    check = 11 - product
    return 0 if check == 10 else check


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2 == 1:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def parse_date(value: str) -> date | None:
    """A calendar date from ISO `2026-03-01`, `01.03.2026`, `01/03/2026`, `01-03-26` (day first,
    as European suppliers write it), `1 March 2026`, `1. März 2026` or `March 1, 2026`;
    None when it is none of these or not a real day (31.02)."""
    text = value.strip()
    for shape in _DATE_SHAPES:
        match = shape.fullmatch(text)
        if match is None:
            continue
        parts = match.groupdict()
        if "mon" in parts:
            month = MONTHS.get(parts["mon"].rstrip(".").lower())
            if month is None:
                return None
        else:
            month = int(parts["m"])
        year = int(parts["y"])
        if year < 100:
            year += 2000
        try:
            return date(year, month, int(parts["d"]))
        except ValueError:
            return None
    return None


def parse_amount(value: str) -> Decimal | None:
    """A non-negative amount from `1,234.56`, `1.234,56`, `1 234,56`, `1'234.50`, `99` or `99.0`
    (the last separator followed by 1-3 digits and nothing else of its kind is the decimal
    mark; thousands groups must have 3 digits); None otherwise."""
    text = re.sub(r"[\s']", "", value.strip())
    if not re.fullmatch(r"\d[\d.,]*", text) or len(text) > 20:
        return None
    last_sep = max(text.rfind("."), text.rfind(","))
    integer, fraction = text, ""
    if last_sep != -1:
        mark = text[last_sep]
        tail = text[last_sep + 1 :]
        other = "," if mark == "." else "."
        decimal_mark = other in text or (text.count(mark) == 1 and len(tail) != 3)
        if decimal_mark:
            integer, fraction = text[:last_sep], tail
            if not 1 <= len(fraction) <= 3:
                return None
    groups = re.split(r"[.,]", integer)
    if len(groups) > 1 and (
        not 1 <= len(groups[0]) <= 3 or any(len(group) != 3 for group in groups[1:])
    ):
        return None
    try:
        return Decimal("".join(groups) + ("." + fraction if fraction else ""))
    except InvalidOperation:
        return None


def is_known_currency(code: str) -> bool:
    return code in ISO_CURRENCIES
