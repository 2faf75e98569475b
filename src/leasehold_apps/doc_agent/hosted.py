"""A planner backed by an OpenAI-compatible chat-completions endpoint. Off by default; used only
when an endpoint is configured and a job asks for `planner.kind: "hosted"`; never called by
tests (they drive `build_request` and `parse_reply` with a fake transport).

What leaves the process is `planner_view(checkpoint)`: tool names, counters, the *names* of
the fields found and the problem *codes*. No field value, no document text, no earlier reply:
the model plans from the checkpoint alone, and learns nothing of the document but its shape.
Its answer is parsed as strictly as any planner output; the guard still decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from leasehold import LeaseholdError
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.planner import PlannerError, Proposal, parse_proposal
from leasehold_apps.doc_agent.vocabulary import MAX_TOOL_STEPS, TOOL_ORDER

DEFAULT_TIMEOUT_S: Final = 5.0
CONNECT_TIMEOUT_S: Final = 2.0
MAX_REPLY_BYTES: Final = 64 * 1024
MAX_CONTENT_CHARS: Final = 2048
_LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})

SYSTEM_PROMPT: Final = (
    "You plan the next step of a document-preparation job. Tools, which must run in this "
    f"order, each at most once: {', '.join(TOOL_ORDER)}. At most {MAX_TOOL_STEPS} tool steps. "
    "You receive the job's checkpoint as JSON. Answer with one JSON object only: "
    '{"tool": "<name>", "args": {}} to run a tool, or {"done": true} when nothing is left.'
)


class HostedPlannerConfigError(LeaseholdError):
    """The hosted planner's endpoint or model setting cannot be used (found at cold start)."""

    code = "hosted_planner_misconfigured"


class HttpTransport(Protocol):
    def post_json(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        """POST `body`; return (status, at most MAX_REPLY_BYTES + 1 bytes of the reply body).
        Raise PlannerError(transient=True) when there is no answer (timeout, refused)."""


@dataclass(frozen=True)
class ChatRequest:
    url: str
    body: bytes
    headers: dict[str, str] = field(repr=False)  # carries the API key: never logged


class HostedPlanner:
    def __init__(
        self,
        endpoint: str,
        model: str,
        api_key: str,
        http: HttpTransport,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = urlsplit(endpoint)
        local = parts.scheme == "http" and parts.hostname in _LOCAL_HOSTS
        if not (parts.scheme == "https" or local) or not parts.hostname or parts.username:
            raise HostedPlannerConfigError(
                "the planner endpoint must be an https:// URL (http:// only on localhost)"
            )
        if not model or len(model) > 128:
            raise HostedPlannerConfigError("the planner model name must be 1 to 128 characters")
        self._endpoint = endpoint
        self._model = model
        self._api_key = api_key
        self._http = http
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"HostedPlanner(endpoint={self._endpoint!r}, model={self._model!r})"

    def build_request(self, checkpoint: AgentCheckpoint) -> ChatRequest:
        """The chat-completions request for `checkpoint`: JSON mode, temperature 0, a short
        answer, and only `planner_view(checkpoint)` as the user message."""
        body = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": json.dumps(planner_view(checkpoint))},
            ],
            "response_format": {"type": "json_object"},
            "temperature": 0,
            "max_tokens": 100,
            "n": 1,
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {self._api_key}",
        }
        return ChatRequest(self._endpoint, json.dumps(body).encode("utf-8"), headers)

    def propose(self, checkpoint: AgentCheckpoint) -> Proposal | None:
        request = self.build_request(checkpoint)
        status, body = self._http.post_json(
            request.url, request.body, request.headers, self._timeout_s
        )
        return parse_reply(status, body)


def planner_view(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """The part of the checkpoint a hosted model may see: structure, never values."""
    return {
        "next_step": checkpoint.next_step,
        "steps_started": checkpoint.steps_started,
        "max_steps": MAX_TOOL_STEPS,
        "tools_run": list(checkpoint.tools_run),
        "tool_in_flight": checkpoint.tool_in_flight,
        "fields_found": sorted(checkpoint.fields),
        "problem_codes": [problem.code for problem in checkpoint.problems],
        "draft_ready": checkpoint.draft_note is not None,
    }


def parse_reply(status: int, body: bytes) -> Proposal | None:
    """The proposal in a chat-completions reply, or None for `{"done": true}`. A non-200 status
    is a PlannerError, transient for 408, 429 and 5xx; any other deviation (not JSON, no
    choice, a refusal, a cut-off answer, content that is not a proposal) is a permanent one."""
    if status != 200:
        transient = status in {408, 429} or 500 <= status <= 599
        raise PlannerError(f"the planner endpoint answered HTTP {status}", transient=transient)
    if len(body) > MAX_REPLY_BYTES:
        raise PlannerError("the planner's reply is too large")
    try:
        reply = json.loads(body)
    except ValueError as exc:
        raise PlannerError("the planner's reply is not JSON") from exc
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise PlannerError("the planner's reply has no choice")
    choice = choices[0]
    message = choice.get("message")
    if choice.get("finish_reason") == "length":
        raise PlannerError("the planner's answer was cut off")
    if not isinstance(message, dict) or message.get("refusal"):
        raise PlannerError("the planner's reply has no message, or refused")
    content = message.get("content")
    if not isinstance(content, str) or len(content) > MAX_CONTENT_CHARS:
        raise PlannerError("the planner's message content is not a short string")
    try:
        answer = json.loads(content)
    except ValueError as exc:
        raise PlannerError("the planner's answer is not a JSON object") from exc
    if answer == {"done": True}:
        return None
    return parse_proposal(answer)


class Urllib3Transport:
    """HttpTransport over urllib3 (already in the Lambda runtime via botocore): no retries, no
    redirects, connect ≤ 2 s, read ≤ the planner's timeout, at most MAX_REPLY_BYTES + 1 read."""

    def __init__(self) -> None:
        import urllib3

        self._pool = urllib3.PoolManager(retries=False)

    def post_json(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        import urllib3

        timeout = urllib3.Timeout(connect=min(CONNECT_TIMEOUT_S, timeout_s), read=timeout_s)
        try:
            response = self._pool.request(
                "POST",
                url,
                body=body,
                headers=dict(headers),
                timeout=timeout,
                redirect=False,
                preload_content=False,
            )
            try:
                data = response.read(MAX_REPLY_BYTES + 1)
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise PlannerError(
                f"the planner endpoint did not answer: {type(exc).__name__}", transient=True
            ) from exc
        return response.status, data
