"""leasehold_dev.local.moto.process: the local stack's moto server runs in a process of its own, is
stopped with its stack, and never outlives the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from leasehold_dev.local.moto import process as moto_process
from leasehold_dev.local.moto.server import set_dynamodb_outage
from leasehold_dev.local.processes import ProcessRef, wait_gone
from leasehold_dev.local.stack import client


def test_the_server_process_serves_with_leasehold_s_patches_and_stops() -> None:
    server = moto_process.spawn()
    try:
        assert server.process.pid != os.getpid()
        sqs = client("sqs", server.endpoint)
        queue = sqs.create_queue(QueueName="in-its-own-process")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="hello")
        assert sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"] == "hello"
        assert set_dynamodb_outage(server.endpoint, True) is True  # the stack's own server
        assert set_dynamodb_outage(server.endpoint, False) is False
    finally:
        server.stop()
    assert server.process.poll() is not None


def test_the_server_process_ends_when_the_process_that_started_it_is_killed(
    tmp_path: Path,
) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from leasehold_dev.local.moto import process as moto_process
            server = moto_process.spawn()
            print(server.process.pid, flush=True)
            time.sleep(120)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = ProcessRef.of(int(parent.stdout.readline()))
        assert child.alive()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        started = time.monotonic()
        assert wait_gone([child], timeout=10) == [], "the moto process outlived its parent"
        assert time.monotonic() - started < 5
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_server_that_cannot_start_is_reported(monkeypatch: object) -> None:
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(moto_process.sys, "executable", "/bin/false")
        with pytest.raises(moto_process.MotoProcessError, match="did not start"):
            moto_process.spawn(timeout=5)


def test_a_data_directory_in_use_stops_a_second_server_with_its_reason(tmp_path: Path) -> None:
    import pytest

    from leasehold_dev.local.journal import Journal

    holder = Journal(tmp_path / "data")
    holder.lock(owner=4321)
    try:
        with pytest.raises(moto_process.MotoProcessError, match=r"in use .* \(pid 4321\)"):
            moto_process.spawn(data=tmp_path / "data")
    finally:
        holder.close()
