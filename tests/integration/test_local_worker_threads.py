"""The local worker runs one poller thread per priority queue in one process (decision F4), so
its handler's module-level Powertools Metrics is shared by threads, which Lambda never does:
`metrics_shared_by_threads` makes the metric set's operations atomic."""

from __future__ import annotations

import contextlib
import io
import json
import threading

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from leasehold_dev.local.invoke import metrics_shared_by_threads

pytestmark = pytest.mark.integration


def test_a_clear_waits_for_a_flush_in_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread A is inside a flush (serialising, held there); thread B clears the same metrics.
    Shared safely, B waits for A — otherwise B empties the set A is serialising."""
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    metrics_shared_by_threads()
    inside, release = threading.Event(), threading.Event()

    class HeldJson:
        @staticmethod
        def dumps(doc: object, **kwargs: object) -> str:
            inside.set()
            release.wait(10)
            return json.dumps(doc)

    monkeypatch.setattr(cloudwatch, "json", HeldJson)
    metrics = Metrics(namespace="LeaseholdThreads", service="threads")
    metrics.add_metric(name="Claimed", unit=MetricUnit.Count, value=1)
    flushing = threading.Thread(target=metrics.flush_metrics)
    clearing = threading.Thread(target=metrics.clear_metrics)
    with contextlib.redirect_stdout(io.StringIO()):
        flushing.start()
        assert inside.wait(10)
        clearing.start()
        clearing.join(timeout=0.5)
        waited = clearing.is_alive()
        release.set()
        flushing.join(timeout=10)
        clearing.join(timeout=10)
    assert waited, "the clear ran while another thread was serialising the same metric set"
