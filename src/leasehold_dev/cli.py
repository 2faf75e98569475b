"""The `leasehold` command: a project of one's own (new, template), the local stack (up, down,
status, a worker to attach), in-process invocation, a user's jobs (leasehold_dev.cli_jobs:
submit, show), the operator's commands (leasehold_dev.cli_ops), a deployed stack's sign-in
(leasehold_dev.cli_login: login, logout), documents, the provider, smoke, demo. Every request to
the API goes through leasehold.client.Client.

Every command that needs a running stack finds it the same way (leasehold_dev.cli_target)."""

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

from leasehold.domain.errors import LeaseholdError
from leasehold_dev.cli_jobs import add_job_commands
from leasehold_dev.cli_login import add_login_commands
from leasehold_dev.cli_ops import add_ops_commands
from leasehold_dev.cli_schedules import add_schedules_commands
from leasehold_dev.cli_target import (
    CliError,
    add_state_option,
    add_url_options,
    api_url,
    local_stack,
)

__all__ = ["CliError", "build_parser", "main"]


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
    """Salvage a data directory `local up` refuses as damaged (leasehold_dev.local.journal's
    `repair`): what it kept, what it could not keep, where the damaged files went."""
    from leasehold_dev.local.journal import JournalError, repair
    from leasehold_dev.local.locate import data_path_for_up

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


def _cmd_smoke(args: argparse.Namespace) -> int:
    from leasehold_dev.smoke import Smoke, SmokeError

    url = api_url(args)
    try:
        return Smoke(url, token=args.token, ops_token=args.ops_token).run()
    except SmokeError as exc:
        raise CliError(str(exc)) from exc


# ---------------------------------------------------------------- docs (doc_prep's documents)


def _cmd_docs_put(args: argparse.Namespace) -> int:
    """Upload a document for doc_prep jobs to the running local stack's documents bucket, under
    the demo user's tenant, and print the `s3_key` a job names it by (stdout: the key alone)."""
    from leasehold_dev.local.gateway import DEMO_USERS
    from leasehold_dev.local.stack import client

    _, stack = local_stack(args)
    bucket = stack.outputs.get("DocumentsBucket")
    if not bucket:
        raise CliError("the running local stack has no documents bucket; restart it (make up)")
    # The rules a document must meet are the agent's own. Importing the agent reads its
    # settings, as a function's cold start does: the one it requires is this stack's bucket.
    os.environ.setdefault("DOCUMENTS_BUCKET", bucket)
    from leasehold_apps.doc_agent.spec import (
        MAX_DOCUMENT_BYTES,
        DocumentUnreadableError,
        decode_document,
        document_prefix,
        tenant_of_key,
    )

    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    try:
        decode_document(data)
    except DocumentUnreadableError as exc:
        raise CliError(f"{args.file}: {exc} (a doc_prep document is UTF-8 text ≤ "
                       f"{MAX_DOCUMENT_BYTES} bytes)") from exc  # fmt: skip
    tenant = DEMO_USERS[args.user]["custom:tenant"]
    key = document_prefix(tenant) + (args.name or path.name)
    if tenant_of_key(key) != tenant:
        raise CliError(
            f"{key!r} is not a usable document key: use a name of A-Z a-z 0-9 ! _ . * ' ( ) - "
            "(pass --name to choose one)"
        )
    client("s3", stack.endpoint).put_object(
        Bucket=bucket, Key=key, Body=data, ContentType="text/plain; charset=utf-8"
    )
    print(f"uploaded {len(data)} bytes for {args.user} (tenant {tenant}) to s3://{bucket}/{key}",
          file=sys.stderr)  # fmt: skip
    print(key)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from leasehold_dev.demo import run_demo

    importable_from(Path.cwd())
    return run_demo(Path(args.template), port=args.port, kinds=args.kinds)


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


def _cmd_new(args: argparse.Namespace) -> int:
    from leasehold_dev.scaffold import Project, write_project

    directory = Path(args.directory)
    project = Project.named(
        directory.resolve(), package=args.package, leasehold_requirement=args.leasehold
    )
    written = write_project(directory, project)
    print(
        f"wrote {len(written)} files to {directory}/ (package {project.package_name}, kind greet)"
    )
    print(f"leasehold for its .venv: {project.leasehold_requirement}")
    print(f"next:  cd {directory} && make test && make up")
    return 0


def _cmd_template(args: argparse.Namespace) -> int:
    from leasehold.sdk.loading import KindLoadError, module_names
    from leasehold_dev.scaffold import drifted, engine_files

    try:
        module_names(args.kinds)
    except KindLoadError as exc:
        raise CliError(str(exc)) from exc
    files = engine_files(args.kinds)
    if args.check:
        stale = drifted(Path(args.check), args.kinds)
        if stale:
            print(
                f"leasehold template: {', '.join(stale)} in {args.check} differ from what the "
                "leasehold installed makes: run `make template` (leasehold template --write)",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.write:
        for name, text in files.items():
            path = Path(args.write) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
        return 0
    sys.stdout.write(files["template.yaml"])
    return 0


def _demo_users() -> list[str]:
    from leasehold_dev.local.gateway import DEMO_USERS

    return list(DEMO_USERS)


def build_parser() -> argparse.ArgumentParser:
    from leasehold_apps.reading_list.provider import PROVIDER_MODES

    parser = argparse.ArgumentParser(prog="leasehold", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
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
    add_job_commands(commands, _demo_users())
    add_ops_commands(commands)
    add_schedules_commands(commands)
    add_login_commands(commands)
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
    smoke = commands.add_parser(
        "smoke", help="one successful and one failing operation of each application, anywhere"
    )
    add_url_options(smoke)
    smoke.add_argument("--ops-token", help="an operator's ID token, for the replay (deployed)")
    add_state_option(smoke)
    smoke.set_defaults(run=_cmd_smoke)
    docs = commands.add_parser("docs", help="documents for doc_prep jobs (local stack)")
    docs_commands = docs.add_subparsers(dest="docs_command", required=True)
    put = docs_commands.add_parser(
        "put", help="upload FILE under the user's tenant; prints the s3_key for a doc_prep job"
    )
    put.add_argument("file")
    put.add_argument("--user", required=True, choices=sorted(_demo_users()))
    put.add_argument("--name", help="the document's name in the bucket (default: FILE's name)")
    add_state_option(put)
    put.set_defaults(run=_cmd_docs_put)
    new = commands.add_parser(
        "new",
        help="write a project of your own: a kind, its tests, template.yaml, Makefile, events",
    )
    new.add_argument("directory", help="the project's directory (new or empty); names the project")
    new.add_argument(
        "--package",
        help="the Python package (default: the directory's name, _ for -); not the name of "
        "a standard-library module or of one leasehold's dependencies install",
    )
    new.add_argument(
        "--leasehold",
        metavar="REQUIREMENT",
        help="how the project's .venv installs leasehold (default: this checkout's path when run "
        "from one, else this release from a package index)",
    )
    new.set_defaults(run=_cmd_new)
    template = commands.add_parser(
        "template",
        help="leasehold's template.yaml with your kinds as the Kinds default (a project's "
        "generated files)",
    )
    template.add_argument(
        "--kinds", required=True, help="LEASEHOLD_KINDS: modules, comma-separated"
    )
    where = template.add_mutually_exclusive_group()
    where.add_argument(
        "--write", metavar="DIR", help="write template.yaml and src/leasehold-requirements.txt"
    )
    where.add_argument(
        "--check", metavar="DIR", help="exit 1 when DIR's generated files differ from these"
    )
    template.set_defaults(run=_cmd_template)
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


if __name__ == "__main__":
    sys.exit(main())
