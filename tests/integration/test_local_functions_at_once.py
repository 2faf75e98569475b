"""`local up` runs the Api, Relay and Sweeper in one process, each one invocation at a time and
none waiting for another (decision CI11): a request during a table outage waited for a whole
sweep's botocore backoffs behind one process-wide lock and missed its client's 20-s timeout.
Their shared Powertools log keys stay each invocation's own (`log_keys_per_thread`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from leasehold_dev.local.invoke import serialised

pytestmark = pytest.mark.integration


def test_a_request_does_not_wait_for_another_functions_invocation() -> None:
    """The sweeper's invocation is held (as by a store outage's retries); the Api's answers."""
    inside, release = threading.Event(), threading.Event()

    def sweep(event: dict[str, Any], context: Any) -> Any:
        inside.set()
        release.wait(10)
        return {"swept": True}

    sweeper = serialised(sweep)
    api = serialised(lambda event, context: {"statusCode": 503})
    held = threading.Thread(target=sweeper, args=({}, None))
    held.start()
    try:
        assert inside.wait(10)
        answered: list[Any] = []
        request = threading.Thread(target=lambda: answered.append(api({}, None)))
        started = time.monotonic()
        request.start()
        request.join(timeout=2)
        took = time.monotonic() - started
        assert answered == [{"statusCode": 503}], f"the Api waited for the sweep ({took:.1f} s)"
    finally:
        release.set()
        held.join(timeout=10)


def test_one_function_still_runs_one_invocation_at_a_time() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def body(event: dict[str, Any], context: Any) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return None

    handler = serialised(body)
    threads = [threading.Thread(target=handler, args=({}, None)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert most == 1


# In a process of its own: log_keys_per_thread patches threading.Thread and the formatter class.
LOG_KEYS_SCRIPT = textwrap.dedent(
    """
    import io, json, sys, threading
    from dataclasses import dataclass
    from aws_lambda_powertools import Logger
    from leasehold_dev.local.invoke import log_keys_per_thread

    if sys.argv[1] == "on":
        log_keys_per_thread()
    out = io.StringIO()
    sweeper_log = Logger(service="leasehold", stream=out)
    api_log = Logger(service="leasehold", stream=out)  # the same formatter, as in local up

    @dataclass
    class Context:
        function_name: str
        aws_request_id: str = "r"
        memory_limit_in_mb: int = 256
        invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:f"

    started, answered = threading.Event(), threading.Event()

    @api_log.inject_lambda_context(clear_state=True)
    def api(event, context):
        api_log.info("request")

    @sweeper_log.inject_lambda_context(clear_state=True)
    def sweep(event, context):
        sweeper_log.info("sweep begins")
        started.set()
        answered.wait(10)
        sweeper_log.info("sweep goes on")
        segment = threading.Thread(target=lambda: sweeper_log.info("segment"))
        segment.start()
        segment.join()

    sweeping = threading.Thread(target=sweep, args=({}, Context("sweeper")))
    sweeping.start()
    started.wait(10)
    requests = threading.Thread(target=api, args=({}, Context("api")))
    requests.start()
    requests.join()
    answered.set()
    sweeping.join()
    print(json.dumps([
        [json.loads(line)["message"], json.loads(line).get("function_name")]
        for line in out.getvalue().splitlines()
    ]))
    """
)


def _logged(mode: str) -> list[list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", LOG_KEYS_SCRIPT, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_each_invocation_logs_with_its_own_function_name_while_another_runs() -> None:
    """A request begins during a sweep: the sweep's later lines, and its segment thread's, still
    name the sweeper."""
    assert _logged("on") == [
        ["sweep begins", "sweeper"],
        ["request", "api"],
        ["sweep goes on", "sweeper"],
        ["segment", "sweeper"],
    ]
