"""leasehold: a durable background-job system on AWS serverless parts.

This module is the public API for kind authors: every name in `__all__` is documented
(docs/sdk.md) and kept stable within a major version.

    from leasehold import FatalError, Kind, RetryableError, StepContext

Three more namespaces serve the other audiences, each with its own `__all__`:

- `leasehold.client`: code that calls a stack over HTTP (`Client`, its errors);
- `leasehold.apps`: an application that keeps items of its own (`Engine`, `job_writes`,
  `submit_direct`, `Routes`, …);
- `leasehold.testing`: test suites (`LeaseholdTestbed`).

Everything else in the package (`leasehold.domain`, `leasehold.store`, `leasehold.service`,
`leasehold.handlers`, `leasehold.sdk`) is private and may change in any release.

The names that moved out of `leasehold` into `leasehold.client` and `leasehold.apps` still
answer here for one release, with a `DeprecationWarning` naming their new home (docs/sdk.md,
"What moved in this release"). Importing `leasehold` imports neither: a Lambda handler's cold
start pays only for what a kind needs.
"""

import importlib
import warnings
from typing import Any

from leasehold.domain.debounce import Debounce
from leasehold.domain.errors import (
    HandBackError,
    LeaseholdError,
    SignalTimeoutError,
    StepInterruptedError,
    StopJobError,
    ValidationError,
)
from leasehold.domain.job import Budget, Owner
from leasehold.domain.limits import Limit, Rate
from leasehold.domain.options import JobOptions, Submission
from leasehold.domain.unique import Unique
from leasehold.domain.waits import ChildView, SignalWait
from leasehold.sdk.config import SettingError, at_cold_start, int_setting, setting
from leasehold.sdk.context import JobInfo, Operation, StepContext, StepLogger
from leasehold.sdk.errors import FatalError, RetryableError
from leasehold.sdk.kind import (
    Checkpoint,
    Effect,
    Finished,
    Kind,
    KindDefinitionError,
    Migration,
    Outcome,
    RelatedChange,
    Schedule,
    Step,
)
from leasehold.sdk.loading import KindLoadError

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "Checkpoint",
    "ChildView",
    "Debounce",
    "Effect",
    "FatalError",
    "Finished",
    "HandBackError",
    "JobInfo",
    "JobOptions",
    "Kind",
    "KindDefinitionError",
    "KindLoadError",
    "LeaseholdError",
    "Limit",
    "Migration",
    "Operation",
    "Outcome",
    "Owner",
    "Rate",
    "RelatedChange",
    "RetryableError",
    "Schedule",
    "SettingError",
    "SignalTimeoutError",
    "SignalWait",
    "Step",
    "StepContext",
    "StepInterruptedError",
    "StepLogger",
    "StopJobError",
    "Submission",
    "Unique",
    "ValidationError",
    "at_cold_start",
    "int_setting",
    "setting",
]

MOVED = {
    **dict.fromkeys(
        ["ApiError", "Client", "JobHandle", "Reply", "WaitTimeout"], "leasehold.client"
    ),
    **dict.fromkeys(
        [
            "ConditionFailed",
            "ConflictError",
            "Engine",
            "NewJob",
            "NotFoundError",
            "Routes",
            "StoreUnavailableError",
            "Submitted",
            "Table",
            "idempotency",
            "items",
            "iso_time",
            "job_states",
            "job_writes",
            "pages",
            "respond",
            "step_operation",
            "submit_direct",
            "transact_closing_job",
        ],
        "leasehold.apps",
    ),
}
"""The names that left `leasehold` in this release, and their new homes: each still answers
here, with a DeprecationWarning, until the next release removes it."""


def __getattr__(name: str) -> Any:
    """A moved name, from its new home, with a warning that names it (PEP 562). The new home is
    imported only then: `import leasehold` loads neither the client nor the application
    toolkit."""
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'leasehold' has no attribute {name!r}")
    warnings.warn(
        f"leasehold.{name} has moved: import it from {home} "
        f"(`from {home} import {name}`); the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
