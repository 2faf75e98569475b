"""Claiming, the first of the worker's three rooms (River's producer): from a wake-up to a job
held under a fresh lease — or to what the message becomes when it cannot be claimed now.

The slot and rate decisions live here (decisions C5, F2, F3): which slots a claim takes, in what
order, what is given back when a later part fails, and whether a rate wait is held in the
invocation or handed back to the queue. The store (store/leases.py, store/slots.py,
store/rates.py) only makes the conditional writes each decision asks for."""

from __future__ import annotations

import contextlib
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    ClaimRejectedError,
    RateLimitedError,
    SlotsFullError,
    StaleEpochError,
    StoreUnavailableError,
)
from leasehold.domain.ids import key_of
from leasehold.domain.job import Job, Owner
from leasehold.domain.limits import (
    MAX_LIMIT,
    PAYLOAD_PREFIX,
    Limit,
    Rate,
    RateKey,
    SlotKey,
    rate_keys,
    slot_keys,
)
from leasehold.domain.policies import LeasePolicy, RetryPolicy
from leasehold.domain.records import WaitingFor
from leasehold.domain.states import JobState
from leasehold.domain.types import JsonObject
from leasehold.service.kinds import Disposition, JobKind, RemainingMs, WakeupResult
from leasehold.service.outcomes import Outcomes
from leasehold.service.pausing import Parking
from leasehold.service.telemetry import Telemetry
from leasehold.store import Stores
from leasehold.store.blobs import is_ref
from leasehold.store.leases import ClaimRejection, LeaseStore
from leasehold.store.queue import Wakeup, WakeupQueue
from leasehold.store.slots import (
    ClaimStores,
    SlotStore,
    holds_declared_slot,
    new_token,
    slot_item_key,
)

logger = Logger(service="leasehold", child=True)


@dataclass(frozen=True)
class WorkerSettings:
    worker_id: str
    lease: LeasePolicy
    retry: RetryPolicy
    slot_wait_ms: int
    heartbeat_every_ms: int
    resend_delay_s: tuple[int, int] = (2, 5)
    """A wake-up the store could not serve goes back to SQS this many seconds out (jittered)."""
    rate_hold_ms: int = 0
    """A wake-up over its kind's rate whose next start is due within this many milliseconds
    (in all, over its tries) is held: the invocation sleeps until the start is due and claims
    again, instead of a new message at least 1 s out (SQS's least delay), which kept a rate of
    2 a second near 1 (decision F3). 0 holds nothing. The worker function holds up to 1 s."""


@dataclass(frozen=True)
class Flow:
    """The slots and rates one job's claim takes (decisions F2, F3). `keys` None: the per-user
    default slot (if the deployment has one); `[]`: no slot at all."""

    keys: list[SlotKey] | None = None
    rates: list[RateKey] | None = None


@dataclass(frozen=True)
class Claimed:
    """The wake-up's job, now held by this worker under a fresh lease."""

    job: Job


@dataclass(frozen=True)
class WorkerParts:
    """What the worker's rooms are built over: `WorkerService` makes it once and hands it to
    the room that claims (its random numbers jitter the re-sent wake-ups; `sleep` passes a
    held rate wait)."""

    stores: Stores
    queue: WakeupQueue
    kinds: dict[str, JobKind]
    clock: Clock
    settings: WorkerSettings
    telemetry: Telemetry
    rng: random.Random
    sleep: Callable[[float], None]


Write = Callable[..., Job]
"""The claim's conditional write (`LeaseStore.claim`) for one job, worker, time and lease,
given the slot entries to record or adopt."""


class Claimer:
    """One worker's claims: the slot and rate decisions around the one conditional write that
    claims a job for `worker_id`, under a lease of `lease_ms`."""

    def __init__(
        self, leases: LeaseStore, claims: ClaimStores, *, worker_id: str, lease_ms: int
    ) -> None:
        self._leases = leases
        self._claims = claims
        self._worker_id = worker_id
        self._lease_ms = lease_ms

    def claim(self, job_id: str, owner: Owner, now: int, flow: Flow | None = None) -> Job:
        """Make this worker the only valid holder: epoch + 1, attempts + 1, a new lease — one
        conditional write (docs/architecture.md rule 2). With a per-user limit, a slot is taken
        first (its own
        single-item write, decision C5) and given back if the claim fails. Raises
        ClaimRejectedError with the reason read from the failed item, or SlotsFullError.

        `flow.keys` are the job's kind's declared limits (decision F2), taken instead of the
        per-user slot; `[]` (a kind that declares none) takes no slot at all. `flow.rates` (F3):
        a start is taken from each once the slots are held (a slot wait spends no start), and
        RateLimitedError — the slots given back — when one has none due yet. No `flow`: the
        per-user slot and no rate."""
        keys, rates = (flow.keys, flow.rates or []) if flow is not None else (None, [])
        write = partial(
            self._leases.claim,
            job_id,
            owner,
            worker_id=self._worker_id,
            now=now,
            lease_ms=self._lease_ms,
        )
        if keys is not None:
            return self._claim_keyed(write, job_id, now, keys, rates)
        slots = self._claims.per_user
        if slots is None:
            self._take_rates(rates, now)
            return write()
        for _ in range(2):
            token = new_token(now)
            take = slots.take(owner, job_id, token)
            if take.full_item is not None and slots.repair(owner, take.full_item, now):
                take = slots.take(owner, job_id, token)
            if not take.took and take.held_token is None:
                raise SlotsFullError(
                    f"per-user limit of {slots.limit} running jobs reached", f"user:{owner.user_id}"
                )
            try:
                self._take_rates(rates, now)
            except RateLimitedError:
                if take.took:
                    slots.release(owner, job_id, token)
                raise
            try:
                return write(took_token=token if take.took else None, held_token=take.held_token)
            except ClaimRejectedError as rejected:
                if take.took:
                    slots.release(owner, job_id, token)
                    raise
                if not _left_running(rejected) or take.held_token is None:
                    raise
                # The job holds no slot any more (it left `running`; its release was lost or
                # is on its way): that entry is nobody's — free it, and take a slot afresh.
                slots.release(owner, job_id, take.held_token)
        raise ClaimRejectedError(ClaimRejection.NOT_DUE)

    def _claim_keyed(
        self,
        write: Callable[..., Job],
        job_id: str,
        now: int,
        keys: list[SlotKey],
        rates: list[RateKey],
    ) -> Job:
        """Take one entry of every key (each on one shard, single conditional writes, as the
        per-user slot), then claim recording them on the job (`slots`: item → token). A key
        with no free entry gives back what was taken and raises SlotsFullError naming it.

        An entry the job already holds on an item (a lease that expired and is claimed again)
        is adopted, conditional on the job still recording it; an entry left by a claim that is
        gone is freed and the claim tried once more."""
        store = self._claims.declared
        for _ in range(2):
            token = new_token(now)
            fresh: list[str] = []
            held: dict[str, str] = {}
            try:
                for key in keys:
                    name, used = _take_key(store, key, job_id, token, now)
                    held[name] = used
                    if used == token:
                        fresh.append(name)
                self._take_rates(rates, now)
            except (SlotsFullError, RateLimitedError):
                for name in fresh:
                    store.release_at(slot_item_key(name), job_id, token)
                raise
            adopted = {name: used for name, used in held.items() if used != token}
            try:
                return write(slots=held, adopt=adopted)
            except StoreUnavailableError:
                # The claim may or may not have been applied: an entry given back here that
                # the job does hold would let one more job start, so it is left for the
                # repair (which frees it only once no running job holds it).
                raise
            except ClaimRejectedError as rejected:
                for name in fresh:
                    store.release_at(slot_item_key(name), job_id, token)
                if not adopted or not _left_running(rejected):
                    raise
                # The job holds none of them any more: those entries are nobody's.
                for name, used in adopted.items():
                    store.release_at(slot_item_key(name), job_id, used)
        raise ClaimRejectedError(ClaimRejection.NOT_DUE)

    def _take_rates(self, rates: list[RateKey], now: int) -> None:
        """A start from each rate (one conditional write each), or RateLimitedError naming the
        first with none due yet. A start taken from an earlier rate of the list is spent."""
        for rate in rates:
            due = self._claims.rates.take(rate.name, rate.interval_ms, now)
            if due is not None:
                raise RateLimitedError(
                    f"rate {rate.label}: the next start is due in {due - now} ms", rate.label, due
                )


def _left_running(rejected: ClaimRejectedError) -> bool:
    """Whether the refused claim's job is still there and no longer `running` (so an entry it
    recorded is nobody's)."""
    old = rejected.job if isinstance(rejected.job, Job) else None
    return old is not None and old.state is not JobState.RUNNING


def _take_key(store: SlotStore, key: SlotKey, job_id: str, token: str, now: int) -> tuple[str, str]:
    """One entry of `key`: (item name, the token it holds — `token` when taken now, an earlier
    claim's when the job already held one there). Tries the job's own shard, then the next
    ones; a full item is repaired once. SlotsFullError when none had room."""
    for shard in key.shard_order():
        name = key.item_name(shard)
        item_key = slot_item_key(name)
        capacity = key.limit.capacity(shard)
        take = store.take_at(item_key, capacity, job_id, token)
        if take.full_item is not None and store.repair_at(
            item_key, take.full_item, now, holds_declared_slot
        ):
            take = store.take_at(item_key, capacity, job_id, token)
        if take.took:
            return name, token
        if take.held_token is not None:
            # Our own take whose answer was lost (the SDK's retry found it), or an earlier
            # claim's entry to adopt.
            return name, take.held_token
    raise SlotsFullError(
        f"concurrency limit {key.label} ({key.limit.max} running) reached", key.label
    )


class Claiming:
    """The worker's claim of one wake-up: the flow its job takes, the claim, a rate wait held
    in the invocation (F3), and what the message becomes when the claim is refused."""

    def __init__(self, parts: WorkerParts, outcomes: Outcomes) -> None:
        self._parts = parts
        self._settings = parts.settings
        self._telemetry = parts.telemetry
        self._claimer = Claimer(
            parts.stores.leases,
            parts.stores.claims,
            worker_id=parts.settings.worker_id,
            lease_ms=parts.settings.lease.lease_ms,
        )
        self._outcomes = outcomes
        self.parking = Parking(parts.stores, parts.clock)
        """Paused kinds (PA2): read once per few seconds, not per claim."""
        self._limited = any(
            kind.concurrency is not None or kind.rate for kind in parts.kinds.values()
        )
        """Whether some kind declares its own concurrency limits: then a wake-up's job is read
        before its claim, to know which slots it takes (decision F2)."""

    def claim(
        self, wakeup: Wakeup, receipt_handle: str | None, remaining_ms: RemainingMs | None
    ) -> Claimed | WakeupResult:
        """The wake-up's job, claimed; or what its message becomes (handed off, kept, let go)."""
        lease_ms = self._settings.lease.lease_ms
        margin = self._settings.lease.safety_margin_ms
        if remaining_ms is not None and remaining_ms() < lease_ms + margin:
            return self.hand_off(wakeup, "no_time", delay_s=0)
        try:
            if self.parking.park_if_paused(wakeup):
                return WakeupResult(Disposition.ACK, "kind_paused")
        except StoreUnavailableError:
            return WakeupResult(Disposition.KEEP, "store_unavailable")
        now = self._parts.clock.now_ms()
        held_ms = 0  # how long this wake-up has been held for its rate (F3)
        flow: Flow | None = None
        try:
            while True:
                flow = self._flow(wakeup) if flow is None else flow
                try:
                    job = self._claimer.claim(wakeup.job_id, wakeup.owner, now, flow)
                    break
                except RateLimitedError as limited:
                    wait_ms = max(1, limited.due_at - now)
                    fits = remaining_ms is None or (remaining_ms() >= wait_ms + lease_ms + margin)
                    if held_ms + wait_ms > self._settings.rate_hold_ms or not fits:
                        raise
                    # Due sooner than SQS could bring it back: wait here and claim again,
                    # the job saying what it waits for meanwhile (once per wake-up).
                    self._telemetry.count("SlotWaits")  # a wait at claim, here in the worker
                    if not held_ms:
                        self._note_waiting(wakeup, now, {"rate": limited.label})
                    self._parts.sleep(wait_ms / 1000)
                    held_ms += wait_ms
                    now = self._parts.clock.now_ms()
        except SlotsFullError as full:
            # Wait for a free slot without burning an attempt or spinning on this message; say
            # so on the job, or the sweeper would take the wait for a lost wake-up (D5).
            self._telemetry.count("SlotWaits")
            # (if even that fails, the re-sent wake-up still goes out; at worst the sweeper adds
            # a copy)
            self._note_waiting(wakeup, now, {"concurrency": full.label} if full.label else None)
            delay_s = max(1, self._settings.slot_wait_ms // 1000)
            return self.hand_off(wakeup, "slots_full", delay_s=delay_s)
        except RateLimitedError as limited:
            # Over its kind's rate: back when the next start is due (F3), saying so on the job.
            self._telemetry.count("SlotWaits")  # a wait at claim; waiting_for says for what
            self._note_waiting(wakeup, now, {"rate": limited.label})
            due_in_s = min(900, max(1, (limited.due_at - now + 999) // 1000))
            return self.hand_off(wakeup, "rate_limited", delay_s=due_in_s)
        except ClaimRejectedError as rejected:
            return self._on_rejected_claim(wakeup, rejected, receipt_handle, now)
        except StoreUnavailableError as unavailable:
            logger.warning(
                "claim: store unavailable",
                extra={"job_id": wakeup.job_id, "detail": str(unavailable)},
            )
            low, high = self._settings.resend_delay_s
            return self.hand_off(
                wakeup, "store_unavailable", delay_s=self._parts.rng.randint(low, high)
            )
        self._telemetry.count("JobsClaimed")
        return Claimed(job)

    def _note_waiting(self, wakeup: Wakeup, now: int, waiting_for: WaitingFor | None) -> None:
        with contextlib.suppress(StoreUnavailableError):
            self._parts.stores.leases.note_dispatch(wakeup.job_id, now=now, waiting_for=waiting_for)

    def _flow(self, wakeup: Wakeup) -> Flow:
        """The job's flow (`_declared_flow`), plus its set's `max_concurrency` when it is a
        child with one (WF7): a slot of the set's own key, whatever its kind declares."""
        flow = self._declared_flow(wakeup)
        cap = cap_key(wakeup.cap, wakeup.job_id) if wakeup.cap else None
        if cap is None:
            return flow
        return Flow(keys=[*(flow.keys or []), cap], rates=flow.rates)

    def _declared_flow(self, wakeup: Wakeup) -> Flow:
        """The slots and rates the job's claim takes (F2, F3): `keys` None for the per-user
        default (a kind that declares no concurrency, or a job that is gone), else its kind's
        declared limits; `rates` its kind's rates. A job of a kind that declares any (or whose
        wake-up does not name its kind) is read first — one strongly consistent GetItem —
        unless its keys need no payload field; with no such kind registered nothing is read."""
        if not self._limited:
            return Flow()
        if wakeup.kind is not None:
            kind = self._parts.kinds.get(wakeup.kind)
            if kind is None or (kind.concurrency is None and not kind.rate):
                return Flow()  # the message names a kind that declares nothing
            keyed = [limit.key for limit in kind.concurrency or ()] + [r.key for r in kind.rate]
            if not any(key.startswith(PAYLOAD_PREFIX) for key in keyed):
                # user, tenant and kind keys need only what the message says: nothing to read
                return _flow_of(kind, wakeup.kind, wakeup.owner, {}, wakeup.job_id)
        job = self._parts.stores.jobs.get(wakeup.job_id)
        if job is None:
            return Flow()
        # a payload in the data bucket: the keyed fields its accept kept on the item (LD15)
        fields = (job.key_fields or {}) if is_ref(job.payload) else job.payload
        return _flow_of(self._parts.kinds.get(job.kind), job.kind, job.owner, fields, job.job_id)

    def hand_off(self, wakeup: Wakeup, outcome: str, *, delay_s: int) -> WakeupResult:
        """Put the wake-up back on the queue as a new message `delay_s` out and let this one go
        (its receive count does not grow); if even SQS refuses, keep this one."""
        try:
            self._parts.queue.send(replace(wakeup, delay_seconds=delay_s))
        except StoreUnavailableError:
            return WakeupResult(Disposition.KEEP, outcome)
        logger.info("wake-up handed off", extra={"job_id": wakeup.job_id, "why": outcome})
        return WakeupResult(Disposition.ACK, outcome)

    def _on_rejected_claim(
        self, wakeup: Wakeup, rejected: ClaimRejectedError, receipt_handle: str | None, now: int
    ) -> WakeupResult:
        job = rejected.job if isinstance(rejected.job, Job) else None
        reason = rejected.reason
        extra: dict[str, Any] = {"job_id": wakeup.job_id, "reason": reason}
        if job is not None:
            extra |= {"epoch": job.epoch, "attempt": job.attempts, "state": job.state.value}
        self._telemetry.count("ClaimConflicts")
        logger.info("claim rejected", extra=extra)
        if job is None or reason in {
            ClaimRejection.TERMINAL,
            ClaimRejection.PAUSED,
            ClaimRejection.UNCERTAIN,
            ClaimRejection.LEASED,
        }:
            return WakeupResult(Disposition.ACK, reason)
        if reason == ClaimRejection.NOT_DUE:
            due_in_s = ((job.next_attempt_at or now) - now + 999) // 1000
            if receipt_handle is not None:
                try:
                    self._parts.queue.delay(
                        receipt_handle, due_in_s, wakeup.priority, wakeup.job_id
                    )
                    return WakeupResult(Disposition.KEEP, reason)
                except StoreUnavailableError:
                    # Not hidden: SQS down, or the message is not on its priority's queue or
                    # its job's shard (a redrive by hand to the work queue, or QueueShards
                    # changed since it was sent; its receipt handle is refused there):
                    # a new one on the job's own queue, as without a receipt handle.
                    pass
            return self.hand_off(wakeup, reason, delay_s=min(900, due_in_s))
        try:
            self._outcomes.settle_abandoned(job, reason, now, by=self._settings.worker_id)
        except StaleEpochError:
            self._telemetry.count("StaleWritesRejected")
        except StoreUnavailableError:
            return WakeupResult(Disposition.KEEP, "store_unavailable")
        return WakeupResult(Disposition.ACK, reason)


def cap_key(cap: str, job_id: str) -> SlotKey | None:
    """A child's share of its set's `max_concurrency` (`<set key>|<max>`, as its wake-ups carry
    it) as a slot key: at most `max` of the set running at once, counted like a kind's limit
    (F2), on up to 16 slot items for a large set. None for a value that is not one."""
    base, _, text = cap.rpartition("|")
    if not base or not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        return None
    most = int(text)
    shards = 1 if most < 64 else min(16, most // 32)
    return SlotKey(
        label=f"children:{base.split('#')[1] if base.count('#') >= 2 else base}",
        base=key_of("SLOTS", "C", base),
        limit=Limit("kind", most, shards),
        start=zlib.crc32(job_id.encode()) % shards,
    )


def _flow_of(
    kind: JobKind | None, name: str, owner: Owner, payload: JsonObject, job_id: str
) -> Flow:
    limits: tuple[Limit, ...] | None = kind.concurrency if kind is not None else None
    rates: tuple[Rate, ...] = kind.rate if kind is not None else ()
    return Flow(
        keys=None
        if limits is None
        else slot_keys(limits, name, owner, payload, job_id, strict=False),
        rates=rate_keys(rates, name, owner, payload, strict=False) if rates else None,
    )


__all__ = ["Claimed", "Claimer", "Claiming", "Flow", "WorkerParts", "WorkerSettings"]
