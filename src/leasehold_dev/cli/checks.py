"""`leasehold smoke` and `leasehold demo`: one successful and one failing operation of each
application against any stack, and the full demo on a local stack of its own."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from leasehold_dev.cli.local import importable_from
from leasehold_dev.cli.target import CliError, add_state_option, add_url_options, api_url


def _cmd_smoke(args: argparse.Namespace) -> int:
    from leasehold_dev.smoke import Smoke, SmokeError

    url = api_url(args)
    try:
        return Smoke(url, token=args.token, ops_token=args.ops_token).run()
    except SmokeError as exc:
        raise CliError(str(exc)) from exc


def _cmd_demo(args: argparse.Namespace) -> int:
    from leasehold_dev.demo import run_demo

    importable_from(Path.cwd())
    return run_demo(Path(args.template), port=args.port, kinds=args.kinds)


def add_smoke_command(commands: Any) -> None:
    """`smoke`."""
    smoke = commands.add_parser(
        "smoke", help="one successful and one failing operation of each application, anywhere"
    )
    add_url_options(smoke)
    smoke.add_argument("--ops-token", help="an operator's ID token, for the replay (deployed)")
    add_state_option(smoke)
    smoke.set_defaults(run=_cmd_smoke)


def add_demo_command(commands: Any) -> None:
    """`demo`."""
    demo = commands.add_parser(
        "demo",
        help="the 26-check demo on the local stack (jobs, reading list, effects, agent, faults)",
    )
    demo.add_argument("--port", type=int, default=0)
    demo.add_argument("--template", default="template.yaml")
    demo.add_argument(
        "--kinds",
        help="LEASEHOLD_KINDS for the demo's stack (it must keep the three applications the "
        "demo exercises; add your own modules to run beside them)",
    )
    demo.set_defaults(run=_cmd_demo)
