"""The fixture title fetcher's modes, and how configuration builds fetchers (no network)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from leasehold.domain.errors import StepInterruptedError
from leasehold_apps.reading_list.titles import FIXTURE_MODES, TitleFetchError, fetcher_from_name
from leasehold_apps.reading_list.titles.fixture import FixtureFetcher, fixture_title
from leasehold_apps.reading_list.titles.live import LiveFetcher

SRC = Path(__file__).resolve().parents[2] / "src"
TITLES = SRC / "leasehold_apps" / "reading_list" / "titles"


class FakeTime:
    """A sleep that only advances a clock, and a tick that records when it was called."""

    def __init__(self, stop_after_ticks: int | None = None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.ticks_at: list[float] = []
        self._stop_after = stop_after_ticks

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def tick(self) -> bool:
        self.ticks_at.append(self.now)
        return self._stop_after is None or len(self.ticks_at) < self._stop_after


def never_called() -> bool:
    raise AssertionError("tick() is only for modes that wait")


def test_the_modes_are_the_four_the_design_names() -> None:
    assert set(FIXTURE_MODES) == {"ok", "timeout", "flaky", "slow"}


@pytest.mark.parametrize(
    ("url", "title"),
    [
        ("https://example.com/articles/leases", "leases · example.com"),
        ("https://example.com/articles/leases/", "leases · example.com"),
        ("https://example.com/", "example.com"),
        ("https://example.com", "example.com"),
        ("http://example.com/a/Durable%20Jobs?x=1", "Durable Jobs · example.com"),
        ("http://[2606:4700::1]/x", "x · [2606:4700::1]"),
        ("https://B\u00fccher.example/", "xn--bcher-kva.example"),
    ],
)
def test_ok_derives_a_deterministic_title_from_the_url(url: str, title: str) -> None:
    fetcher = FixtureFetcher()
    assert fetcher.fetch(url, mode="ok", attempt=1, tick=never_called) == title
    assert fetcher.fetch(url, mode=None, attempt=3, tick=never_called) == title


def test_timeout_fails_every_attempt_retryably() -> None:
    fetcher = FixtureFetcher()
    for attempt in (1, 2, 3, 10):
        with pytest.raises(TitleFetchError) as caught:
            fetcher.fetch(
                "https://example.com/x", mode="timeout", attempt=attempt, tick=never_called
            )
        assert (caught.value.code, caught.value.retryable) == ("timeout", True)


def test_flaky_fails_the_first_attempt_and_succeeds_after() -> None:
    fetcher = FixtureFetcher()
    with pytest.raises(TitleFetchError) as caught:
        fetcher.fetch("https://example.com/x", mode="flaky", attempt=1, tick=never_called)
    assert caught.value.retryable is True
    for attempt in (2, 3):
        title = fetcher.fetch(
            "https://example.com/x", mode="flaky", attempt=attempt, tick=never_called
        )
        assert title == "x · example.com"


def test_slow_waits_in_slices_of_at_most_250_ms_and_ticks_after_each() -> None:
    # Given a slow fixture of 1.1 s on a fake clock
    clock = FakeTime()
    fetcher = FixtureFetcher(slow_seconds=1.1, sleep=clock.sleep)

    # When it fetches
    title = fetcher.fetch("https://example.com/slow", mode="slow", attempt=1, tick=clock.tick)

    # Then it waited the whole time, never more than 250 ms between ticks, and gave the title
    assert title == "slow · example.com"
    assert sum(clock.sleeps) == pytest.approx(1.1)
    assert max(clock.sleeps) <= 0.25
    gaps = [b - a for a, b in zip([0.0, *clock.ticks_at], clock.ticks_at, strict=False)]
    assert len(clock.ticks_at) == 5 and max(gaps) <= 0.25 + 1e-9


def test_slow_stops_as_soon_as_tick_says_so() -> None:
    # Given a tick that answers False on its third call
    clock = FakeTime(stop_after_ticks=3)
    fetcher = FixtureFetcher(slow_seconds=3.0, sleep=clock.sleep)

    # When the slow fetch runs, Then it stops at that call and sleeps no more
    with pytest.raises(StepInterruptedError):
        fetcher.fetch("https://example.com/slow", mode="slow", attempt=1, tick=clock.tick)
    assert len(clock.ticks_at) == 3
    assert sum(clock.sleeps) == pytest.approx(0.75)


def test_slow_ticks_in_real_time_too() -> None:
    # Given the real clock and a 0.6 s slow fixture
    ticks: list[float] = []

    def tick() -> bool:
        ticks.append(time.monotonic())
        return True

    started = time.monotonic()
    FixtureFetcher(slow_seconds=0.6).fetch(
        "https://example.com/", mode="slow", attempt=1, tick=tick
    )

    # Then the gaps between heartbeats stay near 250 ms and the wait lasted about 0.6 s
    gaps = [b - a for a, b in zip([started, *ticks], ticks, strict=False)]
    assert max(gaps) < 0.35
    assert 0.55 <= ticks[-1] - started < 1.5


def test_an_unknown_mode_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown fixture title mode"):
        FixtureFetcher().fetch(
            "https://example.com/", mode="sometimes", attempt=1, tick=never_called
        )


def test_a_url_the_rules_refuse_is_a_bad_url_error() -> None:
    with pytest.raises(TitleFetchError) as caught:
        fixture_title("ftp://example.com/file")
    assert (caught.value.code, caught.value.retryable) == ("bad_url", False)


def test_configuration_builds_fixture_and_live_fetchers_by_name() -> None:
    assert isinstance(fetcher_from_name("fixture", slow_seconds=0.5), FixtureFetcher)
    assert isinstance(fetcher_from_name("live", total_timeout=4.0), LiveFetcher)
    with pytest.raises(ValueError, match="unknown title fetcher"):
        fetcher_from_name("curl")
    with pytest.raises(ValueError, match="cannot be configured"):
        fetcher_from_name("live", _test_allow_loopback_any_port=True)


def test_the_test_only_switch_is_not_reachable_from_configuration() -> None:
    # The switch is named only where LiveFetcher declares it, and the fetchers read no
    # environment variables at all.
    mentions = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "_test_allow_loopback_any_port" in path.read_text()
    )
    assert mentions == ["leasehold_apps/reading_list/titles/live.py"]
    for path in TITLES.glob("*.py"):
        assert not re.search(r"os\.environ|getenv", path.read_text()), path
