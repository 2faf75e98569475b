"""The application toolkit: what an application that keeps items of its own beside its jobs (the
reading list's bookmarks) needs of the engine, so it is written on `leasehold`'s public API alone.

- `Engine.current()`: the function's engine as its cold start built it — the `Table` door (its
  bounded client, retries, error translation and, when set, `LEASEHOLD_FAULTS`' injected faults),
  the clock, the metrics.
- `job_writes`: the transaction entries of a new job, after the checks of `POST /jobs`, to commit
  with items of one's own; `transact_closing_job` closes a job the application made, inside its
  own transaction; `job_states` reads the states of a page of jobs.
- `idempotency`, `pages`, `items`, `iso_time`: the engine's rules for keys, cursors, item values
  and times, so an application's routes answer as `/jobs` does.
- `step_operation`: an operation-ledger entry of the step's own naming, for an effect step that
  settles its operation itself.

Everything here is kept stable as the rest of `leasehold`'s public API is."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from leasehold.domain.clock import Clock, SystemClock, iso
from leasehold.domain.debounce import Debounce, debounced
from leasehold.domain.errors import ValidationError
from leasehold.domain.ids import key_of, time_ordered_ids
from leasehold.domain.job import Job, Owner
from leasehold.domain.options import JobOptions, OptionKeywords, Submission, check_idempotency_key
from leasehold.domain.policies import DEFAULT_MAX_ATTEMPTS
from leasehold.domain.tenancy import TenantPolicy
from leasehold.domain.types import JsonObject, RawItem
from leasehold.sdk.context import Operation, StepContext
from leasehold.sdk.engine_kind import EngineKind
from leasehold.sdk.kind import CAPABILITIES, Kind
from leasehold.sdk.routes import check_request_text
from leasehold.service.jobs import Intake, parse_limit
from leasehold.service.telemetry import Telemetry
from leasehold.store.controls import transact_closing_job as _transact_closing_job
from leasehold.store.cursors import decode_cursor, encode_cursor
from leasehold.store.debounce import plan_debounced
from leasehold.store.guards import new_job_writes
from leasehold.store.items import deserialize_item, serialize
from leasehold.store.jobs import JobStore
from leasehold.store.keys import derived_id, fingerprint_hash, repeat_of, request_token
from leasehold.store.table import ConditionFailed, Table, with_table_name
from leasehold.store.unique import claim_writes

if TYPE_CHECKING:
    from leasehold.service.kinds import JobKind

_STOP_REASON = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


# ------------------------------------------------------------------ the running engine


@dataclass(frozen=True, eq=False)
class Engine:
    """What a function's engine built at its cold start, for an application's own code: the
    table door, the clock and the metrics the engine itself uses (one of each per cold start;
    a test builds its own over its table and a manual clock)."""

    table: Table
    """The door to the single table (see `Table`)."""
    clock: Clock
    """The engine's clock: any object with `now_ms() -> int`."""
    metrics: Telemetry
    """The function's counters (CloudWatch EMF when deployed): any object with
    `count(name, value=1)`."""
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """The deployment's default attempts for a job that names none (`MAX_ATTEMPTS`)."""
    tenancy: TenantPolicy = TenantPolicy()
    """The deployment's limits between tenants (who may ask for high priority, the submit
    rate): `job_writes` and `submit_direct` apply them as `POST /jobs` does."""

    @staticmethod
    def current() -> Engine:
        """The engine of the function this code runs in (built at its cold start, before any
        route is called). RuntimeError outside a leasehold function."""
        if _running is None:
            raise RuntimeError(
                "no leasehold engine runs in this process: Engine.current() is for code that "
                "runs inside a leasehold function (build an Engine yourself in a test)"
            )
        return _running.engine

    def now_ms(self) -> int:
        """The engine's time, epoch milliseconds."""
        return self.clock.now_ms()

    def count(self, metric: str, value: int = 1) -> None:
        """Add `value` to the function's counter `metric`."""
        self.metrics.count(metric, value)

    def new_id(self, prefix: str = "j") -> str:
        """A new id that sorts by creation time: `<prefix>_` + 12 hex digits of milliseconds +
        10 random hex digits."""
        return time_ordered_ids(self.clock, prefix)()


@dataclass(frozen=True)
class _Running:
    engine: Engine
    kinds: Mapping[str, JobKind]


_running: _Running | None = None


def start_engine(engine: Engine, kinds: Mapping[str, JobKind]) -> None:
    """The engine's side: called by each cold start (handlers/wiring.py) once it is built."""
    global _running  # noqa: PLW0603 - one engine per function, replaced by each cold start
    _running = _Running(engine, kinds)


@contextmanager
def engine_started(engine: Engine, kinds: Mapping[str, JobKind]) -> Iterator[Engine]:
    """`engine` is the running one (`Engine.current()`) inside, and the one before it (or none)
    again after: a testbed's engine for as long as the testbed is open."""
    global _running  # noqa: PLW0603 - the testbed's engine, for as long as it is open
    previous = _running
    start_engine(engine, kinds)
    try:
        yield engine
    finally:
        _running = previous


# ------------------------------------------------------------------ a job's own writes


@dataclass(frozen=True)
class NewJob:
    """A new job's transaction entries. `writes` are the job item and its first wake-up (its
    outbox item), each a `Put` conditional on not existing and with `TableName` set: commit them
    in one TransactWriteItems with items of your own (`Table.transact`, or boto3's
    `transact_write_items`). The job is queued, and runs, once they commit — never before."""

    job_id: str
    writes: list[RawItem]
    token: str | None = None
    """With an idempotency key: the `ClientRequestToken` to commit with (the same key and request
    give the same token, so an SDK retry of a commit whose answer was lost succeeds)."""
    fingerprint: str | None = None
    """With an idempotency key: the hash of the request the job item keeps (`fp`)."""
    debounced: bool = False
    """A debounced kind or request: True when `writes` collapse this submission into its
    key's pending job `job_id` (one Update), False when they open a new window (decision DB5).
    A transaction that fails their condition lost to another submission or to the job's
    start: call `job_writes` again and commit what it gives."""
    unique_at: int | None = None
    """With a unique rule: where in `writes` the Put that takes the job's unique key is."""

    def repeated(self, failed: ConditionFailed, index: int = 0) -> bool:
        """Your transaction failed, holding these writes from `index` on: True when the job
        exists from an earlier request with the same key and the same request (answer with it;
        nothing was scheduled); False when the job is this very call's own (an earlier try
        committed and its answer was lost). A key used with another request is a ConflictError
        (409 `idempotency_key_reused`); a failure that is not the job's, a LeaseholdError."""
        return repeat_of(failed, index, self.fingerprint)

    def held_by(self, failed: ConditionFailed, index: int = 0) -> str | None:
        """Your transaction failed, holding these writes from `index` on: the id of the job
        that holds this job's unique key when that is what failed (answer with it, as `POST
        /jobs` answers a duplicate); None when the key is not what failed. Here the key is
        taken only when no job holds it in its window, whatever that job's state (decision
        UQ5)."""
        at = None if self.unique_at is None else index + self.unique_at
        if at is None or not failed.failed_at(at):
            return None
        return str(deserialize_item(failed.old_item(at) or {}).get("job_id") or "") or None


def job_writes(
    table: Table | str,
    kind: Kind | str,
    payload: Mapping[str, Any],
    owner: Owner,
    *,
    options: JobOptions | None = None,
    scope: str = "",
    fingerprint: str | None = None,
    job_id: str | None = None,
    now_ms: int | None = None,
    **keywords: Unpack[OptionKeywords],
) -> NewJob:
    """The entries that make a new job of `kind` (a `Kind`, or the name of a kind this function
    registered) for `owner`, after the same checks and limits as `POST /jobs` — the same accept
    path: the payload's size, the kind's schema and checks, 1 to 20 steps, and `options` (a
    `JobOptions`: key, budget, deadline, attempts, priority, `run_at` / `delay_seconds`; the
    keyword arguments of the same names build one, as before). What the options leave out takes
    the kind's default, else the running engine's (`MAX_ATTEMPTS`), else the engine's own; the
    running engine's tenant limits apply to `priority`. A kind that is not submittable is
    allowed: this is the application's own path. ValidationError (400) names what is wrong. A
    job due more than 15 minutes ahead makes one entry, not two (it has no wake-up until the
    sweeper gives it one).

    With an idempotency key the job's id is derived from the owner, the key and `scope` (the
    same key in another scope names another job), and the job keeps the hash of `fingerprint`
    — the request's canonical text, by default the job's own (kind, payload, budget, deadline,
    attempts) — so `NewJob.repeated` can tell a repeat from a reuse. Otherwise the job gets
    `job_id`, or a new time-ordered id. `now_ms`: the engine's clock, by default the system's."""
    engine_kind = known_kind(kind)
    check_request_text(
        owner, payload, scope=scope, fingerprint=fingerprint, run_at=run_at_text_of(keywords)
    )
    chosen = JobOptions.of(options, **keywords)
    if chosen.idempotency_key is not None and job_id is not None:
        raise ValueError("give a job_id or an idempotency_key, not both")
    intake = engine_intake({engine_kind.name: engine_kind}, now_ms)
    submission = Submission(engine_kind.name, dict(payload), chosen)
    prepared = intake.prepare(
        owner,
        submission,
        submittable_only=False,
        scope=scope,
        fingerprint=fingerprint,
        job_id=job_id,
        blobs=table.blobs if isinstance(table, Table) else None,
    )
    debounce = intake.debounce_for(submission)
    if debounce is not None:
        return _debounced_writes(table, prepared.job, debounce, prepared.spec.payload)
    name = table if isinstance(table, str) else table.name
    # a table named only is written as one shard: shard 0 is read at every count (decision SH1)
    shards = table.index_shards if isinstance(table, Table) else 1
    items = new_job_writes(prepared.job, prepared.fp_hash, shards=shards)
    unique_at = None
    if prepared.unique is not None:  # the kind's or the options' unique rule (decision UQ5)
        unique_at = len(items)
        items += claim_writes(prepared.unique, prepared.job)
    writes = [with_table_name(item, name) for item in items]
    return NewJob(
        prepared.job.job_id, writes, prepared.token, prepared.fp_hash, unique_at=unique_at
    )


def _debounced_writes(
    table: Table | str, job: Job, debounce: Debounce, payload: JsonObject
) -> NewJob:
    """A debounced submission's entries: read the key's window (so the table, not its name);
    the key from the whole `payload` (a large one is a reference on `job` already, LD15)."""
    if isinstance(table, str):
        raise ValidationError("a debounced job's writes read its window: pass the Table")
    key = debounce.key(job.kind, job.owner, payload)
    plan = plan_debounced(table, debounced(job, debounce), key, debounce, job.created_at)
    writes = [with_table_name(item, table.name) for item in plan.writes]
    return NewJob(plan.job_id, writes, debounced=plan.debounced)


def run_at_text_of(keywords: OptionKeywords) -> str | None:
    """The `run_at` keyword when it is text (checked for lone surrogates as a body's text is)."""
    run_at = keywords.get("run_at")
    return run_at if isinstance(run_at, str) else None


def engine_intake(kinds: Mapping[str, JobKind], now_ms: int | None) -> Intake:
    """The accept path for code that submits without HTTP (`job_writes`, `submit_direct`): the
    running engine's defaults, tenant limits and metrics when this code runs inside a leasehold
    function (or a testbed), the engine's own defaults otherwise; the time is `now_ms`, by
    default the system's."""
    clock = _At(SystemClock().now_ms() if now_ms is None else now_ms)
    engine = _running.engine if _running is not None else None
    return Intake(
        kinds,
        clock,
        time_ordered_ids(clock),
        engine.metrics if engine else None,
        default_max_attempts=engine.max_attempts if engine else DEFAULT_MAX_ATTEMPTS,
        tenancy=engine.tenancy if engine else None,
        key_name="idempotency_key",
        blobs=engine.table.blobs if engine else None,
    )


def transact_closing_job(
    table: Table,
    items: list[RawItem],
    job_id: str,
    *,
    reason: str,
    now_ms: int,
    token: str | None = None,
) -> None:
    """Commit `items` (your own transaction entries) and close job `job_id` in the same
    transaction, as the job's state allows: a `queued` job ends `cancelled` with `reason` as its
    stop reason; a `running` one is asked to stop (its worker sees it at its next heartbeat, and
    its kind's `on_related_changed` says how it ends); a finished one is left as it is. The
    state is learnt from the failed condition itself, at most three tries, then ConflictError
    (409 `busy`). When one of `items` fails its own condition, `ConditionFailed` is raised with
    the reasons indexed as in `items`."""
    if not _STOP_REASON.match(reason):
        raise ValueError(f"stop reason {reason!r} must be 1 to 64 of a-z, 0-9 and _")
    _transact_closing_job(table, items, job_id, reason=reason, now=now_ms, token=token)


def job_states(table: Table, job_ids: Iterable[str]) -> dict[str, str]:
    """The state of each job named (`queued`, `running`, `succeeded`, …), read strongly
    consistent, one BatchGetItem per hundred ids — a page of items that each name a job costs one
    request, not one per item. An id with no job is left out; an id that could never have been
    issued is a 404."""
    return JobStore(table).states(list(job_ids))


def job_view(engine: Engine, owner: Owner, job_id: str) -> dict[str, Any]:
    """The view `GET /jobs/{id}` answers for the caller's job `job_id` (a parent waiting for its
    children says how many have ended: `waiting_for.children` `done` of `total`), read strongly
    consistent; another owner's job, or none, is a 404 (`NotFoundError`)."""
    from leasehold.service.fanin import children_done
    from leasehold.service.view import job_view as _job_view
    from leasehold.store import Stores

    stores = Stores.over(engine.table)
    job = stores.jobs.get_owned(owner, job_id)
    kinds = _running.kinds if _running is not None else None
    return _job_view(job, kinds, engine.now_ms(), children_done(stores, job))


# ------------------------------------------------------------------ the engine's rules


class IdempotencyKeys:
    """The engine's rules for `Idempotency-Key` (decision C4), for an application's keyed
    requests: a key names what it made, so a repeat meets the first one's condition."""

    @staticmethod
    def check(key: str | None) -> None:
        """A 400 (`invalid_idempotency_key`) unless `key` is None or 1–128 of
        `A-Z a-z 0-9 . _ : -`."""
        check_idempotency_key(key)

    @staticmethod
    def derived_id(prefix: str, owner: Owner, key: str, scope: str = "") -> str:
        """The id of what a keyed request makes: the same tenant, user, key and scope always
        give the same `<prefix>_` + 22 hex digits."""
        return derived_id(prefix, owner, key, scope)

    @staticmethod
    def fingerprint(request: str) -> str:
        """The hash (88 bits, hex) of a request's canonical text, to keep on what it made and
        compare on a repeat."""
        return fingerprint_hash(request)

    @staticmethod
    def token(owner: Owner, key: str, fingerprint: str) -> str:
        """The `ClientRequestToken` of a keyed commit: the same owner, key and fingerprint give
        the same token."""
        return request_token(owner, key, fingerprint)


class Pages:
    """The engine's paging rules: `limit` as `GET /jobs` takes it, cursors that are the query's
    own LastEvaluatedKey and are refused (400) when they are not one this API returned."""

    @staticmethod
    def limit(raw: str | None, default: int = 20) -> int:
        """The `limit` query parameter: 1 to 100 (400 otherwise); `default` when absent."""
        return parse_limit(raw, default)

    @staticmethod
    def cursor(last_key: Mapping[str, Any] | None) -> str | None:
        """The cursor of a query's LastEvaluatedKey (None when the query is done)."""
        return encode_cursor(dict(last_key) if last_key else None)

    @staticmethod
    def start(cursor: str | None, *, partition: str, sort_prefix: str = "") -> RawItem | None:
        """The ExclusiveStartKey of a cursor for a query of the table (`pk`, `sk`) in
        `partition`, whose sort keys begin with `sort_prefix`: a 400 for any other cursor
        (another partition's, an index's, a forged one). None when there is no cursor."""
        start = decode_cursor(
            cursor, partition_attribute="pk", partition=partition, sort_attribute="sk",
            index_keys=False,
        )  # fmt: skip
        if start and not start["sk"]["S"].startswith(sort_prefix):
            raise ValidationError("'cursor' is not a cursor this API returned")
        return start


class Items:
    """Values between Python and DynamoDB's attribute-value form, as the engine writes them."""

    @staticmethod
    def value(value: Any) -> RawItem:
        """`value` (str, int, bool, None, dict, list, set of str) as an attribute value."""
        return serialize(value)

    @staticmethod
    def plain(item: Mapping[str, Any]) -> RawItem:
        """An item as plain Python: numbers as int (float when fractional), sets as set."""
        return deserialize_item(item)

    @staticmethod
    def key(*parts: str) -> str:
        """A key value from parts — `items.key("BOOKMARKS", tenant)` — as the engine makes its
        own (decision ID1): joined with `#`, each part's `%` and `#` percent-escaped, so no
        tenant, user or id can make two tuples one key; a part holding neither is as it is."""
        return key_of(*parts)


idempotency = IdempotencyKeys()
pages = Pages()
items = Items()


def iso_time(ms: int | None) -> str | None:
    """Epoch milliseconds as the HTTP API shows every time: ISO 8601 UTC with milliseconds
    (`2026-01-01T00:00:00.000Z`); None stays None."""
    return iso(ms)


def step_operation(
    ctx: StepContext, operation_id: str, *, provider: str, capability: str
) -> Operation:
    """The operation-ledger entry `operation_id` of the running step, for a step that settles its
    own effect (declared without `effect=`, so the engine opens and confirms nothing): its id is
    the step's own making — stable across attempts, workers and replays of the same work — and
    the step calls `open` before the provider and `confirm`, `fail` or `release` after. Every
    ledger write is fenced as any worker write is; an open operation makes a lost answer
    recoverable by `capability` (`idempotent_key`, `status_lookup`) or an `unknown` job."""
    if not 1 <= len(operation_id) <= 200:
        raise ValueError("an operation id is 1 to 200 characters")
    if capability not in CAPABILITIES:
        raise ValueError(f"capability {capability!r} must be one of {', '.join(CAPABILITIES)}")
    runtime = ctx._runtime  # noqa: SLF001 - the SDK's own view of the step
    entry = runtime.ledger.get(operation_id)
    recovering = bool(entry and entry.get("state") == "submitted")
    return Operation(runtime, operation_id, provider, capability, recovering=recovering)


# ------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class _At:
    ms: int

    def now_ms(self) -> int:
        return self.ms


def known_kind(kind: Kind | str) -> JobKind:
    """`kind` as the engine runs it: a `Kind` as it is, a name as the running engine registered
    it (ValidationError `unknown_kind` otherwise)."""
    if isinstance(kind, Kind):
        return EngineKind(kind)
    known = _running.kinds if _running is not None else {}
    if kind not in known:
        raise ValidationError(
            f"unknown kind '{str(kind)[:64]}'; known kinds: {', '.join(sorted(known))}",
            code="unknown_kind",
        )
    return known[kind]
