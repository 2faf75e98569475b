"""What may be stored (decision U1): the one rule for everything a kind's code hands the engine — a
step's output, its progress, a receipt, an error's message and code — checked once, before any
of it reaches the store.

A value is storable when it is JSON that both DynamoDB and every JSON client keep exactly:

- `None`, `bool`, `str`, `int`, `float`, `list` (or `tuple`, kept as a list), `dict`;
- object keys are strings (Python's `json` would turn `1` into `"1"`: refused, not changed);
- strings are Unicode text: no lone UTF-16 surrogate (`"\\ud800"` is valid JSON syntax but no
  UTF-8 encoder, DynamoDB's included, can write it);
- integers have at most 38 digits (DynamoDB's number precision); floats are finite and within
  DynamoDB's number range (0, or 1e-130 ≤ |x| < 1e126) — a float is kept exactly: its shortest
  repr, 17 significant digits at most, fits DynamoDB's 38;
- nesting at most 32 levels (DynamoDB's limit for a map in a map).

Anything else is refused with `NotStorableError`, whose message names the first offending place
(`outputs.rows[3].price`), never silently changed. Text that is only *shown* — an error's
message, a reason — is instead made storable with `storable_text` (lone surrogates replaced,
length bounded), since refusing a failure's description would hide the failure."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from leasehold.domain.errors import LeaseholdError
from leasehold.domain.types import JsonObject

MAX_INT_DIGITS = 38
MIN_FLOAT = 1e-130
MAX_FLOAT = 1e126
MAX_DEPTH = 32
MAX_MESSAGE_CHARS = 500
MAX_CODE_CHARS = 100
OUTPUT_NOT_JSON = "output_not_json"
OUTPUT_TOO_LARGE = "output_too_large"
UNSTORABLE_OUTPUT = frozenset({OUTPUT_NOT_JSON, OUTPUT_TOO_LARGE})
"""The codes of a step whose output the engine refused: it ran to its end, so running it again
returns the same — an effect step's job is `unknown` at once, never retried."""
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotStorableError(LeaseholdError, ValueError):
    """A value a kind handed the engine that the store could not keep exactly; the message names
    where and why."""

    code = "not_storable"


def check_storable(value: Any, where: str = "value") -> None:
    """NotStorableError naming the first place in `value` that breaks the rule above."""
    _check(value, where, 0)


def storable_json(value: Any, where: str = "value") -> str:
    """`value` as compact JSON text, once it is checked storable."""
    _check(value, where, 0)
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _check(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise NotStorableError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if not is_text(value):
            raise NotStorableError(f"{where} holds a lone surrogate: it is not Unicode text")
        return
    if isinstance(value, int):
        if len(str(abs(value))) > MAX_INT_DIGITS:
            raise NotStorableError(
                f"{where} is an integer of more than {MAX_INT_DIGITS} digits (DynamoDB keeps 38)"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotStorableError(f"{where} is {value}: not a JSON number")
        if value != 0 and not MIN_FLOAT <= abs(value) < MAX_FLOAT:
            raise NotStorableError(f"{where} = {value!r} is outside DynamoDB's number range")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(item, f"{where}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotStorableError(
                    f"{where} has the key {key!r} ({type(key).__name__}): JSON keys are strings"
                )
            if not is_text(key):
                raise NotStorableError(f"{where} has a key holding a lone surrogate")
            _check(item, f"{where}.{key[:40]}", depth + 1)
        return
    raise NotStorableError(f"{where} is a {type(value).__name__}, which is not JSON")


def is_text(text: str) -> bool:
    """Whether `text` can be encoded as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: Any, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` as a string that can be stored and shown: lone surrogates replaced by U+FFFD,
    cut to `limit` characters."""
    raw = str(text)[:limit]
    # In a Python string every code point of U+D800–U+DFFF is a lone surrogate (a pair decodes
    # to one astral code point).
    return raw if is_text(raw) else _SURROGATE.sub("\ufffd", raw)


def storable_error(error: JsonObject) -> dict[str, str]:
    """A job's `error` as it may be stored and shown: `code` an identifier of at most
    MAX_CODE_CHARS, `message` at most MAX_MESSAGE_CHARS, every other field a short string; lone
    surrogates replaced. A kind's error text is data the engine does not control (decision U1)."""
    out: dict[str, str] = {}
    for key, value in list(error.items())[:12]:
        name = storable_text(key, 40)
        if name == "code":
            out[name] = storable_text(value, MAX_CODE_CHARS)
        elif name == "message":
            out[name] = storable_text(value, MAX_MESSAGE_CHARS)
        else:
            out[name] = storable_text(value, 200)
    return out
