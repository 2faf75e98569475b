"""leasehold.apps: for an application that keeps items of its own beside its jobs (the reading
list's bookmarks) and mounts routes of its own on the API function.

    from leasehold import Owner
    from leasehold.apps import Engine, Routes, job_writes, respond

- `Engine.current()`: the function's engine as its cold start built it — the `Table` door (its
  retries, its error translation, `ConditionFailed`), the clock, the metrics;
- `job_writes` (a new job's transaction entries, to commit with items of one's own),
  `transact_closing_job`, `job_states`, `job_view` (a job's view, as `GET /jobs/{id}`), and
  `submit_direct` (a job committed alone, from code that runs inside AWS) with what it answers,
  `Submitted`; `job_writes_many` (`NewJobs`) and `submit_direct_many` for many jobs at once;
- `Routes` and `respond`: HTTP routes with the engine's rules for identity and input;
- `idempotency`, `pages`, `items`, `iso_time`, `step_operation`: the engine's own rules for
  keys, cursors, item values, times and ledger entries;
- the errors a route raises for the caller: `NotFoundError` (404), `ConflictError` (409),
  `StoreUnavailableError` (503); `ValidationError` (400) is in `leasehold`, as kinds raise it
  too.

A kind's own names (`Kind`, `StepContext`, `Owner`, the errors a step raises) are in
`leasehold`; every name here is documented in docs/sdk.md ("Applications that keep items of
their own") and kept stable as `leasehold`'s are.
"""

from leasehold.sdk.apps import (
    ConditionFailed,
    Engine,
    NewJob,
    Table,
    idempotency,
    iso_time,
    items,
    job_states,
    job_view,
    job_writes,
    pages,
    step_operation,
    transact_closing_job,
)
from leasehold.sdk.direct import Submitted, submit_direct
from leasehold.sdk.errors import ConflictError, NotFoundError, StoreUnavailableError
from leasehold.sdk.many import NewJobs, job_writes_many, submit_direct_many
from leasehold.sdk.routes import Routes, respond

__all__ = [
    "ConditionFailed",
    "ConflictError",
    "Engine",
    "NewJob",
    "NewJobs",
    "NotFoundError",
    "Routes",
    "StoreUnavailableError",
    "Submitted",
    "Table",
    "idempotency",
    "iso_time",
    "items",
    "job_states",
    "job_view",
    "job_writes",
    "job_writes_many",
    "pages",
    "respond",
    "step_operation",
    "submit_direct",
    "submit_direct_many",
    "transact_closing_job",
]
