"""An SQS stand-in that lives on the manual clock, for the property test: delays, visibility
timeouts, receive counts and the redrive to a DLQ behave as SQS's do, but in the test's time, so
a run of thousands of steps takes seconds. (moto's SQS delays are real time.) It can fail a
send, as SQS sometimes does."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import count

from leasehold.domain.clock import ManualClock
from leasehold.domain.errors import StoreUnavailableError
from leasehold.store.queue import QueueStats, Wakeup


@dataclass
class Message:
    wakeup: Wakeup
    visible_at: int
    receipt: str = ""
    receives: int = 0


@dataclass
class ClockQueue:
    clock: ManualClock
    visibility_ms: int
    max_receives: int = 5
    send_failure_rate: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(3))
    messages: dict[int, Message] = field(default_factory=dict)
    dead_letters: list[Wakeup] = field(default_factory=list)
    sent: int = 0
    _ids: count = field(default_factory=count)

    def _maybe_fail(self) -> None:
        if self.send_failure_rate and self.rng.random() < self.send_failure_rate:
            raise StoreUnavailableError("injected SQS failure")

    def _put(self, wakeup: Wakeup) -> None:
        self.messages[next(self._ids)] = Message(
            wakeup, self.clock.now_ms() + wakeup.delay_seconds * 1000
        )
        self.sent += 1

    def send_batch(self, wakeups: list[Wakeup]) -> set[str]:
        self._maybe_fail()
        for wakeup in wakeups:
            self._put(wakeup)
        return set()

    def send(self, wakeup: Wakeup) -> None:
        self._maybe_fail()
        self._put(wakeup)

    def url_for(self, priority: str, job_id: str = "") -> str:
        """One queue for every wake-up (WakeupQueue's choice of queue, for the relay)."""
        return "clock-queue"

    def delay(
        self, receipt_handle: str, seconds: int, priority: str = "normal", job_id: str = ""
    ) -> None:
        for message in self.messages.values():
            if message.receipt == receipt_handle:
                message.visible_at = self.clock.now_ms() + seconds * 1000

    def receive(self, limit: int) -> list[tuple[str, Wakeup]]:
        """Up to `limit` visible messages; each becomes invisible for the visibility timeout, and
        one received too often goes to the DLQ instead (maxReceiveCount)."""
        now = self.clock.now_ms()
        out: list[tuple[str, Wakeup]] = []
        for key, message in list(self.messages.items()):
            if len(out) >= limit:
                break
            if message.visible_at > now:
                continue
            if message.receives >= self.max_receives:
                self.dead_letters.append(message.wakeup)
                del self.messages[key]
                continue
            message.receives += 1
            message.receipt = f"{key}/{message.receives}"
            message.visible_at = now + self.visibility_ms
            out.append((message.receipt, message.wakeup))
        return out

    def delete(self, receipt_handle: str) -> None:
        for key, message in list(self.messages.items()):
            if message.receipt == receipt_handle:
                del self.messages[key]

    def redrive(self) -> None:
        for wakeup in self.dead_letters:
            self._put(wakeup)
        self.dead_letters.clear()

    def stats(self) -> QueueStats:
        now = self.clock.now_ms()
        visible = sum(1 for m in self.messages.values() if m.visible_at <= now)
        return QueueStats(visible, len(self.messages) - visible, 0, len(self.dead_letters))
