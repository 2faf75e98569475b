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

    if args.workers < 0 or args.workers > 16:
        raise CliError("--workers must be between 0 and 16")
    stack = LocalStack(Path(args.template), port=args.port, state_path=Path(args.state))
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
        print(
            f"leasehold local stack ready at {stack.url} (moto; {args.workers} workers)", flush=True
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
        run_worker(Path(args.state), args.name)
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
    # As with `sam local invoke`: the function's logs go to stderr, its result to stdout.
    with contextlib.redirect_stdout(sys.stderr):
        result = invoke(stack, function, event)
    print(json.dumps(result, indent=2, default=str))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from leasehold.demo import run_demo

    return run_demo(Path(args.template), port=args.port)


def build_parser() -> argparse.ArgumentParser:
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
    up.set_defaults(run=_cmd_local_up)
    worker = local.add_parser("worker", help="attach one more worker process to a running stack")
    worker.add_argument("--state", default=".leasehold/local-stack.json")
    worker.add_argument("--name", default="worker-extra")
    worker.set_defaults(run=_cmd_local_worker)
    inv = commands.add_parser("invoke", help="run one function's handler with an event file")
    inv.add_argument("function", help="logical id (WorkerFunction) or short name (worker)")
    inv.add_argument("--event", required=True)
    inv.add_argument("--state", default=".leasehold/local-stack.json")
    inv.set_defaults(run=_cmd_invoke)
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
