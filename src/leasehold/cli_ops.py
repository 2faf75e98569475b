"""`leasehold ops …`: the operator's command line — the view and the acts of the runbook, against
the running local stack or (with `--url`, `--token`) a deployed one; the DLQ redrive, audited;
and, on the local stack only, a way to put a wake-up in the DLQ to rehearse that redrive."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from leasehold.cli_target import (
    CliError,
    add_state_option,
    add_url_options,
    api_url,
    local_stack,
)

if TYPE_CHECKING:
    from leasehold.service.redrive import DeadLetterService

LOCAL_OPERATOR = "ops"
"""The local gateway's operator (X-Demo-User: ops): the identity the local stack records."""


def _ops_request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    import urllib.error
    import urllib.request

    base = api_url(args)
    headers = {"Content-Type": "application/json"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    else:
        headers["X-Demo-User"] = LOCAL_OPERATOR  # the local gateway's stand-in for a JWT
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        try:
            detail = json.loads(error.read() or b"{}").get("error", {})
        except (ValueError, AttributeError):
            detail = {}
        hint = " (pass --token with an operator's ID token)" if error.code == 401 else ""
        raise CliError(
            f"{error.code} {detail.get('code', '')}: {detail.get('message', '')}{hint}"
        ) from error
    except urllib.error.URLError as error:
        raise CliError(f"cannot reach {base}: {error.reason}") from error


def _cmd_ops(args: argparse.Namespace) -> int:
    command = args.ops_command
    if command == "summary":
        result = _ops_request(args, "GET", "/ops/summary")
    elif command == "jobs":
        query = f"state={quote(args.state)}&limit={args.limit}"
        result = _ops_request(args, "GET", f"/ops/jobs?{query}")
    elif command == "show":
        result = _ops_request(args, "GET", f"/ops/jobs/{quote(args.job_id)}")
    elif command == "replay":
        replay: dict[str, Any] = {}
        if args.note:
            replay["note"] = args.note
        if args.checked_provider:
            replay["checked_provider"] = True
        result = _ops_request(args, "POST", f"/ops/jobs/{quote(args.job_id)}/replay", replay)
    elif command == "resolve":
        body = {"outcome": args.outcome, "note": args.note}
        if args.receipt:
            body["receipt"] = args.receipt
        result = _ops_request(args, "POST", f"/ops/jobs/{quote(args.job_id)}/resolve", body)
    elif command == "redrive":
        result = _redrive(args)
    else:
        result = _poison(args)
    print(json.dumps(result, indent=2))
    return 0


def _local_dead_letters(args: argparse.Namespace, hint: str = "") -> DeadLetterService:
    from leasehold.domain.clock import SystemClock
    from leasehold.local.stack import client
    from leasehold.service.redrive import DeadLetterService
    from leasehold.store.jobs import JobStore
    from leasehold.store.operator import OperatorStore
    from leasehold.store.queue import WakeupQueue
    from leasehold.store.table import Table

    _, stack = local_stack(args, hint=hint)
    mapping = stack.queue_mappings[0]
    dlq_url = stack.functions[mapping.function].environment["DLQ_URL"]
    table = Table(client("dynamodb", stack.endpoint), stack.outputs["JobsTable"])
    return DeadLetterService(
        WakeupQueue(client("sqs", stack.endpoint), mapping.queue_url, dlq_url),
        SystemClock(),
        operator_store=OperatorStore(table),
        jobs=JobStore(table),
    )


def _redrive(args: argparse.Namespace) -> dict[str, Any]:
    """DLQ → work queue, recording who, when and why: on each moved job's history where the
    messages are moved one by one (local), and always in the audit line on stderr."""
    from leasehold.domain.clock import SystemClock
    from leasehold.service.redrive import DeadLetterService
    from leasehold.store.queue import WakeupQueue

    if bool(args.queue_url) != bool(args.dlq_url):
        raise CliError("--queue-url and --dlq-url go together (stack outputs QueueUrl and "
                       "DeadLetterQueueUrl)")  # fmt: skip
    if args.queue_url:
        import boto3

        sqs = boto3.client("sqs")
        service = DeadLetterService(WakeupQueue(sqs, args.queue_url, args.dlq_url), SystemClock())
        operator = args.operator or _aws_identity()
    else:
        if args.url:
            raise CliError(
                "the redrive talks to SQS, not the API: for a deployed stack pass --queue-url "
                "and --dlq-url (stack outputs QueueUrl, DeadLetterQueueUrl)"
            )
        service = _local_dead_letters(
            args, hint="or pass --queue-url and --dlq-url for a deployed stack"
        )
        operator = args.operator or LOCAL_OPERATOR
    report = service.redrive(operator=operator, note=args.note, max_messages=args.max).as_dict()
    audit = {"level": "INFO", "message": "operator redrive", **report}
    print(json.dumps(audit, separators=(",", ":")), file=sys.stderr, flush=True)
    return report


def _aws_identity() -> str:
    """The caller's AWS identity (what CloudTrail records for the move task too)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return str(boto3.client("sts").get_caller_identity()["Arn"])
    except (BotoCoreError, ClientError) as exc:
        raise CliError(f"cannot tell who you are ({exc}); pass --operator NAME") from exc


def _poison(args: argparse.Namespace) -> dict[str, Any]:
    if args.url:
        raise CliError("dlq-poison is a local rehearsal: it works on the local stack only")
    wakeup = _local_dead_letters(args).poison(args.job_id)
    return {
        "dead_lettered": wakeup.job_id,
        "local_only": True,
        "next": "leasehold ops summary (sqs.dead_letter), then leasehold ops redrive --note 'why'",
    }


def add_ops_commands(commands: Any) -> None:
    ops = commands.add_parser(
        "ops", help="operator view and actions (the local stack, or deployed with --url)"
    )
    add_url_options(ops)
    add_state_option(ops, "--state-file")
    ops_commands = ops.add_subparsers(dest="ops_command", required=True)

    def command(name: str, help_text: str, state_flags: tuple[str, ...] = ("--state-file",)) -> Any:
        sub = ops_commands.add_parser(name, help=help_text)
        add_url_options(sub, under=True)
        add_state_option(sub, *state_flags, under=True)
        return sub

    command("summary", "counts by state, queue depths, oldest queued job")
    jobs = command("jobs", "jobs in one state, oldest first")
    jobs.add_argument("--state", required=True, help="the job state: dead, unknown, running…")
    jobs.add_argument("--limit", type=int, default=50)
    show = command("show", "one job, whole: view, history, operations, lease holder")
    show.add_argument("job_id")
    replay = command("replay", "a dead, failed or unknown job back to queued")
    replay.add_argument("job_id")
    replay.add_argument("--note", help="why (recorded in the job's history)")
    replay.add_argument(
        "--checked-provider",
        action="store_true",
        help="you checked the provider (required to replay an unknown job)",
    )
    resolve = command("resolve", "settle an unknown job")
    resolve.add_argument("job_id")
    resolve.add_argument("--outcome", choices=["succeeded", "failed"], required=True)
    resolve.add_argument("--note", required=True)
    resolve.add_argument("--receipt", help="the provider's receipt, when it shows the charge")
    redrive = command(
        "redrive",
        "move DLQ messages back to the work queue (records who, when and why)",
        state_flags=("--state", "--state-file"),
    )
    redrive.add_argument("--note", required=True, help="why (each moved job's history, the log)")
    redrive.add_argument("--queue-url", help="deployed: the stack output QueueUrl")
    redrive.add_argument("--dlq-url", help="deployed: the stack output DeadLetterQueueUrl")
    redrive.add_argument(
        "--operator", help="who redrives (default: your AWS identity; locally 'ops')"
    )
    redrive.add_argument("--max", type=int, default=1000)
    poison = command(
        "dlq-poison",
        "LOCAL STACK ONLY: put JOB's wake-up straight into the DLQ, to rehearse the redrive",
    )
    poison.add_argument("job_id")
    ops.set_defaults(run=_cmd_ops)
