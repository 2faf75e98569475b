"""The `fixture` title fetcher (docs/architecture.md "The reading list"): no network, behaviour
chosen per bookmark.

The local stack, the demo and the tests need titles that arrive predictably, fail on demand
and take long enough to race an edit or a delete against. The bookmark's `title_mode` picks:

- `ok` (also when no mode is given): a title derived from the URL alone — the last non-empty
  path segment (percent-decoded) and the host, `"<segment> · <host>"`, or just the host.
  Same URL, same title, every time.
- `timeout`: every attempt fails, retryable, with code `timeout` (the job ends `dead`, the
  bookmark `failed`).
- `flaky`: attempt 1 fails retryably (`timeout`); attempt 2 and later return the `ok` title.
- `slow`: waits `slow_seconds` in slices of at most 250 ms, calling `tick()` after each one and
  stopping with `StepInterruptedError` as soon as it returns False; then the `ok` title.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import unquote

from leasehold import StepInterruptedError, ValidationError
from leasehold_apps.reading_list.titles.errors import TitleFetchError
from leasehold_apps.reading_list.titles.names import FIXTURE_MODES
from leasehold_apps.reading_list.titles.page import clean_title
from leasehold_apps.reading_list.titles.urls import parse_http_url

TICK_INTERVAL_SECONDS = 0.25


class FixtureFetcher:
    """Deterministic titles without a network; see the module docstring for the modes."""

    def __init__(
        self,
        *,
        slow_seconds: float = 3.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 0 <= slow_seconds <= 600:
            raise ValueError("slow_seconds must be between 0 and 600")
        self._slow_seconds = slow_seconds
        self._sleep = sleep

    def fetch(self, url: str, *, mode: str | None, attempt: int, tick: Callable[[], bool]) -> str:
        """The title for `url` under `mode`; `TitleFetchError` or `StepInterruptedError` as the
        mode says. An unknown mode is a `ValueError`: the API refuses it before a job exists."""
        mode = mode or "ok"
        if mode not in FIXTURE_MODES:
            raise ValueError(f"unknown fixture title mode {mode!r}; known: {FIXTURE_MODES}")
        if mode == "timeout" or (mode == "flaky" and attempt <= 1):
            raise TitleFetchError(
                "timeout", f"fixture: no answer in time ({mode}, attempt {attempt})", retryable=True
            )
        if mode == "slow":
            self._wait(tick)
        return fixture_title(url)

    def _wait(self, tick: Callable[[], bool]) -> None:
        remaining = self._slow_seconds
        while remaining > 0:
            pause = min(TICK_INTERVAL_SECONDS, remaining)
            self._sleep(pause)
            remaining -= pause
            if not tick():
                raise StepInterruptedError("the title fetch was told to stop")


def fixture_title(url: str) -> str:
    """`"<last path segment> · <host>"` (or the host alone), from the URL only."""
    try:
        parsed = parse_http_url(url)
    except ValidationError as exc:
        raise TitleFetchError("bad_url", "fixture: not an http(s) URL", retryable=False) from exc
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    path = parsed.target.partition("?")[0]
    segments = [segment for segment in path.split("/") if segment]
    segment = clean_title(unquote(segments[-1])) if segments else None
    title = f"{segment} · {host}" if segment else host
    return clean_title(title) or host
