"""`make bench`'s enqueue paths for the same 1-step job, on moto through the real functions
and the same meter: directly (`submit_direct`) there is no API Gateway request and no API
function invocation, and the job's own writes are the same as over HTTP; batched (`POST
/jobs/batch`) one request and one invocation carry every job, with the same writes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from bench.scenarios import BATCHED, DIRECT, HEADLINE, SCENARIOS, Runner
from bench.stack import Stack, quiet_warnings, set_credentials
from bench.summary import enqueue_paths, summarise
from moto import mock_aws

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def measured() -> Iterator[dict[str, Any]]:
    from leasehold_dev.local.moto import transactions as moto_transactions

    # set_credentials() is the bench's process setup: it also raises the recursion limit to
    # 3000 and rewrites os.environ, for good. Left so, every later test in this xdist worker
    # ran under them: test_moto_expressions' recursion tests (moto's deepcopy overflow at the
    # default limit) failed whenever worksteal put them after this module on the same worker.
    limit, environ = sys.getrecursionlimit(), dict(os.environ)
    try:
        set_credentials()
        quiet_warnings()
        moto_transactions.install()
        with mock_aws():
            stack = Stack()
            runner = Runner(stack)
            out = {}
            for scenario in SCENARIOS:
                if scenario.name in (HEADLINE, DIRECT, BATCHED):
                    out[scenario.name] = summarise(
                        runner.run(replace(scenario, jobs=6)), stack.spec, 200
                    )
            yield out
    finally:
        sys.setrecursionlimit(limit)
        os.environ.clear()
        os.environ.update(environ)


def test_the_direct_path_has_no_api_request_and_no_api_invocation(
    measured: dict[str, Any],
) -> None:
    http, direct = measured[HEADLINE], measured[DIRECT]
    assert direct["final_states"] == {"succeeded": 6} == http["final_states"]
    assert (
        http["per_job"]["api_requests"] == 1 and http["per_job"]["lambda_invocations"]["api"] == 1
    )
    assert direct["per_job"]["api_requests"] == 0
    assert direct["per_job"]["lambda_invocations"]["api"] == 0
    assert direct["usd_per_million_jobs"]["api_gateway"] == 0


def test_the_direct_path_writes_what_post_jobs_writes(measured: dict[str, Any]) -> None:
    http, direct = measured[HEADLINE], measured[DIRECT]
    assert direct["phases"]["accept"] == http["phases"]["accept"]
    assert direct["per_job"]["wcu"] == http["per_job"]["wcu"]
    paths = enqueue_paths(measured)
    saved = paths["saved_usd_per_million"]
    assert saved["dynamodb"] == 0 and saved["api_gateway"] == 1.0
    assert saved["lambda"] > 0 and saved["logs"] > 0
    assert paths["direct_usd_per_million"] < paths["http_usd_per_million"]


def test_a_batch_carries_every_job_in_one_request_with_the_same_writes(
    measured: dict[str, Any],
) -> None:
    http, batched = measured[HEADLINE], measured[BATCHED]
    assert batched["final_states"] == {"succeeded": 6}
    assert batched["per_job"]["api_requests"] == pytest.approx(1 / 6, abs=0.001)
    assert batched["per_job"]["lambda_invocations"]["api"] == pytest.approx(1 / 6, abs=0.001)
    accept = batched["phases"]["accept"]
    assert accept["wcu"] == http["phases"]["accept"]["wcu"]
    assert accept["requests"] == {"dynamodb.TransactWriteItems": pytest.approx(1 / 6, abs=0.001)}
    paths = enqueue_paths(measured)
    assert paths["batch_saved_usd_per_million"]["dynamodb"] == 0
    assert paths["batch_usd_per_million"] < paths["http_usd_per_million"]
