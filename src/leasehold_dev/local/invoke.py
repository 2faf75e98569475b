"""Run a function's handler in-process with the environment the template gives it — the
Docker-free stand-in for `sam local invoke`."""

from __future__ import annotations

import importlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasehold.testing import iam
from leasehold_dev.local.stack import StackInfo

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class LocalContext:
    """The parts of Lambda's context object that Powertools and our handlers read."""

    function_name: str
    memory_limit_in_mb: int = 256
    timeout_ms: int = 60_000
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = "local"
    log_stream_name: str = "local"
    ends: threading.Event | None = None
    """Once set, no time is left (a local worker asked to stop ends its invocation early: the
    engine hands the running job back at the step's next heartbeat, attempt not burned)."""
    _started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        if self.ends is not None and self.ends.is_set():
            return 0
        return max(0, self.timeout_ms - int((time.monotonic() - self._started) * 1000))


def serialised(handler: Handler) -> Handler:
    """One invocation of this function at a time, as one Lambda execution environment runs one.
    The Api, Relay and Sweeper of `local up` share a process but not a lock (decision CI11): on
    Lambda each has its own environment, and a request never waits for a sweep — under a table
    outage a sweep spends seconds in botocore's backoff per call, and a request behind it missed
    its client's timeout. What they share in the process is made safe for threads by
    `metrics_shared_by_threads` and `log_keys_per_thread`."""
    alone = threading.RLock()

    def invoke_alone(event: dict[str, Any], context: Any) -> Any:
        with alone:
            return handler(event, context)

    return invoke_alone


_LOG_KEYS = threading.local()
"""This thread's Powertools log keys: formatter id → the keys its invocation set."""


def log_keys_per_thread() -> None:
    """Keep the Powertools Logger's per-invocation keys (function name, request id, cold start)
    per thread, for handlers that share a process and run at once (`serialised`). Every Logger
    of one service shares one formatter, and each invocation replaces its keys as it starts
    (`inject_lambda_context(clear_state=True)`): without this, a sweep's lines would carry the
    Api's function name once a request began meanwhile. A thread that never set keys (a sweep's
    segment threads) reads those of the thread that started it, else the last ones set.
    Idempotent; for the local stack's process only (it patches threading.Thread)."""
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter as Formatter

    if getattr(Formatter, "_leasehold_keys_per_thread", False):
        return

    def read(formatter: Any) -> Any:
        keys = getattr(_LOG_KEYS, "keys", None)
        if keys is None:
            keys = getattr(threading.current_thread(), "_leasehold_log_keys", None)
        mine = keys.get(id(formatter)) if keys else None
        return mine if mine is not None else formatter.__dict__["log_format"]

    def write(formatter: Any, value: Any) -> None:
        formatter.__dict__["log_format"] = value  # the last set: what other threads read
        if not hasattr(_LOG_KEYS, "keys"):
            _LOG_KEYS.keys = {}
        _LOG_KEYS.keys[id(formatter)] = value

    original_init = threading.Thread.__init__

    def init(thread: threading.Thread, *args: Any, **kwargs: Any) -> None:
        original_init(thread, *args, **kwargs)
        # the starting thread's keys (a dict it keeps updating), read while the new one has none
        thread._leasehold_log_keys = getattr(_LOG_KEYS, "keys", None)  # type: ignore[attr-defined]

    threading.Thread.__init__ = init  # type: ignore[method-assign, assignment]
    Formatter.log_format = property(read, write)  # type: ignore[assignment]
    Formatter._leasehold_keys_per_thread = True  # type: ignore[attr-defined]


_METRICS_LOCK = threading.RLock()


def metrics_shared_by_threads() -> None:
    """Make Powertools' EMF metric set safe for the local worker's poller threads, which share
    one module-level `Metrics` (one thread per priority queue in one process, decision F4): on
    Lambda each invocation has its own execution environment. Without it, one thread's clear
    (at 100 values of a metric, which happens even with metrics disabled) can empty the set
    another thread is serialising, and its invocation fails on an empty set. Idempotent. The
    Logger's per-invocation keys (request id, cold start) may still show another thread's:
    cosmetic, the job's own fields are passed with each line."""
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
        AmazonCloudWatchEMFProvider as Provider,
    )

    if getattr(Provider, "_leasehold_thread_safe", False):
        return
    for name in ("add_metric", "flush_metrics", "serialize_metric_set", "clear_metrics"):
        original = getattr(Provider, name)

        def locked(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _METRICS_LOCK:
                return __original(*args, **kwargs)

        setattr(Provider, name, locked)
    Provider._leasehold_thread_safe = True  # type: ignore[attr-defined]


def apply_environment(stack: StackInfo, function: str) -> None:
    os.environ.update(stack.environment(function))


def load_handler(stack: StackInfo, function: str) -> Handler:
    """Import the function's handler after its environment is set (a cold start). It runs with
    the permissions of its own role: every AWS call it makes is judged against that role's
    policies (leasehold.testing.iam), as on Lambda — also where the API, relay and sweeper
    share one process and one set of clients here."""
    iam.install()  # before the handler's runtime makes its clients
    role = stack.role(function)
    apply_environment(stack, function)
    module_name, _, attribute = stack.functions[function].handler.rpartition(".")
    handler: Handler = getattr(importlib.import_module(module_name), attribute)
    return acting_as(role, handler)


def acting_as(role: iam.Role, handler: Handler) -> Handler:
    """`handler`, each invocation acting as `role` (the AWS calls it makes, in this thread)."""

    def as_role(event: dict[str, Any], context: Any) -> Any:
        with iam.acting_as(role):
            return handler(event, context)

    return as_role


def resolve_function(stack: StackInfo, name: str) -> str:
    """Accept the logical id (WorkerFunction) or a short name (worker)."""
    if name in stack.functions:
        return name
    for logical_id in stack.functions:
        if logical_id.lower() in {name.lower(), f"{name.lower()}function"}:
            return logical_id
    known = ", ".join(sorted(stack.functions))
    raise KeyError(f"unknown function '{name}'; one of: {known}")


def invoke(stack: StackInfo, function: str, event: dict[str, Any]) -> Any:
    handler = load_handler(stack, function)
    return handler(event, LocalContext(function_name=stack.functions[function].name))
