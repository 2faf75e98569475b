"""Every `leasehold` command finds the stack the same way: the state file (from the current
directory upwards, `--state`, or `LEASEHOLD_STATE`), or a deployed stack's `--url` before or
after the subcommand; and `local down` stops what the state file names. No local stack is
started here: a small HTTP server stands in for the gateway, sleeping processes for `local up`
and its workers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from leasehold_dev.local.locate import (
    data_path_for_up,
    find_state,
    running_stack,
    state_path_for_up,
)
from leasehold_dev.local.processes import ProcessRef, WorkerRegistry
from leasehold_dev.local.stack import StackError, StackInfo
from tests.support.cli import run_cli
from tests.support.resources import TEMPLATE


class FakeGateway:
    """Answers every GET with what it was asked: the path and the X-Demo-User header."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.posted: list[tuple[str, str | None, Any]] = []
        seen, posted = self.seen, self.posted

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                posted.append((self.path, self.headers.get("X-Demo-User"), sent))
                self._answer(202, {"job_id": "j_new", "state": "queued"})

            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("X-Demo-User")))
                if "/children" in self.path:  # a page of a job's children
                    child = {"job_id": "j_c", "step": 0, "state": "succeeded"}
                    self._answer(200, {"items": [child], "next_cursor": None})
                    return
                self._answer(200, {"path": self.path})

            def do_DELETE(self) -> None:
                seen.append((f"DELETE {self.path}", self.headers.get("X-Demo-User")))
                self._answer(200, {"path": self.path})

            def _answer(self, status: int, answer: Any) -> None:
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway() -> Iterator[FakeGateway]:
    served = FakeGateway()
    try:
        yield served
    finally:
        served.close()


def _state(path: Path, *, api_url: str = "", process: ProcessRef | None = None) -> Path:
    """A state file naming `process` (default: this test process, which runs) as `local up`."""
    process = process or ProcessRef.current()
    info = StackInfo(
        endpoint="http://127.0.0.1:9",
        functions={},
        stream_mappings=[],
        queue_mappings=[],
        routes=[],
        schedules={},
        api_url=api_url,
        pid=process.pid,
        pid_started=process.started,
    )
    info.save(path)
    return path


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env=env)


def _one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    return out.stderr


def _exited_process() -> ProcessRef:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef.of(done.pid)
    done.wait(timeout=30)
    return ref


# ------------------------------------------------------------------ finding the state file


def test_the_state_file_is_found_from_any_subdirectory(tmp_path: Path) -> None:
    state = _state(tmp_path / ".leasehold" / "local-stack.json")
    deep = tmp_path / "src" / "deeper"
    deep.mkdir(parents=True)
    assert find_state(None, deep, {}) == state
    assert find_state(None, tmp_path, {}) == state
    # an explicit --state wins over LEASEHOLD_STATE, which wins over the search
    assert find_state(None, deep, {"LEASEHOLD_STATE": "/x/env.json"}) == Path("/x/env.json")
    assert find_state("/x/flag.json", deep, {"LEASEHOLD_STATE": "/x/env.json"}) == Path(
        "/x/flag.json"
    )
    assert find_state(None, tmp_path.parent, {}) is None


def test_local_up_writes_its_state_at_the_checkout_root_from_a_subdirectory(
    tmp_path: Path,
) -> None:
    (tmp_path / "template.yaml").write_text("Resources: {}\n")
    deep = tmp_path / "docs" / "more"
    deep.mkdir(parents=True)
    assert state_path_for_up(None, deep, {}) == tmp_path / ".leasehold" / "local-stack.json"
    assert state_path_for_up(None, deep, {"LEASEHOLD_STATE": "/s.json"}) == Path("/s.json")


def test_local_up_keeps_its_data_at_the_checkout_root_from_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text("Resources: {}\n")
    deep = tmp_path / "docs" / "more"
    deep.mkdir(parents=True)
    assert data_path_for_up(None, deep) == tmp_path / ".leasehold" / "data"
    assert data_path_for_up("/elsewhere", deep) == Path("/elsewhere")


def test_in_memory_goes_with_neither_data_nor_fresh(tmp_path: Path) -> None:
    for other in (["--fresh"], ["--data", str(tmp_path / "d")]):
        out = _cli("local", "up", "--in-memory", *other, "--state", str(tmp_path / "s.json"),
                   cwd=tmp_path)  # fmt: skip
        assert "--in-memory keeps nothing" in _one_line_error(out)
        assert not (tmp_path / "d").exists()


def test_an_index_lag_out_of_range_is_refused_in_one_line(tmp_path: Path) -> None:
    for given in ("-1", "60001"):
        out = _cli("local", "up", "--gsi-lag-ms", given, "--state", str(tmp_path / "s.json"),
                   cwd=tmp_path)  # fmt: skip
        assert "--gsi-lag-ms must be between 0 and 60000" in _one_line_error(out)


def test_a_state_file_whose_stack_is_gone_is_stale(tmp_path: Path) -> None:
    state = _state(tmp_path / "s.json", process=_exited_process())
    with pytest.raises(StackError, match="not running any more"):
        running_stack(str(state), tmp_path, {})


def test_a_recycled_pid_is_not_taken_for_the_recorded_process() -> None:
    me = ProcessRef.current()
    assert me.alive()
    if me.started:  # /proc present: the same pid with another start time is someone else
        assert not ProcessRef(me.pid, me.started + 1).alive()
    assert not _exited_process().alive()


# ------------------------------------------------------------------ ops commands


def test_ops_from_a_subdirectory_talk_to_the_stack_of_the_state_file(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    # Given a running stack's state file at the checkout root, and a user in a subdirectory
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    deep = tmp_path / "src" / "leasehold"
    deep.mkdir(parents=True)
    # When they ask for the summary and a job's whole view, with no --url
    summary = _cli("ops", "summary", cwd=deep)
    shown = _cli("ops", "show", "j_1", cwd=deep)
    # Then both reach that stack's gateway as the local operator
    assert summary.returncode == 0 and shown.returncode == 0, summary.stderr + shown.stderr
    assert json.loads(summary.stdout) == {"path": "/ops/summary"}
    assert gateway.seen == [("/ops/summary", "ops"), ("/ops/jobs/j_1", "ops")]


@pytest.mark.parametrize(
    "args",
    [
        ("ops", "jobs", "--state", "dead", "--url", "{url}"),
        ("ops", "--url", "{url}", "jobs", "--state", "dead"),
        ("ops", "--url", "http://127.0.0.1:9", "jobs", "--url", "{url}", "--state", "dead"),
    ],
)
def test_url_is_accepted_before_and_after_the_subcommand(
    tmp_path: Path, gateway: FakeGateway, args: tuple[str, ...]
) -> None:
    # No state file anywhere: the --url alone names the stack (the last one given wins)
    out = _cli(*(arg.format(url=gateway.url) for arg in args), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert gateway.seen == [("/ops/jobs?state=dead&limit=50", "ops")]


def test_leasehold_state_names_the_stack_from_anywhere(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    state = _state(tmp_path / "elsewhere" / "stack.json", api_url=gateway.url)
    out = _cli("ops", "summary", cwd=tmp_path, env={"LEASEHOLD_STATE": str(state)})
    assert out.returncode == 0, out.stderr
    assert gateway.seen == [("/ops/summary", "ops")]


def test_a_user_submits_and_shows_a_job_from_a_subdirectory_with_no_flags(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    # Given a running stack's state file at the checkout root, and a job request in a file
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    deep = tmp_path / "docs"
    deep.mkdir()
    request = {"kind": "synthetic", "payload": {"steps": [{"name": "hello"}]}}
    (deep / "hello.json").write_text(json.dumps(request))
    # When they submit it (inline, and from the file as bob) and show a job
    inline = _cli("submit", json.dumps(request), cwd=deep)
    from_file = _cli("submit", "hello.json", "--user", "bob", cwd=deep)
    shown = _cli("show", "j_new", cwd=deep)
    # Then each reached the stack as that user, with the request as written
    for out in (inline, from_file, shown):
        assert out.returncode == 0, out.stderr
    assert json.loads(inline.stdout) == {"job_id": "j_new", "state": "queued"}
    assert gateway.posted == [("/jobs", "alice", request), ("/jobs", "bob", request)]
    assert gateway.seen == [("/jobs/j_new", "alice")]


def test_a_user_signals_a_job_and_lists_its_children(tmp_path: Path, gateway: FakeGateway) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    signalled = _cli("signal", "j_1", "reviewed", '{"ok": true}', cwd=tmp_path)
    listed = _cli("children", "j_1", "--user", "bob", cwd=tmp_path)
    for out in (signalled, listed):
        assert out.returncode == 0, out.stderr
    assert gateway.posted == [("/jobs/j_1/signals/reviewed", "alice", {"ok": True})]
    assert [(path.split("?")[0], user) for path, user in gateway.seen] == [
        ("/jobs/j_1/children", "bob")
    ]
    assert json.loads(listed.stdout.splitlines()[0])["job_id"] == "j_c"
    bad = _cli("signal", "j_1", "reviewed", "{x", cwd=tmp_path)
    assert bad.returncode != 0 and "not JSON" in bad.stderr


def test_an_operator_signals_any_job_and_lists_its_children(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    signalled = _cli("ops", "signal", "j_1", "go", '{"ok": 1}', "--note", "why", cwd=tmp_path)
    listed = _cli("ops", "children", "j_1", cwd=tmp_path)
    for out in (signalled, listed):
        assert out.returncode == 0, out.stderr
    assert gateway.posted == [
        ("/ops/jobs/j_1/signals/go", "ops", {"note": "why", "body": {"ok": 1}})
    ]
    assert [(path.split("?")[0], user) for path, user in gateway.seen] == [
        ("/ops/jobs/j_1/children", "ops")
    ]
    assert [json.loads(line)["job_id"] for line in listed.stdout.splitlines()] == ["j_c"]
    assert _cli("ops", "signal", "j_1", "go", cwd=tmp_path).returncode != 0  # no --note


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("missing.json", "cannot read"),
        ("[1]", "must be a JSON object"),
    ],
)
def test_a_bad_job_request_is_one_line_and_nothing_is_sent(
    tmp_path: Path, gateway: FakeGateway, request_text: str, expected: str
) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    assert expected in _one_line_error(_cli("submit", request_text, cwd=tmp_path))
    assert gateway.posted == []


def test_an_operator_pauses_and_resumes_a_kind_with_a_note(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    paused = _cli("ops", "pause", "send_sms", "--note", "provider down", cwd=tmp_path)
    resumed = _cli("ops", "resume", "send_sms", "--note", "back", cwd=tmp_path)
    for out in (paused, resumed):
        assert out.returncode == 0, out.stderr
    assert gateway.posted == [
        ("/ops/kinds/send_sms/pause", "ops", {"note": "provider down"}),
        ("/ops/kinds/send_sms/resume", "ops", {"note": "back"}),
    ]
    assert _cli("ops", "pause", "send_sms", cwd=tmp_path).returncode != 0  # no --note


def test_ops_list_is_ops_jobs(tmp_path: Path, gateway: FakeGateway) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    out = _cli("ops", "list", "--state", "unknown", "--limit", "5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert gateway.seen == [("/ops/jobs?state=unknown&limit=5", "ops")]


def test_schedules_commands_reach_the_stack_as_the_user(
    tmp_path: Path, gateway: FakeGateway
) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url)
    payload = {"steps": [{"name": "report"}]}
    created = _cli(
        "schedules",
        "create",
        "cron(0 9 ? * MON-FRI *)",
        "--kind",
        "synthetic",
        "--payload",
        json.dumps(payload),
        "--timezone",
        "Europe/Paris",
        cwd=tmp_path,
    )
    listed = _cli("schedules", "--user", "bob", "list", "--limit", "5", cwd=tmp_path)
    shown = _cli("schedules", "show", "s_1", cwd=tmp_path)
    deleted = _cli("schedules", "delete", "s_1", cwd=tmp_path)
    for out in (created, listed, shown, deleted):
        assert out.returncode == 0, out.stderr
    assert gateway.posted == [
        (
            "/schedules",
            "alice",
            {
                "kind": "synthetic",
                "payload": payload,
                "expression": "cron(0 9 ? * MON-FRI *)",
                "timezone": "Europe/Paris",
                "missed": "skip",
            },
        )
    ]
    assert gateway.seen == [
        ("/schedules?limit=5", "bob"),
        ("/schedules/s_1", "alice"),
        ("DELETE /schedules/s_1", "alice"),
    ]
    bad = _cli(
        "schedules", "create", "rate(1 hour)", "--kind", "k", "--payload", "{x", cwd=tmp_path
    )
    assert "not JSON" in _one_line_error(bad) and len(gateway.posted) == 1


def test_without_a_stack_every_command_says_to_start_one(tmp_path: Path) -> None:
    for args in (
        ("submit", '{"kind": "synthetic", "payload": {}}'),
        ("show", "j_1"),
        ("ops", "list", "--state", "dead"),
        ("ops", "replay", "j_1"),
        ("ops", "resolve", "j_1", "--outcome", "failed", "--note", "n"),
        ("ops", "dlq-send", "--body", "x"),
        ("local", "status"),
        ("ops", "summary"),
        ("ops", "redrive", "--note", "n"),
        ("invoke", "api", "--event", "x.json"),
        ("local", "worker"),
        ("smoke",),
        ("provider", "charges"),
        ("docs", "put", "x.txt", "--user", "alice"),
    ):
        error = _one_line_error(_cli(*args, cwd=tmp_path))
        assert "no local stack is running" in error and "make up" in error, (args, error)
    assert "--url" in _cli("ops", "summary", cwd=tmp_path).stderr


def test_a_stale_state_file_is_reported_not_used(tmp_path: Path, gateway: FakeGateway) -> None:
    _state(tmp_path / ".leasehold" / "local-stack.json", api_url=gateway.url,
           process=_exited_process())  # fmt: skip
    error = _one_line_error(_cli("ops", "summary", cwd=tmp_path))
    assert "not running any more" in error and gateway.seen == []


# ------------------------------------------------------------------ local up and local down


def test_a_second_local_up_is_refused_and_leaves_the_first_stacks_file(tmp_path: Path) -> None:
    state = _state(tmp_path / "stack.json", api_url="http://127.0.0.1:9")
    before = state.read_bytes()
    out = _cli("local", "up", "--port", "0", "--state", str(state), "--template", str(TEMPLATE),
               cwd=tmp_path)  # fmt: skip
    assert "already running" in _one_line_error(out) and "local down" in out.stderr
    assert state.read_bytes() == before
    assert "stopped" not in out.stdout + out.stderr


def test_local_down_stops_the_stack_process_and_every_registered_worker(tmp_path: Path) -> None:
    # Given a `local up` stand-in that exits on SIGTERM, and a worker that ignores SIGTERM
    up = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stubborn = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    )  # fmt: skip
    try:
        state = _state(tmp_path / ".leasehold" / "local-stack.json", process=ProcessRef.of(up.pid))
        WorkerRegistry(state).register("stubborn", ProcessRef.of(stubborn.pid))
        (tmp_path / "sub").mkdir()
        # When `local down` runs from a subdirectory
        out = _cli("local", "down", "--timeout", "5", cwd=tmp_path / "sub")
        # Then both are gone (the stubborn one killed), and so are the state file and registry
        assert out.returncode == 0, out.stderr
        assert up.wait(timeout=10) == -signal.SIGTERM
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
        assert not state.exists() and not WorkerRegistry(state).directory.exists()
        assert f"pid {up.pid}" in out.stdout and "stubborn" in out.stdout
    finally:
        for process in (up, stubborn):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_local_down_with_nothing_running_is_not_an_error(tmp_path: Path) -> None:
    out = _cli("local", "down", cwd=tmp_path)
    assert out.returncode == 0 and "nothing to stop" in out.stderr
