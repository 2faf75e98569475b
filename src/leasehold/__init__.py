"""leasehold: a durable background-job system on AWS serverless parts.

This module is the public API: every name in `__all__` is documented (docs/sdk.md) and kept
stable within a major version. Everything else in the package (`leasehold.domain`,
`leasehold.store`, `leasehold.service`, `leasehold.handlers`, `leasehold.sdk.*`) is private and
may change in any release; import from `leasehold` itself.

    from leasehold import FatalError, Kind, RetryableError, StepContext
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
from leasehold.sdk.config import SettingError, int_setting, setting
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
    "ConflictError",
    "Effect",
    "FatalError",
    "Finished",
    "HandBackError",
    "JobInfo",
    "Kind",
    "KindDefinitionError",
    "KindLoadError",
    "LeaseholdError",
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
    "ValidationError",
    "int_setting",
    "respond",
    "setting",
]
