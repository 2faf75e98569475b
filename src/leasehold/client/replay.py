"""The operator's replay, written once for the two doors that offer it: `Client.ops` (over
HTTP) and `LeaseholdTestbed` (in the test's process, through the API's own service)."""

from __future__ import annotations

from leasehold.domain.types import JsonObject


class Replays:
    """`replay(job_id, …)`: its keywords become the body of `POST /ops/jobs/{job_id}/replay`
    here; each door says how that body reaches the operator's service (`_send_replay`)."""

    def replay(
        self,
        job_id: str,
        *,
        note: str | None = None,
        checked_provider: bool = False,
        from_start: bool = False,
    ) -> JsonObject:
        """A dead, failed or unknown job back to queued under the same id (`POST
        /ops/jobs/{job_id}/replay`); the job's view. An unknown job needs
        `checked_provider=True` and a `note` (without them the request is invalid input:
        `ApiError.InvalidInput` over HTTP, `ValidationError` on a testbed); a job in another
        state is a conflict (`ApiError.Conflict`, `ConflictError`). `from_start`: run every
        step again under the kind's current steps, the checkpoint dropped (a job stopped
        `kind_changed`), instead of going on from the checkpoint."""
        body: JsonObject = {}
        if note is not None:
            body["note"] = note
        if checked_provider:
            body["checked_provider"] = True
        if from_start:
            body["from"] = "start"
        return self._send_replay(job_id, body)

    def _send_replay(self, job_id: str, body: JsonObject) -> JsonObject:
        """The door's own way to the operator's service (each door defines it)."""
        raise NotImplementedError
