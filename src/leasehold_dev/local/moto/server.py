"""The embedded moto server of the local stack: moto's threaded server with leasehold's patches
installed (leasehold_dev.local.moto.*), DynamoDB served one request at a time, and three local-only
paths (a journal restore, an outage switch, detaching moto's own Lambda invocations)."""

from __future__ import annotations

import json
import threading
from typing import Any

from leasehold_dev.local.moto.durable import RESTORE_PATH, Durability


def start_moto(durability: Durability | None = None) -> tuple[Any, str]:
    """An embedded moto server on 127.0.0.1 and a free port. DynamoDB requests are served one at
    a time: DynamoDB evaluates a condition and applies its write atomically, moto's threaded
    server does not — without this, two workers could both pass the same claim condition.
    Transactions run leasehold_dev.local.moto.transactions (which also keeps each
    `ClientRequestToken` for ten minutes, as DynamoDB does) and queries
    leasehold_dev.local.moto.queries (neither costs time in proportion to the table); an update
    refused for the item's size changes nothing (leasehold_dev.local.moto.item_size); attribute
    values are serialized by the fast path of leasehold_dev.local.moto.serialization. With
    `durability` (a data directory's journal, leasehold_dev.local.moto.durable), every write it
    acknowledges is on disk first and `POST RESTORE_PATH` loads the directory's state. With
    `LEASEHOLD_GSI_LAG_MS` in the environment, index queries lag that far behind the table
    (leasehold_dev.local.moto.index_lag), as a GSI may on AWS."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from leasehold_dev.local.listen import LISTEN_BACKLOG
    from leasehold_dev.local.moto import (
        expressions,
        index_lag,
        item_size,
        queries,
        serialization,
        serving,
        text,
        transactions,
    )

    transactions.install()
    text.install()
    item_size.install()
    serving.install()
    expressions.install()
    serialization.install()
    queries.install()
    index_lag.install()
    index_lag.configure_from_environment()
    dynamodb_lock = threading.Lock()
    outage = threading.Event()

    def atomic_dynamodb(app: Any) -> Any:
        def serve(environ: dict[str, Any], start_response: Any) -> Any:
            if environ.get("PATH_INFO") == OUTAGE_PATH:
                return _outage_switch(outage, environ, start_response)
            if environ.get("PATH_INFO") == DETACH_PATH and environ["REQUEST_METHOD"] == "POST":
                _detach_moto_invocations()
                start_response("204 No Content", [])
                return []
            if durability is not None and environ.get("PATH_INFO") == RESTORE_PATH:
                with dynamodb_lock:
                    return durability.restore_endpoint(environ, start_response)
            if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB_"):
                if outage.is_set():
                    return _dynamodb_unavailable(environ, start_response)
                if durability is not None:
                    return durability.dynamodb(app, environ, start_response, dynamodb_lock)
                with dynamodb_lock:
                    return list(app(environ, start_response))
            if durability is not None and durability.is_object_write(environ):
                return durability.object_write(app, environ, start_response, dynamodb_lock)
            return app(environ, start_response)

        return serve

    class AtomicMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = atomic_dynamodb(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address,
                self._port,
                app,
                True,
                request_handler=serving.KeepAliveRequestHandler,
            )
            self._server.socket.listen(LISTEN_BACKLOG)  # werkzeug's is 128: say how many
            self._server_ready_event.set()
            self._server.serve_forever(poll_interval=0.1)  # stop() waits for a poll

    server = AtomicMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


DETACH_PATH = "/_leasehold/detach-invocations"
"""Local only: `POST` here runs `_detach_moto_invocations` in the server's own process."""

OUTAGE_PATH = "/_leasehold/outage"
"""Local only: `POST {"dynamodb": true|false}` here makes the embedded server answer every
DynamoDB request (the table and its indexes; not its stream) 503 `ServiceUnavailable`, or stops
doing so; `GET` says which. A real outage of the table for every client — the API, the relay,
the sweeper and every worker process — to show what an outage does (`make demo`)."""


def _outage_switch(outage: Any, environ: dict[str, Any], start_response: Any) -> list[bytes]:
    if environ.get("REQUEST_METHOD") == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            wanted = json.loads(environ["wsgi.input"].read(length) or b"{}").get("dynamodb")
        except (ValueError, AttributeError):
            wanted = None
        if not isinstance(wanted, bool):
            start_response("400 Bad Request", [("Content-Type", "application/json")])
            return [b'{"error": "send {"dynamodb": true|false}"}']
        if wanted:
            outage.set()
        else:
            outage.clear()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({"dynamodb": outage.is_set()}).encode()]


def _dynamodb_unavailable(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))  # keep-alive stays sane
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#ServiceUnavailable",
        "message": "local outage: the table is unavailable (leasehold local stack)",
    }
    start_response("503 Service Unavailable", [("Content-Type", "application/x-amz-json-1.0")])
    return [json.dumps(body).encode()]


def set_dynamodb_outage(endpoint: str, on: bool) -> bool:
    """Switch the embedded server's DynamoDB outage on or off; returns the state it reports."""
    answer = post(endpoint + OUTAGE_PATH, json.dumps({"dynamodb": on}).encode())
    return bool(json.loads(answer)["dynamodb"])


def post(url: str, body: bytes, timeout: float = 5) -> bytes:
    import urllib.request

    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return bytes(answer.read())


def _detach_moto_invocations() -> None:
    """moto would run a mapped Lambda itself (through Docker, absent here) on every stream record
    and queue message — and drop them when that fails. The local pumps own the event sources,
    so the embedded server's own hooks are cleared (the mappings stay readable in StackInfo), in
    every region the server holds (the stack's is the one it has)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    for dynamodb in list(dynamodb_backends[DEFAULT_ACCOUNT_ID].values()):
        for table in dynamodb.tables.values():
            table.lambda_event_source_mappings.clear()
    for sqs in list(sqs_backends[DEFAULT_ACCOUNT_ID].values()):
        for queue in sqs.queues.values():
            queue.lambda_event_source_mappings.clear()


def detach_invocations(endpoint: str | None) -> None:
    """Clear moto's own Lambda hooks on the stack's tables and queues (the pumps own the event
    sources): over HTTP when the server runs in another process (leasehold_dev.local.moto.process),
    in this process otherwise."""
    if endpoint:
        post(endpoint + DETACH_PATH, b"")
    else:
        _detach_moto_invocations()
