"""The bounded document-preparation agent (docs/architecture.md "The document-preparation agent")
as a leasehold application: the `doc_prep`
kind, on leasehold's public API alone. Name this package in `LEASEHOLD_KINDS` to deploy it.

A planner *proposes* the next tool from the checkpoint alone; `guard.check_proposal` decides,
in trusted code, whether it may run; `runner.run_tool` applies one tool and returns the next
checkpoint; `kind` runs that loop inside the kind's one engine step. Nothing does I/O but
`documents` (one bounded S3 read per document) and `hosted.HostedPlanner`, off by default.

Importing the package reads its settings (`settings.AgentSettings`, at cold start: a missing
DOCUMENTS_BUCKET or a hosted planner configured by halves stops the function with its name)
and builds `doc_prep` from them; the tools, the guard and the runner load only inside a
worker's step.
"""

from leasehold_apps.doc_agent.kind import STOP_REASONS, doc_prep_kind
from leasehold_apps.doc_agent.settings import AgentSettings, documents_reader, hosted_planner

SETTINGS = AgentSettings.from_env()

doc_prep = doc_prep_kind(
    documents=documents_reader(SETTINGS.documents_bucket),
    hosted_planner=hosted_planner(SETTINGS),
)

__all__ = ["SETTINGS", "STOP_REASONS", "AgentSettings", "doc_prep", "doc_prep_kind"]
