"""Ids are injected like time: a test can name its jobs; production ids sort by creation time."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from leasehold.domain.clock import Clock

IdFactory = Callable[[], str]


def time_ordered_ids(clock: Clock, prefix: str = "j") -> IdFactory:
    """`j_` + 12 hex digits of milliseconds + 10 random hex digits: unique and roughly sortable."""

    def new_id() -> str:
        return f"{prefix}_{clock.now_ms():012x}{secrets.token_hex(5)}"

    return new_id


# ------------------------------------------------------------------ identities in keys and hashes

KEY_SEPARATOR = "#"
"""Between the parts of a table key (`OWNER#<tenant>#<user>`, `SLOTS#…`, `SCHED#…`)."""
SOURCE_SEPARATOR = "|"
"""Between the parts of a hashed source (a derived job id, a ClientRequestToken)."""
ESCAPE = "%"
_ESCAPES = {ESCAPE: "%25", KEY_SEPARATOR: "%23", SOURCE_SEPARATOR: "%7C"}


def escaped(part: str, separator: str) -> str:
    """`part` with `%` and `separator` percent-escaped (`%25`, `%23` for `#`, `%7C` for `|`). A
    part that holds neither is returned as it is, so every key and id of an ordinary identity
    is byte for byte what it was before identities were encoded (docs/decisions.md ID1)."""
    if ESCAPE not in part and separator not in part:
        return part
    return part.replace(ESCAPE, _ESCAPES[ESCAPE]).replace(separator, _ESCAPES[separator])


def key_of(*parts: str) -> str:
    """A table key from its parts (the first is the item family's name: `OWNER`, `SLOTS`, …),
    joined with `#`, each part escaped: no part can hold the separator, so two distinct tuples
    never make one key, and tuples of different lengths never meet — `SLOTS#<tenant>#<user>`
    (three parts) can never be a concurrency key's `SLOTS#K#<kind>#…` (six or more)."""
    return KEY_SEPARATOR.join(escaped(part, KEY_SEPARATOR) for part in parts)


def hash_source(*parts: str, verbatim: int) -> str:
    """The text a derived id or request token hashes: the parts joined with `|`, each escaped
    except `parts[verbatim]`. That one part needs no escaping for the join to be injective: the
    parts before it are read up to the first separators (they hold none), the parts after it
    from the last ones, and what is left between is it. Callers leave the user id verbatim (a
    JWT `sub` such as `auth0|123` holds the separator), so a user's keyed jobs keep their ids
    across the change as long as the other parts hold no `%` or `|` (decision ID1)."""
    if not 0 <= verbatim < len(parts):
        raise ValueError("verbatim must name one of the parts")
    return SOURCE_SEPARATOR.join(
        part if index == verbatim else escaped(part, SOURCE_SEPARATOR)
        for index, part in enumerate(parts)
    )
