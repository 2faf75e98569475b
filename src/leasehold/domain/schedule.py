"""Schedule expressions (decision FS1): `cron(…)` in AWS EventBridge's six-field syntax and
`rate(…)`, with an IANA time zone, and the pure function that says when the next tick is.

Supported (decision FS1): `cron(min hour day-of-month month day-of-week year)` with `*`, `?`,
lists `,`, ranges `-`, steps `/` (`*/15`, `5/10`, `1-30/2`), month names `JAN`–`DEC` and day
names `SUN`–`SAT` (AWS numbers days 1 = SUN … 7 = SAT); exactly one of day-of-month and
day-of-week is `?`, as AWS requires. `L`, `W` and `#` are refused (400), not guessed at.
`rate(N minute|minutes|hour|hours|day|days)`: N ≥ 1, singular unit for 1, plural otherwise, as
AWS requires; a rate ticks every N periods from the schedule's anchor (its creation minute), in
UTC — a rate has no wall clock, so its time zone changes nothing.

Time zones come from zoneinfo. A cron tick is a local wall-clock time:
- a local time that does not exist (the hour skipped when clocks go forward) fires once, at the
  first instant after the gap (02:30 on the spring-forward night in Europe/Paris fires at 03:00
  local);
- a local time that happens twice (the hour repeated when clocks go back) fires once, at its
  first occurrence.
So ticks are strictly increasing instants, and no day loses or doubles a daily tick."""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from leasehold.domain.errors import ValidationError

MINUTE_MS = 60_000
MAX_YEAR = 2199
"""AWS's last cron year; the search for a next tick never looks past it."""
MAX_RATE_MINUTES = 366 * 24 * 60


class MissedTicks(StrEnum):
    """What a schedule does with ticks its trigger missed (fired more than one period late)."""

    SKIP = "skip"
    """Missed ticks make no job; the latest due tick (late by less than a period) still runs."""
    RUN_ONCE = "run_once"
    """All the missed ticks together make one job (for the earliest of them), besides the
    latest due tick's own."""


_MONTHS = {name: i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS = {name.upper(): number for name, number in _MONTHS.items()}
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
_CRON = re.compile(r"^cron\((.*)\)$")
_RATE = re.compile(r"^rate\(([0-9]{1,6}) (minute|minutes|hour|hours|day|days)\)$")
_PART = re.compile(r"^(\*|[A-Z0-9]+(?:-[A-Z0-9]+)?)(?:/([0-9]+))?$")
_AWS_SPECIAL = re.compile(r"(^|[,/-])L|[0-9]L\b|[0-9]W\b|^LW$")
_UNIT_MINUTES = {"minute": 1, "hour": 60, "day": 1440}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minutes", 0, 59, {}),
    _Field("hours", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 1, 7, _DAYS),
    _Field("year", 1970, MAX_YEAR, {}),
)


def _number(text: str, spec: _Field) -> int:
    value = spec.names.get(text)
    if value is None:
        if not text.isdecimal() or not text.isascii():
            raise ValidationError(f"cron {spec.name}: {text[:16]!r} is not a value")
        value = int(text)
    if not spec.low <= value <= spec.high:
        raise ValidationError(f"cron {spec.name}: {value} is outside {spec.low}–{spec.high}")
    return value


def _parse_field(text: str, spec: _Field) -> frozenset[int] | None:
    """The values a field allows (None for `?`, "any")."""
    if text == "?":
        return None
    if "#" in text or _AWS_SPECIAL.search(text):
        raise ValidationError(
            f"cron {spec.name}: 'L', 'W' and '#' are not supported (decision FS1)"
        )
    values: set[int] = set()
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if not match:
            raise ValidationError(f"cron {spec.name}: {part[:16]!r} is not a value, range or step")
        base, step_text = match.groups()
        if base == "*":
            low, high = spec.low, spec.high
        elif "-" in base:
            first, last = base.split("-")
            low, high = _number(first, spec), _number(last, spec)
            if low > high:
                raise ValidationError(f"cron {spec.name}: range {base} runs backwards")
        else:
            low = _number(base, spec)
            high = spec.high if step_text else low
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValidationError(f"cron {spec.name}: a step must be at least 1")
        values.update(range(low, high + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int] | None
    months: frozenset[int]
    days_of_week: frozenset[int] | None
    years: frozenset[int]

    def matches_day(self, year: int, month: int, day: int) -> bool:
        if self.days_of_month is not None:
            return day in self.days_of_month
        aws_weekday = (calendar.weekday(year, month, day) + 1) % 7 + 1  # Monday=0 → MON=2
        return self.days_of_week is not None and aws_weekday in self.days_of_week


@dataclass(frozen=True)
class Rate:
    minutes: int


@dataclass(frozen=True)
class ScheduleExpression:
    """A parsed expression and its zone. `text` is what the caller wrote."""

    text: str
    timezone: str
    rule: Cron | Rate

    def next_tick_after(self, after_ms: int, *, anchor_ms: int = 0) -> int | None:
        """The first tick strictly after `after_ms` (ms since the epoch, UTC), or None when the
        expression has no later tick (a cron whose years are over). A rate ticks at
        `anchor_ms + k × period`."""
        if isinstance(self.rule, Rate):
            period = self.rule.minutes * MINUTE_MS
            if after_ms < anchor_ms:
                return anchor_ms
            return anchor_ms + ((after_ms - anchor_ms) // period + 1) * period
        return _next_cron(self.rule, ZoneInfo(self.timezone), after_ms)


def parse_timezone(name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        raise ValidationError("'timezone' must be an IANA time zone name, e.g. 'Europe/Paris'")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"'timezone': unknown time zone {name[:64]!r}") from exc
    return name


def parse_expression(text: object, timezone: object = "UTC") -> ScheduleExpression:
    """`cron(…)` or `rate(…)` in the supported subset (module docstring), or ValidationError
    naming what is wrong."""
    zone = parse_timezone(timezone)
    if not isinstance(text, str) or len(text) > 256:
        raise ValidationError("'expression' must be 'cron(…)' or 'rate(…)' (at most 256 chars)")
    rate = _RATE.fullmatch(text)
    if rate:
        count, unit = int(rate.group(1)), rate.group(2)
        singular = unit.rstrip("s")
        if count < 1 or (count == 1) != (unit == singular):
            raise ValidationError(
                "rate: N must be at least 1, with a singular unit for 1 ('rate(1 hour)') "
                "and a plural one otherwise ('rate(5 minutes)')"
            )
        period_minutes = count * _UNIT_MINUTES[singular]
        if period_minutes > MAX_RATE_MINUTES:
            raise ValidationError("rate: a period may be at most 366 days")
        return ScheduleExpression(text, zone, Rate(period_minutes))
    cron = _CRON.fullmatch(text)
    if not cron:
        raise ValidationError(
            "'expression' must be 'cron(min hour day-of-month month day-of-week year)' "
            "or 'rate(N minutes|hours|days)'"
        )
    parts = cron.group(1).upper().split()
    if len(parts) != len(_FIELDS):
        raise ValidationError("cron takes 6 fields: min hour day-of-month month day-of-week year")
    values = [_parse_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    minutes, hours, dom, months, dow, years = values
    if (dom is None) == (dow is None):
        raise ValidationError("cron: exactly one of day-of-month and day-of-week must be '?'")
    for name, field in (("minutes", minutes), ("hours", hours), ("month", months)):
        if field is None:
            raise ValidationError(f"cron {name}: '?' is only for day-of-month or day-of-week")
    if years is None:
        raise ValidationError("cron year: '?' is only for day-of-month or day-of-week")
    assert minutes is not None and hours is not None and months is not None
    return ScheduleExpression(text, zone, Cron(minutes, hours, dom, months, dow, years))


def _to_utc_ms(wall: datetime, zone: ZoneInfo) -> int:
    """The instant of a local wall time: its first occurrence when it happens twice; the first
    instant after the gap when it never happens (module docstring)."""
    local = wall.replace(tzinfo=zone, fold=0)
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:  # in a gap: walk to its end
        probe = wall
        for _ in range(2 * 1440):  # the longest gap on record is a day (Samoa, 2011)
            probe += timedelta(minutes=1)
            moved = probe.replace(tzinfo=zone, fold=0).astimezone(UTC)
            if moved.astimezone(zone).replace(tzinfo=None) == probe:
                instant = moved
                break
    return int(instant.timestamp() * 1000)


def _next_cron(rule: Cron, zone: ZoneInfo, after_ms: int) -> int | None:
    # Start a day early in local time: a wall time near `after` may map either side of it.
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(zone).replace(tzinfo=None)
    floor = start - timedelta(hours=26)  # no zone's offset moves by more than this
    first_day = floor.date()
    minutes, hours = sorted(rule.minutes), sorted(rule.hours)
    for year in sorted(y for y in rule.years if y >= first_day.year):
        for month in sorted(rule.months):
            if (year, month) < (first_day.year, first_day.month):
                continue
            for day in range(1, calendar.monthrange(year, month)[1] + 1):
                if (year, month, day) < (first_day.year, first_day.month, first_day.day):
                    continue
                if not rule.matches_day(year, month, day):
                    continue
                for hour in hours:
                    for minute in minutes:
                        wall = datetime(year, month, day, hour, minute)
                        if wall <= floor:
                            continue
                        tick = _to_utc_ms(wall, zone)
                        if tick > after_ms:
                            return tick
    return None


SCHEDULE_ACTIVE = "active"
SCHEDULE_DELETED = "deleted"


@dataclass(frozen=True)
class Schedule:
    """One schedule: who owns it, what job each tick makes (`job`: a `POST /jobs` body), when.
    `next_tick_at` is the one tick not yet fired (None once the expression has no more);
    `version` increases on every write, and every fire is conditional on `next_tick_at`."""

    schedule_id: str
    owner_tenant: str
    owner_user: str
    expression: str
    timezone: str
    missed: MissedTicks
    job: dict[str, object]
    anchor_at: int
    created_at: int
    updated_at: int
    next_tick_at: int | None
    state: str = SCHEDULE_ACTIVE
    version: int = 1
    ticks_fired: int = 0
    ticks_skipped: int = 0
    last_tick_at: int | None = None
    last_job_id: str | None = None
    last_error: str | None = None
    declared_by_kind: bool = False
    history: tuple[Mapping[str, object], ...] = ()
    counted: bool = False
    """Whether the schedule holds a place in its owner's quota (decision Q2): its delete gives
    it back. Schedules made before the quota, and a kind's declared ones, hold none."""

    def parsed(self) -> ScheduleExpression:
        return parse_expression(self.expression, self.timezone)


@dataclass(frozen=True)
class Firing:
    """What one fire at `now` does for a schedule whose next tick `due` has come: the ticks
    that make a job (at most two: the latest due tick, and with `run_once` one for the missed
    ones), how many missed ticks make none, and the tick after."""

    job_ticks: tuple[int, ...]
    skipped: int
    next_tick_at: int | None


MAX_COUNTED_MISSES = 1_000
"""How many missed cron ticks a fire walks through one by one to count them: past it, it
jumps to the last two days, and the count is a lower bound (a rate is counted exactly)."""


def plan_firing(
    expression: ScheduleExpression, missed: MissedTicks, due: int, now: int, anchor_ms: int
) -> Firing:
    """The missed-tick policy (decision FS2). Ticks `due` … `latest` are all ≤ `now`; a tick is
    *missed* when the trigger comes more than one period late for it, that is when a later tick
    is also due — so every due tick but the latest is missed. The latest always makes a job;
    the missed ones make none (`skip`) or one between them, for the earliest (`run_once`)."""
    latest, missed_ticks = due, 0
    following = expression.next_tick_after(due, anchor_ms=anchor_ms)
    if isinstance(expression.rule, Rate) and following is not None and following <= now:
        period = expression.rule.minutes * MINUTE_MS
        missed_ticks = (now - due) // period
        latest = due + missed_ticks * period
        following = latest + period
    while following is not None and following <= now:
        missed_ticks += 1
        if missed_ticks == MAX_COUNTED_MISSES:  # stop counting; find the latest from `now`
            following = expression.next_tick_after(now - 2 * 86_400_000, anchor_ms=anchor_ms)
        latest = following or latest
        following = expression.next_tick_after(latest, anchor_ms=anchor_ms)
    if missed_ticks == 0:
        return Firing((due,), 0, following)
    if missed is MissedTicks.RUN_ONCE:
        return Firing((due, latest), missed_ticks - 1, following)
    return Firing((latest,), missed_ticks, following)
