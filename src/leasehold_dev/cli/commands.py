"""The `leasehold` command's parser, built from one module a command group, and `main`, which
runs the command chosen and turns a LeaseholdError into one line and exit code 2."""

from __future__ import annotations

import argparse
import sys

from leasehold.domain.errors import LeaseholdError
from leasehold_dev.cli.checks import add_demo_command, add_smoke_command
from leasehold_dev.cli.documents import add_docs_commands
from leasehold_dev.cli.jobs import add_job_commands
from leasehold_dev.cli.local import add_local_commands
from leasehold_dev.cli.login import add_login_commands
from leasehold_dev.cli.ops import add_ops_commands
from leasehold_dev.cli.project import add_project_commands
from leasehold_dev.cli.provider import add_provider_commands
from leasehold_dev.cli.schedules import add_schedules_commands

DESCRIPTION = """The `leasehold` command: a project of one's own (new, template), the local stack
(up, down, status, a worker to attach), in-process invocation, a user's jobs (submit, show), the
operator's commands (ops), a deployed stack's sign-in (login, logout), documents, the provider,
smoke, demo. Every request to the API goes through leasehold.Client."""


def _demo_users() -> list[str]:
    from leasehold_dev.local.gateway import DEMO_USERS

    return list(DEMO_USERS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leasehold", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    add_local_commands(commands)
    add_job_commands(commands, _demo_users())
    add_ops_commands(commands)
    add_schedules_commands(commands)
    add_login_commands(commands)
    add_provider_commands(commands)
    add_smoke_command(commands)
    add_docs_commands(commands, _demo_users())
    add_project_commands(commands)
    add_demo_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except LeaseholdError as exc:  # CliError, a stack or store error: one line, what to do
        print(f"leasehold: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
