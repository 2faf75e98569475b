"""An application's own settings, read from the function's environment once (at cold start,
when its module is imported): the same rule as the engine's settings — a required setting that
is missing stops the function with its name, never a silent default."""

from __future__ import annotations

import os
from collections.abc import Callable

from leasehold.domain.errors import LeaseholdError

_AT_COLD_START: list[Callable[[], None]] = []


class SettingError(LeaseholdError, RuntimeError):
    """A required application setting is missing or malformed."""


def setting(name: str, default: str | None = None) -> str:
    """The environment variable `name`; `default` when it is unset or empty, and
    `SettingError` when there is no default."""
    value = os.environ.get(name, "")
    if value == "":
        if default is None:
            raise SettingError(f"environment variable {name} is not set")
        return default
    return value


def int_setting(name: str, default: int | None = None) -> int:
    """An integer setting (`SettingError` when it is not a number)."""
    raw = setting(name, None if default is None else str(default))
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise SettingError(f"environment variable {name}={raw!r} is not an integer") from exc


def at_cold_start(check: Callable[[], None]) -> Callable[[], None]:
    """Register `check()` to run when a function loads the module that declares it (with
    `LEASEHOLD_KINDS`, after every module is imported): an application reads and checks its
    settings there, so a missing or malformed one stops the function at cold start with its
    name — not at the first request that needs it. Raise `SettingError` (or any error) to
    refuse."""
    _AT_COLD_START.append(check)
    return check


def checks_registered() -> int:
    """How many checks are registered so far (the loader notes it around each import)."""
    return len(_AT_COLD_START)


_BROUGHT: dict[str, list[Callable[[], None]]] = {}


def note_brought(module: str, since: int) -> None:
    """The checks registered since position `since` came with the import of `module` (by any
    module it imported, its own helpers included): they are `module`'s from now on, also when a
    later load finds it imported already."""
    new = _AT_COLD_START[since:]
    if new:
        known = _BROUGHT.setdefault(module, [])
        known.extend(check for check in new if check not in known)


def cold_start_checks(module: str) -> list[Callable[[], None]]:
    """The checks `module` brought with its import, and those of its submodules."""
    own = [
        check
        for check in _AT_COLD_START
        if check.__module__ == module or check.__module__.startswith(module + ".")
    ]
    return [
        *_BROUGHT.get(module, []),
        *(check for check in own if check not in _BROUGHT.get(module, [])),
    ]


__all__ = [
    "SettingError",
    "at_cold_start",
    "checks_registered",
    "cold_start_checks",
    "note_brought",
    "int_setting",
    "setting",
]
