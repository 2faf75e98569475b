"""The HTTP API (docs/architecture.md "HTTP API"): one route, one service call. Identity comes only
from the JWT
authorizer's claims; errors use one envelope and one status table."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold import console
from leasehold.domain import sizes
from leasehold.domain.batch import MAX_BATCH_BODY_BYTES, submissions_of
from leasehold.domain.errors import (
    ConflictError,
    ForbiddenError,
    JobNotFoundError,
    LeaseholdError,
    StoreRefusedError,
    StoreUnavailableError,
    SubmitRateExceededError,
    UnauthenticatedError,
    ValidationError,
)
from leasehold.domain.job import Owner
from leasehold.domain.options import Submission
from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import (
    metrics,
    runtime,
    trim_log_context,
    xray_annotate,
    xray_traced,
)
from leasehold.sdk.routes import Routes, body_of, caller_of, header_of, query_of, require_text
from leasehold.service.jobs import JobService, batch_results
from leasehold.service.ops import OpsService
from leasehold.service.schedules import ScheduleService
from leasehold.service.signals import WorkflowService
from leasehold.service.tracing import SpanKind, span_under, trace_id_of

logger = Logger(service="leasehold")


STATUS_BY_ERROR: list[tuple[type[LeaseholdError], int]] = [
    (ValidationError, 400),
    (StoreRefusedError, 400),
    (UnauthenticatedError, 401),
    (ForbiddenError, 403),
    (JobNotFoundError, 404),
    (ConflictError, 409),
    (SubmitRateExceededError, 429),
    (StoreUnavailableError, 503),
]


def _envelope(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps({"error": {"code": code, "message": message}}),
        headers=headers,
    )


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status, content_type="application/json", body=json.dumps(body), headers=headers
    )


def _on_leasehold_error(error: LeaseholdError) -> Response:
    for error_type, mapped in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            # a body or payload over its limit is a 413 (decision LD2)
            status = 413 if error.code == "payload_too_large" else mapped
            headers = {"Retry-After": "2"} if status == 503 else None
            if isinstance(error, SubmitRateExceededError):
                headers = {"Retry-After": str(error.retry_after_seconds)}
            if status >= 500:
                logger.warning("dependency unavailable", extra={"detail": str(error)})
            elif isinstance(error, StoreRefusedError):  # the request, or a bug: say which code
                logger.warning("the store refused the request", extra={"detail": str(error)})
            return _envelope(status, error.code, str(error), headers)
    logger.exception("unmapped leasehold error")
    return _envelope(500, "internal_error", "something went wrong; nothing is promised")


def _on_no_route(_: NotFoundError) -> Response:
    # No route's pattern matches a path segment holding a lone surrogate (it is no `\w`): such
    # a path is not text at all, so it is the request that is wrong (400), not the route (404).
    try:
        require_text(str(app.current_event.raw_event.get("rawPath") or ""), "the path")
    except ValidationError as error:
        return _envelope(400, error.code, str(error))
    return _envelope(404, "not_found", "no such route")


def _on_unexpected(_: Exception) -> Response:
    logger.exception("unexpected error")
    return _envelope(500, "internal_error", "something went wrong; nothing is promised")


def with_error_envelope(resolver: APIGatewayHttpResolver) -> APIGatewayHttpResolver:
    """`resolver`, answering errors as this API does: a `LeaseholdError` by STATUS_BY_ERROR in
    the one envelope, no route a 404 `not_found`, anything else a 500 that promises nothing
    (leasehold.testing resolves an application's routes through a resolver made this way)."""
    resolver.exception_handler(LeaseholdError)(_on_leasehold_error)
    resolver.exception_handler(NotFoundError)(_on_no_route)
    resolver.exception_handler(Exception)(_on_unexpected)
    return resolver


app = with_error_envelope(APIGatewayHttpResolver())


# ------------------------------------------------------------------------- identity and input


def caller() -> Owner:
    """The caller from the authorizer's JWT claims (never from the body)."""
    return caller_of(app.current_event.raw_event)


def operator() -> Owner:
    owner = caller()
    if not owner.is_operator:
        raise ForbiddenError("operators only")
    return owner


def json_body(required: bool = True) -> Any:
    return body_of(app.current_event.raw_event, required=required)


def large_body(instead: str, *, required: bool = True) -> Any:
    """The body of a route that takes large values (`POST /jobs`, a signal, a callback): up to
    the API's 5 MiB, past it a 413 `payload_too_large` saying what to do `instead` (LD2, LD13)."""
    try:
        return body_of(
            app.current_event.raw_event, required=required, max_bytes=sizes.API_BODY_LIMIT
        )
    except ValidationError as refused:
        if refused.code == "too_large":
            raise ValidationError(f"{refused}; {instead}", code="payload_too_large") from None
        raise


_SIGNAL_INSTEAD = "put a larger body in your own bucket and signal its key"


def _header(name: str) -> str | None:
    return header_of(app.current_event.raw_event, name)


def _query(name: str) -> str | None:
    return query_of(app.current_event.raw_event, name)


@cache
def jobs() -> JobService:
    return runtime().jobs()


@cache
def schedules() -> ScheduleService:
    return runtime().schedules()


@cache
def ops() -> OpsService:
    return runtime().ops()


@cache
def workflows() -> WorkflowService:
    return runtime().workflows()


# ------------------------------------------------------------------------- routes


@app.get("/health")
def health() -> Response:
    return _json(200, {"status": "ok"})


@app.post("/jobs")
def submit_job() -> Response:
    owner = caller()
    service = jobs()
    # The trace header is read as every header is: text, or a 400 (a malformed but textual
    # one only starts a new trace, decision TR1).
    _header("traceparent")
    # Parsed here, at the edge: the service takes typed values (decision OW1).
    body = large_body(
        "upload a larger payload first and name it as 'payload_upload' "
        "(POST /uploads; Client.submit does it for you, decision LD7)"
    )
    submission = Submission.from_body(
        body, _header("Idempotency-Key"), known_kinds=service.intake.submittable()
    )
    accepted = service.accept(owner, submission)
    location = f"/jobs/{accepted.job_id}"
    trace_id = trace_id_of(accepted.traceparent)
    xray_annotate(leasehold_job_id=accepted.job_id, leasehold_trace_id=trace_id or "")
    logger.info(
        "accepted",
        extra={"job_id": accepted.job_id, "new_job": accepted.created, "trace_id": trace_id},
    )
    answer: dict[str, object] = {
        "job_id": accepted.job_id,
        "state": accepted.state,
        "status_url": location,
    }
    if accepted.debounced:  # collapsed into its key's pending job (decision DB2)
        answer["debounced"] = True
    if accepted.duplicate:  # another job holds the request's unique key (decision UQ2)
        return _json(200, answer | {"duplicate": True}, headers={"Location": location})
    return _json(202, answer, headers={"Location": location})


@app.post("/jobs/batch")
def submit_batch() -> Response:
    """Up to 100 jobs, each accepted or refused on its own: 200 with a result per item, in
    order (decisions BA1-BA6); a key travels in each item, not in a header."""
    owner = caller()
    service = jobs()
    if _header("Idempotency-Key") is not None:
        raise ValidationError(
            "POST /jobs/batch takes an 'idempotency_key' in each job request, not the "
            "Idempotency-Key header",
            code="invalid_idempotency_key",
        )
    body = body_of(app.current_event.raw_event, max_bytes=MAX_BATCH_BODY_BYTES)
    items = submissions_of(body, known_kinds=service.intake.submittable())
    outcomes = service.accept_many(owner, items)
    logger.info("batch", extra={"jobs": len(outcomes)})
    return _json(200, batch_results(outcomes))


@app.post("/uploads")
def create_upload() -> Response:
    """An owner-scoped PUT for an input too large for a `POST /jobs` body, good for 15 minutes;
    a job names it as `"payload_upload"` (decisions LD7–LD9)."""
    return _json(201, jobs().create_upload(caller(), json_body()))


@app.get("/jobs")
def list_jobs() -> Response:
    return _json(
        200,
        jobs().list(
            caller(), state=_query("state"), limit=_query("limit"), cursor=_query("cursor")
        ),
    )


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    return _json(200, jobs().view(caller(), job_id))


@app.get("/jobs/<job_id>/result")
def get_result(job_id: str) -> Response:
    """A large result, the owner's only (DESIGN §20): `{"job_id", "result"}` when a Lambda
    answer can carry it, else a 303 to a presigned URL (the bare result) good for five minutes
    (decision LD3)."""
    owner, service = caller(), jobs()
    body = service.result(owner, job_id)
    if len(body) > sizes.API_BODY_LIMIT:
        link = service.result_link(owner, job_id)
        if link is not None:
            return Response(status_code=303, body="", headers={"Location": link})
    return _result_answer(job_id, body)


def _result_answer(job_id: str, body: bytes) -> Response:
    """`{"job_id": …, "result": …}` around the stored JSON, without parsing it again."""
    text = f'{{"job_id":{json.dumps(job_id)},"result":{body.decode()}}}'
    return Response(status_code=200, content_type="application/json", body=text)


@app.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response:
    return _json(202, jobs().cancel(caller(), job_id))


@app.post("/jobs/<job_id>/approval")
def decide_approval(job_id: str) -> Response:
    owner = caller()
    return _json(200, jobs().decide_approval(owner, job_id, json_body()))


@app.post("/jobs/<job_id>/signals/<name>")
def signal_job(job_id: str, name: str) -> Response:
    owner = caller()
    body = large_body(_SIGNAL_INSTEAD, required=False)
    return _json(202, workflows().signal(owner, job_id, name, body))


@app.get("/jobs/<job_id>/children")
def list_children(job_id: str) -> Response:
    return _json(
        200,
        workflows().children(caller(), job_id, cursor=_query("cursor"), limit=_query("limit")),
    )


@app.post("/callbacks/<token>")
def callback(token: str) -> Response:
    # No identity (the template's route has no authorizer): the token is the authority.
    return _json(202, workflows().callback(token, large_body(_SIGNAL_INSTEAD, required=False)))


@app.post("/schedules")
def create_schedule() -> Response:
    view = schedules().create(caller(), json_body())
    location = f"/schedules/{view['schedule_id']}"
    return _json(201, view, headers={"Location": location})


@app.get("/schedules")
def list_schedules() -> Response:
    return _json(200, schedules().list(caller(), limit=_query("limit"), cursor=_query("cursor")))


@app.get("/schedules/<schedule_id>")
def get_schedule(schedule_id: str) -> Response:
    return _json(200, schedules().get(caller(), schedule_id))


@app.delete("/schedules/<schedule_id>")
def delete_schedule(schedule_id: str) -> Response:
    return _json(200, schedules().delete(caller(), schedule_id))


@app.get("/ops/summary")
def ops_summary() -> Response:
    operator()
    return _json(200, ops().summary())


@app.get("/ops/jobs/<job_id>/result")
def ops_result(job_id: str) -> Response:
    """Any job's result, whole, for an operator (the console's download, DESIGN §20)."""
    return _result_answer(job_id, jobs().result(operator(), job_id))


@app.get("/ops/jobs")
def ops_jobs() -> Response:
    operator()
    return _json(
        200,
        ops().jobs(
            _query("state"),
            _query("limit"),
            _query("cursor"),
            kind=_query("kind"),
            tenant=_query("tenant"),
        ),
    )


@app.get("/ops/jobs/<job_id>")
def ops_show(job_id: str) -> Response:
    operator()
    return _json(200, ops().show(job_id))


@app.post("/ops/jobs/<job_id>/replay")
def ops_replay(job_id: str) -> Response:
    who = operator()
    return _json(202, ops().replay(job_id, who, json_body(required=False)))


@app.post("/ops/jobs/<job_id>/resolve")
def ops_resolve(job_id: str) -> Response:
    who = operator()
    return _json(200, ops().resolve(job_id, who, json_body()))


@app.post("/ops/jobs/<job_id>/cancel")
def ops_cancel(job_id: str) -> Response:
    who = operator()
    return _json(202, ops().cancel(job_id, who, json_body()))


@app.get("/ops/jobs/<job_id>/children")
def ops_children(job_id: str) -> Response:
    operator()
    page = workflows().ops_children(job_id, cursor=_query("cursor"), limit=_query("limit"))
    return _json(200, page)


@app.post("/ops/jobs/<job_id>/signals/<name>")
def ops_signal(job_id: str, name: str) -> Response:
    who = operator()
    return _json(202, workflows().ops_signal(who, job_id, name, large_body(_SIGNAL_INSTEAD)))


@app.get("/ops/kinds")
def ops_kinds() -> Response:
    operator()
    return _json(200, ops().kinds())


@app.post("/ops/kinds/<kind>/pause")
def ops_pause_kind(kind: str) -> Response:
    who = operator()
    return _json(200, ops().pause_kind(kind, who, json_body()))


@app.post("/ops/kinds/<kind>/resume")
def ops_resume_kind(kind: str) -> Response:
    who = operator()
    return _json(200, ops().resume_kind(kind, who, json_body()))


@app.post("/ops/dlq/redrive")
def ops_redrive() -> Response:
    who = operator()
    return _json(200, ops().redrive(who, json_body()))


def _console_asset(name: str) -> Response:
    text = console.asset(name)
    if text is None:
        return _envelope(404, "not_found", "no such console asset")
    return Response(status_code=200, body=text, headers=console.headers(name))


@app.get("/console")
def console_page() -> Response:
    """The console's shell: no identity needed, no data in it (leasehold.console)."""
    return _console_asset(console.PAGE)


@app.get("/console/<asset>")
def console_file(asset: str) -> Response:
    return _console_asset(asset)


_MOUNTED: list[Routes] = []


@cache
def mounted() -> APIGatewayHttpResolver:
    """The API with every configured application's routes (once per cold start; a router
    already mounted by an earlier start in this process is not mounted twice)."""
    loaded = runtime().loaded
    for routes in loaded.routes if loaded else ():
        if not any(routes is done for done in _MOUNTED):
            app.include_router(routes)
            _MOUNTED.append(routes)
    return app


def _span_name(event: JsonObject) -> str:
    """`POST /jobs`, `GET /jobs/{job_id}`: the route, never the path (ids stay attributes)."""
    route = str(event.get("routeKey") or "")
    if " " in route:
        return route[:120]
    method = str((event.get("requestContext") or {}).get("http", {}).get("method", "?"))
    return f"{method[:10]} {route or 'route'}"


def _header_traceparent(event: JsonObject) -> str | None:
    """The request's `traceparent` header as it came (checked when it is used)."""
    for name, value in (event.get("headers") or {}).items():
        if isinstance(name, str) and name.lower() == "traceparent" and isinstance(value, str):
            return value
    return None


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@xray_traced
def handler(event: JsonObject, context: LambdaContext) -> JsonObject:
    trim_log_context(logger)
    resolver = mounted()  # the engine first: a trace file's provider is installed with it
    # The request's span: a child of its `traceparent` header when that is valid, else the
    # root of a new trace (decision TR1); a job it accepts joins this trace.
    with span_under(
        _span_name(event),
        _header_traceparent(event),
        kind=SpanKind.SERVER,
        attributes={"leasehold.function": "api"},
        new_trace=True,
    ):
        return resolver.resolve(event, context)
