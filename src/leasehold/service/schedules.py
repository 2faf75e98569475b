"""Schedules (docs/schedules.md): create, list, read and delete them for their owner, and fire the
due
ones — each tick one job, whose id is derived from the schedule id and the tick time, committed
in one transaction with the schedule's advance past that tick (decisions FS2–FS4)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import LeaseholdError, StoreUnavailableError, ValidationError
from leasehold.domain.ids import IdFactory
from leasehold.domain.job import Job, Owner
from leasehold.domain.options import Submission
from leasehold.domain.schedule import (
    MINUTE_MS,
    MissedTicks,
    Schedule,
    parse_expression,
    plan_firing,
)
from leasehold.domain.storable import storable_text
from leasehold.domain.tenancy import TenantPolicy
from leasehold.domain.types import JsonObject
from leasehold.service.jobs import Intake, parse_limit
from leasehold.service.kinds import JobKind
from leasehold.service.passes import Budget, Segment, Walk
from leasehold.service.telemetry import Telemetry
from leasehold.service.tracing import active_traceparent, job_attributes, span_under
from leasehold.store.guards import new_job_writes
from leasehold.store.history import entry, expand
from leasehold.store.keys import derived_id
from leasehold.store.passes import PassCursorStore
from leasehold.store.schedules import ScheduleStore
from leasehold.store.table import Table

logger = Logger(service="leasehold", child=True)

SCHEDULE_FIELDS = frozenset(
    {
        "kind",
        "payload",
        "expression",
        "timezone",
        "missed",
        "budget",
        "deadline_seconds",
        "max_attempts",
        "priority",
    }
)
JOB_FIELDS = ("kind", "payload", "budget", "deadline_seconds", "max_attempts", "priority")
MAX_SCHEDULES_PER_FIRE = 100
"""Due schedules one run reads when the caller names no budget (the sweeper names its own)."""
SCHEDULE_PASS = "schedules"
"""The schedule pass's cursor name (store/passes.py)."""
KIND_TENANT = "_kinds"
"""The reserved tenant that owns the schedules declared on kinds (user: the kind's name)."""
DEPLOY = "deploy"
"""Who the history names for a declared schedule created or removed at start-up."""


def declared_schedule_id(kind: str, expression: str, tz: str, missed: str, payload: Any) -> str:
    """A declared schedule's id: the same declaration always names the same schedule, so every
    cold start creates it at most once, and a changed declaration is a new schedule."""
    source = json.dumps([kind, expression, tz, missed, payload], sort_keys=True, default=str)
    return f"s_{hashlib.sha256(source.encode()).hexdigest()[:22]}"


def tick_job_id(owner: Owner, schedule_id: str, tick_at: int) -> str:
    """The one job a tick makes (decision FS4: idempotency key = schedule id + tick time), in a
    namespace of its own so no `Idempotency-Key` a caller sends can name it."""
    return derived_id("j", owner, f"{schedule_id}@{tick_at}", namespace="schedule")


def schedule_view(schedule: Schedule) -> JsonObject:
    return {
        "schedule_id": schedule.schedule_id,
        "state": schedule.state,
        "expression": schedule.expression,
        "timezone": schedule.timezone,
        "missed": schedule.missed.value,
        **{name: schedule.job[name] for name in JOB_FIELDS if name in schedule.job},
        "next_tick_at": iso(schedule.next_tick_at),
        "last_tick_at": iso(schedule.last_tick_at),
        "last_job_id": schedule.last_job_id,
        "last_error": schedule.last_error,
        "ticks_fired": schedule.ticks_fired,
        "ticks_skipped": schedule.ticks_skipped,
        "declared_by_kind": schedule.declared_by_kind,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
        "version": schedule.version,
        "history": [{**expand(item), "at": iso(int(str(item["t"])))} for item in schedule.history],
    }


class ScheduleService:
    def __init__(
        self,
        table: Table,
        kinds: Mapping[str, JobKind],
        clock: Clock,
        new_id: IdFactory,
        telemetry: Telemetry,
        default_max_attempts: int = 3,
        tenancy: TenantPolicy | None = None,
    ) -> None:
        self._tenancy = tenancy or TenantPolicy()
        self._table = table
        self._store = ScheduleStore(table)
        self._kinds = {name: kind for name, kind in kinds.items() if kind.submittable}
        self._clock = clock
        self._new_id = new_id
        self._telemetry = telemetry
        self._intake = Intake(
            self._kinds,
            clock,
            new_id,
            telemetry,
            default_max_attempts=default_max_attempts,
            tenancy=self._tenancy,
        )
        """The accept path a tick's job is made by, as `POST /jobs` makes one."""

    # ------------------------------------------------------------------ the owner's routes

    def create(self, owner: Owner, body: Any) -> JsonObject:
        """Validate everything a tick will need now (the expression, the zone, the job it makes,
        as `POST /jobs` would), then put the schedule with its first tick."""
        if not isinstance(body, dict):
            raise ValidationError("the body must be a JSON object")
        unknown = sorted(set(body) - SCHEDULE_FIELDS)
        if unknown:
            raise ValidationError(f"unknown field {unknown[0][:40]!r}")
        if "expression" not in body:
            raise ValidationError("'expression' is required: 'cron(…)' or 'rate(…)'")
        expression = parse_expression(body["expression"], body.get("timezone", "UTC"))
        missed_text = body.get("missed", MissedTicks.SKIP.value)
        try:
            missed = MissedTicks(missed_text)
        except ValueError as exc:
            raise ValidationError('\'missed\' must be "skip" or "run_once"') from exc
        created = self._create(owner, body, expression, missed)
        assert created is not None  # a fresh id: its Put has no other item to meet
        return created

    def _create(
        self,
        owner: Owner,
        body: JsonObject,
        expression: Any,
        missed: MissedTicks,
        *,
        schedule_id: str | None = None,
        by: str | None = None,
    ) -> JsonObject | None:
        job = {name: body[name] for name in JOB_FIELDS if name in body}
        now = self._clock.now_ms()
        declared = schedule_id is not None
        schedule_id = schedule_id or self._new_id()
        # A kind's declared schedule is the deployer's, not a caller's: no tenant limits.
        self._tick_job(
            job, owner, tick_job_id(owner, schedule_id, now), now, tenant_limits=not declared
        )
        anchor = now - now % MINUTE_MS
        first = expression.next_tick_after(now, anchor_ms=anchor)
        if first is None:
            raise ValidationError("'expression' has no tick after now: it would never fire")
        schedule = Schedule(
            schedule_id=schedule_id,
            owner_tenant=owner.tenant,
            owner_user=owner.user_id,
            expression=expression.text,
            timezone=expression.timezone,
            missed=missed,
            job=job,
            anchor_at=anchor,
            created_at=now,
            updated_at=now,
            next_tick_at=first,
            declared_by_kind=declared,
            history=(entry("created", at=now, by=by or owner.user_id),),
        )
        quota = None if declared else self._tenancy.schedules_per_owner
        if not self._store.create(schedule, replace_deleted=declared, quota=quota):
            return None  # a declared schedule another cold start created first
        logger.info("schedule created", extra={"schedule_id": schedule_id, "by": owner.user_id})
        return schedule_view(schedule)

    def sync_declared(self) -> dict[str, int]:
        """Make the stored schedules of each kind what the kind declares (`Kind(...,
        schedules=[...])`): a declared one not stored is created (its id comes from the
        declaration, so two cold starts at once create it once); a stored one no longer
        declared is deleted, its history naming `deploy`. Run at the sweeper's cold start."""
        report: Counter[str] = Counter()
        for name, kind in self._kinds.items():
            owner = Owner(KIND_TENANT, name)
            wanted: dict[str, JsonObject] = {}
            for declared in kind.declared_schedules:
                payload = dict(declared.payload)
                sid = declared_schedule_id(
                    name, declared.expression, declared.tz, declared.missed, payload
                )
                wanted[sid] = {
                    "kind": name,
                    "payload": payload,
                    "expression": declared.expression,
                    "timezone": declared.tz,
                    "missed": declared.missed,
                }
            stored = self._stored(owner) if wanted or self._any_stored(owner) else {}
            for sid, body in wanted.items():
                if sid in stored:
                    continue
                expression = parse_expression(body["expression"], body["timezone"])
                try:
                    created = self._create(
                        owner,
                        body,
                        expression,
                        MissedTicks(body["missed"]),
                        schedule_id=sid,
                        by=DEPLOY,
                    )
                except ValidationError as refused:  # its payload fails the kind's own checks
                    logger.error(
                        "a declared schedule was refused",
                        extra={
                            "kind": name,
                            "expression": body["expression"],
                            "detail": str(refused),
                        },
                    )
                    report["declared_refused"] += 1
                    continue
                report["declared_created" if created else "declared_raced"] += 1
            for sid in set(stored) - set(wanted):
                self._store.delete(owner, sid, by=DEPLOY, now=self._clock.now_ms())
                report["declared_deleted"] += 1
        if report:
            logger.info("declared schedules synced", extra=dict(report))
        return dict(report)

    def _stored(self, owner: Owner) -> dict[str, Schedule]:
        """The owner's active schedules, every page (a kind declares a handful)."""
        found: dict[str, Schedule] = {}
        cursor: str | None = None
        for _ in range(100):
            page, cursor = self._store.list_for_owner(owner, limit=100, cursor=cursor)
            found.update({s.schedule_id: s for s in page if s.state == "active"})
            if not cursor:
                break
        return found

    def _any_stored(self, owner: Owner) -> bool:
        page, _ = self._store.list_for_owner(owner, limit=1, cursor=None)
        return bool(page)

    def get(self, owner: Owner, schedule_id: str) -> JsonObject:
        return schedule_view(self._store.get(owner, schedule_id))

    def list(self, owner: Owner, *, limit: str | None, cursor: str | None) -> JsonObject:
        schedules, next_cursor = self._store.list_for_owner(
            owner, limit=parse_limit(limit), cursor=cursor
        )
        return {"schedules": [schedule_view(s) for s in schedules], "next_cursor": next_cursor}

    def delete(self, owner: Owner, schedule_id: str) -> JsonObject:
        deleted = self._store.delete(owner, schedule_id, by=owner.user_id, now=self._clock.now_ms())
        logger.info("schedule deleted", extra={"schedule_id": schedule_id, "by": owner.user_id})
        return schedule_view(deleted)

    def _tick_job(
        self,
        template: JsonObject,
        owner: Owner,
        job_id: str,
        now: int,
        *,
        tenant_limits: bool = False,
    ) -> Job:
        """The job a tick makes of the schedule's job template (a kind, a payload and the
        `JobOptions` of a `POST /jobs` body), through the accept path `POST /jobs` takes; the
        tenant's limits are checked when the schedule is created, not at each tick."""
        submission = Submission.from_body(template, known_kinds=self._kinds)
        prepared = self._intake.prepare(
            owner,
            submission,
            job_id=job_id,
            tenant_limits=tenant_limits,
            now=now,
            blobs=self._table.blobs,
        )
        return prepared.job

    # ------------------------------------------------------------------ the trigger

    def fire_due(
        self,
        *,
        limit: int = MAX_SCHEDULES_PER_FIRE,
        segment: Segment | None = None,
        time_left: Callable[[], int] | None = None,
        progress: Counter[str] | None = None,
    ) -> dict[str, int]:
        """Fire the schedules whose tick has come: at most `limit` read this run, walking the
        segment's shards of the due index from where the last run stopped (decision SP2), each
        shard in turn so none starves another. Safe to run twice at once or late: each tick's
        job has one id, each advance is conditional on the tick, and so is the cursor's save.
        `progress` (when given) gets what the walk examined, its laps and a lost cursor save."""
        segment = segment or Segment()
        report: Counter[str] = Counter()
        now = self._clock.now_ms()
        cursors = PassCursorStore(self._table)
        walk: Walk[Schedule] | None = None
        saved = True
        try:
            cursor = cursors.load(SCHEDULE_PASS, segment.index, segment.count)
            walk = Walk[Schedule](
                cursor, segment.shards(self._store.shard_count), Budget(limit, time_left)
            )
            for schedule in walk.items(
                lambda shard, after, size: self._store.due_page(
                    shard, now=now, after=after, limit=size
                )
            ):
                try:
                    self._fire(schedule, now, report)
                except StoreUnavailableError:
                    raise
                except Exception:  # one schedule's fault never stops the others (decision U3)
                    report["schedule_errors"] += 1
                    logger.exception(
                        "schedule fire failed", extra={"schedule_id": schedule.schedule_id}
                    )
            # a lost save: another sweep moved the cursor, and its place stands
            if walk.moved:  # an idle pass writes nothing
                saved = cursors.save(SCHEDULE_PASS, segment.index, cursor, now=self._clock.now_ms())
        except StoreUnavailableError as unavailable:
            report["schedules_unavailable"] += 1
            logger.warning("schedule fire cut short", extra={"detail": str(unavailable)})
        if progress is not None and walk is not None:
            progress["schedules_examined"] += walk.examined
            progress["schedules_laps"] += int(walk.lap_finished)
            progress["cursor_races"] += int(not saved)
        report = +report  # only what happened
        if report["schedule_jobs"]:  # one metric (the dashboard's 50); the rest is in the log
            self._telemetry.count("ScheduleJobs", report["schedule_jobs"])
        if report:
            logger.info("schedules fired", extra=dict(report))
        return dict(report)

    def _fire(self, schedule: Schedule, now: int, report: Counter[str]) -> None:
        assert schedule.next_tick_at is not None
        owner = Owner(schedule.owner_tenant, schedule.owner_user)
        firing = plan_firing(
            schedule.parsed(), schedule.missed, schedule.next_tick_at, now, schedule.anchor_at
        )
        writes, job_ids, error = [], [], None
        job_spec_kind = str(schedule.job.get("kind", ""))[:100]
        for tick in firing.job_ticks:
            job_id = tick_job_id(owner, schedule.schedule_id, tick)
            try:
                # Each tick's job starts a trace of its own, linked from the sweep's (TR1).
                with span_under(
                    "leasehold.schedule_tick",
                    None,
                    new_trace=True,
                    links=[active_traceparent()],
                    attributes=job_attributes(job_id)
                    | {"leasehold.schedule_id": schedule.schedule_id},
                ):
                    job = self._tick_job(schedule.job, owner, job_id, now)
            except LeaseholdError as refused:  # the kind is gone, or its schema changed
                error = storable_text(f"tick {iso(tick)} made no job: {refused}")
                continue
            except Exception as failed:  # the kind's own code (check, plan) raised: fenced
                logger.exception("schedule tick: the kind raised", extra={"kind": job_spec_kind})
                error = storable_text(
                    f"tick {iso(tick)} made no job: the kind raised {type(failed).__name__}"
                )
                continue
            writes.append(new_job_writes(job, shards=self._store.shard_count))
            job_ids.append(job_id)
        advance = self._store.advance(
            schedule,
            next_tick_at=firing.next_tick_at,
            fired=len(job_ids),
            skipped=firing.skipped + (len(firing.job_ticks) - len(job_ids)),
            last_tick_at=firing.job_ticks[-1],
            last_job_id=job_ids[-1] if job_ids else None,
            last_error=error,
            now=now,
        )
        written = self._store.fire(advance, writes)
        if written is not None:
            report.update(
                schedule_jobs=written,
                schedule_jobs_existing=len(writes) - written,
                schedule_ticks_skipped=firing.skipped,
            )
            if error:
                report["schedule_errors"] += 1
                logger.warning(
                    "schedule tick made no job",
                    extra={"schedule_id": schedule.schedule_id, "detail": error},
                )
        else:
            report["schedule_fires_lost_race"] += 1
