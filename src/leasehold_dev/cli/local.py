"""`leasehold local …` (up, down, repair, status, worker) and `leasehold invoke`: the embedded
local stack of a checkout, and one function's handler run in-process against it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from leasehold_dev.cli.target import CliError, add_state_option, local_stack


def _busy_port(port: int) -> str:
    """Advice in the words of both ways a user starts the stack."""
    other = port + 1 if port < 65535 else 8081
    return (
        f"port {port} on 127.0.0.1 is busy (another program, or a local stack of another "
        f"checkout); choose another port: `PORT={other} make up` or "
        f"`leasehold local up --port {other}`"
    )


def importable_from(directory: Path) -> None:
    """Let the stack and its worker processes import the user's kind modules from the directory
    `local up` runs in, as `python -m` would (the `leasehold` script's own directory is not
    it): first on sys.path here, and on PYTHONPATH for every process it starts."""
    where = str(directory)
    if where not in sys.path:
        sys.path.insert(0, where)
    paths = [part for part in os.environ.get("PYTHONPATH", "").split(os.pathsep) if part]
    if where not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([where, *paths])


def _parameter_overrides(given: list[str], template_path: Path) -> dict[str, str]:
    """`--parameter NAME=VALUE`s, each NAME one of the template's parameters."""
    from leasehold_dev.local.rules import parameter_values, rule_problems
    from leasehold_dev.local.stack import LOCAL_PARAMETERS
    from leasehold_dev.local.template import TemplateError, load_template

    if not given:
        return {}
    try:
        loaded = load_template(template_path)
    except TemplateError as exc:
        raise CliError(str(exc)) from exc
    declared = dict(loaded.get("Parameters") or {})
    known = set(declared)
    overrides = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise CliError(
                f"--parameter {text!r}: give NAME=VALUE, e.g. LostWakeupGraceSeconds=120"
            )
        if name not in known:
            raise CliError(
                f"--parameter {name}: the template has no such parameter "
                f"(it has {', '.join(sorted(known))})"
            )
        problem = _parameter_problem(declared[name] or {}, value)
        if problem:
            raise CliError(f"--parameter {name}={value}: {problem}")
        overrides[name] = value
    # Then the template's Rules over all of them, as CloudFormation evaluates them before it
    # makes anything (a lease longer than the worker's timeout allows is refused here).
    local = {k: v for k, v in LOCAL_PARAMETERS.items() if k in known}
    try:
        refused = rule_problems(loaded, parameter_values(loaded, {**local, **overrides}))
    except TemplateError as exc:
        raise CliError(str(exc)) from exc
    if refused:
        raise CliError("--parameter: the template's Rules refuse it: " + "; ".join(refused))
    return overrides


def _parameter_problem(declared: dict[str, Any], value: str) -> str | None:
    """What CloudFormation would refuse in `value` for this parameter (moto's checks none of
    it: a WorkerBatchSize of 0 made pollers that ask SQS for no messages), or None."""
    import re

    allowed = declared.get("AllowedValues")
    if allowed is not None and value not in [str(v) for v in allowed]:
        return f"must be one of {', '.join(str(v) for v in allowed)}"
    if declared.get("Type") == "Number":
        try:
            number = float(value)
        except ValueError:
            return "must be a number"
        if "MinValue" in declared and number < float(declared["MinValue"]):
            return f"must be at least {declared['MinValue']}"
        if "MaxValue" in declared and number > float(declared["MaxValue"]):
            return f"must be at most {declared['MaxValue']}"
    pattern = declared.get("AllowedPattern")
    if pattern is not None and re.fullmatch(str(pattern), value) is None:
        return f"does not match the pattern {pattern}"
    if "MinLength" in declared and len(value) < int(declared["MinLength"]):
        return f"must be at least {declared['MinLength']} characters"
    if "MaxLength" in declared and len(value) > int(declared["MaxLength"]):
        return f"must be at most {declared['MaxLength']} characters"
    return None


MAX_GSI_LAG_MS = 60_000
"""`local up --gsi-lag-ms`'s bound: a minute behind is already far past what AWS shows."""


def _cmd_local_up(args: argparse.Namespace) -> int:
    from leasehold.store.faults import FaultPlan, FaultSpecError
    from leasehold_dev.local.locate import data_path_for_up, state_path_for_up, template_for_up
    from leasehold_dev.local.runner import LocalStack
    from leasehold_dev.local.stack import PortBusyError, StackError
    from leasehold_dev.local.template import TemplateError

    if args.workers < 0 or args.workers > 16:
        raise CliError("--workers must be between 0 and 16")
    if not 0 <= args.port <= 65535:
        raise CliError("--port must be between 0 and 65535 (0: any free port)")
    try:
        FaultPlan.parse(args.faults)
    except FaultSpecError as exc:
        raise CliError(f"--faults: {exc}") from exc
    if not 0 <= args.gsi_lag_ms <= MAX_GSI_LAG_MS:
        raise CliError(f"--gsi-lag-ms must be between 0 and {MAX_GSI_LAG_MS}")
    if args.in_memory and (args.fresh or args.data):
        raise CliError("--in-memory keeps nothing: it goes with neither --data nor --fresh")
    cwd = Path.cwd()
    importable_from(cwd)
    state = state_path_for_up(args.state_file, cwd, os.environ)
    functions_log = Path(args.functions_log) if args.functions_log else None
    template_path = template_for_up(args.template, cwd)
    parameters = _parameter_overrides(args.parameter, template_path)
    stack = LocalStack(
        template_path,
        parameters=parameters,
        port=args.port,
        state_path=state,
        faults=args.faults,
        gsi_lag_ms=args.gsi_lag_ms,
        handler_log=functions_log,
        kinds=args.kinds,
        data_dir=None if args.in_memory else data_path_for_up(args.data, cwd),
        fresh=args.fresh,
        traces=Path(args.traces) if args.traces else None,
    )
    stopped = threading.Event()

    def on_signal(*_: object) -> None:
        stopped.set()
        if stack.supervisor is not None:
            # Ctrl-C reaches the workers too, and they end once they have handed their jobs
            # back: none of them is restarted from now on.
            stack.supervisor.halt()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start()
    except PortBusyError as exc:
        stack.stop()
        raise CliError(_busy_port(exc.port)) from exc
    except (StackError, TemplateError) as exc:
        stack.stop()  # whatever had started (moto, providers); nothing was announced
        raise CliError(str(exc)) from exc
    try:
        logs = state.parent / "logs"
        # Kept running: a worker that dies is restarted, and this terminal says so.
        stack.supervise_workers([f"worker-{index + 1}" for index in range(args.workers)], logs)
        faults = f"; faults {args.faults}" if args.faults else ""
        if args.gsi_lag_ms:
            faults += f"; indexes lag {args.gsi_lag_ms} ms"
        if args.traces:
            faults += f"; spans to {args.traces}"
        if stack.restored is not None:
            for line in stack.restored.lines():
                print(line, flush=True)
            if stack.restored.set_aside_to is not None:
                print(f"leasehold: {stack.restored.lines()[0].strip()}", file=sys.stderr)
        kept = f"state in {stack.data_dir}" if stack.data_dir else "IN MEMORY: nothing is kept"
        print(
            f"leasehold local stack ready at {stack.url} "
            f"(moto; {args.workers} workers; {kept}{faults})",
            flush=True,
        )
        print(f"  kinds: {', '.join(stack.kind_names())}", flush=True)
        where = functions_log or "this terminal"
        print(
            f"  logs: Api, Relay, Sweeper → {where}; workers → {logs}/worker-N.log; "
            "stop with Ctrl-C or `leasehold local down`",
            flush=True,
        )
        while not stopped.wait(0.5):
            pass
    finally:
        stack.stop()
        print("leasehold local stack stopped", flush=True)
    return 0


def _cmd_local_worker(args: argparse.Namespace) -> int:
    from leasehold_dev.local.runner import run_worker
    from leasehold_dev.local.stack import StackError

    path, _ = local_stack(args)
    try:
        run_worker(path, args.name, parent_pid=args.parent_pid)
    except StackError as exc:
        raise CliError(str(exc)) from exc
    return 0


def _cmd_local_down(args: argparse.Namespace) -> int:
    """Stop the `local up` process of the state file, every worker registered beside it
    (spawned or attached) and so the providers, moto and gateway it runs; remove the state file.
    Bounded: `--timeout` for `local up` to stop, then SIGKILL."""
    from leasehold_dev.local.locate import STATE_FILE, find_state
    from leasehold_dev.local.processes import WorkerRegistry, stop_processes, wait_gone
    from leasehold_dev.local.stack import StackError, StackInfo

    path = find_state(args.state_file, Path.cwd(), os.environ)
    if path is None or not path.is_file():
        where = path or f"{STATE_FILE} here or above"
        print(f"leasehold: no local stack is running (no {where}); nothing to stop",
              file=sys.stderr)  # fmt: skip
        return 0
    registry = WorkerRegistry(path)
    workers = registry.workers()
    try:
        info: StackInfo | None = StackInfo.load(path)
    except StackError:
        info = None
    up = info.process if info is not None and info.pid != os.getpid() else None
    was_running = up is not None and up.signal(signal.SIGTERM)
    if up is not None and was_running and wait_gone([up], args.timeout):
        up.signal(signal.SIGKILL)
        wait_gone([up], 5.0)
    # Attached workers `local up` could not stop (it was gone, or was killed), and any that
    # registered while it stopped.
    workers.update(registry.workers())
    stop_processes(list(registry.workers()), grace=5.0)
    left = [process for process in [up, *workers] if process is not None and process.alive()]
    if left:
        raise CliError(f"still running after SIGKILL: pids {[p.pid for p in left]}")
    path.unlink(missing_ok=True)
    registry.clear()
    names = ", ".join(sorted(name for name in workers.values())) or "none"
    if was_running:
        assert info is not None
        print(f"leasehold local stack stopped (pid {info.pid}; workers: {names})")
    else:
        print(f"leasehold: the local stack of {path} was not running; cleared its state file "
              f"(workers stopped: {names})")  # fmt: skip
    return 0


def _cmd_local_repair(args: argparse.Namespace) -> int:
    """Salvage a data directory `local up` refuses as damaged (leasehold_dev.local.salvage's
    `repair`): what it kept, what it could not keep, where the damaged files went."""
    from leasehold_dev.local.journal_format import JournalError
    from leasehold_dev.local.locate import data_path_for_up
    from leasehold_dev.local.salvage import repair

    data = data_path_for_up(args.data, Path.cwd())
    if not data.is_dir():
        raise CliError(f"no data directory at {data} (give the one `local up` used: --data DIR)")
    try:
        report = repair(data)
    except (JournalError, OSError) as exc:
        raise CliError(str(exc)) from exc
    for line in report.lines():
        print(line, flush=True)
    return 0


def _cmd_local_status(args: argparse.Namespace) -> int:
    """Whether the stack runs, where, and where its logs are; `--wait` for a background start."""
    from leasehold_dev.local.processes import WorkerRegistry
    from leasehold_dev.local.supervisor import read_status

    deadline = time.monotonic() + args.wait
    while True:
        try:
            path, info = local_stack(args)
            if info.api_url:
                break
        except CliError:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise CliError("the local stack is still starting")
        time.sleep(0.5)
    workers = WorkerRegistry(path).workers()
    supervised = read_status(path)
    status = {
        "url": info.api_url,
        "pid": info.pid,
        "state_file": str(path),
        "workers": [{"name": name, "pid": ref.pid} for ref, name in workers.items()],
        # the workers `local up` keeps running: restarts, how the last one ended, held (s)
        "supervised": supervised,
        "worker_logs": str(path.parent / "logs"),
        "data": info.data_dir or None,
        "providers": json.loads(info.local_environment.get("LEASEHOLD_LOCAL_PROVIDERS", "{}")),
    }
    print(json.dumps(status, indent=2))
    return 0


def _cmd_invoke(args: argparse.Namespace) -> int:
    from leasehold_dev.local.invoke import invoke, resolve_function

    _, stack = local_stack(args)
    try:
        function = resolve_function(stack, args.function)
    except KeyError as exc:
        raise CliError(str(exc).strip("'\"")) from exc
    try:
        event: Any = json.loads(Path(args.event).read_text())
    except FileNotFoundError as exc:
        raise CliError(f"event file not found: {args.event}") from exc
    except ValueError as exc:
        raise CliError(f"event file {args.event} is not valid JSON: {exc}") from exc
    import warnings

    # As with `sam local invoke`: the function's logs go to stderr, its result to stdout.
    # Powertools warns when an invocation published no metric (a health check): not news here.
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        result = invoke(stack, function, event)
    print(json.dumps(result, indent=2, default=str))
    return 0


def add_local_commands(commands: Any) -> None:
    """`local up|down|repair|status|worker` and `invoke`."""
    local = commands.add_parser("local", help="the embedded local stack").add_subparsers(
        dest="local_command", required=True
    )
    up = local.add_parser("up", help="start moto + the stack of template.yaml + gateway + workers")
    up.add_argument("--port", type=int, default=8080, help="the gateway's port (0: any free)")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--template", help="default: template.yaml of the checkout (here or above)")
    add_state_option(up)
    up.add_argument(
        "--data",
        metavar="DIR",
        help="the data directory: tables, documents and charges survive a stop, Ctrl-C or "
        "kill -9 (default: .leasehold/data of the checkout)",
    )
    up.add_argument(
        "--fresh",
        action="store_true",
        help="start EMPTY: the data directory's state is moved aside to DIR.previous",
    )
    up.add_argument(
        "--in-memory",
        action="store_true",
        help="keep nothing on disk (everything is gone when the stack stops; for comparisons)",
    )
    up.add_argument(
        "--functions-log",
        metavar="FILE",
        help="write the Api, Relay and Sweeper logs to FILE instead of this terminal",
    )
    up.add_argument(
        "--kinds",
        help="LEASEHOLD_KINDS for every function: importable modules, comma-separated, whose "
        "kinds (and routes) are registered (default: the template's Kinds parameter)",
    )
    up.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a template parameter for this stack, over the local defaults (repeatable), "
        "e.g. --parameter LostWakeupGraceSeconds=120",
    )
    up.add_argument(
        "--faults",
        default="",
        help="inject store and queue faults, e.g. "
        "'dynamodb.TransactWriteItems:TransactionConflict=0.05,sqs.SendMessageBatch:InternalError=0.03'",
    )
    up.add_argument(
        "--traces",
        metavar="FILE",
        help="append every span of every function (api, relay, worker, sweeper) to FILE as "
        "JSON lines in OTLP's JSON encoding: one line a span",
    )
    up.add_argument(
        "--gsi-lag-ms",
        type=int,
        default=0,
        metavar="MS",
        help="make the table's indexes lag this far behind it, as a GSI may on AWS: an index "
        "Query answers from the table as it stood MS ago (default 0: current)",
    )
    up.set_defaults(run=_cmd_local_up)
    down = local.add_parser(
        "down", help="stop the running stack: its process, every worker (attached too), providers"
    )
    add_state_option(down)
    down.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL")
    down.set_defaults(run=_cmd_local_down)
    repair = local.add_parser(
        "repair",
        help="salvage a data directory `local up` refuses as damaged: keep every record before "
        "the damage, move the damaged files aside, say what could not be kept",
        description="Salvage a data directory that `leasehold local up` refuses as damaged (a "
        "record in the middle of the journal, or a snapshot line, that does not check out). "
        "Keeps every journal record before the first damaged one and every snapshot line that "
        "checks out, moves the damaged snapshot and journal aside into DIR/damaged-<time>/ "
        "(never deletes them), and says what it could not keep. A directory that loads whole "
        "is left as it is. The stack must be stopped.",
    )
    repair.add_argument(
        "--data",
        metavar="DIR",
        help="the data directory (default: .leasehold/data of the checkout, as `local up`)",
    )
    repair.set_defaults(run=_cmd_local_repair)
    status = local.add_parser("status", help="is a stack running: its URL, pid, workers, logs")
    add_state_option(status)
    status.add_argument("--wait", type=float, default=0.0, help="wait up to this many seconds")
    status.set_defaults(run=_cmd_local_status)
    worker = local.add_parser("worker", help="attach one more worker process to a running stack")
    add_state_option(worker)
    worker.add_argument("--name", default="worker-extra")
    worker.add_argument(
        "--parent-pid",
        type=int,
        help="stop once this process is no longer the worker's parent (default: its parent now)",
    )
    worker.set_defaults(run=_cmd_local_worker)
    inv = commands.add_parser("invoke", help="run one function's handler with an event file")
    inv.add_argument("function", help="logical id (WorkerFunction) or short name (worker)")
    inv.add_argument("--event", required=True)
    add_state_option(inv)
    inv.set_defaults(run=_cmd_invoke)
