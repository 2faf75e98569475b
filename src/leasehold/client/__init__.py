"""The leasehold HTTP API from Python (docs/sdk.md, "The client"): `Client`, the `JobHandle`
its `submit` returns, `Reply` (one raw answer), `ApiError` with a subclass per status, and
`WaitTimeout`. Import these from `leasehold`; `leasehold` loads this package only when one of
them is first used, so a Lambda handler's cold start never pays for it."""

from leasehold.client.errors import ApiError, WaitTimeout
from leasehold.client.http import Client, JobHandle, Reply
from leasehold.domain.job import Budget
from leasehold.domain.options import JobOptions

__all__ = ["ApiError", "Budget", "Client", "JobHandle", "JobOptions", "Reply", "WaitTimeout"]
