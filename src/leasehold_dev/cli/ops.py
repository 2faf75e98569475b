"""`leasehold ops …`: the operator's command line — the view and the acts of the runbook, against
the running local stack or (with `--url`, `--token`) a deployed one; the DLQ redrive, audited,
which sets poison messages aside; and, on the local stack only, a way to put a wake-up or any
message in the DLQ to rehearse that redrive."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leasehold_dev.cli.target import (
    CliError,
    add_state_option,
    add_url_options,
    answers_as_cli_errors,
    api_client,
    local_stack,
)

if TYPE_CHECKING:
    from leasehold.service.redrive import DeadLetterService
    from leasehold.store.set_aside import SetAside

SET_ASIDE_FILE = Path("dead-letters-set-aside.jsonl")
"""The redrive's poison messages, beside the local stack's state file unless --set-aside."""
LOCAL_OPERATOR = "ops"
"""The local gateway's operator (X-Demo-User: ops): the identity the local stack records."""


def _cmd_ops(args: argparse.Namespace) -> int:
    command = args.ops_command
    if command in {"redrive", "dlq-send"}:
        result = _redrive(args) if command == "redrive" else _dlq_send(args)
        print(json.dumps(result, indent=2))
        return 0
    client = api_client(args, user=LOCAL_OPERATOR)
    with answers_as_cli_errors(client.base_url):
        if command == "summary":
            result = client.ops.summary()
        elif command in {"jobs", "list"}:  # one page, as the API answers it (next_cursor)
            query = {"state": args.state, "limit": args.limit, "cursor": args.cursor}
            query |= {"kind": args.kind, "tenant": args.tenant}
            result = client.call("GET", "/ops/jobs", query=query)
        elif command == "show":
            result = client.ops.show(args.job_id)
        elif command == "replay":
            result = client.ops.replay(
                args.job_id,
                note=args.note,
                checked_provider=args.checked_provider,
                from_start=args.from_start,
            )
        elif command == "cancel":
            result = client.ops.cancel(args.job_id, note=args.note)
        elif command == "children":  # every page, a JSON line each
            for child in client.ops.children(args.job_id):
                print(json.dumps(child))
            return 0
        elif command == "kinds":
            result = {"kinds": client.ops.kinds()}
        elif command == "pause":
            result = client.ops.pause_kind(args.kind, note=args.note)
        elif command == "resume":
            result = client.ops.resume_kind(args.kind, note=args.note)
        elif command == "signal":
            body = json.loads(args.body) if args.body is not None else None
            result = client.ops.signal(args.job_id, args.name, body, note=args.note)
        else:
            result = client.ops.resolve(
                args.job_id, args.outcome, note=args.note, receipt=args.receipt
            )
    print(json.dumps(result, indent=2))
    return 0


def _local_dead_letters(args: argparse.Namespace, hint: str = "") -> tuple[Path, DeadLetterService]:
    from leasehold.domain.clock import SystemClock
    from leasehold.service.redrive import DeadLetterService
    from leasehold.store import Stores
    from leasehold.store.queue import WakeupQueue
    from leasehold.store.table import Table
    from leasehold_dev.local.stack import client

    state, stack = local_stack(args, hint=hint)
    mapping = stack.work_queue_mapping()
    env = stack.functions[mapping.function].environment
    table = Table(
        client("dynamodb", stack.endpoint),
        stack.outputs["JobsTable"],
        index_shards=int(env.get("INDEX_SHARDS", "1")),  # the functions' own (decision SH1)
    )
    priority_urls = {"high": env.get("HIGH_QUEUE_URL", ""), "low": env.get("LOW_QUEUE_URL", "")}
    return state, DeadLetterService(
        WakeupQueue(
            client("sqs", stack.endpoint),
            mapping.queue_url,
            env["DLQ_URL"],
            priority_urls={k: v for k, v in priority_urls.items() if v},
            shard_urls=[u for u in env.get("QUEUE_SHARD_URLS", "").split(",") if u],
        ),
        SystemClock(),
        Stores.over(table, 0),
    )


def _redrive(args: argparse.Namespace) -> dict[str, Any]:
    """DLQ → work queue, recording who, when and why: on each moved job's history where the
    messages are moved one by one (local), and always in the audit line on stderr. Poison
    messages are appended to the set-aside file (one JSON object a line) and deleted."""
    from leasehold.domain.clock import SystemClock
    from leasehold.service.redrive import DeadLetterService
    from leasehold.store.queue import WakeupQueue

    if bool(args.queue_url) != bool(args.dlq_url):
        raise CliError("--queue-url and --dlq-url go together (stack outputs QueueUrl and "
                       "DeadLetterQueueUrl)")  # fmt: skip
    if args.queue_url:
        import boto3

        sqs = boto3.client("sqs")
        others = {"high": args.high_queue_url, "low": args.low_queue_url}
        queue = WakeupQueue(
            sqs,
            args.queue_url,
            args.dlq_url,
            priority_urls={priority: url for priority, url in others.items() if url},
            shard_urls=[url.strip() for url in args.queue_shard_urls.split(",") if url.strip()],
        )
        service = DeadLetterService(queue, SystemClock())
        operator = args.operator or _aws_identity()
        set_aside_file = Path(args.set_aside or SET_ASIDE_FILE.name)
    else:
        if args.url:
            raise CliError(
                "the redrive talks to SQS, not the API: for a deployed stack pass --queue-url "
                "and --dlq-url (stack outputs QueueUrl, DeadLetterQueueUrl)"
            )
        state, service = _local_dead_letters(
            args, hint="or pass --queue-url and --dlq-url for a deployed stack"
        )
        operator = args.operator or LOCAL_OPERATOR
        set_aside_file = Path(args.set_aside) if args.set_aside else state.parent / SET_ASIDE_FILE
    sink = _SetAsideFile(set_aside_file, by=operator, note=args.note)
    report = service.redrive(
        operator=operator, note=args.note, max_messages=args.max, set_aside=sink.keep
    ).as_dict()
    if report.get("set_aside"):
        report["set_aside_file"] = str(set_aside_file)
    audit = {"level": "INFO", "message": "operator redrive", **report}
    print(json.dumps(audit, separators=(",", ":")), file=sys.stderr, flush=True)
    return report


class _SetAsideFile:
    """Where a redrive keeps the poison messages it takes out of the DLQ: appended, one JSON
    object a line (the whole body, why, who, when), flushed to disk before the message is
    deleted from the DLQ — so a poison message is never lost, only moved out of the way."""

    def __init__(self, path: Path, *, by: str, note: str) -> None:
        self.path, self.by, self.note = path, by, note

    def keep(self, poison: SetAside) -> None:
        from leasehold.domain.clock import SystemClock, iso

        record = {
            "set_aside_at": iso(SystemClock().now_ms()),
            "by": self.by,
            "note": self.note,
            **poison.as_dict(whole=True),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise CliError(
                f"cannot keep a poison message in {self.path} ({exc.strerror or exc}); it stays "
                "in the DLQ: pass --set-aside FILE"
            ) from exc


def _aws_identity() -> str:
    """The caller's AWS identity (what CloudTrail records for the move task too)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return str(boto3.client("sts").get_caller_identity()["Arn"])
    except (BotoCoreError, ClientError) as exc:
        raise CliError(f"cannot tell who you are ({exc}); pass --operator NAME") from exc


def _dlq_send(args: argparse.Namespace) -> dict[str, Any]:
    if args.url:
        raise CliError("dlq-send is a local rehearsal: it works on the local stack only")
    if (args.job_id is None) == (args.body is None):
        raise CliError(
            "dlq-send takes a JOB_ID (its wake-up) or --body TEXT (any message), not both"
        )
    _, service = _local_dead_letters(args)
    if args.body is not None:
        service.dead_letter_body(args.body)
        sent: dict[str, Any] = {"dead_lettered_body": args.body}
    else:
        sent = {"dead_lettered": service.dead_letter_job(args.job_id).job_id}
    return {
        **sent,
        "local_only": True,
        "next": "leasehold ops summary (sqs.dead_letter), then leasehold ops redrive --note 'why'",
    }


def _json_text(text: str) -> str:
    try:
        json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    return text


def add_ops_commands(commands: Any) -> None:
    ops = commands.add_parser(
        "ops", help="operator view and actions (the local stack, or deployed with --url)"
    )
    add_url_options(ops)
    add_state_option(ops, "--state-file")
    ops_commands = ops.add_subparsers(dest="ops_command", required=True)

    def command(
        name: str,
        help_text: str,
        state_flags: tuple[str, ...] = ("--state-file",),
        aliases: tuple[str, ...] = (),
    ) -> Any:
        sub = ops_commands.add_parser(name, help=help_text, aliases=list(aliases))
        add_url_options(sub, under=True)
        add_state_option(sub, *state_flags, under=True)
        return sub

    command("summary", "counts by state, queue depths, oldest queued job")
    jobs = command("jobs", "jobs in one state, oldest first", aliases=("list",))
    jobs.add_argument("--state", required=True, help="the job state: dead, unknown, running…")
    jobs.add_argument("--limit", type=int, default=50, help="rows on the page (≤ 100)")
    jobs.add_argument("--cursor", help="the previous page's next_cursor: the page after it")
    jobs.add_argument("--kind", help="only jobs of this kind")
    jobs.add_argument("--tenant", help="only this tenant's jobs")
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
    replay.add_argument(
        "--from-start",
        action="store_true",
        help="run every step again under the kind's current steps (a job stopped "
        "kind_changed), not from its checkpoint",
    )
    cancel = command("cancel", "cancel any tenant's job (a running one is asked to stop)")
    cancel.add_argument("job_id")
    cancel.add_argument("--note", required=True, help="why (recorded in the job's history)")
    children = command("children", "any tenant's job's children, a JSON line each")
    children.add_argument("job_id")
    signal = command("signal", "send a signal to any tenant's job (recorded with a note)")
    signal.add_argument("job_id")
    signal.add_argument("name", help="the signal's name, as the step waits for it")
    signal.add_argument("body", nargs="?", type=_json_text, help="a JSON body (default null)")
    signal.add_argument("--note", required=True, help="why (recorded in the job's history)")
    command("kinds", "every kind: running, paused (who, when, why) or resuming")
    pause = command("pause", "pause a kind: its jobs wait, queued, until resume")
    pause.add_argument("kind")
    pause.add_argument("--note", required=True, help="why (kept on the kind and its jobs)")
    resume = command("resume", "resume a kind: its waiting jobs are woken")
    resume.add_argument("kind")
    resume.add_argument("--note", required=True, help="why (kept on the kind and its jobs)")
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
        "--high-queue-url",
        help="deployed: the stack output HighPriorityQueueUrl (with --low-queue-url, each "
        "message returns to the queue it came from)",
    )
    redrive.add_argument("--low-queue-url", help="deployed: the stack output LowPriorityQueueUrl")
    redrive.add_argument(
        "--queue-shard-urls",
        default="",
        help="deployed with QueueShards 2 or 4: the stack output QueueShardUrls (comma-separated)",
    )
    redrive.add_argument(
        "--operator", help="who redrives (default: your AWS identity; locally 'ops')"
    )
    redrive.add_argument("--max", type=int, default=1000)
    redrive.add_argument(
        "--set-aside",
        metavar="FILE",
        help="where poison messages are kept, one JSON object a line (default: "
        f"{SET_ASIDE_FILE.name} beside the local stack's state file)",
    )
    send = command(
        "dlq-send",
        "LOCAL STACK ONLY: put JOB's wake-up (or --body TEXT: any message, a poison one) straight "
        "into the DLQ, to rehearse the redrive",
    )
    send.add_argument("job_id", nargs="?")
    send.add_argument("--body", help="the message's body, instead of a job's wake-up")
    ops.set_defaults(run=_cmd_ops)
