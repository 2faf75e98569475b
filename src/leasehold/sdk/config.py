"""An application's own settings, read from the function's environment once (at cold start,
when its module is imported): the same rule as the engine's settings — a required setting that
is missing stops the function with its name, never a silent default."""

from __future__ import annotations

import os


class SettingError(RuntimeError):
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
        return int(float(raw))
    except ValueError as exc:
        raise SettingError(f"environment variable {name}={raw!r} is not a number") from exc


__all__ = ["SettingError", "int_setting", "setting"]
