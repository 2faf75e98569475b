"""Which stack a `leasehold` command talks to, found the same way by every command, and the one
error type the command line prints.

A deployed stack is named with `--url` (and `--token`); otherwise the running local stack is
found from its state file (leasehold_dev.local.locate: `--state`, `LEASEHOLD_STATE`, or
`.leasehold/local-stack.json` here or in a directory above). `--url`, `--token` and the state
file are accepted before and after an `ops` subcommand alike."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from leasehold.domain.errors import LeaseholdError

if TYPE_CHECKING:
    from leasehold.client import Client
    from leasehold_dev.local.stack import StackInfo

DEPLOYED_HINT = (
    "or pass --url URL (with --token TOKEN, or after `leasehold login`) for a deployed stack"
)
STATE_HELP = (
    "the local stack's state file (default: $LEASEHOLD_STATE, else .leasehold/local-stack.json "
    "in this directory or the nearest one above that has it)"
)


class CliError(LeaseholdError):
    """A problem the user can fix: printed as one line, exit code 2."""


def add_state_option(parser: argparse.ArgumentParser, *flags: str, under: bool = False) -> None:
    """The state file option (dest `state_file`). `under`: on a subcommand whose parent has the
    same option — absent here, it must not hide the parent's value (hence SUPPRESS)."""
    parser.add_argument(
        *(flags or ("--state", "--state-file")),
        dest="state_file",
        metavar="FILE",
        default=argparse.SUPPRESS if under else None,
        help=STATE_HELP,
    )


def add_url_options(parser: argparse.ArgumentParser, *, under: bool = False) -> None:
    default = argparse.SUPPRESS if under else None
    parser.add_argument(
        "--url", default=default, help="a deployed stack's API base URL (default: the local stack)"
    )
    parser.add_argument(
        "--token",
        default=default,
        help="an ID token (deployed; for /ops an operator's). Default with --url: the session "
        "of `leasehold login` for that URL; locally X-Demo-User stands in",
    )


def local_stack(args: argparse.Namespace, *, hint: str = "") -> tuple[Path, StackInfo]:
    """(state file, StackInfo) of the running local stack, or a CliError saying what to do."""
    from leasehold_dev.local.locate import running_stack
    from leasehold_dev.local.stack import StackError

    try:
        return running_stack(getattr(args, "state_file", None), Path.cwd(), os.environ)
    except StackError as exc:
        raise CliError(f"{exc}{'; ' + hint if hint else ''}") from exc


def api_url(args: argparse.Namespace) -> str:
    """`--url` as given (checked), else the running local stack's gateway."""
    url = getattr(args, "url", None)
    if url:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise CliError(f"--url must be an http(s) URL such as https://…/, not {url!r}")
        return str(url).rstrip("/")
    _, info = local_stack(args, hint=DEPLOYED_HINT)
    if not info.api_url:
        raise CliError("the local stack is still starting; try again in a few seconds")
    return info.api_url


def api_client(args: argparse.Namespace, *, user: str) -> Client:
    """The client of the stack the command talks to: with `--token`, that ID token's caller;
    with `--url` and no `--token`, the `leasehold login` session of that URL if there is one;
    otherwise the local gateway's stand-in for a JWT, `user` (X-Demo-User)."""
    from leasehold.client import Client

    base = api_url(args)
    token = getattr(args, "token", None)
    if token:
        return Client(base, token=token)
    if getattr(args, "url", None):
        from leasehold.client import ApiError
        from leasehold.client.login import LoginSession, session_path

        if session_path().exists():
            try:
                session = LoginSession.load()
            except ApiError as exc:
                raise CliError(exc.message) from None
            if session.api_url == base:
                return Client(base, token=session.fresh_id_token)
    return Client(base, user=user)


@contextmanager
def answers_as_cli_errors(base: str = "") -> Iterator[None]:
    """An error answer as one line (its status, code and message), a lost answer as "cannot
    reach": what the command line prints (exit code 2)."""
    from leasehold.client import ApiError

    try:
        yield
    except ApiError as error:
        if error.status == 0:
            raise CliError(f"cannot reach {base or 'the stack'}: {error.message}") from None
        hint = ""
        if error.status == 401 and error.code != "login_expired":
            hint = " (pass --token with an ID token, or run `leasehold login`)"
        raise CliError(f"{error.status} {error.code}: {error.message}{hint}") from None


def api_request(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: Any = None,
    *,
    user: str,
    query: dict[str, Any] | None = None,
) -> Any:
    """One request to the stack's API through `leasehold.client.Client`, its JSON answer; a CliError
    for an error answer (its code and message) or an unreachable stack. `--idempotency-key`
    goes along as the `Idempotency-Key` header."""
    client = api_client(args, user=user)
    key = getattr(args, "idempotency_key", None)
    headers = {"Idempotency-Key": key} if key else None
    with answers_as_cli_errors(client.base_url):
        return client.call(method, path, body, headers=headers, query=query)
