"""Schedule expressions (decision FS1): parsing, the next tick, time zones and DST. No I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasehold.domain.errors import ValidationError
from leasehold.domain.schedule import MINUTE_MS, Cron, parse_expression

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
START = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
END = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


def local(instant: int, zone: str) -> datetime:
    return datetime.fromtimestamp(instant / 1000, tz=UTC).astimezone(ZoneInfo(zone))


def exists(wall: datetime, zone: str) -> bool:
    aware = wall.replace(tzinfo=ZoneInfo(zone))
    return aware.astimezone(UTC).astimezone(ZoneInfo(zone)).replace(tzinfo=None) == wall


field_values = st.one_of(
    st.just("*"),
    st.integers(0, 59).map(str),
    st.tuples(st.integers(0, 29), st.integers(30, 59)).map(lambda r: f"{r[0]}-{r[1]}"),
    st.tuples(st.integers(0, 59), st.integers(1, 30)).map(lambda r: f"{r[0]}/{r[1]}"),
)
hour_values = st.one_of(
    st.just("*"),
    st.integers(0, 23).map(str),
    st.lists(st.integers(0, 23), min_size=1, max_size=3, unique=True).map(
        lambda hs: ",".join(map(str, hs))
    ),
    st.integers(1, 6).map(lambda s: f"*/{s}"),
)
day_fields = st.one_of(
    st.just(("*", "?")),
    st.integers(1, 28).map(lambda d: (str(d), "?")),
    st.sampled_from(["MON-FRI", "SUN", "2,4,6", "SAT-SAT", "*"]).map(lambda w: ("?", w)),
)
crons = st.builds(
    lambda m, h, days: f"cron({m} {h} {days[0]} * {days[1]} *)",
    field_values,
    hour_values,
    day_fields,
)


def matches(rule: Cron, wall: datetime) -> bool:
    return (
        wall.minute in rule.minutes
        and wall.hour in rule.hours
        and wall.month in rule.months
        and wall.year in rule.years
        and rule.matches_day(wall.year, wall.month, wall.day)
    )


@settings(max_examples=150, deadline=None)
@given(text=crons, zone=st.sampled_from(ZONES), after=st.integers(START, END))
def test_a_cron_tick_is_later_matches_and_is_the_first(text: str, zone: str, after: int) -> None:
    # Given a cron expression in a zone, When we ask for the next tick after a time
    expression = parse_expression(text, zone)
    assert isinstance(expression.rule, Cron)
    tick = expression.next_tick_after(after)
    # Then it is strictly later, on a minute, and (ticks follow each other) monotonic
    assert tick is not None and tick > after and tick % MINUTE_MS == 0
    following = expression.next_tick_after(tick)
    assert following is not None and following > tick
    # and its local wall time matches the expression, unless it stands for a skipped time
    wall = local(tick, zone).replace(tzinfo=None)
    if not matches(expression.rule, wall):
        gap_start = wall - timedelta(minutes=1)
        assert not exists(gap_start, zone), f"{text} gave a non-matching {wall} in {zone}"
    # and no matching instant lies between `after` and the tick (checked minute by minute over
    # the last two hours before it)
    probe = max(after + 1, tick - 2 * 3600_000)
    probe = probe + (-probe % MINUTE_MS)
    while probe < tick:
        wall_probe = local(probe, zone).replace(tzinfo=None)
        first_time = local(probe - 3600_000, zone).replace(tzinfo=None) < wall_probe
        assert not (matches(expression.rule, wall_probe) and first_time), (
            f"{text} in {zone}: {wall_probe} matches before the tick {wall}"
        )
        probe += MINUTE_MS


@given(
    count=st.integers(1, 366),
    unit=st.sampled_from(["minute", "hour", "day"]),
    anchor=st.integers(START, END),
    after=st.integers(START, END),
)
def test_a_rate_ticks_every_period_from_its_anchor(
    count: int, unit: str, anchor: int, after: int
) -> None:
    text = f"rate({count} {unit}{'' if count == 1 else 's'})"
    expression = parse_expression(text, "Europe/Paris")
    period = count * {"minute": 1, "hour": 60, "day": 1440}[unit] * MINUTE_MS
    tick = expression.next_tick_after(after, anchor_ms=anchor)
    assert tick is not None and tick > after
    assert (tick - anchor) % period == 0
    assert tick - period <= max(after, anchor - period)  # no tick skipped in between


def test_a_daily_tick_in_the_spring_gap_runs_once_at_the_end_of_the_gap() -> None:
    # 2026-03-29: Paris goes from 02:00 CET to 03:00 CEST; 02:30 does not exist that night
    expression = parse_expression("cron(30 2 * * ? *)", "Europe/Paris")
    ticks = [expression.next_tick_after(ms(2026, 3, 28, 12))]
    for _ in range(2):
        ticks.append(expression.next_tick_after(ticks[-1] or 0))
    assert ticks == [ms(2026, 3, 29, 1, 0), ms(2026, 3, 30, 0, 30), ms(2026, 3, 31, 0, 30)]


def test_a_daily_tick_in_the_repeated_hour_runs_once_at_its_first_occurrence() -> None:
    # 2026-10-25: Paris goes from 03:00 CEST back to 02:00 CET; 02:30 happens twice
    expression = parse_expression("cron(30 2 * * ? *)", "Europe/Paris")
    first = expression.next_tick_after(ms(2026, 10, 24, 12))
    assert first == ms(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert expression.next_tick_after(first) == ms(2026, 10, 26, 1, 30)  # 02:30 CET, next day


def test_every_minute_across_the_fall_back_hour_never_ticks_twice_for_one_instant() -> None:
    expression = parse_expression("cron(* * * * ? *)", "America/New_York")
    tick = ms(2026, 11, 1, 5, 0)  # 01:00 EDT, start of the repeated hour
    seen = []
    for _ in range(150):
        tick = expression.next_tick_after(tick) or 0
        seen.append(tick)
    assert seen == sorted(set(seen))
    # the second 01:xx (EST) is skipped: after 01:59 EDT comes 02:00 EST
    assert ms(2026, 11, 1, 6, 0) not in seen and ms(2026, 11, 1, 7, 0) in seen


def test_aws_numbers_days_from_sunday() -> None:
    expression = parse_expression("cron(0 9 ? * 2 *)", "UTC")  # 2 = MON
    tick = expression.next_tick_after(ms(2026, 12, 1))  # a Tuesday
    assert tick == ms(2026, 12, 7, 9, 0)  # the next Monday
    names = parse_expression("cron(0 9 ? * MON *)", "UTC")
    assert names.next_tick_after(ms(2026, 12, 1)) == tick


def test_a_cron_that_never_fires_again_has_no_next_tick() -> None:
    assert parse_expression("cron(0 0 30 FEB ? *)").next_tick_after(START) is None
    assert parse_expression("cron(0 0 1 1 ? 2025)").next_tick_after(START) == ms(2025, 1, 1)
    assert parse_expression("cron(0 0 1 1 ? 2025)").next_tick_after(ms(2025, 1, 1)) is None


@pytest.mark.parametrize(
    ("text", "zone", "says"),
    [
        ("cron(0 9 * * *)", "UTC", "6 fields"),
        ("cron(0 9 * * * *)", "UTC", "exactly one of day-of-month"),
        ("cron(0 9 ? * ? *)", "UTC", "exactly one of day-of-month"),
        ("cron(0 9 L * ? *)", "UTC", "not supported"),
        ("cron(0 9 15W * ? *)", "UTC", "not supported"),
        ("cron(0 9 ? * 6#3 *)", "UTC", "not supported"),
        ("cron(0 9 ? * 6L *)", "UTC", "not supported"),
        ("cron(60 9 * * ? *)", "UTC", "outside 0–59"),
        ("cron(0 24 * * ? *)", "UTC", "outside 0–23"),
        ("cron(0 9 * 13 ? *)", "UTC", "outside 1–12"),
        ("cron(0 9 5-1 * ? *)", "UTC", "backwards"),
        ("cron(0/0 9 * * ? *)", "UTC", "at least 1"),
        ("cron(0 9 * * ? 1969)", "UTC", "outside 1970"),
        ("cron(x 9 * * ? *)", "UTC", "not a value"),
        ("rate(1 minutes)", "UTC", "singular"),
        ("rate(5 minute)", "UTC", "plural"),
        ("rate(0 minutes)", "UTC", "at least 1"),
        ("rate(5 weeks)", "UTC", "must be"),
        ("rate(400 days)", "UTC", "366 days"),
        ("every day", "UTC", "must be"),
        (7, "UTC", "must be"),
        ("rate(5 minutes)", "Mars/Olympus", "unknown time zone"),
        ("rate(5 minutes)", 3, "IANA"),
    ],
)
def test_an_expression_outside_the_subset_is_refused_saying_why(
    text: object, zone: object, says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        parse_expression(text, zone)
