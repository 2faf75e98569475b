"""`leasehold provider …`: serve the local billable enrichment provider, and read what the running
local stack's providers charged."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from leasehold_dev.cli.target import CliError, add_state_option, local_stack


def _cmd_provider_serve(args: argparse.Namespace) -> int:
    import sqlite3

    from leasehold_dev.local.provider import serve_provider

    if not 0 <= args.port <= 65535:
        raise CliError("--port must be between 0 and 65535")
    try:
        return serve_provider(args.port, args.capability, Path(args.db))
    except (OSError, sqlite3.Error) as exc:
        raise CliError(f"cannot serve the provider (port {args.port}, {args.db}): {exc}") from exc


def _cmd_provider_charges(args: argparse.Namespace) -> int:
    """What the running local stack's billable providers charged (the operator's evidence for
    an `unknown` enrich job): `GET /v1/charges[?key=]` of each, or of `--mode` alone."""
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    _, stack = local_stack(args)
    providers: dict[str, str] = json.loads(
        stack.local_environment.get("LEASEHOLD_LOCAL_PROVIDERS", "{}")
    )
    if not providers:
        raise CliError("the running local stack has no providers; restart it (make up)")
    modes = [args.mode] if args.mode else sorted(providers)
    query = f"?key={quote(args.key)}" if args.key else ""
    answers: dict[str, Any] = {}
    for mode in modes:
        url = f"{providers[mode]}/v1/charges{query}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                answers[mode] = {"url": url, **json.loads(answer.read() or b"{}")}
        except (urllib.error.URLError, ValueError) as exc:
            raise CliError(f"cannot read {url}: {exc}") from exc
    print(json.dumps(answers[args.mode] if args.mode else answers, indent=2))
    return 0


def add_provider_commands(commands: Any) -> None:
    """`provider serve` and `provider charges`."""
    from leasehold_apps.reading_list.provider import PROVIDER_MODES

    provider = commands.add_parser("provider", help="the local billable enrichment provider")
    provider_commands = provider.add_subparsers(dest="provider_command", required=True)
    serve = provider_commands.add_parser("serve", help="serve it on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=int, default=8090)
    serve.add_argument("--capability", choices=PROVIDER_MODES, required=True)
    serve.add_argument("--db", default=".leasehold/provider.sqlite3", help="the charge ledger")
    serve.set_defaults(run=_cmd_provider_serve)
    charges = provider_commands.add_parser(
        "charges", help="what the running local stack's providers charged (GET /v1/charges)"
    )
    charges.add_argument("--key", help="one idempotency key (an enrich job's operation id)")
    charges.add_argument("--mode", choices=["idempotent", "lookup", "none"])
    add_state_option(charges)
    charges.set_defaults(run=_cmd_provider_charges)
