"""`leasehold login` and `leasehold logout`: a deployed stack's Cognito session for the command
line and for `leasehold.client.Client.from_login()` (leasehold.client.login keeps it)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from leasehold_dev.cli.target import CliError

LOGIN_HELP = """Sign in to a deployed stack's user pool (USER_PASSWORD_AUTH) and keep the session in
a file only you can read (default ~/.config/leasehold/session.json, or $LEASEHOLD_SESSION, mode
0600). Afterwards `leasehold … --url URL` without --token, and Client.from_login() in Python,
use its ID token, renewed with the refresh token while that lasts (the template: 30 days); then
they say to run `leasehold login` again. Name the stack with --stack (its outputs ApiUrl and
UserPoolClientId are read with your AWS credentials) or give --url and --client-id (no AWS
credentials needed). No token is ever printed. A user pool with MFA (OperatorMfa) asks for
the code of the user's authenticator app: --mfa-code CODE, or LEASEHOLD_MFA_CODE, or asked
here in a terminal; a user who has no authenticator yet, in a pool where MFA is ON, sets one
up here in a terminal (the secret to add to the app is shown once)."""

MFA_CODE_ENV = "LEASEHOLD_MFA_CODE"


def _region(args: argparse.Namespace) -> str:
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        import boto3

        region = boto3.session.Session().region_name
    if not region:
        raise CliError("which region is the stack in? pass --region (or set AWS_REGION)")
    return str(region)


def _stack_outputs(stack: str, region: str) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = boto3.client("cloudformation", region_name=region).describe_stacks(
            StackName=stack
        )
    except (BotoCoreError, ClientError) as exc:
        raise CliError(f"cannot read the outputs of stack {stack} in {region}: {exc}") from exc
    outputs = described["Stacks"][0].get("Outputs", [])
    return {o["OutputKey"]: o["OutputValue"] for o in outputs if "OutputKey" in o}


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password for {args.username}: ")
    else:
        raise CliError("no terminal to ask for the password: pass --password-stdin")
    if not password:
        raise CliError("the password is empty")
    return password


def _new_password() -> str:
    first = getpass.getpass("The user pool wants a new password. New password: ")
    if first != getpass.getpass("The same again: "):
        raise CliError("the two new passwords differ; nothing changed")
    return first


def _mfa_code(args: argparse.Namespace) -> Any:
    """What answers an MFA challenge: --mfa-code, else LEASEHOLD_MFA_CODE, else a prompt in
    a terminal, else nothing (the sign-in then says how to give one)."""
    given = args.mfa_code or os.environ.get(MFA_CODE_ENV)
    if given:
        return lambda: given
    if sys.stdin.isatty() and not args.password_stdin:
        return lambda: input("Code from your authenticator app: ").strip()
    return None


def _mfa_setup(username: str) -> Any:
    """In a terminal only: show the secret for the authenticator app, ask for its code."""
    if not sys.stdin.isatty():
        return None

    def set_up(secret: str) -> str:
        from urllib.parse import quote

        print(
            "The user pool requires an authenticator app (TOTP) and this user has none yet.\n"
            f"Add this secret to the app (shown once): {secret}\n"
            f"or as a link: otpauth://totp/leasehold:{quote(username)}?secret={secret}"
            "&issuer=leasehold"
        )
        return input("Then the app's code: ").strip()

    return set_up


def _cmd_login(args: argparse.Namespace) -> int:
    from leasehold.client.errors import ApiError
    from leasehold.client.login import LoginSession, session_path

    region = _region(args)
    url, client_id = args.url, args.client_id
    if args.stack:
        outputs = _stack_outputs(args.stack, region)
        url = url or outputs.get("ApiUrl")
        client_id = client_id or outputs.get("UserPoolClientId")
    if not url or not client_id:
        raise CliError(
            "name the stack: --stack NAME (its outputs), or --url URL and --client-id ID "
            "(the outputs ApiUrl and UserPoolClientId of `sam list stack-outputs`)"
        )
    if not args.username:
        if not sys.stdin.isatty():
            raise CliError("pass --username (the e-mail the user pool knows)")
        args.username = input("Username (e-mail): ").strip()
    password = _password(args)
    path = Path(args.session) if args.session else session_path()
    try:
        session = LoginSession.sign_in(
            api_url=url,
            region=region,
            client_id=client_id,
            username=args.username,
            password=password,
            path=path,
            new_password=_new_password if sys.stdin.isatty() and not args.password_stdin else None,
            mfa_code=_mfa_code(args),
            mfa_setup=_mfa_setup(args.username),
        )
    except ApiError as exc:
        raise CliError(exc.message) from None
    print(
        f"logged in as {session.username} to {session.api_url}; the session is kept in "
        f"{session.path} (only you can read it). Use it with `leasehold … --url "
        f"{session.api_url}` or Client.from_login().",
    )
    return 0


def _cmd_logout(args: argparse.Namespace) -> int:
    from leasehold.client.login import session_path

    path = Path(args.session) if args.session else session_path()
    if not path.exists():
        print(f"not logged in (no session at {path})")
        return 0
    path.unlink()
    print(f"removed the session at {path}")
    return 0


def add_login_commands(commands: Any) -> None:
    login = commands.add_parser(
        "login", help="sign in to a deployed stack's user pool", description=LOGIN_HELP
    )
    login.add_argument("--stack", help="the deployed stack's name (reads its outputs)")
    login.add_argument("--url", help="the stack's API URL (output ApiUrl)")
    login.add_argument("--client-id", help="the user pool's app client (output UserPoolClientId)")
    login.add_argument("--region", help="the stack's region (default: AWS_REGION, your config)")
    login.add_argument("--username", help="the user's e-mail address")
    login.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin's first line"
    )
    login.add_argument(
        "--mfa-code",
        metavar="CODE",
        help=f"the authenticator app's code, when the pool asks for one (or ${MFA_CODE_ENV})",
    )
    login.add_argument("--session", metavar="FILE", help="where to keep the session")
    login.set_defaults(run=_cmd_login)
    logout = commands.add_parser("logout", help="forget the session `leasehold login` kept")
    logout.add_argument("--session", metavar="FILE", help="the session file to remove")
    logout.set_defaults(run=_cmd_logout)
