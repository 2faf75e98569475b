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
