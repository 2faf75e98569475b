"""leasehold: a durable background-job system on AWS serverless parts.

This module is the public API: every name in `__all__` is documented (docs/sdk.md) and kept
stable within a major version. Everything else in the package (`leasehold.domain`,
`leasehold.store`, `leasehold.service`, `leasehold.handlers`, `leasehold.sdk.*`) is private and
may change in any release; import from `leasehold` itself.

    from leasehold import FatalError, Kind, RetryableError, StepContext

An application that keeps items of its own beside its jobs (routes, a store) uses the toolkit
of `leasehold.sdk.apps` through the same names: `Engine`, `Table`, `job_writes`, …

Code that calls a stack over HTTP uses `Client` (with `JobHandle`, `Reply`, `ApiError` and its
subclasses, `WaitTimeout`): those names are loaded on first use, so `import leasehold` in a
Lambda handler does not import the client.
"""

from typing import TYPE_CHECKING, Any

from leasehold.domain.errors import (
    ConflictError,
    HandBackError,
    LeaseholdError,
    StepInterruptedError,
    StopJobError,
    StoreUnavailableError,
    ValidationError,
)
from leasehold.domain.job import Budget, Owner
from leasehold.domain.limits import Limit, Rate
from leasehold.domain.options import JobOptions
from leasehold.sdk.apps import (
    ConditionFailed,
    Engine,
    NewJob,
    Table,
    idempotency,
    iso_time,
    items,
    job_states,
    job_writes,
    pages,
    step_operation,
    transact_closing_job,
)
from leasehold.sdk.config import SettingError, at_cold_start, int_setting, setting
from leasehold.sdk.context import JobInfo, Operation, StepContext, StepLogger
from leasehold.sdk.direct import Submitted, submit_direct
from leasehold.sdk.errors import FatalError, NotFoundError, RetryableError
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
from leasehold.sdk.routes import Routes, respond

if TYPE_CHECKING:
    from leasehold.client import ApiError, Client, JobHandle, Reply, WaitTimeout

_CLIENT_NAMES = frozenset({"ApiError", "Client", "JobHandle", "Reply", "WaitTimeout"})

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "Budget",
    "Checkpoint",
    "Client",
    "ConditionFailed",
    "ConflictError",
    "Effect",
    "Engine",
    "FatalError",
    "Finished",
    "HandBackError",
    "JobHandle",
    "JobInfo",
    "JobOptions",
    "Kind",
    "KindDefinitionError",
    "KindLoadError",
    "LeaseholdError",
    "Limit",
    "Migration",
    "NewJob",
    "NotFoundError",
    "Operation",
    "Outcome",
    "Owner",
    "Rate",
    "RelatedChange",
    "Reply",
    "RetryableError",
    "Routes",
    "Schedule",
    "SettingError",
    "Step",
    "StepContext",
    "StepInterruptedError",
    "StepLogger",
    "StopJobError",
    "StoreUnavailableError",
    "Submitted",
    "Table",
    "ValidationError",
    "WaitTimeout",
    "at_cold_start",
    "idempotency",
    "int_setting",
    "iso_time",
    "items",
    "job_states",
    "job_writes",
    "pages",
    "respond",
    "setting",
    "step_operation",
    "submit_direct",
    "transact_closing_job",
]


def __getattr__(name: str) -> Any:
    """The client's names, imported when first asked for (PEP 562)."""
    if name in _CLIENT_NAMES:
        import leasehold.client

        return getattr(leasehold.client, name)
    raise AttributeError(f"module 'leasehold' has no attribute {name!r}")
