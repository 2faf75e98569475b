"""Fixtures the end-to-end tests share: a headless Chromium for the console's browser tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import headless_chromium, missing_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # No skip: `make setup` installs the browser, so a missing one is a failure to see
    missing = missing_browser()
    if missing is not None:
        pytest.fail(missing)
    with headless_chromium() as driver:
        yield driver
