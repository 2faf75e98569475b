"""Runs the whole system on one machine: moto server, stack from template.yaml, gateway, stream
pump, sweeper schedule and N worker processes. Stops everything on Ctrl-C or SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from leasehold_dev.local.datadir import (
    PROVIDER_MODES,
    RestoreSummary,
    count_charges,
    provider_ledger,
    set_aside,
)
from leasehold_dev.local.gateway import Gateway
from leasehold_dev.local.invoke import (
    LocalContext,
    apply_environment,
    load_handler,
    log_keys_per_thread,
    metrics_shared_by_threads,
    serialised,
)
from leasehold_dev.local.journal_format import JournalError
from leasehold_dev.local.moto import process as moto_process
from leasehold_dev.local.moto.process import quiet_local_noise
from leasehold_dev.local.processes import (
    ProcessRef,
    WorkerRegistry,
    stop_processes,
    stop_requested_by_signals,
)
from leasehold_dev.local.pumps import QueuePoller, Repeater, StreamPump, scheduled_event
from leasehold_dev.local.stack import (
    StackError,
    StackInfo,
    check_port_free,
    create_stack,
    durable_resources,
    restore_data,
)
from leasehold_dev.local.supervisor import WorkerSupervisor
from leasehold_dev.local.template import load_template
from leasehold_dev.local.uploads import local_uploads

DEFAULT_STATE = Path(".leasehold/local-stack.json")
WORKER_STOP_SECONDS = 5.0
"""How long a worker may take to finish its batch after SIGTERM before it is killed."""
SUPERVISE_EVERY_SECONDS = 1.0
"""How often `local up` looks for a worker process that has ended (and restarts it)."""
STACK_GONE_EXIT_SECONDS = 2.0
"""How soon an attached worker ends after the stack it serves is gone."""


class StackAlreadyRunningError(StackError):
    """The state file names a stack whose `local up` process still runs."""

    def __init__(self, state_path: Path, info: StackInfo) -> None:
        where = f" at {info.api_url}" if info.api_url else ""
        super().__init__(
            f"a local stack is already running{where} (pid {info.pid}, {state_path}); "
            "stop it with `leasehold local down` (or `make down`)"
        )
        self.info = info


def check_kinds(info: StackInfo) -> list[str]:
    """Load the functions' kinds here, as each function will at its cold start, so a module
    that does not import (or a kind defined twice, or one with no steps) stops `local up` with
    its name instead of failing inside every worker."""
    from leasehold.sdk.loading import KindLoadError, load_kinds

    env = info.environment(info.function_for("handlers.worker.handler"))
    saved = dict(os.environ)
    os.environ.update(env)  # the applications' cold-start checks read the function's settings
    try:
        loaded = load_kinds(
            env.get("LEASEHOLD_KINDS", ""), max_step_seconds=float(env["MAX_STEP_SECONDS"])
        )
    except KindLoadError as refused:
        raise StackError(str(refused)) from refused
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return sorted(loaded.kinds)


class LocalStack:
    """The embedded stack in this process (gateway and pumps as threads); workers are separate
    processes started with `spawn_worker`."""

    def __init__(
        self,
        template: Path,
        *,
        port: int = 8080,
        state_path: Path = DEFAULT_STATE,
        sweep_seconds: float = 1.0,
        parameters: dict[str, str] | None = None,
        handler_log: Path | None = None,
        faults: str = "",
        gsi_lag_ms: int = 0,
        kinds: str | None = None,
        data_dir: Path | None = None,
        fresh: bool = False,
        traces: Path | None = None,
    ) -> None:
        """`data_dir`: the data directory whose state the stack keeps and restores (None: keep
        nothing — every table, document and charge is gone when it stops); `fresh`: move what
        `data_dir` holds aside (to `<data_dir>.previous`) and start empty; `traces`: the file
        every function's spans are appended to, as OTLP JSON lines (decision TR5)."""
        self.traces = traces
        self.data_dir = data_dir
        self.fresh = fresh
        self.restored: RestoreSummary | None = None
        self._scratch: Path | None = None  # the providers' ledgers when nothing is kept
        self.faults = faults
        self.gsi_lag_ms = gsi_lag_ms
        """How far the table's indexes lag behind it (leasehold_dev.local.moto.index_lag)."""
        self.kinds = kinds
        """LEASEHOLD_KINDS for every function (the template's `Kinds` parameter); None: the
        template's default."""
        self.providers: dict[str, Any] = {}
        self.handler_log = handler_log
        self.template = template
        self.port = port
        self.state_path = state_path
        self.sweep_seconds = sweep_seconds
        self.parameters = parameters
        self.info: StackInfo | None = None
        self.gateway: Gateway | None = None
        self.stream_pumps: list[StreamPump] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.supervisor: WorkerSupervisor | None = None
        self._moto: Any = None
        self._log_file: Any = None
        self._threads: list[Repeater] = []
        self._kind_names: list[str] = []

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return f"http://127.0.0.1:{self.gateway.port}"

    def kind_names(self) -> list[str]:
        """The kinds the functions register (known once `start` has created the stack)."""
        return list(self._kind_names)

    @property
    def started(self) -> bool:
        """The gateway listens and the state file says where (workers may be spawned)."""
        return self.gateway is not None and bool(self.info and self.info.api_url)

    def start(self) -> StackInfo:
        """Raises StackAlreadyRunningError when the state file names a live stack (its file is
        left alone), PortBusyError, or TemplateError; what was started before a failure is
        stopped by `stop()`."""
        quiet_local_noise()
        self._refuse_a_second_stack()
        if self.port:
            check_port_free(self.port)
        load_template(self.template)  # a template that cannot be read stops us before any data
        set_aside_to = None
        if self.data_dir is not None and self.fresh:
            try:
                set_aside_to = set_aside(self.data_dir)
            except JournalError as exc:
                raise StackError(str(exc)) from exc
        try:
            self._moto = moto_process.spawn(data=self.data_dir, gsi_lag_ms=self.gsi_lag_ms)
        except moto_process.MotoProcessError as exc:
            raise StackError(str(exc)) from exc
        endpoint = self._moto.endpoint
        urls = self._start_providers()
        parameters = {
            "EnrichmentProviderUrl": urls["idempotent"],
            "EnrichmentProviderCapability": "idempotent_key",
            **(self.parameters or {}),
        }
        if self.kinds is not None:
            parameters["Kinds"] = self.kinds
        info = create_stack(endpoint, self.template, parameters)
        if self.data_dir is not None:
            restored = restore_data(endpoint, durable_resources(endpoint, self.template))
            self.restored = RestoreSummary(
                data=self.data_dir,
                items=int(restored["items"]),
                tables=int(restored["tables"]),
                documents=int(restored["documents"]),
                charges=count_charges(self.data_dir),
                seconds=float(restored["load_seconds"]) + float(restored["seconds"]),
                set_aside_to=set_aside_to,
            )
            info.data_dir = str(self.data_dir)
        self._kind_names = check_kinds(info)
        info.local_environment["LEASEHOLD_LOCAL_PROVIDERS"] = json.dumps(urls)
        if self.faults:
            info.local_environment["LEASEHOLD_FAULTS"] = self.faults
        # The key the API signs local upload URLs with and the gateway checks them by (LD7)
        info.local_environment["LEASEHOLD_LOCAL_UPLOADS"] = secrets.token_urlsafe(32)
        if self.traces is not None:  # every function, attached workers too (the state has it)
            info.local_environment["LEASEHOLD_TRACES"] = str(self.traces.resolve())
        me = ProcessRef.current()
        info.pid, info.pid_started = me.pid, me.started
        self.info = info
        info.save(self.state_path)
        if self.handler_log is not None:
            # In-process handlers bind their log stream at import: send it to a file.
            self.handler_log.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = self.handler_log.open("a", buffering=1)
            with contextlib.redirect_stdout(self._log_file):
                return self._start_functions(info)
        return self._start_functions(info)

    def _refuse_a_second_stack(self) -> None:
        if not self.state_path.is_file():
            return
        try:
            existing = StackInfo.load(self.state_path)
        except StackError:
            return  # unreadable: a stale file this start replaces
        if existing.pid != os.getpid() and existing.process.alive():
            raise StackAlreadyRunningError(self.state_path, existing)

    def _start_providers(self) -> dict[str, str]:
        """The billable enrichment provider, once per capability (docs/architecture.md "External
        effects"), each with its own
        durable charge ledger beside the state file. A request may pick one (local only)."""
        from leasehold_dev.local.provider import ProviderServer

        ledgers = self.data_dir
        if ledgers is None:
            ledgers = self._scratch = Path(tempfile.mkdtemp(prefix="leasehold-providers-"))
        for mode in PROVIDER_MODES:
            db = provider_ledger(ledgers, mode)
            self.providers[mode] = ProviderServer(capability=mode, db_path=db).start()
        return {mode: server.url for mode, server in self.providers.items()}

    def _start_functions(self, info: StackInfo) -> StackInfo:
        # The Api, Relay and Sweeper run at once in this process, each one invocation at a
        # time (`serialised`, decision CI11): their shared metric set and log keys made safe.
        metrics_shared_by_threads()
        log_keys_per_thread()
        api = info.function_for("handlers.api.handler")
        apply_environment(info, api)
        self.gateway = Gateway(
            self.port,
            info.routes,
            {api: serialised(load_handler(info, api))},
            traces=self.traces.resolve() if self.traces is not None else None,
            uploads=local_uploads(info, api),
        )
        endpoint = info.endpoint
        for mapping in info.stream_mappings:
            pump = StreamPump(
                endpoint,
                mapping,
                serialised(load_handler(info, mapping.function)),
                info.functions[mapping.function].name,
            )
            self.stream_pumps.append(pump)
            self._threads.append(Repeater(f"stream:{mapping.function}", 0.1, pump.poll_once))
        for function in info.schedules:
            handler = serialised(load_handler(info, function))
            name = info.functions[function].name

            def run_schedule(handler: Any = handler, name: str = name) -> object:
                return handler(scheduled_event(name), LocalContext(name))

            self._threads.append(Repeater(f"schedule:{function}", self.sweep_seconds, run_schedule))
        self.gateway.start()
        info.api_url = self.url
        info.save(self.state_path)
        for thread in self._threads:
            thread.start()
        return info

    def spawn_worker(self, name: str, log_dir: Path | None = None) -> subprocess.Popen[bytes]:
        """One more worker process (`leasehold local worker`), logging to `<log_dir>/<name>.log`."""
        log_dir = log_dir or self.state_path.parent / "logs"
        process = spawn_worker_process(self.state_path, name, log_dir)
        self.workers.append(process)
        return process

    def supervise_workers(self, names: list[str], log_dir: Path | None = None) -> None:
        """Start a worker process for each name and keep them running while the stack runs:
        one that ends is restarted and the restart printed, within a bound (WorkerSupervisor)."""
        log_dir = log_dir or self.state_path.parent / "logs"

        def say(line: str) -> None:
            print(line, flush=True)

        supervisor = WorkerSupervisor(
            lambda name: spawn_worker_process(self.state_path, name, log_dir),
            say=say,
            status=self.state_path,
        )
        self.supervisor = supervisor
        for name in names:
            supervisor.start(name)
        watch = Repeater("supervisor", SUPERVISE_EVERY_SECONDS, supervisor.check_once)
        self._threads.append(watch)
        watch.start()

    def stop(self) -> None:
        """Stop the workers it spawned and every worker attached to it (`leasehold local
        worker`, registered beside the state file), then its threads, gateway, providers and
        moto; remove the state file it wrote. Bounded: a worker gets WORKER_STOP_SECONDS to
        finish its batch, then SIGKILL. Safe to call after a failed or partial start."""
        if self.supervisor is not None:
            self.supervisor.halt()  # no restart while the stack stops
            self.workers.extend(self.supervisor.processes().values())
        for process in self.workers:
            if process.poll() is None:
                process.terminate()
        registry = WorkerRegistry(self.state_path)
        attached = [] if self.info is None else list(registry.workers())
        stop_processes(attached, grace=WORKER_STOP_SECONDS)
        deadline = time.monotonic() + WORKER_STOP_SECONDS
        for process in self.workers:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for thread in self._threads:
            thread.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        if self.gateway:
            self.gateway.stop()
        for server in self.providers.values():
            server.stop()
        if self._moto:
            self._moto.stop()
            self._moto = None
        if self.info is not None:  # only the file this process wrote, never another stack's
            self.state_path.unlink(missing_ok=True)
            registry.clear()
        if self.supervisor is not None:
            self.supervisor.forget()
        if self._log_file is not None:
            self._log_file.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def spawn_worker_process(state_path: Path, name: str, log_dir: Path) -> subprocess.Popen[bytes]:
    """Start `leasehold local worker` for a running stack, its output in `<log_dir>/<name>.log`.
    The worker stops once this process is gone (it is told this pid: a parent that dies before
    the worker has started is still noticed)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{name}.log").open("ab") as log:
        command = [sys.executable, "-m", "leasehold_dev.cli", "local", "worker", "--state"]
        return subprocess.Popen(
            [*command, str(state_path), "--name", name, "--parent-pid", str(os.getpid())],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def run_worker(
    state_path: Path,
    name: str,
    *,
    parent_pid: int | None = None,
    max_idle_polls: int | None = None,
) -> None:
    """A worker process: poll the queue with the template's batch size and call the Worker
    handler with SQS events, deleting only what was not reported failed.

    It registers beside the state file (so `local down` and a stopping `local up` stop it), and
    stops on its own within STACK_GONE_EXIT_SECONDS once the stack it serves is gone — the
    state file removed or the `local up` process no longer running — instead of polling a dead
    endpoint forever. The stack's tables and queues lived in that process: there is nothing
    left to finish, so a worker blocked in a request retrying a dead endpoint is ended.

    It also stops on SIGTERM/SIGINT (after the message in hand) and once `parent_pid` (default:
    its parent at start) is no longer its parent — checked between polls, so an orphan is gone
    within a poll or two. Not Linux's parent-death signal: that fires when the *thread* that
    started the worker ends, and the demo starts workers from task threads that end long before
    the stack."""
    parent = parent_pid if parent_pid is not None else os.getppid()
    quiet_local_noise()
    info = StackInfo.load(state_path)
    stack_process = info.process
    if info.pid and not stack_process.alive():
        raise StackError(
            f"the local stack of {state_path} is not running any more (its process {info.pid} "
            "is gone); start one with `make up`"
        )
    mappings = info.worker_mappings()
    metrics_shared_by_threads()  # one poller thread per priority queue share the handler
    # The lease holder's name: the process's name and pid (`ops show` reads both).
    os.environ["AWS_LAMBDA_LOG_STREAM_NAME"] = f"{name}@{os.getpid()}"
    handler = load_handler(info, mappings[0].function)
    function = info.functions[mappings[0].function]
    # Asked to stop (SIGTERM from `local down` / a stopping `local up`, SIGINT from Ctrl-C):
    # every invocation in hand has no time left from then on, so the engine hands its job back
    # at the step's next heartbeat (attempt not burned) instead of being killed holding it.
    stopping = stop_requested_by_signals()
    # One poller per event source mapping, as Lambda has (decision F4): the high, normal and
    # low queues are polled independently, so no backlog on one holds up another.
    pollers = [
        QueuePoller(
            info.endpoint,
            mapping,
            handler,
            function.name,
            timeout_ms=function.timeout_seconds * 1000,
            ends=stopping,
        )
        for mapping in mappings
    ]
    me = ProcessRef.current()
    registry = WorkerRegistry(state_path)
    registry.register(name, me)

    def watch_the_stack() -> None:
        while state_path.is_file() and not (info.pid and not stack_process.alive()):
            time.sleep(0.25)
        print(f"{name}: the local stack is gone (pid {info.pid}); stopping", flush=True)
        stopping.set()
        time.sleep(STACK_GONE_EXIT_SECONDS / 2)  # the loop's chance to end on its own
        registry.unregister(me)
        os._exit(0)  # blocked in a request to the dead endpoint: nothing left to save

    threading.Thread(target=watch_the_stack, name="watch-the-stack", daemon=True).start()
    print(f"{name} polling {', '.join(m.queue_url for m in mappings)}", flush=True)

    def poll(poller: QueuePoller) -> None:
        idle = 0
        while (
            not stopping.is_set() and os.getppid() == parent
        ):  # an orphan stops (no workers left over)
            try:
                received, _ = poller.poll_once(wait_seconds=1)
            except Exception as exc:  # the stack went away or hiccuped: wait, then try again
                print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
                time.sleep(0.5)
                received = 0
            idle = 0 if received else idle + 1
            if max_idle_polls is not None and idle >= max_idle_polls:
                break

    threads = [
        threading.Thread(target=poll, args=(poller,), name=f"poll-{index}", daemon=True)
        for index, poller in enumerate(pollers)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.5)
    finally:
        registry.unregister(me)
