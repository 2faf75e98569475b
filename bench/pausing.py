"""What pausing a kind costs in DynamoDB requests (decisions PA2, PA4), counted at the engine's
table door on the testbed (moto, 8 index shards by the template's testbed settings): a run of
20 jobs with nothing paused, 20 jobs parked at their claim, ten paused minutes, the resume and
the woken jobs' run, and a sweep while the kind is resuming. Requests, not units: moto prices
nothing (bench/meter.py says why). `python -m bench.pausing`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from leasehold import Kind, StepContext
from leasehold.store.table import Table
from leasehold.testing import LeaseholdTestbed

mail = Kind("bench_mail", schema={"type": "object"})


@mail.step()
def send(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


@contextmanager
def counted() -> Iterator[Counter[str]]:
    """Every Table request by method, while inside."""
    calls: Counter[str] = Counter()
    saved: dict[str, Callable[..., Any]] = {}
    for name in ("get", "query", "batch_get", "update", "put", "transact"):
        saved[name] = getattr(Table, name)

        def wrap(self: Table, *a: Any, _name: str = name, **k: Any) -> Any:
            calls[_name] += 1
            return saved[_name](self, *a, **k)

        setattr(Table, name, wrap)
    try:
        yield calls
    finally:
        for name, method in saved.items():
            setattr(Table, name, method)


def main() -> None:
    with LeaseholdTestbed([mail]) as tb, counted() as calls:

        def phase(title: str, act: Callable[[], object]) -> None:
            calls.clear()
            act()
            print(f"{title}: {dict(sorted(calls.items()))}")

        for _ in range(20):
            tb.submit("bench_mail", {})
        phase("20 jobs run, nothing paused", tb.run_until_idle)
        tb.advance(5)
        tb.pause_kind("bench_mail", "bench")
        for _ in range(20):
            tb.submit("bench_mail", {})
        phase("the same 20 parked at their claim", tb.run_until_idle)
        tb.advance(600, sweep=False)
        phase("a sweep ten paused minutes later", tb.sweep)
        phase("the resume (wakes 20)", lambda: tb.resume_kind("bench_mail", "bench"))
        phase("the 20 woken jobs run", tb.run_until_idle)
        phase("a sweep while resuming, none left", tb.sweep)


if __name__ == "__main__":
    main()
