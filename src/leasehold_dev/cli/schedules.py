"""`leasehold schedules …`: create, list, show and delete the caller's schedules, against the
running local stack (as `--user`, default alice) or, with `--url`, a deployed one."""

from __future__ import annotations

import argparse
import json
from typing import Any

from leasehold_dev.cli.target import (
    CliError,
    add_state_option,
    add_url_options,
    answers_as_cli_errors,
    api_client,
)


def _cmd_schedules(args: argparse.Namespace) -> int:
    client = api_client(args, user=args.user)
    command = args.schedules_command
    with answers_as_cli_errors(client.base_url):
        if command == "create":
            try:
                payload = json.loads(args.payload)
            except ValueError as exc:
                raise CliError(f"--payload is not JSON: {exc}") from None
            result: Any = client.schedules.create(
                args.kind,
                payload,
                args.expression,
                timezone=args.timezone,
                missed=args.missed,
                max_attempts=args.max_attempts,
            )
        elif command == "list":  # one page, as the API answers it (next_cursor)
            query = {"limit": args.limit, "cursor": args.cursor}
            result = client.call("GET", "/schedules", query=query)
        elif command == "show":
            result = client.schedules.get(args.schedule_id)
        else:
            result = client.schedules.delete(args.schedule_id)
    print(json.dumps(result, indent=2))
    return 0


def add_schedules_commands(commands: Any) -> None:
    schedules = commands.add_parser(
        "schedules", help="cron/rate schedules: one job per tick (the local stack, or --url)"
    )
    add_url_options(schedules)
    add_state_option(schedules, "--state-file")
    schedules.add_argument(
        "--user", default="alice", help="locally: the demo user to act as (X-Demo-User)"
    )
    sub = schedules.add_subparsers(dest="schedules_command", required=True)

    def command(name: str, help_text: str) -> Any:
        parser = sub.add_parser(name, help=help_text)
        add_url_options(parser, under=True)
        add_state_option(parser, "--state-file", under=True)
        return parser

    create = command("create", "create a schedule; prints it with its first tick")
    create.add_argument("expression", help="'cron(0 9 ? * MON-FRI *)' or 'rate(15 minutes)'")
    create.add_argument("--kind", required=True, help="the job kind each tick submits")
    create.add_argument("--payload", required=True, help="the job's payload, as JSON")
    create.add_argument("--timezone", default="UTC", help="an IANA zone, e.g. Europe/Paris")
    create.add_argument("--missed", choices=["skip", "run_once"], default="skip")
    create.add_argument("--max-attempts", type=int)
    listing = command("list", "your schedules, newest first (one page)")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor", help="the previous page's next_cursor")
    show = command("show", "one schedule: next tick, last job, counts, history")
    show.add_argument("schedule_id")
    delete = command("delete", "stop a schedule for good (kept readable 30 days)")
    delete.add_argument("schedule_id")
    schedules.set_defaults(run=_cmd_schedules)
