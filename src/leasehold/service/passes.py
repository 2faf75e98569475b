"""The sweeper's periodic passes, each with a rate (decisions SP1–SP4): a pass reads at most
`rate × interval` items a run, shared by the segments, and carries a cursor across runs, so every
item of its index is reached in (items ÷ rate) seconds whatever their number.

A walk goes over its segment's shards in order, each from where the last run stopped in it to its
end, then the next shard; past the last shard a lap is finished and the run ends (the next run
starts the next lap at the first shard). It stops early when its budget of items is spent or the
run's time is nearly up; its place is saved (conditionally: store/passes.py) for the next run.
Pages are read whole and every item of a page is handled before the place moves past it."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from leasehold.store.passes import PassCursor

T = TypeVar("T")

PAGE_LIMIT = 100
"""Items one index read asks for at most (one Query and one BatchGetItem)."""
SAFETY_MARGIN_MS = 10_000
"""A walk reads no new page with less than this left of the invocation: a page's writes
(a hundred items, two writes each) finish well inside it, and the cursor is saved after."""

ReadPage = Callable[[int, str | None, int], tuple[list[T], str | None]]
"""`(shard, after, limit) -> (items, last sort key read | None when the shard is exhausted)`."""


@dataclass(frozen=True)
class Segment:
    """Segment `index` of `count`: the shards `s` with `s % count == index` (decision SP3)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"segment {self.index} of {self.count} does not exist")

    def shards(self, shard_count: int) -> list[int]:
        """The shards this segment owns, in walking order."""
        return [shard for shard in range(max(shard_count, 1)) if shard % self.count == self.index]


def run_budget(rate_per_second: int, interval_seconds: int, segments: int) -> int:
    """Items one segment's run of a pass may read: the pass's rate over the sweep interval,
    shared by its segments (rounded up: the segments together read at least the rate)."""
    return math.ceil(rate_per_second * interval_seconds / max(segments, 1))


class Budget:
    """What a run may still read: a count of items, and the invocation's time (`time_left`, the
    milliseconds remaining; None: no limit but the count)."""

    def __init__(self, items: int, time_left: Callable[[], int] | None = None) -> None:
        self.items = items
        self._time_left = time_left

    def page(self) -> int:
        """How many items the next page may ask for: 0 when the run must stop."""
        if self.items <= 0:
            return 0
        if self._time_left is not None and self._time_left() < SAFETY_MARGIN_MS:
            return 0
        return min(self.items, PAGE_LIMIT)

    def spend(self, read: int) -> None:
        self.items -= max(read, 1)  # an empty page read still costs: a walk always ends


class Walk(Generic[T]):
    """One run of a pass over a segment's shards from `cursor`, which it moves as it goes."""

    def __init__(self, cursor: PassCursor, shards: list[int], budget: Budget) -> None:
        self.cursor = cursor
        self.shards = shards
        self.budget = budget
        self.examined = 0
        self.lap_finished = False
        self._start = (cursor.next_shard, dict(cursor.positions))

    @property
    def moved(self) -> bool:
        """Whether the cursor is worth saving: the walk read something or changed its place (an
        idle run — every shard empty — writes nothing)."""
        place = (self.cursor.next_shard, self.cursor.positions)
        return self.examined > 0 or place != self._start

    def items(self, read: ReadPage[T]) -> Iterator[T]:
        """Every item read, one at a time; the cursor moves past a page only once each of its
        items has been taken (a run cut short mid-page reads that page again next time)."""
        if not self.shards:
            return
        cursor = self.cursor
        ahead = [shard for shard in self.shards if shard >= cursor.next_shard]
        start = self.shards.index(ahead[0]) if ahead else 0
        known = set(self.shards)
        cursor.positions = {s: key for s, key in cursor.positions.items() if s in known}
        for shard in self.shards[start:]:
            cursor.next_shard = shard
            after = cursor.positions.get(shard)
            while True:
                limit = self.budget.page()
                if limit == 0:
                    return
                page, last = read(shard, after, limit)
                self.budget.spend(len(page))
                for item in page:
                    self.examined += 1
                    yield item
                if last is None:
                    break
                after = cursor.positions[shard] = last
            cursor.positions.pop(shard, None)
        cursor.next_shard = self.shards[0]
        cursor.laps += 1
        self.lap_finished = True
