"""Pausing a kind (DESIGN §21, decisions PA1–PA5): the worker's cached view of the paused kinds,
parking a job whose claim finds its kind paused, and waking a resumed kind's parked jobs.

- **The claim pays no read for it.** Each worker keeps the `PAUSES` item for PAUSE_CACHE_MS
  (one GetItem per worker per 5 s, whatever its claim rate): a pause reaches every worker within
  that. A job claimed meanwhile runs; one parked under a pause that has just been lifted is not
  (the park's transaction checks the kind is still paused).
- **A parked job costs nothing while parked**: `queued`, in the due index beyond any due time,
  its wake-up let go — no message, no sweep, no busy loop.
- **Resume wakes them all, bounded**: up to WAKE_PER_CALL in the operator's request, the
  sweeper the rest (WAKE_PER_SWEEP a run, one GetItem a run when no kind is resuming); the
  kind's entry goes once a sweep finds none left after the index's lag (RESUME_SETTLE_MS)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import ConflictError, JobNotFoundError
from leasehold.domain.types import JsonObject, RawItem
from leasehold.store import Stores
from leasehold.store.pauses import KindPause, PauseStore
from leasehold.store.queue import Wakeup
from leasehold.store.table import ConditionFailed

logger = Logger(service="leasehold", child=True)

PAUSE_CACHE_MS = 5_000
"""How long a worker trusts its read of the paused kinds (the longest a pause takes to stop
new starts on a warm worker)."""
WAKE_PER_CALL = 100
"""Parked jobs one resume request wakes (each a two-item transaction): well inside API
Gateway's 30 s; the sweeper wakes the rest."""
WAKE_PER_SWEEP = 500
"""Parked jobs one sweep wakes, over every resuming kind."""
RESUME_SETTLE_MS = 60_000
"""A resuming kind's entry goes only once a sweep this long after the resume finds no parked
job left: a job parked just before the resume may reach the (eventually consistent) index late."""
_PAGE = 25


class PauseCache:
    """One worker's view of the paused kinds, read at most once per PAUSE_CACHE_MS."""

    def __init__(self, store: PauseStore, clock: Clock, ttl_ms: int = PAUSE_CACHE_MS) -> None:
        self._store = store
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._pauses: dict[str, KindPause] = {}
        self._read_at: int | None = None
        self.reads = 0
        """How many times the item was read (the cost a test and the bench count)."""

    def paused(self, kind: str | None) -> KindPause | None:
        """`kind`'s pause if it is paused now (as last read); None otherwise."""
        pauses = self.current()
        pause = pauses.get(kind) if kind is not None else None
        return pause if pause is not None and pause.paused else None

    def current(self) -> dict[str, KindPause]:
        now = self._clock.now_ms()
        if self._read_at is None or now - self._read_at >= self._ttl_ms:
            self._pauses = self._store.read()
            self._read_at = now
            self.reads += 1
        return self._pauses

    def any_paused(self) -> bool:
        return any(pause.paused for pause in self.current().values())

    def forget(self) -> None:
        """Read again at the next look (a park found the kind no longer paused)."""
        self._read_at = None


class Parking:
    """The claim's look at its kind's pause: the job parked instead of claimed, or None."""

    def __init__(self, stores: Stores, clock: Clock) -> None:
        self._stores = stores
        self._clock = clock
        self.store = PauseStore(stores.table)
        self.cache = PauseCache(self.store, clock)

    def park_if_paused(self, wakeup: Wakeup) -> bool:
        """True when the wake-up's job was parked (its message is done with). A wake-up that
        names no kind (an old message) is read for it only while some kind is paused."""
        if not self.cache.any_paused():
            return False
        kind = wakeup.kind
        if kind is None:
            job = self._stores.jobs.get(wakeup.job_id)
            kind = job.kind if job is not None else None
        pause = self.cache.paused(kind)
        if pause is None:
            return False
        if self.store.park(wakeup.job_id, pause, now=self._clock.now_ms()):
            logger.info("job parked: its kind is paused", extra={"job_id": wakeup.job_id})
            return True
        self.cache.forget()  # resumed meanwhile (or the job moved on): claim as usual
        return False


@dataclass
class Woken:
    """What one round of waking did: jobs woken, and whether every shard was read to its end."""

    woken: int = 0
    done: bool = True


def wake_parked(store: PauseStore, pause: KindPause, shards: int, now: int, most: int) -> Woken:
    """Wake up to `most` parked jobs of `pause.kind`, shard by shard (index entries read count
    against `most` too, so a lagging index cannot hold a request)."""
    result = Woken()
    budget = most
    by = pause.resumed_by or "operator"
    for shard in range(shards):
        start: RawItem | None = None
        while True:
            if budget <= 0:
                result.done = False
                return result
            page, start = store.parked_page(
                pause.kind, shard, limit=min(_PAGE, budget), start=start
            )
            budget -= max(1, len(page))
            for job, parked_at in page:
                if store.wake(job, parked_at, by=by, now=now):
                    result.woken += 1
            if start is None:
                break
    return result


def wake_resuming(stores: Stores, clock: Clock, most: int = WAKE_PER_SWEEP) -> int:
    """The sweeper's part: wake the parked jobs of every resuming kind (up to `most` in all),
    and let go of a resume that has none left. Returns how many were woken."""
    store = PauseStore(stores.table)
    woken = 0
    for pause in store.read().values():
        if pause.paused or pause.resumed_at is None:
            continue
        now = clock.now_ms()
        result = wake_parked(store, pause, stores.table.index_shards, now, most - woken)
        woken += result.woken
        if result.done and result.woken == 0 and now - pause.resumed_at >= RESUME_SETTLE_MS:
            store.resumed(pause)
        if woken >= most:
            break
    return woken


def kind_view(kind: str, pause: KindPause | None) -> JsonObject:
    """One kind as `GET /ops/kinds` lists it: `running`, `paused` (who, when, why) or
    `resuming` (resumed; parked jobs still being woken)."""
    return {
        "kind": kind,
        "state": "running" if pause is None else pause.state,
        "paused": None
        if pause is None
        else {"since": iso(pause.since), "by": pause.by, "note": pause.note},
        "resumed": None
        if pause is None or pause.resumed_at is None
        else {"at": iso(pause.resumed_at), "by": pause.resumed_by, "note": pause.resumed_note},
    }


class KindPauses:
    """The operator's pause and resume of a kind (`/ops/kinds`), each audited: the kind's entry
    keeps who and why, every job it parks or wakes says so in its history, and a log line."""

    def __init__(self, stores: Stores, clock: Clock, kinds: list[str] | None) -> None:
        self._stores = stores
        self._store = PauseStore(stores.table)
        self._clock = clock
        self._kinds = kinds

    def _known(self, kind: str, *, or_paused: bool = False) -> None:
        """404 for a kind that is not registered — unless resuming one paused before a deploy
        dropped it (its parked jobs must not be stranded)."""
        if self._kinds is None or kind in self._kinds:
            return
        if or_paused and kind in self._store.read():
            return
        raise JobNotFoundError(f"no kind {kind[:100]!r} is registered")

    def list(self) -> JsonObject:
        pauses = self._store.read()
        names = sorted(set(self._kinds or []) | set(pauses))
        return {"kinds": [kind_view(name, pauses.get(name)) for name in names]}

    def pause(self, kind: str, by: str, note: str) -> JsonObject:
        """PA1: pausing a paused kind is a 200 that changes nothing (`changed: false`)."""
        self._known(kind)
        try:
            pause, changed = self._store.pause(kind, by=by, note=note, now=self._clock.now_ms())
        except ConditionFailed as raced:
            raise ConflictError(f"kind {kind} changed meanwhile: ask again", code="busy") from raced
        logger.info("operator pause", extra={"kind": kind, "operator": by, "note": note})
        return {**kind_view(kind, pause), "changed": changed}

    def resume(self, kind: str, by: str, note: str) -> JsonObject:
        """Resume and wake up to WAKE_PER_CALL parked jobs now (`more`: the sweeper wakes the
        rest). Resuming a kind that is not paused is a 200 that changes nothing."""
        self._known(kind, or_paused=True)
        now = self._clock.now_ms()
        try:
            pause = self._store.resume(kind, by=by, note=note, now=now)
        except ConditionFailed as raced:
            raise ConflictError(f"kind {kind} changed meanwhile: ask again", code="busy") from raced
        if pause is None:
            current = self._store.read().get(kind)
            return {**kind_view(kind, current), "changed": False, "woken": 0, "more": False}
        logger.info("operator resume", extra={"kind": kind, "operator": by, "note": note})
        woken = wake_parked(self._store, pause, self._stores.table.index_shards, now, WAKE_PER_CALL)
        return {
            **kind_view(kind, pause),
            "changed": True,
            "woken": woken.woken,
            "more": not woken.done,
        }


__all__ = [
    "PAUSE_CACHE_MS",
    "KindPauses",
    "WAKE_PER_CALL",
    "Parking",
    "PauseCache",
    "Woken",
    "wake_parked",
    "wake_resuming",
]
