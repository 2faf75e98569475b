"""A lagging global secondary index for one test (leasehold_dev.local.moto.index_lag): index
Queries answer from the table as it stood `lag_ms` ago on the test's clock; base-table reads are
current. Used by the invariant tests (stateful machine, crash matrix, delayed jobs, schedules,
sweeper) and by the readers' own tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from leasehold.domain.clock import Clock
from leasehold_dev.local.moto import index_lag as moto_index_lag

LAG_MS = 500
"""The lag the invariant tests run with: longer than a step of most tests, shorter than a lease."""


@contextmanager
def lagging_index(
    clock: Clock, lag_ms: int = LAG_MS, *, random_up_to: bool = False, seed: int = 0
) -> Iterator[None]:
    """Index reads lag `lag_ms` (or up to it) behind the table on `clock` until the block ends."""
    lag_on(clock, lag_ms, random_up_to=random_up_to, seed=seed)
    try:
        yield
    finally:
        lag_off()


def lag_on(
    clock: Clock, lag_ms: int = LAG_MS, *, random_up_to: bool = False, seed: int = 0
) -> None:
    """Index reads lag from now on (for an object whose life is not one block: a state machine);
    `lag_off()` when it ends."""
    moto_index_lag.install()
    moto_index_lag.configure(lag_ms, clock=clock.now_ms, random_up_to=random_up_to, seed=seed)


def lag_off() -> None:
    moto_index_lag.configure(0)


current_index = moto_index_lag.current_index
"""Index reads in the block see the table as stored: a test's own look, not the code's."""
