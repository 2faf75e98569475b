"""The `leasehold` command: the local stack, a worker to attach, and in-process invocation."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any


class CliError(Exception):
    """A problem the user can fix: printed as one line, exit code 2."""


def _cmd_local_up(args: argparse.Namespace) -> int:
    from leasehold.local.runner import LocalStack
    from leasehold.local.stack import StackError
    from leasehold.local.template import TemplateError
    from leasehold.store.faults import FaultPlan, FaultSpecError

    if args.workers < 0 or args.workers > 16:
        raise CliError("--workers must be between 0 and 16")
    try:
        FaultPlan.parse(args.faults)
    except FaultSpecError as exc:
        raise CliError(f"--faults: {exc}") from exc
    stack = LocalStack(
        Path(args.template), port=args.port, state_path=Path(args.state), faults=args.faults
    )
    stopped = threading.Event()

    def on_signal(*_: object) -> None:
        stopped.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        try:
            stack.start()
        except (StackError, TemplateError) as exc:
            raise CliError(str(exc)) from exc
        for index in range(args.workers):
            stack.spawn_worker(f"worker-{index + 1}")
        faults = f"; faults {args.faults}" if args.faults else ""
        print(
            f"leasehold local stack ready at {stack.url} (moto; {args.workers} workers{faults})",
            flush=True,
        )
        while not stopped.wait(0.5):
            pass
    finally:
        stack.stop()
        print("leasehold local stack stopped", flush=True)
    return 0


def _cmd_local_worker(args: argparse.Namespace) -> int:
    from leasehold.local.runner import run_worker
    from leasehold.local.stack import StackError

    try:
        run_worker(Path(args.state), args.name, parent_pid=args.parent_pid)
    except StackError as exc:
        raise CliError(str(exc)) from exc
    return 0


def _cmd_invoke(args: argparse.Namespace) -> int:
    from leasehold.local.invoke import invoke, resolve_function
    from leasehold.local.stack import StackError, StackInfo

    try:
        stack = StackInfo.load(Path(args.state))
        function = resolve_function(stack, args.function)
    except (StackError, KeyError) as exc:
        raise CliError(str(exc).strip("'\"")) from exc
    try:
        event: Any = json.loads(Path(args.event).read_text())
    except FileNotFoundError as exc:
        raise CliError(f"event file not found: {args.event}") from exc
    except ValueError as exc:
        raise CliError(f"event file {args.event} is not valid JSON: {exc}") from exc
    import warnings

    # As with `sam local invoke`: the function's logs go to stderr, its result to stdout.
    # Powertools warns when an invocation published no metric (a health check): not news here.
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        result = invoke(stack, function, event)
    print(json.dumps(result, indent=2, default=str))
    return 0


def _ops_request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    else:
        headers["X-Demo-User"] = "ops"  # the local gateway's stand-in for an operator's JWT
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        args.url.rstrip("/") + path, data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        detail = json.loads(error.read() or b"{}").get("error", {})
        raise CliError(
            f"{error.code} {detail.get('code', '')}: {detail.get('message', '')}"
        ) from error
    except urllib.error.URLError as error:
        raise CliError(f"cannot reach {args.url}: {error.reason}") from error


def _cmd_ops(args: argparse.Namespace) -> int:
    if args.ops_command == "summary":
        result = _ops_request(args, "GET", "/ops/summary")
    elif args.ops_command == "jobs":
        result = _ops_request(args, "GET", f"/ops/jobs?state={args.state}&limit={args.limit}")
    elif args.ops_command == "show":
        result = _ops_request(args, "GET", f"/ops/jobs/{args.job_id}")
    elif args.ops_command == "replay":
        replay: dict[str, Any] = {}
        if args.note:
            replay["note"] = args.note
        if args.checked_provider:
            replay["checked_provider"] = True
        result = _ops_request(args, "POST", f"/ops/jobs/{args.job_id}/replay", replay)
    elif args.ops_command == "resolve":
        body = {"outcome": args.outcome, "note": args.note}
        if args.receipt:
            body["receipt"] = args.receipt
        result = _ops_request(args, "POST", f"/ops/jobs/{args.job_id}/resolve", body)
    else:
        result = _redrive(args)
    print(json.dumps(result, indent=2))
    return 0


def _redrive(args: argparse.Namespace) -> dict[str, Any]:
    """DLQ → work queue. A wake-up names its job, so a redriven message finds the same job."""
    import boto3

    from leasehold.store.queue import WakeupQueue

    if args.queue_url and args.dlq_url:
        sqs = boto3.client("sqs")
        queue_url, dlq_url = args.queue_url, args.dlq_url
    else:
        from leasehold.local.stack import StackError, StackInfo, client

        try:
            stack = StackInfo.load(Path(args.state))
        except StackError as exc:
            raise CliError(
                f"{exc} (or pass --queue-url and --dlq-url for a deployed stack)"
            ) from exc
        sqs = client("sqs", stack.endpoint)
        queue_url = stack.queue_mappings[0].queue_url
        dlq_url = stack.functions[stack.queue_mappings[0].function].environment["DLQ_URL"]
    moved = WakeupQueue(sqs, queue_url, dlq_url).redrive_dead_letters(max_messages=args.max)
    if moved < 0:
        return {"redrive": "started", "how": "StartMessageMoveTask (SQS moves the messages itself)"}
    return {"redrive": "done", "moved": moved, "how": "receive/send/delete (no move task here)"}


def _cmd_smoke(args: argparse.Namespace) -> int:
    from leasehold.smoke import Smoke, SmokeError

    url = args.url
    if not url:
        from leasehold.local.stack import StackError, StackInfo

        try:
            url = StackInfo.load(Path(args.state)).api_url
        except StackError as exc:
            raise CliError(f"{exc} (or pass --url for a deployed stack)") from exc
    try:
        return Smoke(url, token=args.token, ops_token=args.ops_token).run()
    except SmokeError as exc:
        raise CliError(str(exc)) from exc


# ---------------------------------------------------------------- docs (doc_prep's documents)


def _cmd_docs_put(args: argparse.Namespace) -> int:
    """Upload a document for doc_prep jobs to the running local stack's documents bucket, under
    the demo user's tenant, and print the `s3_key` a job names it by (stdout: the key alone)."""
    from leasehold.agent.spec import (
        MAX_DOCUMENT_BYTES,
        DocumentUnreadableError,
        decode_document,
        document_prefix,
        tenant_of_key,
    )
    from leasehold.local.gateway import DEMO_USERS
    from leasehold.local.stack import StackError, StackInfo, client

    try:
        stack = StackInfo.load(Path(args.state))
    except StackError as exc:
        raise CliError(str(exc)) from exc
    bucket = stack.outputs.get("DocumentsBucket")
    if not bucket:
        raise CliError("the running local stack has no documents bucket; restart it (make up)")
    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    try:
        decode_document(data)
    except DocumentUnreadableError as exc:
        raise CliError(f"{args.file}: {exc} (a doc_prep document is UTF-8 text ≤ "
                       f"{MAX_DOCUMENT_BYTES} bytes)") from exc  # fmt: skip
    tenant = DEMO_USERS[args.user]["custom:tenant"]
    key = document_prefix(tenant) + (args.name or path.name)
    if tenant_of_key(key) != tenant:
        raise CliError(
            f"{key!r} is not a usable document key: use a name of A-Z a-z 0-9 ! _ . * ' ( ) - "
            "(pass --name to choose one)"
        )
    client("s3", stack.endpoint).put_object(
        Bucket=bucket, Key=key, Body=data, ContentType="text/plain; charset=utf-8"
    )
    print(f"uploaded {len(data)} bytes for {args.user} (tenant {tenant}) to s3://{bucket}/{key}",
          file=sys.stderr)  # fmt: skip
    print(key)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from leasehold.demo import run_demo

    return run_demo(Path(args.template), port=args.port)


def _cmd_provider_serve(args: argparse.Namespace) -> int:
    import sqlite3

    from leasehold.local.provider import serve_provider

    if not 0 <= args.port <= 65535:
        raise CliError("--port must be between 0 and 65535")
    try:
        return serve_provider(args.port, args.capability, Path(args.db))
    except (OSError, sqlite3.Error) as exc:
        raise CliError(f"cannot serve the provider (port {args.port}, {args.db}): {exc}") from exc


def _demo_users() -> list[str]:
    from leasehold.local.gateway import DEMO_USERS

    return list(DEMO_USERS)


def build_parser() -> argparse.ArgumentParser:
    from leasehold.providers.enrichment import PROVIDER_MODES

    parser = argparse.ArgumentParser(prog="leasehold", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    local = commands.add_parser("local", help="the embedded local stack").add_subparsers(
        dest="local_command", required=True
    )
    up = local.add_parser("up", help="start moto + the stack of template.yaml + gateway + workers")
    up.add_argument("--port", type=int, default=8080)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--template", default="template.yaml")
    up.add_argument("--state", default=".leasehold/local-stack.json")
    up.add_argument(
        "--faults",
        default="",
        help="inject store and queue faults, e.g. "
        "'dynamodb.TransactWriteItems:TransactionConflict=0.05,sqs.SendMessageBatch:InternalError=0.03'",
    )
    up.set_defaults(run=_cmd_local_up)
    worker = local.add_parser("worker", help="attach one more worker process to a running stack")
    worker.add_argument("--state", default=".leasehold/local-stack.json")
    worker.add_argument("--name", default="worker-extra")
    worker.add_argument(
        "--parent-pid",
        type=int,
        help="stop once this process is no longer the worker's parent (default: its parent now)",
    )
    worker.set_defaults(run=_cmd_local_worker)
    inv = commands.add_parser("invoke", help="run one function's handler with an event file")
    inv.add_argument("function", help="logical id (WorkerFunction) or short name (worker)")
    inv.add_argument("--event", required=True)
    inv.add_argument("--state", default=".leasehold/local-stack.json")
    inv.set_defaults(run=_cmd_invoke)
    ops = commands.add_parser("ops", help="operator view and actions (local stack or deployed)")
    ops.add_argument("--url", default="http://127.0.0.1:8080", help="API base URL")
    ops.add_argument("--token", help="an operator's ID token (deployed); locally X-Demo-User: ops")
    ops_commands = ops.add_subparsers(dest="ops_command", required=True)
    ops_commands.add_parser("summary", help="counts by state, queue depths, oldest queued job")
    jobs = ops_commands.add_parser("jobs", help="jobs in one state, oldest first")
    jobs.add_argument("--state", required=True)
    jobs.add_argument("--limit", type=int, default=50)
    show = ops_commands.add_parser(
        "show", help="one job, whole: view, history, operations, lease holder"
    )
    show.add_argument("job_id")
    replay = ops_commands.add_parser("replay", help="a dead, failed or unknown job back to queued")
    replay.add_argument("job_id")
    replay.add_argument("--note", help="why (recorded in the job's history)")
    replay.add_argument(
        "--checked-provider",
        action="store_true",
        help="you checked the provider (required to replay an unknown job)",
    )
    resolve = ops_commands.add_parser("resolve", help="settle an unknown job")
    resolve.add_argument("job_id")
    resolve.add_argument("--outcome", choices=["succeeded", "failed"], required=True)
    resolve.add_argument("--note", required=True)
    resolve.add_argument("--receipt", help="the provider's receipt, when it shows the charge")
    redrive = ops_commands.add_parser("redrive", help="move DLQ messages back to the work queue")
    redrive.add_argument("--state", default=".leasehold/local-stack.json")
    redrive.add_argument("--queue-url")
    redrive.add_argument("--dlq-url")
    redrive.add_argument("--max", type=int, default=1000)
    ops.set_defaults(run=_cmd_ops)
    provider = commands.add_parser("provider", help="the local billable enrichment provider")
    provider_commands = provider.add_subparsers(dest="provider_command", required=True)
    serve = provider_commands.add_parser("serve", help="serve it on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=int, default=8090)
    serve.add_argument("--capability", choices=PROVIDER_MODES, required=True)
    serve.add_argument("--db", default=".leasehold/provider.sqlite3", help="the charge ledger")
    serve.set_defaults(run=_cmd_provider_serve)
    smoke = commands.add_parser(
        "smoke", help="one successful and one failing operation of each application, anywhere"
    )
    smoke.add_argument("--url", help="the API's base URL (default: the running local stack)")
    smoke.add_argument("--token", help="a user's ID token (deployed); locally X-Demo-User")
    smoke.add_argument("--ops-token", help="an operator's ID token, for the replay (deployed)")
    smoke.add_argument("--state", default=".leasehold/local-stack.json")
    smoke.set_defaults(run=_cmd_smoke)
    docs = commands.add_parser("docs", help="documents for doc_prep jobs (local stack)")
    docs_commands = docs.add_subparsers(dest="docs_command", required=True)
    put = docs_commands.add_parser(
        "put", help="upload FILE under the user's tenant; prints the s3_key for a doc_prep job"
    )
    put.add_argument("file")
    put.add_argument("--user", required=True, choices=sorted(_demo_users()))
    put.add_argument("--name", help="the document's name in the bucket (default: FILE's name)")
    put.add_argument("--state", default=".leasehold/local-stack.json")
    put.set_defaults(run=_cmd_docs_put)
    demo = commands.add_parser("demo", help="the ten-task demo on the local stack")
    demo.add_argument("--port", type=int, default=0)
    demo.add_argument("--template", default="template.yaml")
    demo.set_defaults(run=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"leasehold: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
