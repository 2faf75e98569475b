"""Drives the embedded local stack as a user would: a `leasehold local up` process, worker
processes, HTTP requests. Everything binds to 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlsplit

from leasehold.client import Client
from leasehold_dev.local.runner import spawn_worker_process
from tests.support.contract import Exchange, check_exchange
from tests.support.resources import ROOT, TEMPLATE


def local_up_command(
    state: Path,
    *,
    workers: int = 0,
    kinds: str | None = None,
    data: Path | None = None,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`leasehold local up` on any free port with this checkout's template, as a user runs it,
    keeping its state in `data` (default: `data` beside the state file — never the
    checkout's own `.leasehold/data`)."""
    return [
        sys.executable,
        "-m",
        "leasehold_dev.cli",
        "local",
        "up",
        "--port",
        "0",
        "--workers",
        str(workers),
        "--state",
        str(state),
        "--template",
        str(TEMPLATE),
        "--data",
        str(data or state.parent / "data"),
        *(["--kinds", kinds] if kinds is not None else []),
        *extra,
    ]


class LocalStackProcess:
    def __init__(
        self,
        workdir: Path,
        workers: int = 0,
        state: Path | None = None,
        *,
        kinds: str | None = None,
        python_path: Path | None = None,
        data: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        """`kinds`: `--kinds` (LEASEHOLD_KINDS); `python_path`: a directory the stack and its
        workers import the user's kind modules from (put first on PYTHONPATH); `data`: its data
        directory (default `<workdir>/data`); `extra`: more `local up` options. The stack runs
        in a process group of its own (with its workers and its moto server), so a test can
        kill all of it at once (`kill_group`)."""
        self.state = state or workdir / "stack.json"
        self.data = data or self.state.parent / "data"
        self.log = workdir / "stack.log"
        self.workdir = workdir
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self._clients: dict[str | None, Client] = {}
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("LEASEHOLD_STATE", None)
        if python_path is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                part for part in (str(python_path), env.get("PYTHONPATH", "")) if part
            )
        self.env = env
        self.startup: list[str] = []
        """What `local up` printed before its ready line (what it restored, --fresh)."""
        self.process = subprocess.Popen(
            local_up_command(self.state, workers=workers, kinds=kinds, data=self.data, extra=extra),
            stdout=subprocess.PIPE,
            stderr=self.log.open("ab"),
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
        self.url = self._wait_ready()

    def _wait_ready(self, timeout: float = 90) -> str:
        """The URL from the "ready at" line. From then on a thread copies the stack's stdout (the
        Api function's log lines) to `stack.out`: a pipe nobody reads fills up after ~64 KiB of
        logs, and the stack then stalls in the middle of a request."""
        deadline = time.monotonic() + timeout
        stdout = self.process.stdout
        assert stdout is not None
        while time.monotonic() < deadline:
            line = stdout.readline().decode()
            self.startup.append(line.rstrip("\n"))
            if "ready" in line:
                self.out = self.workdir / "stack.out"
                threading.Thread(target=_drain, args=(stdout, self.out), daemon=True).start()
                return line.split("ready at ")[1].split()[0]
            if self.process.poll() is not None:
                raise RuntimeError(f"local stack exited: {self.log.read_text()[-2000:]}")
        raise TimeoutError("local stack did not become ready")

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        process = spawn_worker_process(self.state, name, self.workdir)
        self.workers[name] = process
        return process

    def kill_worker(self, name: str) -> None:
        self.workers[name].send_signal(signal.SIGKILL)
        self.workers[name].wait(timeout=10)

    def kill_group(self) -> None:
        """SIGKILL the stack's whole process group — `local up`, its moto server and the
        workers it spawned — at once, as `kill -9 -PGID` does, and wait for `local up`."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def client(self, user: str | None = "alice") -> Client:
        """The stack's leasehold.client.Client as `user` (None: no identity), one pool for all."""
        if user not in self._clients:
            if self._clients:
                self._clients[user] = next(iter(self._clients.values())).with_identity(user=user)
            else:
                self._clients[user] = Client(self.url, user=user, timeout=15)
        return self._clients[user]

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        user: str | None = "alice",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One HTTP request through leasehold.client.Client, any status an answer (`headers`: more
        request headers, e.g. an `Idempotency-Key`); the answer is checked against
        docs/openapi.yaml before it is returned (a response that breaks the document fails the
        test that received it)."""
        client = self.client(user)
        reply = client.request(method, path, body, headers=headers)
        sent = {**client.headers(), **(headers or {})}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        parts = urlsplit(path)
        check_exchange(
            Exchange(
                method=method,
                path=parts.path,
                query=dict(parse_qsl(parts.query, keep_blank_values=True)),
                request_headers=sent,
                request_body=data,
                status=reply.status,
                response_headers=dict(reply.headers),
                response_body=reply.raw,
            )
        )
        return reply.status, json.loads(reply.raw or b"{}")

    def wait_for(
        self, job_id: str, states: set[str], timeout: float = 60, user: str = "alice"
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            _, view = self.request("GET", f"/jobs/{job_id}", user=user)
            if view.get("state") in states:
                return view
            time.sleep(0.2)
        raise TimeoutError(f"{job_id} did not reach {states}: {view}")

    def stop(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.terminate()
        for process in self.workers.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _drain(stream: IO[bytes], path: Path) -> None:
    with path.open("ab") as sink:
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            sink.write(chunk)
            sink.flush()  # a test reads it while the stack runs (what `local up` printed)


__all__ = ["ROOT", "LocalStackProcess", "local_up_command"]
