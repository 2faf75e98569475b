"""The agent's own settings, read once at cold start (when `leasehold_apps.doc_agent` is
imported), and the parts built from them: the documents bucket's reader and the hosted planner,
each made only when first needed (the API never reads a document or asks a model, so it never
makes an S3 or a Secrets Manager client)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from leasehold import SettingError, setting

if TYPE_CHECKING:
    from leasehold_apps.doc_agent.documents import DocumentReader
    from leasehold_apps.doc_agent.planner import Planner

ENV_VARIABLES: Final = (
    "DOCUMENTS_BUCKET",
    "HOSTED_PLANNER_ENDPOINT",
    "HOSTED_PLANNER_MODEL",
    "HOSTED_PLANNER_API_KEY_SECRET",
)
"""What `AgentSettings.from_env` reads: a test checks the template sets each for every function."""


@dataclass(frozen=True)
class AgentSettings:
    documents_bucket: str
    """DOCUMENTS_BUCKET: where doc_prep jobs read `s3_key` documents (the worker's role may read
    only `tenants/*/documents/*`)."""
    hosted_planner_endpoint: str = ""
    """HOSTED_PLANNER_ENDPOINT: an OpenAI-compatible chat-completions URL; empty = off, and a
    doc_prep job asking for `planner.kind: hosted` is a 400."""
    hosted_planner_model: str = ""
    hosted_planner_api_key_secret: str = ""
    """HOSTED_PLANNER_API_KEY_SECRET: the ARN of a Secrets Manager secret holding the endpoint's
    API key, read by the worker at its first hosted job; empty = no key sent."""

    def check(self) -> AgentSettings:
        problems = []
        if self.hosted_planner_endpoint and not self.hosted_planner_model:
            problems.append("HOSTED_PLANNER_MODEL must be set when HOSTED_PLANNER_ENDPOINT is")
        if self.hosted_planner_api_key_secret and not self.hosted_planner_endpoint:
            problems.append(
                "HOSTED_PLANNER_API_KEY_SECRET is set but HOSTED_PLANNER_ENDPOINT is not"
            )
        if problems:
            raise SettingError("; ".join(problems))
        return self

    @staticmethod
    def from_env() -> AgentSettings:
        return AgentSettings(
            documents_bucket=setting("DOCUMENTS_BUCKET"),
            hosted_planner_endpoint=setting("HOSTED_PLANNER_ENDPOINT", ""),
            hosted_planner_model=setting("HOSTED_PLANNER_MODEL", ""),
            hosted_planner_api_key_secret=setting("HOSTED_PLANNER_API_KEY_SECRET", ""),
        ).check()


def documents_reader(bucket: str) -> Callable[[], DocumentReader]:
    """The documents bucket's reader, made at a doc_prep job's first S3 read."""

    def build() -> DocumentReader:
        from leasehold_apps.doc_agent.documents import S3Documents

        return S3Documents.for_bucket(bucket)

    return build


def hosted_planner(settings: AgentSettings) -> Callable[[], Planner] | None:
    """The hosted planner when an endpoint is configured (never by default, never in tests).
    Its endpoint and model are checked now, at cold start; its API key is read from Secrets
    Manager at the worker's first hosted job, and never logged (HostedPlanner keeps it out of
    its repr and its request's repr)."""
    if not settings.hosted_planner_endpoint:
        return None
    from leasehold_apps.doc_agent.hosted import HostedPlanner, Urllib3Transport

    endpoint, model = settings.hosted_planner_endpoint, settings.hosted_planner_model
    HostedPlanner(endpoint, model, "", Urllib3Transport())  # HostedPlannerConfigError if unusable
    secret = settings.hosted_planner_api_key_secret

    def build() -> Planner:
        import boto3

        from leasehold_apps.doc_agent.documents import CLIENT_CONFIG

        api_key = ""
        if secret:
            client = boto3.session.Session().client("secretsmanager", config=CLIENT_CONFIG)
            api_key = str(client.get_secret_value(SecretId=secret)["SecretString"])
        return HostedPlanner(endpoint, model, api_key, Urllib3Transport())

    return build
