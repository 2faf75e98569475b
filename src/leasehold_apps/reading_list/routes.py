"""The reading list's HTTP routes (docs/architecture.md "HTTP API", "The reading list";
docs/openapi.yaml): `/bookmarks…`, mounted on the
API function with the engine's identity, input and error rules (`leasehold.apps.Routes`). One route,
one service call, over the function's own table door (`Engine.current()`)."""

from __future__ import annotations

from functools import lru_cache

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response

from leasehold.apps import Engine, Routes, respond
from leasehold_apps.reading_list.service import BookmarkService

logger = Logger(service="leasehold", child=True)
routes = Routes()


@lru_cache(maxsize=2)
def _service(engine: Engine) -> BookmarkService:
    return BookmarkService(engine)


def bookmarks() -> BookmarkService:
    """The service over this cold start's engine (built once per cold start)."""
    return _service(Engine.current())


@routes.post("/bookmarks")
def create_bookmark() -> Response:
    owner = routes.caller()
    view, created = bookmarks().create(owner, routes.body(), routes.header("Idempotency-Key"))
    location = f"/bookmarks/{view['id']}"
    logger.info(
        "bookmark saved",
        extra={
            "bookmark_id": view["id"],
            "new_bookmark": created,
            "job_id": view["title_job"]["job_id"],
        },
    )
    return respond(201, view, headers={"Location": location})


@routes.get("/bookmarks")
def list_bookmarks() -> Response:
    owner = routes.caller()
    return respond(
        200, bookmarks().list(owner, limit=routes.query("limit"), cursor=routes.query("cursor"))
    )


@routes.post("/bookmark-imports")
def import_bookmarks() -> Response:
    owner = routes.caller()
    accepted = bookmarks().start_import(owner, routes.body(), routes.header("Idempotency-Key"))
    location = f"/bookmark-imports/{accepted.job_id}"
    logger.info(
        "accepted",
        extra={"job_id": accepted.job_id, "new_job": accepted.created, "kind": "import"},
    )
    return respond(
        202,
        {
            "import_id": accepted.job_id,
            "state": accepted.state,
            "status_url": location,
            "job_url": f"/jobs/{accepted.job_id}",
        },
        headers={"Location": location},
    )


@routes.get("/bookmark-imports/<import_id>")
def get_import(import_id: str) -> Response:
    return respond(200, bookmarks().import_view(routes.caller(), import_id))


@routes.get("/bookmarks/<bookmark_id>")
def get_bookmark(bookmark_id: str) -> Response:
    return respond(200, bookmarks().view(routes.caller(), bookmark_id))


@routes.patch("/bookmarks/<bookmark_id>")
def edit_bookmark(bookmark_id: str) -> Response:
    owner = routes.caller()
    view = bookmarks().edit(owner, bookmark_id, routes.body())
    title_job = view.get("title_job") or {}
    logger.info(
        "bookmark edited",
        extra={"bookmark_id": bookmark_id, "version": view.get("version")}
        | ({"job_id": title_job["job_id"]} if title_job.get("job_id") else {}),
    )
    return respond(200, view)


@routes.post("/bookmarks/<bookmark_id>/enrich")
def enrich_bookmark(bookmark_id: str) -> Response:
    owner = routes.caller()
    accepted = bookmarks().enrich(
        owner, bookmark_id, routes.body(required=False), routes.header("Idempotency-Key")
    )
    location = f"/jobs/{accepted.job_id}"
    logger.info(
        "accepted",
        extra={
            "job_id": accepted.job_id,
            "new_job": accepted.created,
            "kind": "enrich",
            "bookmark_id": bookmark_id,
        },
    )
    return respond(
        202,
        {"job_id": accepted.job_id, "state": accepted.state, "status_url": location},
        headers={"Location": location},
    )


@routes.patch("/bookmarks/<bookmark_id>/read")
def mark_bookmark_read(bookmark_id: str) -> Response:
    owner = routes.caller()
    return respond(200, bookmarks().mark_read(owner, bookmark_id, routes.body()))


@routes.delete("/bookmarks/<bookmark_id>")
def delete_bookmark(bookmark_id: str) -> Response:
    bookmarks().delete(routes.caller(), bookmark_id)
    logger.info("bookmark deleted", extra={"bookmark_id": bookmark_id})
    return respond(204)
