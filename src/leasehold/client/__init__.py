"""leasehold.client: the leasehold HTTP API from Python, for code that submits work and waits
for it (docs/sdk.md, "The client").

    from leasehold.client import ApiError, Client, WaitTimeout

`Client`, the `JobHandle` its `submit` returns, `Reply` (one raw answer), `ApiError` with a
subclass per status (`ApiError.NotFound`, …), `WaitTimeout`, and for a deployed stack the
`leasehold login` session, `LoginSession`, with `MfaRequired`. Every error here is a
`LeaseholdError`. `import leasehold` never imports this package, so a Lambda handler's cold
start never pays for it."""

from leasehold.client.errors import ApiError, WaitTimeout
from leasehold.client.http import Client, JobHandle, Reply
from leasehold.client.login import LoginSession, MfaRequired

__all__ = [
    "ApiError",
    "Client",
    "JobHandle",
    "LoginSession",
    "MfaRequired",
    "Reply",
    "WaitTimeout",
]
