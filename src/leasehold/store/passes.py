"""Pass cursors (decision SP2): where each periodic pass of the sweeper stopped, one control item
per pass and segment (`pk=SWEEP#<pass>#<segment>`), so the next run goes on from there instead of
reading the same oldest items again.

An item holds the shard the walk is in (`next_shard`), the last sort key read in each shard it
stopped inside (`positions`), how many laps it has finished (`laps`) and a `version`. A save is
conditional on the version the run loaded: two sweeps of one segment never both move its
cursor — the one that loses keeps nothing and the next run reads from the winner's place."""

from __future__ import annotations

from dataclasses import dataclass, field

from leasehold.domain.types import RawItem
from leasehold.store.expressions import Expression
from leasehold.store.items import deserialize_item
from leasehold.store.table import ConditionFailed, Table

CURSOR_SORT_KEY = "CURSOR"


def pass_cursor_key(name: str, segment: int) -> RawItem:
    return {"pk": {"S": f"SWEEP#{name}#{segment}"}, "sk": {"S": CURSOR_SORT_KEY}}


@dataclass
class PassCursor:
    """Where a pass's walk over its segment's shards stands (mutable: a walk moves it)."""

    next_shard: int = 0
    """The shard the walk reads next (the first of the segment's shards at or after it)."""
    positions: dict[int, str] = field(default_factory=dict)
    """The last sort key read in a shard the walk stopped inside (none: from its start)."""
    laps: int = 0
    """Walks over every shard of the segment finished so far."""
    segments: int = 1
    """The segment count the cursor was written under (another count: a fresh walk)."""
    version: int = 0
    """The stored item's version; 0: no item yet."""


class PassCursorStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def load(self, name: str, segment: int, segments: int) -> PassCursor:
        """The pass's cursor for this segment, read consistently; a fresh one when there is no
        item, or when it was written under another segment count (other shards)."""
        item = self._table.get(pass_cursor_key(name, segment))
        if item is None:
            return PassCursor(segments=segments)
        doc = deserialize_item(item)
        version = int(str(doc.get("version", 0)))
        if int(str(doc.get("segments", 1))) != segments:
            return PassCursor(segments=segments, version=version)
        raw_positions = doc.get("positions") or {}
        positions = (
            {int(shard): str(key) for shard, key in raw_positions.items()}
            if isinstance(raw_positions, dict)
            else {}
        )
        return PassCursor(
            next_shard=int(str(doc.get("next_shard", 0))),
            positions=positions,
            laps=int(str(doc.get("laps", 0))),
            segments=segments,
            version=version,
        )

    def save(self, name: str, segment: int, cursor: PassCursor, *, now: int) -> bool:
        """Write the cursor if nobody has since the run loaded it (same `version`); False when
        another sweep got there first (nothing written: its place stands)."""
        expr = Expression()
        version = expr.name("version")
        if cursor.version == 0:
            expr.condition(f"attribute_not_exists({version})")
        else:
            expr.condition(f"{version} = {expr.value(cursor.version)}")
        expr.set("version", cursor.version + 1)
        expr.set("next_shard", cursor.next_shard)
        expr.set("positions", {str(shard): key for shard, key in cursor.positions.items()})
        expr.set("laps", cursor.laps)
        expr.set("segments", cursor.segments)
        expr.set("updated_at", now)
        try:
            self._table.update(expr.update_params(pass_cursor_key(name, segment)), return_new=False)
        except ConditionFailed:
            return False
        cursor.version += 1
        return True
