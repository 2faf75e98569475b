"""The `enrich` kind (docs/architecture.md "External effects"): ask the billable provider for a
summary and tags of a bookmark's
page and save them on the bookmark, under the same `source_version` fence as the title. Made by
`POST /bookmarks/{id}/enrich`, never submitted directly.

A call charges money, so the step goes through the operation ledger: the entry is saved
(`submitted`) before the call under an operation id stable across attempts, workers and replays
of the same work (`<job>:<step>:<source_version>`: a new URL is new work), which is also the
provider key. The step settles the operation itself (`leasehold.apps.step_operation`). After a lost
answer — in this attempt or a crashed earlier one — the operation is recovered, never started
afresh: with `idempotent_key` the same key is sent again (the provider returns the first
receipt), with `status_lookup` the key is looked up (and sent again only when `not_found`), and
with neither the job becomes `unknown` for an operator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leasehold import FatalError, Finished, Operation, Outcome, RetryableError, Step, StepContext
from leasehold.apps import step_operation
from leasehold_apps.reading_list import settings
from leasehold_apps.reading_list.kinds import BookmarkKind
from leasehold_apps.reading_list.store import enrichment_failed, enrichment_saved

if TYPE_CHECKING:
    from leasehold_apps.reading_list.provider import ProviderRejected, Receipt

PROVIDER_NAME = "enrichment"
CALL_BOUND_MS = 12_000
"""Two provider calls (a lost answer, then its recovery) of at most 5 s each, and slack."""


class EnrichKind(BookmarkKind):
    """`provider_url` and `capability`: the provider's (default: ENRICHMENT_PROVIDER_URL and
    ENRICHMENT_PROVIDER_CAPABILITY, with LEASEHOLD_LOCAL_PROVIDERS, read when first needed);
    `client`: a provider of one's own with the same contract (a test's in-memory one)."""

    def __init__(
        self,
        provider_url: str | None = None,
        capability: str | None = None,
        *,
        local_providers: dict[str, str] | None = None,
        timeout_s: float = 5.0,
        client: Any = None,
    ) -> None:
        super().__init__(
            "enrich",
            "an enrich job",
            deleted="the bookmark was deleted",
            superseded="the bookmark's URL changed meanwhile",
        )
        self._given = None
        if provider_url is not None:
            self._given = settings.ProviderSettings(
                provider_url, capability or "none", dict(local_providers or {})
            )
        self._timeout_s = timeout_s
        self._client = client
        self._clients: dict[tuple[str, str], Any] = {}
        # Planned, not declared, as the title kind's step: the same engine checks as before.
        step = Step("enrich", self._enrich, cost=1, timeout_seconds=CALL_BOUND_MS / 1000)
        self.planner(lambda payload: [step])
        self.result(self._result)
        self.outcome_writes(self._outcome_writes)

    def _settings(self) -> settings.ProviderSettings:
        return self._given or settings.provider_settings()

    @property
    def configured(self) -> bool:
        return bool(self._settings().url)

    @property
    def local_modes(self) -> tuple[str, ...]:
        """Provider modes a request may pick (only on the local stack's own providers)."""
        return tuple(sorted(self._settings().local))

    def _provider(self, payload: dict[str, Any]) -> Any:
        from leasehold_apps.reading_list.provider import Capability, EnrichmentProvider

        mode = payload.get("provider_mode")
        if not mode and self._client is not None:
            return self._client
        config = self._settings()
        url, capability = (config.local[mode], mode) if mode else (config.url, config.capability)
        if (url, capability) not in self._clients:
            self._clients[url, capability] = EnrichmentProvider(
                url, Capability.parse(capability), timeout_s=self._timeout_s
            )
        return self._clients[url, capability]

    def _enrich(self, ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        from leasehold_apps.reading_list.provider import (
            ProviderOutcomeUnknown,
            ProviderRejected,
            ProviderUnavailable,
        )

        provider = self._provider(payload)
        operation = step_operation(
            ctx,
            f"{ctx.job_id}:{ctx.step_index}:{payload['source_version']}",
            provider=PROVIDER_NAME,
            capability=provider.capability.value,
        )
        if operation.state == "confirmed":  # a crash came after the ledger write
            return _output(operation, dict(operation.receipt or {}))
        if operation.state == "submitted":
            return _output(operation, self._recover(operation, provider, payload).to_dict())
        operation.open({"url": payload["url"]})
        try:
            receipt = provider.submit(operation.key, url=payload["url"], fault=payload.get("fault"))
        except ProviderRejected as refused:
            raise _refused(operation, refused) from refused
        except ProviderUnavailable as unreachable:
            operation.release(str(unreachable)[:300])
            raise RetryableError(
                f"the provider could not be reached: {unreachable}",
                effect_settled=True,
                code="provider_unavailable",
            ) from unreachable
        except ProviderOutcomeUnknown:
            return _output(operation, self._recover(operation, provider, payload).to_dict())
        operation.confirm(receipt.to_dict(), reconciled=False)
        return _output(operation, receipt.to_dict())

    @staticmethod
    def _recover(operation: Operation, provider: Any, payload: dict[str, Any]) -> Receipt:
        """Settle a submitted operation by the provider's capability — never a fresh one."""
        from leasehold_apps.reading_list.provider import (
            Capability,
            ProviderError,
            ProviderRejected,
        )

        key = operation.key
        if provider.capability is Capability.NONE:
            raise FatalError(
                f"provider {PROVIDER_NAME} cannot say whether operation {key} happened",
                code="effect_uncertain",
            )
        try:
            if provider.capability is Capability.STATUS_LOOKUP:
                found = provider.lookup(key)
                if found.status == "succeeded" and found.receipt is not None:
                    operation.confirm(found.receipt.to_dict(), reconciled=True)
                    return found.receipt
                if found.status == "failed":
                    operation.fail("provider_failed", "lookup")
                    raise FatalError(
                        f"operation {key} failed at the provider",
                        effect_settled=True,
                        code="provider_failed",
                    )
            # idempotent key, or a lookup that found nothing: the same key again
            receipt = provider.submit(key, url=payload["url"])
        except ProviderRejected as refused:
            raise _refused(operation, refused) from refused
        except ProviderError as still_unknown:
            # Still no answer: the operation stays open; the next attempt asks again.
            raise RetryableError(
                f"operation {key} could not be settled yet: {still_unknown}",
                code="effect_unsettled",
            ) from still_unknown
        operation.confirm(receipt.to_dict(), reconciled=True)
        return receipt

    @staticmethod
    def _result(finished: Finished) -> dict[str, Any]:
        return {"bookmark_id": finished.job.payload["bookmark_id"], **finished.output_list[-1]}

    @staticmethod
    def _outcome_writes(outcome: Outcome) -> list[dict[str, Any]]:
        job, now = outcome.job, outcome.now_ms
        tenant, bookmark_id = job.owner.tenant, job.payload["bookmark_id"]
        source_version = job.payload["source_version"]
        if outcome.state == "succeeded":
            enrichment = {
                key: outcome.result[key] for key in ("summary", "tags", "receipt", "operation_id")
            }
            saved = {**enrichment, "job_id": job.job_id}
            return [enrichment_saved(tenant, bookmark_id, source_version, saved, now)]
        if outcome.state in {"dead", "failed"} and outcome.error is not None:
            failure = {"job_id": job.job_id, "error": dict(outcome.error)}
            return [enrichment_failed(tenant, bookmark_id, source_version, failure, now)]
        return []


def _output(operation: Operation, receipt: dict[str, Any]) -> dict[str, Any]:
    return {
        "operation_id": operation.operation_id,
        "receipt": receipt["receipt"],
        "summary": receipt.get("summary", ""),
        "tags": receipt.get("tags", []),
    }


def _refused(operation: Operation, refused: ProviderRejected) -> FatalError:
    """A provider's refusal settles the operation as failed (nothing was charged) and fails
    the job for good: the same request would be refused again."""
    operation.fail("provider_rejected", str(refused)[:300])
    return FatalError(
        f"the provider refused operation {operation.key}: {refused}",
        effect_settled=True,
        code="provider_rejected",
    )


enrich = EnrichKind()
"""The deployed `enrich` kind: its provider is ENRICHMENT_PROVIDER_URL's."""
