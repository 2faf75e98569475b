"""`leasehold local up --parameter NAME=VALUE`: moto's CloudFormation does not check a
parameter's Type, MinValue, MaxValue, AllowedValues or AllowedPattern (a WorkerBatchSize of 0
made a stack whose pollers ask SQS for 0 messages; "abc" for a Number raised a ValueError from
moto). AWS refuses those at deploy: `local up` refuses them too, in one line."""

from __future__ import annotations

import pytest

from leasehold_dev.cli.local import _parameter_overrides
from leasehold_dev.cli.target import CliError
from tests.integration.test_template import TEMPLATE


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("WorkerBatchSize=0", "WorkerBatchSize"),
        ("WorkerConcurrencyLow=1", "at least 2"),
        ("WorkerConcurrencyHigh=abc", "a number"),
        ("WorkerConcurrencyHigh=1001", "at most 1000"),
        ("Kinds=not a module", "pattern"),
        ("LeaseSeconds=7", "must be one of"),
        # parameters that must agree (the template's Rules, with the local stack's timeout 30)
        ("LeaseSeconds=60", "LeaseSeconds must be at most 20"),
        ("WorkerTimeoutSeconds=300", "QueueVisibilitySeconds must be at least 1800"),
        ("MaxStepSeconds=30", "MaxStepSeconds must be at most 20"),
    ],
)
def test_out_of_range_parameters_are_refused(given: str, says: str) -> None:
    with pytest.raises(CliError, match=says):
        _parameter_overrides([given], TEMPLATE)


def test_good_parameters_pass() -> None:
    assert _parameter_overrides(["WorkerConcurrencyLow=2", "WorkerBatchSize=5"], TEMPLATE) == {
        "WorkerConcurrencyLow": "2",
        "WorkerBatchSize": "5",
    }


def test_parameters_that_agree_together_pass() -> None:
    given = ["WorkerTimeoutSeconds=120", "QueueVisibilitySeconds=720", "LeaseSeconds=60"]
    assert _parameter_overrides(given, TEMPLATE) == {
        "WorkerTimeoutSeconds": "120",
        "QueueVisibilitySeconds": "720",
        "LeaseSeconds": "60",
    }
