"""`JobOptions`: everything a job can be submitted with besides its kind and payload — one value
that every way in takes (`POST /jobs`, `Client.submit`, `job_writes`, `submit_direct`, the
testbed, a schedule's tick), like River's `InsertOpts` and DBOS's `EnqueueOptions`.

Each field is checked where it is declared, with the message `POST /jobs` answers; what a field
left as None means (the kind's default, else the deployment's) is decided at accept, in one
function (`leasehold.service.jobs.resolve_spec`)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypedDict

from leasehold.domain.debounce import Debounce
from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Budget, Priority, check_priority
from leasehold.domain.policies import MAX_ATTEMPTS_LIMIT, MAX_DEADLINE_SECONDS, MAX_DELAY_SECONDS
from leasehold.domain.types import JsonObject
from leasehold.domain.unique import Unique, unique_of

UPLOAD_ID = re.compile(r"^u_[0-9a-f]{1,64}$")
"""What a `payload_upload` may be: an id `POST /uploads` answered."""
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
"""What an `Idempotency-Key` may be (docs/openapi.yaml says the same)."""
MAX_BUDGET_COST = 10**12
MAX_BUDGET_STEPS = 10_000
JOB_FIELDS = frozenset(
    {"kind", "payload", "budget", "deadline_seconds", "max_attempts"}
    | {"run_at", "delay_seconds", "priority", "debounce", "unique", "payload_upload"}
)
"""The fields of a `POST /jobs` body."""


def check_idempotency_key(key: str | None) -> None:
    """A 400 (`invalid_idempotency_key`) unless `key` is None or 1–128 of `A-Z a-z 0-9 . _ : -`."""
    if key is not None and (not isinstance(key, str) or not IDEMPOTENCY_KEY.fullmatch(key)):
        raise ValidationError(
            "Idempotency-Key must be 1–128 characters of A-Z a-z 0-9 . _ : -",
            code="invalid_idempotency_key",
        )


def bounded_int(value: Any, name: str, *, low: int, high: int) -> int:
    """`value` if it is an integer (not a bool) within low..high; ValidationError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"'{name}' must be an integer")
    if not low <= value <= high:
        raise ValidationError(f"'{name}' must be between {low} and {high}")
    return value


def budget_of(raw: Any) -> Budget | None:
    """A request's `budget` (`{"max_cost": n, "max_steps": n}`, either or both) as a Budget."""
    if raw is None or isinstance(raw, Budget):
        return raw
    if not isinstance(raw, Mapping) or set(raw) - {"max_cost", "max_steps"}:
        raise ValidationError("'budget' must be an object with 'max_cost' and/or 'max_steps'")
    return Budget(max_cost=raw.get("max_cost"), max_steps=raw.get("max_steps"))


def run_at_ms(run_at: str | datetime) -> int:
    """`run_at` (ISO 8601 text or an aware datetime) as epoch milliseconds; ValidationError for
    anything else — a local time is ambiguous, so it needs a UTC offset."""
    when = run_at
    if isinstance(run_at, str):
        if not 10 <= len(run_at) <= 40:
            raise ValidationError("'run_at' must be an ISO 8601 time with an offset")
        try:
            when = datetime.fromisoformat(run_at)
        except ValueError as exc:
            raise ValidationError(
                "'run_at' must be an ISO 8601 time with an offset, e.g. 2026-12-01T09:30:00Z"
            ) from exc
    if not isinstance(when, datetime):
        raise ValidationError("'run_at' must be an ISO 8601 time with an offset")
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValidationError(
            "'run_at' needs a UTC offset (Z or ±hh:mm): a local time is ambiguous"
        )
    try:
        return int(when.timestamp() * 1000)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValidationError("'run_at' is out of range") from exc


class OptionKeywords(TypedDict, total=False):
    """The keyword arguments the submitting functions took before `JobOptions` (each builds
    the field of its name; a mapping `budget` or `unique` is read as `POST /jobs` reads one)."""

    idempotency_key: str | None
    budget: Budget | Mapping[str, int] | None
    deadline_seconds: int | None
    max_attempts: int | None
    priority: Priority | None
    run_at: str | datetime | None
    delay_seconds: int | None
    traceparent: str | None
    debounce: Debounce | None
    unique: Unique | Mapping[str, Any] | None


@dataclass(frozen=True)
class JobOptions:
    """How to submit a job; every field is optional, and None means the default.

        client.submit("shout", {"text": "hi"}, options=JobOptions(idempotency_key="o-1"))

    A field that is out of range raises `ValidationError` (HTTP 400) when the options are made,
    with the message `POST /jobs` gives for it."""

    idempotency_key: str | None = None
    """The same key and the same request give the same job (1–128 of `A-Z a-z 0-9 . _ : -`);
    the same key with another request is a conflict (409 `idempotency_key_reused`)."""
    budget: Budget | None = None
    """The most the job may cost (`max_cost`) and the most steps it may run (`max_steps`)."""
    deadline_seconds: int | None = None
    """1 s to 24 h (default 1 h), counted from when the job is due: past it, the job fails."""
    max_attempts: int | None = None
    """1 to 10 (default the kind's, else the deployment's `MAX_ATTEMPTS`)."""
    priority: Priority | None = None
    """`high`, `normal` or `low` (default the kind's, else normal): which queue wakes it."""
    run_at: str | datetime | None = None
    """Not started before this time (ISO 8601 with an offset, or an aware datetime), at most
    365 days ahead; a time in the past means now."""
    delay_seconds: int | None = None
    """Not started before this many seconds from accept (0 to 365 days); not with `run_at`."""
    traceparent: str | None = None
    """The W3C trace the job joins (`00-<trace id>-<span id>-<flags>`); None: the current
    OpenTelemetry span's, else a new trace. A malformed one is ignored, as OpenTelemetry's
    propagator ignores it (decision TR1). Not part of the request's fingerprint: a repeat
    with another trace is still a repeat."""
    debounce: Debounce | None = None
    """Collapse this submission into its key's pending job (`Debounce`, decisions DB1–DB6);
    None: the kind's, if it declares one. Not with an idempotency key, nor a delay."""
    unique: Unique | None = None
    """At most one job per unique key in a window (`Unique(by=[...], period_seconds=…)`): a
    second is not created, the first one answers (`duplicate`). A kind that declares one keeps
    it: a request may repeat it, not change it. Not part of the request's fingerprint."""

    def __post_init__(self) -> None:
        check_idempotency_key(self.idempotency_key)
        if self.unique is not None and not isinstance(self.unique, Unique):
            raise ValidationError("'unique' must be a Unique(by=[...], period_seconds=...)")
        if self.traceparent is not None and not isinstance(self.traceparent, str):
            raise ValidationError("'traceparent' must be a string")
        if self.budget is not None:
            if not isinstance(self.budget, Budget):
                raise ValidationError("'budget' must be a Budget(max_cost=…, max_steps=…)")
            if self.budget.max_cost is not None:
                bounded_int(self.budget.max_cost, "budget.max_cost", low=0, high=MAX_BUDGET_COST)
            if self.budget.max_steps is not None:
                bounded_int(self.budget.max_steps, "budget.max_steps", low=0, high=MAX_BUDGET_STEPS)
        if self.deadline_seconds is not None:
            bounded_int(self.deadline_seconds, "deadline_seconds", low=1, high=MAX_DEADLINE_SECONDS)
        if self.max_attempts is not None:
            bounded_int(self.max_attempts, "max_attempts", low=1, high=MAX_ATTEMPTS_LIMIT)
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValidationError("give 'run_at' or 'delay_seconds', not both")
        if self.delay_seconds is not None:
            bounded_int(self.delay_seconds, "delay_seconds", low=0, high=MAX_DELAY_SECONDS)
        if self.run_at is not None:
            run_at_ms(self.run_at)
        if self.priority is not None:
            check_priority(self.priority)
        if self.debounce is not None:
            check_debounce_options(self.debounce, self)

    @staticmethod
    def of(options: JobOptions | None = None, **keywords: Any) -> JobOptions:
        """`options` with the keyword arguments the submitting functions took before JobOptions
        (`idempotency_key=`, `budget={"max_cost": 5}`, …; None: not given) laid over it — so
        `submit(kind, payload, max_attempts=2)` keeps working. TypeError for an unknown name."""
        given = {name: value for name, value in keywords.items() if value is not None}
        unknown = sorted(set(given) - {f.name for f in fields(JobOptions)})
        if unknown:
            raise TypeError(f"unknown job option(s): {', '.join(unknown)}")
        if "budget" in given:
            given["budget"] = budget_of(given["budget"])
        if "unique" in given:
            given["unique"] = unique_of(given["unique"])
        base = options or JobOptions()
        if not given:
            return base
        current = {f.name: getattr(base, f.name) for f in fields(JobOptions)}
        return JobOptions(**{**current, **given})

    @property
    def run_at_ms(self) -> int | None:
        """`run_at` as epoch milliseconds (None when not given)."""
        return None if self.run_at is None else run_at_ms(self.run_at)

    def body_fields(self) -> JsonObject:
        """The options as `POST /jobs` fields (the key and the trace travel in their headers,
        not here): what
        the HTTP client sends; the fields left at None are left out."""
        body: JsonObject = {}
        if self.budget is not None:
            budget = {"max_cost": self.budget.max_cost, "max_steps": self.budget.max_steps}
            body["budget"] = {name: value for name, value in budget.items() if value is not None}
        for name in ("deadline_seconds", "max_attempts", "delay_seconds", "priority"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        if isinstance(self.run_at, datetime):
            body["run_at"] = self.run_at.isoformat()
        elif self.run_at is not None:
            body["run_at"] = self.run_at
        if self.debounce is not None:
            body["debounce"] = self.debounce.body()
        if self.unique is not None:
            body["unique"] = self.unique.body()
        return body


@dataclass(frozen=True)
class Submission:
    """A job request as the accept path takes it: the kind's name, the payload and the options."""

    kind: str
    payload: JsonObject
    options: JobOptions = JobOptions()
    payload_upload: str | None = None
    """The request named an upload (`POST /uploads`) instead of a payload: the payload is read
    from it at accept (service/uploads.py), and `payload` is empty until then (decision LD8)."""

    @staticmethod
    def from_body(
        body: Any,
        idempotency_key: str | None = None,
        known_kinds: Collection[str] | None = None,
    ) -> Submission:
        """A `POST /jobs` body (and its `Idempotency-Key` header) parsed at the edge: the body's
        shape, the kind's name (one of `known_kinds`, when given) and each option. The payload
        itself is the kind's to check, at accept. (Its `traceparent` header is the parent of
        the request's span, whose trace the job joins: handlers/api.py.)"""
        check_idempotency_key(idempotency_key)
        if not isinstance(body, dict):
            raise ValidationError("the body must be a JSON object")
        extra = sorted(set(body) - JOB_FIELDS)
        if extra:
            raise ValidationError(f"unknown field(s): {', '.join(extra)}")
        kind = body.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValidationError("'kind' is required and must be a string")
        if known_kinds is not None:
            check_kind_known(kind, known_kinds)
        payload = body.get("payload")
        upload = body.get("payload_upload")
        if upload is not None:
            if "payload" in body:
                raise ValidationError("give 'payload' or 'payload_upload', not both")
            if not isinstance(upload, str) or not UPLOAD_ID.fullmatch(upload):
                raise ValidationError(
                    "'payload_upload' must be an upload_id that POST /uploads answered",
                    code="upload_not_found",
                )
            payload = {}
        elif not isinstance(payload, dict):
            raise ValidationError("'payload' is required and must be a JSON object")
        # An explicit null is no deadline, attempts or priority (the OpenAPI document refuses
        # it); a null budget, run_at or delay is the default.
        for name in ("deadline_seconds", "max_attempts", "priority"):
            if name in body and body[name] is None:
                if name == "priority":
                    check_priority(None)
                raise ValidationError(f"'{name}' must be an integer")
        options = JobOptions(
            idempotency_key=idempotency_key,
            budget=budget_of(body.get("budget")),
            deadline_seconds=body.get("deadline_seconds"),
            max_attempts=body.get("max_attempts"),
            priority=body.get("priority"),
            run_at=_run_at_text(body.get("run_at")),
            delay_seconds=body.get("delay_seconds"),
            debounce=Debounce.from_body(body.get("debounce")),
            unique=unique_of(body.get("unique")),
        )
        return Submission(kind, payload, options, payload_upload=upload)


def _run_at_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValidationError("'run_at' must be an ISO 8601 time with an offset")
    return value


def check_debounce_options(debounce: Any, options: JobOptions) -> None:
    """A 400 unless `debounce` is a Debounce that goes with the other options: not with an
    idempotency key (a retry collapses into the same pending job anyway), nor with a delay
    (the window is the delay) — decision DB4."""
    if not isinstance(debounce, Debounce):
        raise ValidationError("'debounce' must be a Debounce(by=..., seconds=..., keep=...)")
    if options.idempotency_key is not None:
        raise ValidationError(
            "a debounced submission takes no Idempotency-Key: a retry collapses into the "
            "same pending job anyway",
            code="debounce_with_key",
        )
    if options.run_at is not None or options.delay_seconds is not None:
        raise ValidationError("give 'debounce' or 'run_at' / 'delay_seconds', not both")


def check_kind_known(kind: str, known: Collection[str]) -> None:
    """ValidationError `unknown_kind`, naming the known kinds, unless `kind` is one of them."""
    if kind not in known:
        raise ValidationError(
            f"unknown kind '{kind[:64]}'; known kinds: {', '.join(sorted(known))}",
            code="unknown_kind",
        )


__all__ = ["JobOptions", "OptionKeywords", "Submission", "check_idempotency_key"]
