"""Title fetchers for the reading list (docs/architecture.md "The reading list"): the boundary the
`title` job kind calls.

Importing this package is cheap (no urllib3, no HTML parser): the API imports it for
`validate_bookmark_url` and `FIXTURE_MODES`; a fetcher's module is imported only when
`fetcher_from_name` builds it.

Contract of `TitleFetcher.fetch(url, *, mode, attempt, tick)`:
- returns the page title: non-empty, whitespace collapsed, at most 300 characters;
- raises `TitleFetchError` with a `code` from `TITLE_ERROR_CODES` and `retryable` (timeouts,
  connection failures, 408/429/5xx: True; refused URLs and addresses, non-HTML, other 4xx, no
  title: False);
- calls `tick()` at least every 250 ms while it waits, and raises `StepInterruptedError` as
  soon as `tick()` returns False (lease lost or cancel requested);
- `mode` is the bookmark's `title_mode`; only the fixture fetcher reads it (the API accepts a
  `title_mode` only while the fixture fetcher is configured). `attempt` counts from 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from leasehold_apps.reading_list.titles.errors import TITLE_ERROR_CODES, TitleFetchError
from leasehold_apps.reading_list.titles.names import FETCHER_NAMES, FIXTURE_MODES
from leasehold_apps.reading_list.titles.urls import validate_bookmark_url

__all__ = [
    "FETCHER_NAMES",
    "FIXTURE_MODES",
    "TITLE_ERROR_CODES",
    "TitleFetchError",
    "TitleFetcher",
    "fetcher_from_name",
    "validate_bookmark_url",
]


class TitleFetcher(Protocol):
    """Finds the title of the page at a bookmark's URL (see the package docstring)."""

    def fetch(
        self, url: str, *, mode: str | None, attempt: int, tick: Callable[[], bool]
    ) -> str: ...


def fetcher_from_name(name: str, **options: Any) -> TitleFetcher:
    """Build the fetcher configuration names: `fixture` or `live`; anything else is ValueError.

    `options` go to the fetcher's constructor (`slow_seconds` for the fixture; timeouts and
    limits for live). Options starting with `_` are test-only switches and are refused here,
    so no configuration path can reach them.
    """
    private = sorted(option for option in options if option.startswith("_"))
    if private:
        raise ValueError(f"title fetcher option(s) {', '.join(private)} cannot be configured")
    if name == "fixture":
        from leasehold_apps.reading_list.titles.fixture import FixtureFetcher

        return FixtureFetcher(**options)
    if name == "live":
        from leasehold_apps.reading_list.titles.live import LiveFetcher

        return LiveFetcher(**options)
    raise ValueError(f"unknown title fetcher {name!r}; known: {', '.join(FETCHER_NAMES)}")
