"""What a job waits for between two steps (DESIGN §19, decisions WF1–WF9): its children, a
signal (or the callback that stands for it), or a time. A waiting job is `queued` with its wait
recorded (`wait` on the item) and its due time set to when the wait must be looked at again —
the time itself, a signal's deadline, or the next check of its children — so the delayed-job
machinery (the due index, the sweeper's due pass, the claim's `next_attempt_at` guard) carries
it, and a wake-up that arrives early is harmless: the claim looks at the wait and parks the job
again unless it is over."""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict

from leasehold.domain.errors import ValidationError
from leasehold.domain.policies import MAX_DELAY_SECONDS

MAX_CHILDREN = 10_000
"""At most this many children a parent (DESIGN §19); more is the step's FatalError."""
MAX_FANIN_SHARDS = 16
FANIN_SHARE = 640
"""A fan-in counter item takes at most this many of a set's child ends (decision WF4)."""
CHILD_CHECK_FIRST_MS = 60_000
CHILD_CHECK_MAX_MS = 3_600_000
"""A parent waiting for its children is looked at by the sweeper after a minute, then after
twice as long each time, up to an hour: the backstop for a lost wake-up (WF5)."""
MAX_SIGNAL_SECONDS = MAX_DELAY_SECONDS
_SIGNAL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class WaitRecord(TypedDict, total=False):
    """The `wait` a queued job holds (stored as it is). `type` says which fields it has."""

    type: Literal["time", "signal", "children", "approval"]
    step: int
    """The step that asked for it: the job resumes at `step + 1` (an approval: the step that
    needs it, which runs once it is approved)."""
    at: int
    """time: when the next step may start."""
    name: str
    """signal, approval: the signal's name (an approval's is reserved, `approval_signal`)."""
    until: int
    """signal: when the wait times out."""
    total: int
    """children: how many the step started."""
    shards: int
    """children: how many fan-in counter items their ends are counted on."""
    tolerate: int
    """children: how many may end other than `succeeded` before the parent fails."""
    every: int
    """children: the backstop check's current interval (ms)."""
    step_name: str
    """approval: the name of the step that needs it (the view's `approval`)."""
    requested_at: int
    """approval: when the job paused for it."""


class ParentLink(TypedDict):
    """A child's `parent` (its view shows `job_id` and `step`)."""

    job_id: str
    step: int
    index: int
    shards: int
    total: int
    """How many children the set has: a child's end wakes the parent when it is the last."""
    tolerate: int


def approval_signal(step: int, epoch: int) -> str:
    """The signal an approval decision is delivered as (decision WF50): reserved — `@` is
    outside a user's signal names, so no owner's signal or wait can use it — and named by the
    pause (the step, the epoch that paused), so a replayed job's new pause is never satisfied
    by an earlier decision."""
    return f"@approval.{step}.{epoch}"


def approval_wait(step: int, step_name: str, requested_at: int, epoch: int) -> WaitRecord:
    """What a job paused before step `step` waits for: that step's approval."""
    return {
        "type": "approval",
        "step": step,
        "name": approval_signal(step, epoch),
        "step_name": step_name,
        "requested_at": requested_at,
    }


def check_signal_name(name: Any) -> str:
    """`name` if it can name a signal; ValidationError otherwise."""
    if not isinstance(name, str) or not _SIGNAL_NAME.fullmatch(name):
        raise ValidationError("a signal's name is 1-64 letters, digits, '_', '.' or '-'")
    return name


def fanin_shards(total: int) -> int:
    """How many counter items a set of `total` children's ends are spread over (WF4): one per
    FANIN_SHARE children, at most MAX_FANIN_SHARDS."""
    return max(1, min(MAX_FANIN_SHARDS, -(-total // FANIN_SHARE)))


def fanin_shard(child_id: str, shards: int) -> int:
    """The counter item a child's end is counted on: stable, from its id (never `hash()`)."""
    return zlib.crc32(child_id.encode()) % shards


def expected_per_shard(parent_id: str, step: int, total: int, shards: int) -> list[int]:
    """How many of a set's children each counter item counts (so a child whose own item is not
    complete knows, from one read, that it is not the last)."""
    counts = [0] * shards
    for index in range(total):
        counts[fanin_shard(child_id(parent_id, step, index), shards)] += 1
    return counts


def child_id(parent_id: str, step: int, index: int) -> str:
    """A child's id, derived from its parent's, the step and its index (DESIGN §19): a step
    re-run after a crash derives the same ids, so it cannot start a second set. It has the form
    every job id the API issues has (`j_` and 22 hex digits, 88 bits of SHA-256): the lineage
    is on the child (`parent`), not in its id."""
    digest = hashlib.sha256(f"child|{parent_id}|{step}|{index}".encode()).hexdigest()
    return f"j_{digest[:22]}"


def waiting_view(wait: WaitRecord, *, children_done: int | None = None) -> dict[str, Any]:
    """The job view's `waiting_for` for a wait (DESIGN §19)."""
    kind = wait.get("type")
    if kind == "time":
        return {"time": wait.get("at")}
    if kind == "signal":
        return {"signal": wait.get("name"), "until": wait.get("until")}
    done: dict[str, Any] = {"total": wait.get("total", 0)}
    if children_done is not None:
        done["done"] = children_done
    return {"children": done}


@dataclass(frozen=True)
class ChildView:
    """One child as `StepContext.children()` shows it."""

    job_id: str
    state: str
    """Its state now (`queued` for one not started yet)."""
    result: Any = None
    error: Mapping[str, str] | None = None


@dataclass(frozen=True)
class SignalWait:
    """What `StepContext.wait_for_signal` returns: the wait, and the callback token a third
    party may use instead of the owner's signal (`POST /callbacks/{token}`, no identity)."""

    name: str
    until_ms: int
    token: str
    """Unguessable (192 random bits, URL-safe), stored only hashed, single-use, and valid until
    the wait times out."""


def at_ms(when: datetime) -> int:
    """An aware datetime as epoch milliseconds (`continue_at`)."""
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise ValueError("continue_at takes a timezone-aware datetime")
    return int(when.timestamp() * 1000)


@dataclass
class StepRequests:
    """What the running step asked for, to happen with its checkpoint (the worker reads it
    once the step returns): children to start, and what the next step waits for."""

    children: list[Any] = field(default_factory=list)
    """The children, each a `Job` as the accept path made it (not yet written)."""
    tolerate: int = 0
    groups: int = 0
    wait: WaitRecord | None = None
    tokens: list[str] = field(default_factory=list)
    """Callback tokens handed out by this step (their hashes are already stored)."""

    def asks_for(self, what: str) -> None:
        """A step waits for one thing: children, a signal, or a time."""
        current = self.wait.get("type") if self.wait else ("children" if self.children else None)
        if current is not None and current != what:
            raise ValueError(
                f"this step already waits for {current}; a step waits for one thing "
                "(children, a signal, or a time)"
            )


__all__ = [
    "approval_signal",
    "approval_wait",
    "ChildView",
    "SignalWait",
    "at_ms",
    "CHILD_CHECK_FIRST_MS",
    "CHILD_CHECK_MAX_MS",
    "MAX_CHILDREN",
    "ParentLink",
    "StepRequests",
    "WaitRecord",
    "check_signal_name",
    "child_id",
    "expected_per_shard",
    "fanin_shard",
    "fanin_shards",
    "waiting_view",
]
