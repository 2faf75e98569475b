"""Workflows (DESIGN §19, decisions WF1–WF9): what a step asks for between steps — children,
a signal or a callback, a time — and how the job waits for it without a lease, wakes when it is
over, and goes on at its next step.

- **In the step** (`StepContext.spawn/map/wait_for_signal/continue_after/continue_at`): the
  request is recorded on the attempt; children are validated through the one accept path
  (`Intake.prepare`) at once, so a bad child is the step's error, not a later surprise.
- **After the step** (`park`): the children are written under the parent's fence, then the
  checkpoint and the wait in one fenced write; then one look at whether the wait is over
  already (a signal that came early, children that ended before the park), waking the job if so.
- **At the claim** (`evaluate`): a woken job's wait is looked at; over → the next step runs; not
  over → parked again (no attempt spent); too many children failed → `failed` /
  `children_failed`, its unfinished children cancelled.
- **A child's end** (`child_ended`): counted with the end itself (store/waits_ends.py); the end
  that completes the set (or fails it) wakes the parent.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock
from leasehold.domain.errors import (
    ConflictError,
    FatalStepError,
    JobNotFoundError,
    SignalTimeoutError,
    ValidationError,
)
from leasehold.domain.job import Budget, Checkpoint, Job, Owner
from leasehold.domain.options import JobOptions, Submission
from leasehold.domain.policies import DEFAULT_MAX_ATTEMPTS
from leasehold.domain.states import TERMINAL_STATES, JobState
from leasehold.domain.waits import (
    CHILD_CHECK_FIRST_MS,
    CHILD_CHECK_MAX_MS,
    MAX_CHILDREN,
    MAX_SIGNAL_SECONDS,
    ChildView,
    ParentLink,
    SignalWait,
    WaitRecord,
    check_signal_name,
    child_id,
    fanin_shards,
)
from leasehold.service.fanin import child_ended
from leasehold.service.jobs import Intake
from leasehold.service.kinds import Attempt, Disposition, JobKind, WakeupResult
from leasehold.service.telemetry import Telemetry
from leasehold.service.tracing import active_traceparent
from leasehold.store import Stores
from leasehold.store.blobs import signal_blob
from leasehold.store.history import entry
from leasehold.store.queue import Wakeup
from leasehold.store.waits import WaitStore

logger = Logger(service="leasehold", child=True)

CASCADE_PAGE = 100
_SETTLED = TERMINAL_STATES | {JobState.UNKNOWN}
"""A child the cascade leaves as it is: ended, or `unknown` (an operator settles it)."""
CASCADE_PAGES_PER_MESSAGE = 10


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _no_id() -> str:
    raise AssertionError("a child's id derives from its parent's")


class Workflows:
    def __init__(
        self,
        stores: Stores,
        clock: Clock,
        kinds: Mapping[str, JobKind],
        telemetry: Telemetry,
        *,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self._stores = stores
        self._waits = WaitStore(stores.table)
        self._clock = clock
        self._telemetry = telemetry
        self._intake = Intake(
            kinds, clock, _no_id, telemetry, default_max_attempts=default_max_attempts
        )

    @property
    def waits(self) -> WaitStore:
        return self._waits

    # ------------------------------------------------------------------ in the step

    def request_children(
        self,
        attempt: Attempt,
        kind: str,
        payloads: list[Any],
        options: JobOptions | None,
        *,
        max_concurrency: int | None,
        tolerate_failures: int,
    ) -> list[str]:
        """Children asked for by the running step: validated now, written with its checkpoint."""
        requests = attempt.requests
        requests.asks_for("children")
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or not 1 <= max_concurrency <= 1000
        ):
            raise ValueError("max_concurrency must be an integer from 1 to 1000")
        if isinstance(tolerate_failures, bool) or not isinstance(tolerate_failures, int):
            raise ValueError("tolerate_failures must be an integer ≥ 0")
        if tolerate_failures < 0:
            raise ValueError("tolerate_failures must be an integer ≥ 0")
        options = options or JobOptions()
        if options.traceparent is None:
            # the parent's trace goes on in its children (the step's span when one records),
            # and children sharing one trace share one wake-up item (WF43)
            options = replace(options, traceparent=active_traceparent() or attempt.job.traceparent)
        if options.idempotency_key is not None:
            raise ValueError("a child's id derives from its parent's: give no idempotency_key")
        start = len(requests.children)
        if start + len(payloads) > MAX_CHILDREN:
            raise FatalStepError(
                f"a parent may start at most {MAX_CHILDREN} children; this step asked for "
                f"{start + len(payloads)}",
                error_code="too_many_children",
            )
        parent = attempt.job
        now = self._clock.now_ms()
        group = requests.groups
        requests.groups += 1
        requests.tolerate += tolerate_failures
        ids: list[str] = []
        for offset, payload in enumerate(payloads):
            if not isinstance(payload, dict):
                raise ValidationError(f"child {start + offset}'s payload must be a JSON object")
            cid = child_id(parent.job_id, attempt.step_index, start + offset)
            try:
                prepared = self._intake.prepare(
                    parent.owner,
                    Submission(kind, payload, options),
                    submittable_only=False,
                    job_id=cid,
                    tenant_limits=False,
                    now=now,
                    blobs=self._stores.table.blobs,
                )
            except ValidationError as bad:
                raise FatalStepError(
                    f"child {start + offset} ({kind}) was refused: {bad}",
                    error_code="child_invalid",
                ) from None
            child = prepared.job
            _bound_by_parent(child, parent)
            if max_concurrency is not None:
                child.cap = {
                    "base": f"CHILDREN#{parent.job_id}#{attempt.step_index}#{group}",
                    "max": max_concurrency,
                }
            requests.children.append(child)
            ids.append(cid)
        return ids

    def request_signal(self, attempt: Attempt, name: str, timeout_seconds: int) -> SignalWait:
        """The next step waits for signal `name` (or its callback), at most `timeout_seconds`.
        The token's hash is stored at once, under the fence, so a third party may answer even
        before the step returns."""
        check_signal_name(name)
        if (
            isinstance(timeout_seconds, bool)
            or not isinstance(timeout_seconds, int)
            or not 1 <= timeout_seconds <= MAX_SIGNAL_SECONDS
        ):
            raise ValueError(f"timeout_seconds must be an integer from 1 to {MAX_SIGNAL_SECONDS}")
        requests = attempt.requests
        requests.asks_for("signal")
        if requests.wait is not None and requests.wait.get("name") != name:
            raise ValueError("a step waits for one signal")
        now = self._clock.now_ms()
        until = now + timeout_seconds * 1000
        token = secrets.token_urlsafe(24)
        self._waits.put_callback(attempt.job, token_hash(token), name, until, now=now)
        requests.wait = {"type": "signal", "step": attempt.step_index, "name": name, "until": until}
        requests.tokens.append(token)
        return SignalWait(name=name, until_ms=until, token=token)

    def request_time(self, attempt: Attempt, at_ms: int) -> None:
        """The next step starts no earlier than `at_ms` (at most 365 days ahead)."""
        now = self._clock.now_ms()
        if at_ms - now > MAX_SIGNAL_SECONDS * 1000:
            raise ValueError("a job may sleep at most 365 days")
        attempt.requests.asks_for("time")
        attempt.requests.wait = {"type": "time", "step": attempt.step_index, "at": max(now, at_ms)}

    def signal_body(self, job: Job, name: str) -> Any:
        """The body of signal `name`; SignalTimeoutError when its wait ran out first."""
        check_signal_name(name)
        got = self._waits.signal(job.job_id, name)
        if got is None:
            raise ValueError(
                f"no signal {name!r} has come and no wait for it has ended: a step reads a "
                "signal an earlier step waited for (wait_for_signal)"
            )
        if got.timed_out:
            raise SignalTimeoutError(name)
        blobs = self._stores.table.blobs  # a large body is read whole, its hash checked (LD13)
        return got.body if blobs is None else blobs.load(job.job_id, got.body)

    def children_views(
        self, job: Job, step: int | None = None, *, start: int = 0, limit: int = 100
    ) -> tuple[list[ChildView], int | None]:
        """A page of the children of set `step` (default: the last set), from index `start`:
        the views and the next index (None at the end)."""
        sets = {int(s): int(n) for s, n in (job.spawned or [])}
        if not sets:
            return [], None
        chosen = max(sets) if step is None else step
        total = sets.get(chosen, 0)
        stop = min(total, start + limit)
        ids = [child_id(job.job_id, chosen, i) for i in range(start, stop)]
        views = [
            ChildView(i, "queued")
            if child is None
            else ChildView(child.job_id, child.state.value, child.result, child.error)
            for i, child in zip(ids, self._waits.children_states(ids), strict=True)
        ]
        return views, (stop if stop < total else None)

    # ------------------------------------------------------------------ after the step

    def park(
        self, attempt: Attempt, checkpoint: Checkpoint, index: int, step_name: str
    ) -> WakeupResult:
        """The step asked for a wait: children written, then the checkpoint and the wait in one
        fenced write, then one look whether it is over already."""
        requests = attempt.requests
        job = attempt.job
        now = self._clock.now_ms()
        spawned = None
        if requests.children:
            total = len(requests.children)
            shards = fanin_shards(total)
            for number, child in enumerate(requests.children):
                child.parent = ParentLink(
                    job_id=job.job_id,
                    step=index,
                    index=number,
                    shards=shards,
                    total=total,
                    tolerate=requests.tolerate,
                )
            self._waits.write_children(job, requests.children, now=now)
            self._telemetry.count("ChildrenStarted", total)
            wait: WaitRecord = {
                "type": "children",
                "step": index,
                "total": total,
                "shards": shards,
                "tolerate": requests.tolerate,
                "every": CHILD_CHECK_FIRST_MS,
            }
            due = now + CHILD_CHECK_FIRST_MS
            spawned = [*(job.spawned or []), [index, total]]
        else:
            assert requests.wait is not None
            wait = requests.wait
            due = int(wait["at"]) if wait.get("type") == "time" else int(wait["until"])
        what = wait.get("type", "?")
        attempt.job = self._waits.park(
            job,
            checkpoint,
            wait,
            due_at=due,
            now=now,
            history=entry(
                "waiting",
                at=now,
                state=JobState.QUEUED.value,
                attempt=job.attempts,
                epoch=job.epoch,
                reason=f"{what} after step {index} ('{step_name}')",
            ),
            spawned=spawned,
        )
        self._stores.leases.release_slot(job)  # a waiting job holds no slot (C5)
        self._telemetry.count("JobsWaiting")
        logger.info("waiting", extra=attempt.log_keys | {"step": index, "wait": what})
        self._look_once(attempt.job, wait, now)
        return WakeupResult(Disposition.ACK, "waiting")

    def _look_once(self, job: Job, wait: WaitRecord, now: int) -> None:
        """Right after a park: a signal that came before it, children that all ended before
        it, or a cancel that came while the step ran (the claim ends it then, with its
        children: WF52), wake the job now (their own wake found it not parked yet)."""
        step = int(wait.get("step", 0))
        if job.cancel_requested:
            self._waits.wake(job.job_id, step, now)
        elif wait.get("type") == "signal":
            if self._waits.signal(job.job_id, str(wait.get("name"))) is not None:
                self._waits.wake(job.job_id, step, now)
        elif wait.get("type") == "children":
            fan = self._waits.fanin(job.job_id, step, int(wait.get("shards", 1)))
            if fan.ended >= int(wait.get("total", 0)) or fan.failed > int(wait.get("tolerate", 0)):
                self._waits.wake(job.job_id, step, now)

    # ------------------------------------------------------------------ at the claim

    def evaluate(self, attempt: Attempt, stop: Any) -> WakeupResult | None:
        """A claimed job that was waiting: None when its wait is over (the next step runs), or
        what the claim came to — parked again, or stopped (`stop(attempt, error)`: too many
        children failed)."""
        job, wait = attempt.job, attempt.job.wait
        if wait is None:
            return None
        now = self._clock.now_ms()
        kind = wait.get("type")
        if kind == "time":
            if now >= int(wait.get("at", 0)):
                return None
            return self._repark(attempt, wait, int(wait.get("at", now)), now)
        if kind == "approval":
            return self._approved(attempt, wait, now)
        if kind == "signal":
            name = str(wait.get("name"))
            if self._waits.signal(job.job_id, name) is not None:
                return None
            if now >= int(wait.get("until", 0)):
                self._waits.mark_timed_out(job, name, now=now)  # or the signal came just now
                return None
            return self._repark(attempt, wait, int(wait.get("until", now)), now)
        step, total = int(wait.get("step", 0)), int(wait.get("total", 0))
        fan = self._waits.fanin(job.job_id, step, int(wait.get("shards", 1)))
        tolerate = int(wait.get("tolerate", 0))
        if fan.failed > tolerate:
            return stop(
                attempt,
                {
                    "code": "children_failed",
                    "message": f"{fan.failed} of {total} children ended other than succeeded "
                    f"(tolerated: {tolerate}); the unfinished ones are being cancelled",
                },
            )
        if fan.ended >= total:
            return None
        every = min(CHILD_CHECK_MAX_MS, int(wait.get("every", CHILD_CHECK_FIRST_MS)) * 2)
        return self._repark(attempt, {**wait, "every": every}, now + every, now)

    def _approved(self, attempt: Attempt, wait: WaitRecord, now: int) -> WakeupResult | None:
        """An approval's wait (WF50): its signal says `approve` → the step runs, approved on
        the checkpoint (kept by the next write); none yet → paused again. A wait left behind
        the checkpoint (a replay) is over: the step's own check asks anew."""
        step, job = int(wait.get("step", -1)), attempt.job
        if step != job.checkpoint.next_step:
            return None
        got = self._waits.signal(job.job_id, str(wait.get("name")))
        if got is None:
            return self._repark(attempt, wait, None, now)
        if isinstance(got.body, dict) and got.body.get("decision") == "approve":
            job.checkpoint = replace(job.checkpoint, approved_step=step)
            attempt.checkpoint = replace(attempt.checkpoint, approved_step=step)
        return None

    def _repark(
        self, attempt: Attempt, wait: WaitRecord, due: int | None, now: int
    ) -> WakeupResult:
        held = attempt.job
        attempt.job = self._waits.park(
            held, held.checkpoint, wait, due_at=due, now=now, history=None
        )
        self._stores.leases.release_slot(held)
        self._telemetry.count("WaitsChecked")
        return WakeupResult(Disposition.ACK, "still_waiting")

    # ------------------------------------------------------------------ a child's end

    def child_ended(self, job: Job, target: JobState) -> None:
        """After a child's end was written: wake its parent if the set is over."""
        child_ended(self._waits, job, target, self._clock.now_ms(), self._telemetry)

    # ------------------------------------------------------------------ a parent's end

    def cascade(self, wakeup: Wakeup, send: Callable[[Wakeup], None]) -> WakeupResult:
        """A parent ended while its children ran (cancelled, failed, past its deadline): cancel
        those not ended, a page at a time — queued ones at once, running ones asked to stop —
        up to CASCADE_PAGES_PER_MESSAGE pages, then the rest in a new wake-up (WF6)."""
        try:
            step_text, start_text = str(wakeup.cascade).split(":", 1)
            step, index = int(step_text), int(start_text)
        except ValueError:
            logger.error("cascade: bad wake-up", extra={"job_id": wakeup.job_id})
            return WakeupResult(Disposition.ACK, "bad_cascade")
        parent = self._stores.jobs.get(wakeup.job_id)
        total = {int(s): int(n) for s, n in (parent.spawned or [])}.get(step, 0) if parent else 0
        now = self._clock.now_ms()
        cancelled = 0
        for _ in range(CASCADE_PAGES_PER_MESSAGE):
            if index >= total:
                break
            ids = [
                child_id(wakeup.job_id, step, i)
                for i in range(index, min(total, index + CASCADE_PAGE))
            ]
            for cid, child in zip(ids, self._waits.children_states(ids), strict=True):
                if child is None or child.state in _SETTLED:
                    continue
                try:
                    ended = self._stores.controls.cancel(
                        child.owner, cid, now=now, reason="parent_ended", by="leasehold"
                    )
                except (ConflictError, JobNotFoundError):
                    continue  # it ended meanwhile
                cancelled += 1
                if ended.state is JobState.CANCELLED:
                    child_ended(self._waits, ended, JobState.CANCELLED, now)
            index += CASCADE_PAGE
        self._telemetry.count("ChildrenCancelled", cancelled)
        if index < total:
            send(replace(wakeup, cascade=f"{step}:{index}", delay_seconds=0))
        return WakeupResult(Disposition.ACK, "cascade")

    # ------------------------------------------------------------------ the API

    def signal(self, owner: Owner, job_id: str, name: str, body: Any) -> Job:
        """`POST /jobs/{id}/signals/{name}`: the owner's signal, kept once (409 for a second),
        waking the job if it waits for it."""
        check_signal_name(name)
        job = self._stores.jobs.get_owned(owner, job_id)
        return self._deliver(job, name, body)

    def signal_any(self, job_id: str, name: str, body: Any) -> Job:
        """An operator's signal to any tenant's job (`POST /ops/jobs/{id}/signals/{name}`)."""
        check_signal_name(name)
        job = self._stores.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return self._deliver(job, name, body)

    def callback(self, token: str, body: Any) -> Job:
        """`POST /callbacks/{token}`: the wait's callback, as the owner's signal would."""
        if not isinstance(token, str) or not 20 <= len(token) <= 100:
            raise JobNotFoundError("no such callback (unknown, used or expired)")
        now = self._clock.now_ms()
        hashed = token_hash(token)
        job_id, name = self._waits.callback_target(hashed, now=now)
        job = self._stores.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError("no such callback (unknown, used or expired)")
        return self._deliver(job, name, body, hashed)

    def _deliver(self, job: Job, name: str, body: Any, hashed: str | None = None) -> Job:
        now = self._clock.now_ms()
        if job.state in TERMINAL_STATES:
            raise ConflictError(f"job {job.job_id} is {job.state.value}", code="not_waiting")
        blobs = self._stores.table.blobs  # a large body: its blob first, the item names it
        if blobs is not None:
            body = blobs.keep(job.job_id, signal_blob(name), body)
        if not self._waits.put_signal(job, name, body, now=now, token_hash=hashed):
            raise ConflictError(
                f"signal {name!r} of job {job.job_id} has come already (or its wait timed out)",
                code="signal_exists",
            )
        self._telemetry.count("SignalsReceived")
        wait = job.wait or {}
        if wait.get("type") == "signal" and wait.get("name") == name:
            self._waits.wake(job.job_id, int(wait.get("step", 0)), now)
        else:
            # Not parked on it as read: it may park on it any moment — the park looks once
            # after its write, and this second look covers a park between the two.
            fresh = self._stores.jobs.get(job.job_id)
            fresh_wait = (fresh.wait if fresh else None) or {}
            if fresh_wait.get("type") == "signal" and fresh_wait.get("name") == name:
                self._waits.wake(job.job_id, int(fresh_wait.get("step", 0)), now)
        got = self._stores.jobs.get(job.job_id)
        return got or job


def _bound_by_parent(child: Job, parent: Job) -> None:
    """A child's deadline and budget never outlive its parent's (DESIGN §19)."""
    child.deadline_at = min(child.deadline_at, parent.deadline_at)
    budget = parent.budget
    cost = None
    if budget.max_cost is not None:
        left = max(0, budget.max_cost - parent.checkpoint.cost_used)
        own = child.budget.max_cost
        cost = left if own is None else min(own, left)
    steps = None
    if budget.max_steps is not None:
        left = max(0, budget.max_steps - parent.checkpoint.steps_used)
        own = child.budget.max_steps
        steps = left if own is None else min(own, left)
    if cost is not None or steps is not None:
        child.budget = Budget(
            max_cost=cost if cost is not None else child.budget.max_cost,
            max_steps=steps if steps is not None else child.budget.max_steps,
        )


__all__ = ["Workflows", "token_hash"]
