"""The names configuration and requests use: the fetchers, and the fixture fetcher's modes (a
module of its own, so the fetchers need not import the package that builds them)."""

FETCHER_NAMES = ("fixture", "live")
FIXTURE_MODES = ("ok", "timeout", "flaky", "slow")
