"""What the caller's thread and the helper thread share while one live fetch runs."""

from __future__ import annotations

import contextlib
import threading
import time

import urllib3

from leasehold import StepInterruptedError
from leasehold_apps.reading_list.titles.errors import timeout_error


class FetchRun:
    """What the caller's thread and the helper thread share about one fetch.

    The first `finish()` wins: a helper that completes after the caller gave up (deadline or
    tick) cannot change the outcome the caller already reported.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.done = threading.Event()
        self.hosts: list[str] = []
        self.redirects = 0
        self.status: int | None = None
        self.bytes_read = 0
        self._lock = threading.Lock()
        self._stopped = False
        self._title: str | None = None
        self._error: Exception | None = None
        self._response: urllib3.BaseHTTPResponse | None = None

    def current_host(self) -> str:
        return self.hosts[-1] if self.hosts else "the host"

    def remaining(self) -> float:
        """Seconds left before the deadline; raises once the fetch is over or out of time."""
        if self._stopped or self.done.is_set():
            raise StepInterruptedError("the title fetch was stopped")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise timeout_error(self.current_host(), None)
        return left

    def finish(self, *, title: str | None = None, error: Exception | None = None) -> None:
        with self._lock:
            if self.done.is_set():
                return
            self._title, self._error = title, error
            self.done.set()

    def outcome(self) -> str:
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._title is None:
                raise RuntimeError("the title fetch ended without an outcome")
            return self._title

    def attach(self, response: urllib3.BaseHTTPResponse) -> None:
        """Register the answer being read, so `abort()` can shut its socket; raises if the
        fetch was already aborted (nobody would shut it then)."""
        with self._lock:
            self._response = response
            stopped = self._stopped
        if stopped:
            raise StepInterruptedError("the title fetch was stopped")

    def detach(self) -> None:
        with self._lock:
            self._response = None

    def abort(self) -> None:
        """Stop the helper: it checks `remaining()` between steps, and a read blocked on the
        socket returns at once because the socket's reading side is shut down."""
        with self._lock:
            self._stopped = True
            response = self._response
            if response is None:
                return
            # Already released or closed: then nothing is blocked on it.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.shutdown()
