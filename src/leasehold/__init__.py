"""leasehold: a durable background-job system on AWS serverless parts.

This module is the public API: every name in `__all__` is documented (docs/sdk.md) and kept
stable within a major version. Everything else in the package (`leasehold.domain`,
`leasehold.store`, `leasehold.service`, `leasehold.handlers`, `leasehold.sdk.*`) is private and
may change in any release; import from `leasehold` itself.

    from leasehold import FatalError, Kind, RetryableError, StepContext

An application that keeps items of its own beside its jobs (routes, a store) uses the toolkit
of `leasehold.sdk.apps` through the same names: `Engine`, `Table`, `job_writes`, …
"""

from leasehold.domain.errors import (
    ConflictError,
    HandBackError,
    LeaseholdError,
    StepInterruptedError,
    StopJobError,
    StoreUnavailableError,
    ValidationError,
)
from leasehold.domain.job import Owner
from leasehold.domain.limits import Limit
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
from leasehold.sdk.errors import FatalError, NotFoundError, RetryableError
from leasehold.sdk.kind import (
    Effect,
    Finished,
    Kind,
    KindDefinitionError,
    Outcome,
    RelatedChange,
    Step,
)
from leasehold.sdk.loading import KindLoadError
from leasehold.sdk.routes import Routes, respond

__version__ = "0.1.0"

__all__ = [
    "ConditionFailed",
    "ConflictError",
    "Effect",
    "Engine",
    "FatalError",
    "Finished",
    "HandBackError",
    "JobInfo",
    "Kind",
    "KindDefinitionError",
    "KindLoadError",
    "LeaseholdError",
    "Limit",
    "NewJob",
    "NotFoundError",
    "Operation",
    "Outcome",
    "Owner",
    "RelatedChange",
    "RetryableError",
    "Routes",
    "SettingError",
    "Step",
    "StepContext",
    "StepInterruptedError",
    "StepLogger",
    "StopJobError",
    "StoreUnavailableError",
    "Table",
    "ValidationError",
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
    "transact_closing_job",
]
