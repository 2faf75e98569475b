"""The `enrich` kind (arch §6): ask the billable provider for a summary and tags of a bookmark's
page and save them on the bookmark, under the same `source_version` fence as the title. Made by
`POST /bookmarks/{id}/enrich`, never submitted directly.

A call charges money, so the step goes through the operation ledger: the entry is saved
(`submitted`) before the call under an operation id stable across attempts, workers and replays
of the same work (`<job>:<step>:<source_version>`), which is also the provider key. After a lost
answer — in this attempt or a crashed earlier one — the operation is recovered, never started
afresh: with `idempotent_key` the same key is sent again (the provider returns the first
receipt), with `status_lookup` the key is looked up (and sent again only when `not_found`), and
with neither the job becomes `unknown` for an operator."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from leasehold.domain.errors import FatalStepError, TransientStepError
from leasehold.domain.states import JobState, StopReason
from leasehold.kinds import BookmarkKindBase, StepPlan
from leasehold.store.bookmarks import enrichment_failed, enrichment_saved

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job
    from leasehold.providers.enrichment import EnrichmentProvider, ProviderRejected, Receipt
    from leasehold.service.kinds import StepRuntime as StepContext

PROVIDER_NAME = "enrichment"
CALL_BOUND_MS = 12_000
"""Two provider calls (a lost answer, then its recovery) of at most 5 s each, and slack."""


class EnrichKind(BookmarkKindBase):
    name = "enrich"
    noun = "an enrich job"

    def __init__(
        self,
        provider_url: str,
        capability: str,
        *,
        local_providers: dict[str, str] | None = None,
        timeout_s: float = 5.0,
        client: Any = None,
    ) -> None:
        self._url = provider_url
        self._capability = capability
        self._local = local_providers or {}
        self._timeout_s = timeout_s
        self._clients: dict[str, EnrichmentProvider] = {}
        if client is not None:  # tests: an in-memory provider with the same contract
            self._clients["default"] = client

    @property
    def configured(self) -> bool:
        return bool(self._url)

    @property
    def local_modes(self) -> tuple[str, ...]:
        """Provider modes a request may pick (only on the local stack's own providers)."""
        return tuple(sorted(self._local))

    def _provider(self, payload: dict[str, Any]) -> EnrichmentProvider:
        from leasehold.providers.enrichment import Capability, EnrichmentProvider

        mode = payload.get("provider_mode")
        cache_key = mode or "default"
        if cache_key not in self._clients:
            if mode:
                url, capability = self._local[mode], Capability.parse(mode)
            else:
                url, capability = self._url, Capability.parse(self._capability)
            self._clients[cache_key] = EnrichmentProvider(
                url, capability, timeout_s=self._timeout_s
            )
        return self._clients[cache_key]

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        return [
            StepPlan(
                "enrich", cost=1, duration_ms=CALL_BOUND_MS, needs_approval=False, has_effect=False
            )
        ]

    @staticmethod
    def operation_id(job: Job, index: int) -> str:
        return f"{job.job_id}:{index}:{job.payload['source_version']}"

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        from leasehold.providers.enrichment import (
            ProviderOutcomeUnknown,
            ProviderRejected,
            ProviderUnavailable,
        )

        context: StepContext = tick
        provider = self._provider(payload)
        operation = self.operation_id(context.job, index)
        entry = context.ledger.get(operation)
        if entry and entry["state"] == "confirmed":
            return _output(operation, entry["receipt"])  # a crash came after the ledger write
        if entry and entry["state"] == "submitted":
            receipt = self._recover(context, provider, operation, payload)
            return _output(operation, receipt.to_dict())
        body = json.dumps({"url": payload["url"]}, sort_keys=True)
        context.ledger.submit(
            operation,
            provider=PROVIDER_NAME,
            key=operation,
            fingerprint=hashlib.sha256(body.encode()).hexdigest()[:32],
            capability=provider.capability.value,
            step=index,
        )
        try:
            receipt = provider.submit(operation, url=payload["url"], fault=payload.get("fault"))
        except ProviderRejected as refused:
            raise _refused(context, operation, refused) from refused
        except ProviderUnavailable as unreachable:
            context.ledger.release(operation, str(unreachable)[:300])
            raise TransientStepError(
                f"the provider could not be reached: {unreachable}",
                effect_settled=True,
                error_code="provider_unavailable",
            ) from unreachable
        except ProviderOutcomeUnknown:
            receipt = self._recover(context, provider, operation, payload)
            return _output(operation, receipt.to_dict())
        context.ledger.confirm(operation, receipt.to_dict(), reconciled=False)
        return _output(operation, receipt.to_dict())

    def _recover(
        self,
        context: StepContext,
        provider: EnrichmentProvider,
        operation: str,
        payload: dict[str, Any],
    ) -> Receipt:
        """Settle a submitted operation by the provider's capability — never a fresh one."""
        from leasehold.providers.enrichment import Capability, ProviderError, ProviderRejected

        if provider.capability is Capability.NONE:
            raise FatalStepError(
                f"provider {PROVIDER_NAME} cannot say whether operation {operation} happened",
                error_code="effect_uncertain",
            )
        try:
            if provider.capability is Capability.STATUS_LOOKUP:
                found = provider.lookup(operation)
                if found.status == "succeeded" and found.receipt is not None:
                    context.ledger.confirm(operation, found.receipt.to_dict(), reconciled=True)
                    return found.receipt
                if found.status == "failed":
                    context.ledger.fail(operation, {"code": "provider_failed", "message": "lookup"})
                    raise FatalStepError(
                        f"operation {operation} failed at the provider",
                        effect_settled=True,
                        error_code="provider_failed",
                    )
            # idempotent key, or a lookup that found nothing: the same key again
            receipt = provider.submit(operation, url=payload["url"])
        except ProviderRejected as refused:
            raise _refused(context, operation, refused) from refused
        except ProviderError as still_unknown:
            # Still no answer: the operation stays open; the next attempt asks again.
            raise TransientStepError(
                f"operation {operation} could not be settled yet: {still_unknown}",
                error_code="effect_unsettled",
            ) from still_unknown
        context.ledger.confirm(operation, receipt.to_dict(), reconciled=True)
        return receipt

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        return {"bookmark_id": job.payload["bookmark_id"], **checkpoint.outputs[-1]}

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        payload, tenant = job.payload, job.owner.tenant
        if target is JobState.SUCCEEDED:
            enrichment = {
                key: result[key] for key in ("summary", "tags", "receipt", "operation_id")
            }
            return [
                enrichment_saved(
                    tenant,
                    payload["bookmark_id"],
                    payload["source_version"],
                    {**enrichment, "job_id": job.job_id},
                    now,
                )
            ]
        if target in {JobState.DEAD, JobState.FAILED} and error is not None:
            return [
                enrichment_failed(
                    tenant,
                    payload["bookmark_id"],
                    payload["source_version"],
                    {"job_id": job.job_id, "error": error},
                    now,
                )
            ]
        return []

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[StopReason, dict[str, str]]:
        if changed.old_item is None:
            return StopReason.SOURCE_DELETED, {
                "code": "source_deleted",
                "message": "the bookmark was deleted",
            }
        return StopReason.SUPERSEDED, {
            "code": "superseded",
            "message": "the bookmark's URL changed meanwhile",
        }


def _output(operation: str, receipt: dict[str, Any]) -> dict[str, Any]:
    return {
        "operation_id": operation,
        "receipt": receipt["receipt"],
        "summary": receipt.get("summary", ""),
        "tags": receipt.get("tags", []),
    }


def _refused(context: StepContext, operation: str, refused: ProviderRejected) -> FatalStepError:
    """A provider's refusal settles the operation as failed (nothing was charged) and fails
    the job for good: the same request would be refused again."""
    context.ledger.fail(operation, {"code": "provider_rejected", "message": str(refused)[:300]})
    return FatalStepError(
        f"the provider refused operation {operation}: {refused}",
        effect_settled=True,
        error_code="provider_rejected",
    )
