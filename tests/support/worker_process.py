"""A local stack's state file on an embedded moto server, and a wait for a worker process to
poll: what the tests that start `local worker` processes share."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold_dev.local.moto.server import start_moto
from leasehold_dev.local.stack import create_stack
from tests.support.resources import TEMPLATE


def stack_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A stack created from template.yaml on a moto server that lives while this runs. The
    embedded server keeps its backends in this process: another module's stack (the same name)
    may still be there, so they are reset first."""
    server, endpoint = start_moto()
    try:
        reset_backends(endpoint)
        path = tmp_path_factory.mktemp("stack") / "stack.json"
        create_stack(endpoint, TEMPLATE).save(path)
        yield path
    finally:
        server.stop()


def reset_backends(endpoint: str) -> None:
    """moto's own reset (`POST /moto-api/reset`) of every backend of this process."""
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def wait_polling(log: Path, timeout: float = 30) -> None:
    """Until the worker's log says it polls (TimeoutError with the log after `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.is_file() and "polling" in log.read_text():
            return
        time.sleep(0.1)
    raise TimeoutError(f"the worker never polled: {log.read_text() if log.is_file() else ''}")
