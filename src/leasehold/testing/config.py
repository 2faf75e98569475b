"""What a testbed runs: the user's kinds (as the functions would load them) and the deployment
settings (the template's defaults, with a test's overrides), checked as the functions check
theirs at cold start."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, TypedDict, Unpack

from leasehold.domain.clock import ManualClock
from leasehold.domain.ids import IdFactory
from leasehold.domain.tenancy import TenantPolicy
from leasehold.handlers.settings import Settings, Tunings
from leasehold.handlers.wiring import sweep_settings, worker_settings
from leasehold.sdk.kind import Kind
from leasehold.sdk.loading import KindLoadError, load_kinds
from leasehold.sdk.routes import Routes
from leasehold.service.sweeper import SweepSettings
from leasehold.service.worker import WorkerSettings
from leasehold.testing.crashes import Crashes, WatchedKind
from leasehold.testing.definitions import Definitions

KindsSpec = str | Kind | Routes | Iterable[str | Kind | Routes]
"""Kinds for a testbed: a `LEASEHOLD_KINDS`-style module string (`"app.kinds,app.more"`: its
modules' `Kind`s and `Routes`, as the functions register them), a `Kind`, an application's
`Routes` (for `LeaseholdTestbed.request`), or any mix of them in a list."""


TESTBED_INDEX_SHARDS = 8
"""A testbed reads the by_state keys over at most 8 shards (decision SH4), not the template's 64:
moto answers each shard's Query by scanning the table, so every shard costs test time, and 8
already exercises every merged reader. `settings={"index_shards": 64}` runs the deployed count."""


class OtherQueues(TypedDict, total=False):
    """The queues a `Settings` may name beside QUEUE_URL and DLQ_URL, passed on as given
    (each left out: none)."""

    high_queue_url: str
    low_queue_url: str
    queue_shard_urls: tuple[str, ...]
    data_bucket: str


@dataclass(frozen=True)
class TestbedSettings(Tunings):
    """The deployment settings a testbed's functions run with: template.yaml's parameter
    defaults unless a test overrides them (`LeaseholdTestbed(settings={"lease_seconds": 10})`).
    They are checked as the functions check theirs (a worker timeout shorter than the lease
    plus its margin is refused the same way); the numbers both read are `Tunings`."""

    __test__: ClassVar[bool] = False  # not a pytest test class

    max_attempts: int
    """The default `max_attempts` of a job (a kind's own default, or the request's, wins)."""
    worker_batch_size: int
    """Wake-ups per worker invocation."""
    schedules_per_owner: int = 0
    """Active schedules one caller may keep (0: no limit; the template's `SchedulesPerOwner`)."""
    tenant_submit_rate: int = 0
    """Jobs one tenant may submit a second (0: no limit; the template's `TenantSubmitRate`).
    `HighPriorityTenants` has no testbed setting: the testbed's `submit` may ask for any
    priority, as a kind's own code may (the API's rule is tested over HTTP)."""
    queue_shards: int = 1
    """Normal-priority queues, each with its own event source (the template's `QueueShards`:
    1, 2 or 4): a job's wake-ups all go to one, chosen by a stable hash of its id."""
    index_shards: int = 8
    """How many shards each `by_state` key is spread over: the template's `IndexShards`, at
    most TESTBED_INDEX_SHARDS unless a test asks for more (decision SH4)."""
    jitter: bool = False
    """False (the default): a retry waits the whole backoff ceiling, min(cap, base·2^(n-1)),
    so a test knows when it is due. True: full jitter from the testbed's seed, as deployed."""

    @staticmethod
    def of(definitions: Definitions, overrides: Mapping[str, Any] | None = None) -> TestbedSettings:
        """The definitions' defaults with `overrides` (unknown names are a TypeError)."""
        names = {f.name for f in fields(TestbedSettings)}
        unknown = sorted(set(overrides or {}) - names)
        if unknown:
            raise TypeError(f"unknown testbed setting(s): {', '.join(unknown)}")
        defaults: dict[str, Any] = dict(definitions.settings)
        defaults["index_shards"] = min(defaults["index_shards"], TESTBED_INDEX_SHARDS)
        base = TestbedSettings(**defaults)
        settings = replace(base, **dict(overrides or {}))
        shards = tuple(f"queue-{n}" for n in range(1, settings.queue_shards))
        if settings.queue_shards < 1:
            raise ValueError(f"queue_shards must be 1 or more, not {settings.queue_shards}")
        # the functions' own cold-start check (it refuses more shards than a template makes)
        settings.engine("table", "queue", "dlq", queue_shard_urls=shards)
        return settings

    def engine(
        self,
        table: str,
        queue_url: str,
        dlq_url: str,
        **queues: Unpack[OtherQueues],
    ) -> Settings:
        """The functions' `Settings` for these resources (raises SettingsError when the
        arithmetic of lease, timeout, step and visibility does not hold): what the testbed's
        engine is built from, by the functions' own `build_engine`. The `Tunings` are copied as
        a whole, so a number added to them reaches the testbed's engine with no edit here."""
        tunings = {field.name: getattr(self, field.name) for field in fields(Tunings)}
        return Settings(
            **tunings,
            table_name=table,
            queue_url=queue_url,
            dlq_url=dlq_url,
            **queues,
            default_max_attempts=self.max_attempts,
            metrics_namespace="LeaseholdTesting",
            kinds="leasehold.testing",
            tenancy=TenantPolicy(
                schedules_per_owner=self.schedules_per_owner, submit_rate=self.tenant_submit_rate
            ),
            index_shards=self.index_shards,
        ).check()

    def worker(self, worker_id: str) -> WorkerSettings:
        """The worker function's settings, as the deployed worker's are derived
        (`leasehold.handlers.wiring.worker_settings`)."""
        return worker_settings(self.engine("table", "queue", "dlq"), worker_id)

    def sweeper(self) -> SweepSettings:
        """The sweeper function's settings."""
        return sweep_settings(self.engine("table", "queue", "dlq"))


def resolve_kinds(
    spec: KindsSpec, crashes: Crashes, *, max_step_seconds: float
) -> tuple[dict[str, WatchedKind], tuple[Routes, ...]]:
    """The kinds by name, as the functions register them, and the routes the API function would
    mount: a module string through `load_kinds` (the same `KindLoadError`s as a cold start), a
    `Kind` checked by the same rules (a name taken twice, no steps, a step longer than
    `max_step_seconds`), a `Routes` as it is."""
    items: list[str | Kind | Routes] = (
        [spec] if isinstance(spec, str | Kind | Routes) else list(spec)
    )
    found: dict[str, tuple[Kind, str]] = {}
    routes: list[Routes] = []

    def mount(router: Routes) -> None:
        if not any(router is known for known in routes):
            routes.append(router)

    def add(kind: Kind, where: str) -> None:
        if kind.name in found:
            if found[kind.name][0] is kind:
                return
            raise KindLoadError(
                f"kind {kind.name!r} is given twice ({found[kind.name][1]} and {where})"
            )
        found[kind.name] = (kind, where)

    for item in items:
        if isinstance(item, str):
            loaded = load_kinds(item, max_step_seconds=max_step_seconds)
            for engine_kind in loaded.kinds.values():
                add(engine_kind.kind, f"module string {item!r}")
            for router in loaded.routes:
                mount(router)
        elif isinstance(item, Kind):
            _check_kind(item, max_step_seconds)
            add(item, "a Kind object")
        elif isinstance(item, Routes):
            mount(item)
        else:
            raise TypeError(
                f"a kind is a Kind, a Routes or a module string, not {type(item).__name__}"
            )
    if not found:
        raise KindLoadError("a testbed needs at least one kind")
    longest_ms = int(max_step_seconds * 1000)
    kinds = {
        name: WatchedKind(kind, crashes, max_step_ms=longest_ms)
        for name, (kind, _) in found.items()
    }
    return kinds, tuple(routes)


def _check_kind(kind: Kind, max_step_seconds: float) -> None:
    if not kind.has_steps:
        raise KindLoadError(f"kind {kind.name!r} has no steps")
    for step in kind.steps:
        if step.timeout_seconds > max_step_seconds:
            raise KindLoadError(
                f"kind {kind.name!r} step {step.name!r} may run {step.timeout_seconds:g} s, "
                f"over MAX_STEP_SECONDS ({max_step_seconds:g})"
            )


class BackoffCeiling(random.Random):
    """Seeded randomness whose `uniform` is its upper bound: a retry waits the whole backoff
    ceiling (TestbedSettings.jitter False)."""

    def uniform(self, a: float, b: float) -> float:
        """`b`: the longest the engine would wait."""
        return b


def seeded_ids(clock: ManualClock, rng: random.Random) -> IdFactory:
    """Ids shaped like the API's (`j_` + 12 hex of milliseconds + 10 hex), repeatable by seed."""
    return lambda: f"j_{clock.now_ms():012x}{rng.getrandbits(40):010x}"


__all__ = ["BackoffCeiling", "KindsSpec", "TestbedSettings", "resolve_kinds", "seeded_ids"]
