"""moto, made into the world a testbed's jobs run in: AWS as moto's in-process mock, with fake
credentials, where time is the testbed's manual clock.

While a `MotoWorld` is open (a process-wide state: open one testbed at a time):
- `moto.mock_aws` is started (nested inside a caller's own mock, if any);
- fake credentials and a region are set in the environment, and `AWS_ENDPOINT_URL` /
  `AWS_PROFILE` are removed (a user's own boto3 clients reach moto too);
- moto's SQS reads the manual clock: delays, visibility timeouts, receive counts and the redrive
  to the dead-letter queue behave as SQS's do, in test time (moto's own are real time);
- a request answered by an injected fault (leasehold.store.faults) is left unapplied by moto,
  as the service leaves it (moto's mock would otherwise apply it too);
- botocore's standard retries keep their rules (what is retried, how often) but not their
  real-time sleeps.
Everything is restored when it closes."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Sequence
from typing import Any, Self
from unittest import mock

from leasehold.domain.clock import ManualClock
from leasehold.store.faults import INJECTED_MARK, FaultPlan, install_faults

REGION = "us-east-1"
"""The region every testbed client uses."""

FAKE_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
"""What the environment says while a testbed is open (never real credentials)."""

REMOVED_ENVIRONMENT = ("AWS_ENDPOINT_URL", "AWS_PROFILE")
"""Removed while a testbed is open: nothing may point a client away from moto."""


class OpenedByWith:
    """What `with` does for the testing package's worlds (`MotoWorld`, `LeaseholdTestbed`):
    opens one on entry and closes it on exit; each says what opening and closing are."""

    def open(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MotoWorld(OpenedByWith):
    """The patches above as one context manager over a manual clock."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._stack: contextlib.ExitStack | None = None

    def open(self) -> None:
        """Start moto and apply the patches (idempotent)."""
        if self._stack is not None:
            return
        import moto.sqs.models as sqs_models
        from botocore.retries.standard import ExponentialBackoff
        from moto import mock_aws
        from moto.core.botocore_stubber import BotocoreStubber

        stack = contextlib.ExitStack()
        try:
            stack.enter_context(mock.patch.dict(os.environ, FAKE_ENVIRONMENT))
            for name in REMOVED_ENVIRONMENT:
                os.environ.pop(name, None)
            clock = self._clock
            stack.enter_context(
                mock.patch.object(sqs_models, "unix_time", lambda dt=None: clock.now_ms() / 1000.0)
            )
            stack.enter_context(
                mock.patch.object(sqs_models, "unix_time_millis", lambda dt=None: clock.now_ms())
            )
            stack.enter_context(
                mock.patch.object(
                    BotocoreStubber,
                    "process_request",
                    _unless_injected(BotocoreStubber.process_request),
                )
            )
            stack.enter_context(
                mock.patch.object(ExponentialBackoff, "delay_amount", lambda self, context: 0)
            )
            stack.enter_context(mock_aws())
        except BaseException:
            stack.close()
            raise
        self._stack = stack

    def close(self) -> None:
        """Stop moto (its data goes with it) and undo every patch."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()


class InjectedFaults:
    """The fault injectors of the functions' clients (`leasehold.store.faults`, as
    `LEASEHOLD_FAULTS` installs them), off until a test gives them a plan; client n draws from
    `random.Random(seed + n)`."""

    def __init__(self, clients: Sequence[Any], seed: int) -> None:
        self._injectors = [
            install_faults(client, FaultPlan(()), random.Random(seed + n))
            for n, client in enumerate(clients)
        ]

    def use(self, spec: str) -> None:
        """Inject by `spec` from now on (`""`: no more faults); FaultSpecError if unreadable."""
        plan = FaultPlan.parse(spec)
        for injector in self._injectors:
            injector.use(plan)

    def counts(self) -> dict[str, int]:
        """How many faults were injected, by `Operation:ErrorCode`, over every client."""
        counts: dict[str, int] = {}
        for injector in self._injectors:
            for key, value in injector.injected.items():
                counts[key] = counts.get(key, 0) + value
        return counts


def hidden_messages(queue_url: str) -> list[tuple[int, str]]:
    """The messages of a moto queue that are not visible now — delayed, or received and not
    deleted — as (the testbed-clock millisecond when SQS shows them again, body). moto keeps
    this to itself; an unreadable queue gives []."""
    from moto.sqs.models import sqs_backends

    name = queue_url.rstrip("/").rsplit("/", 1)[-1]
    found: list[tuple[int, str]] = []
    for account in list(sqs_backends):
        queue = sqs_backends[account][REGION].queues.get(name)
        for message in list(getattr(queue, "_messages", None) or []):
            if message.delayed or not message.visible:
                # visible once the clock is past visible_at, and no longer delayed at
                # delayed_until
                at = max(int(message.delayed_until), int(message.visible_at) + 1)
                found.append((at, str(message.body)))
    return found


def _unless_injected(original: Any) -> Any:
    """moto's request handler, skipping a request an injected fault has already answered."""

    def process_request(self: Any, request: Any) -> Any:
        if (getattr(request, "context", None) or {}).get(INJECTED_MARK):
            return None
        return original(self, request)

    return process_request


__all__ = [
    "FAKE_ENVIRONMENT",
    "REGION",
    "REMOVED_ENVIRONMENT",
    "InjectedFaults",
    "MotoWorld",
    "hidden_messages",
]
