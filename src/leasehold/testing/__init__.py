"""leasehold.testing: run your kinds on the whole engine, on moto, with a clock you move.

    from leasehold.testing import LeaseholdTestbed

    with LeaseholdTestbed([shout]) as tb:            # Kind objects, or "app.kinds,app.more"
        job_id = tb.submit("shout", {"text": "hi"})  # POST /jobs: the API's validation
        tb.run_until_idle()                          # relay, SQS, worker, until nothing is due
        assert tb.view(job_id)["state"] == "succeeded"

A retry waits for its backoff on the testbed's clock (`advance(seconds)`, or `drain()` to skip
ahead); `crash(after_step=..., in_step=..., at=...)` kills the worker at a step or between a
parent's and its children's writes; `expire_wait(job_id)` ends one job's signal wait or sleep
now; `faults(spec)` injects AWS errors as `LEASEHOLD_FAULTS` does; `request(method, path,
body)` calls an application's own routes (the `Routes` of a module string's modules, or
`Routes` given with the kinds). For
pytest, enable the `leasehold_testbed` fixture with
`pytest_plugins = ["leasehold.testing.pytest_plugin"]` in your conftest.py.

Never deployed: it needs moto (`pip install "moto[server]"`), and it starts moto's mock itself.
"""

from leasehold.testing.applications import Answer
from leasehold.testing.config import KindsSpec, TestbedSettings
from leasehold.testing.crashes import CrashPlan, WorkerCrashed
from leasehold.testing.definitions import PACKAGED, Definitions, TemplateError
from leasehold.testing.report import Delivery, NotIdleError, RunReport
from leasehold.testing.testbed import DEFAULT_OWNER, OPERATOR, LeaseholdTestbed

__all__ = [
    "Answer",
    "CrashPlan",
    "DEFAULT_OWNER",
    "Definitions",
    "Delivery",
    "KindsSpec",
    "LeaseholdTestbed",
    "NotIdleError",
    "OPERATOR",
    "PACKAGED",
    "RunReport",
    "TemplateError",
    "TestbedSettings",
    "WorkerCrashed",
]
