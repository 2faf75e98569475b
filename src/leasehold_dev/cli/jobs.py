"""`leasehold submit` and `leasehold show`: a job as its owner submits and sees it, against the
running local stack (as one of the local gateway's demo users) or, with `--url` (and `--token`,
or the session of `leasehold login`), a deployed one — through `leasehold.client.Client`, the same
POST /jobs and GET /jobs/{job_id} any client calls."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from leasehold.client.uploads import payload_fields
from leasehold.domain.sizes import UPLOAD_LIMIT
from leasehold_dev.cli.target import (
    CliError,
    add_state_option,
    add_url_options,
    answers_as_cli_errors,
    api_client,
    api_request,
)

DEFAULT_USER = "alice"
MAX_REQUEST_BYTES = UPLOAD_LIMIT + 64 * 1024
"""The largest job request read: a payload past the API's 5 MiB body goes by a presigned upload
(as `Client.submit` sends it, decision LD9), up to 32 MiB; refused here first past that."""


def _job_request(text: str) -> Any:
    """The job request: inline JSON (starting with `{` or `[`), `-` for stdin, or a JSON file."""
    if text == "-":
        source, raw = "stdin", sys.stdin.read()
    elif text.lstrip()[:1] in {"{", "["}:
        source, raw = "the request", text
    else:
        source = text
        try:
            raw = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read the job request {text}: {exc.strerror or exc}") from exc
    if len(raw.encode()) > MAX_REQUEST_BYTES:
        raise CliError(f"{source} is over {MAX_REQUEST_BYTES} bytes, the most a job takes")
    try:
        request = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise CliError(f"{source} must be a JSON object such as {EXAMPLE}")
    return request


EXAMPLE = '{"kind": "synthetic", "payload": {"steps": [{"name": "hello"}]}}'


def _cmd_submit(args: argparse.Namespace) -> int:
    request = _job_request(args.request)
    if args.priority is not None:
        request["priority"] = args.priority
    if "payload" in request:  # a payload too large for a body is uploaded first (LD9)
        client = api_client(args, user=args.user)
        with answers_as_cli_errors(client.base_url):
            request.update(payload_fields(client, request.pop("payload")))
    print(json.dumps(api_request(args, "POST", "/jobs", request, user=args.user), indent=2))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    client = api_client(args, user=args.user)
    with answers_as_cli_errors(client.base_url):
        view = client.get(args.job_id)
    print(json.dumps(view, indent=2))
    return 0


def _cmd_signal(args: argparse.Namespace) -> int:
    body = json.loads(args.body) if args.body is not None else None
    client = api_client(args, user=args.user)
    with answers_as_cli_errors(client.base_url):
        view = client.signal(args.job_id, args.name, body)
    print(json.dumps(view, indent=2))
    return 0


def _cmd_children(args: argparse.Namespace) -> int:
    client = api_client(args, user=args.user)
    with answers_as_cli_errors(client.base_url):
        for child in client.children(args.job_id):
            print(json.dumps(child))
    return 0


def _json_body(text: str) -> str:
    try:
        json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    return text


def add_job_commands(commands: Any, demo_users: list[str]) -> None:
    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--user",
            default=DEFAULT_USER,
            choices=sorted(demo_users),
            help=f"local stack: the demo user you act as (default {DEFAULT_USER})",
        )
        add_url_options(sub)
        add_state_option(sub)

    submit = commands.add_parser(
        "submit", help="submit a job (POST /jobs): REQUEST is inline JSON, a JSON file, or -"
    )
    submit.add_argument("request", metavar="REQUEST", help=f"e.g. '{EXAMPLE}'")
    submit.add_argument("--idempotency-key", help="the same key and body answer the same job")
    submit.add_argument(
        "--priority",
        choices=["high", "normal", "low"],
        help="the job's priority (default: its kind's, normal unless declared)",
    )
    common(submit)
    submit.set_defaults(run=_cmd_submit)
    show = commands.add_parser("show", help="one of your jobs as you see it (GET /jobs/{job_id})")
    show.add_argument("job_id")
    common(show)
    show.set_defaults(run=_cmd_show)
    signal = commands.add_parser(
        "signal",
        help="send a signal to one of your jobs (POST /jobs/{job_id}/signals/{name})",
    )
    signal.add_argument("job_id")
    signal.add_argument("name", help="the signal's name, as the step waits for it")
    signal.add_argument("body", nargs="?", type=_json_body, help="a JSON body (default null)")
    common(signal)
    signal.set_defaults(run=_cmd_signal)
    children = commands.add_parser(
        "children", help="one of your jobs' children, a JSON line each (GET /jobs/{id}/children)"
    )
    children.add_argument("job_id")
    common(children)
    children.set_defaults(run=_cmd_children)
