"""Planners: the fixture and scripted planners, the strict parsing of any planner's output, and
the hosted adapter's request and reply handling with a fake transport (no network)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.hosted import (
    HostedPlanner,
    HostedPlannerConfigError,
    parse_reply,
    planner_view,
)
from leasehold_apps.doc_agent.planner import (
    FixturePlanner,
    PlannerError,
    Proposal,
    ScriptedPlanner,
    next_proposal,
    parse_proposal,
)
from leasehold_apps.doc_agent.runner import build_planner
from leasehold_apps.doc_agent.spec import PlannerSpec
from leasehold_apps.doc_agent.vocabulary import Problem

ENDPOINT = "https://models.example.com/v1/chat/completions"
SECRET_VALUE = "DE89370400440532013000"


def after(*tools: str) -> AgentCheckpoint:
    checkpoint = AgentCheckpoint()
    for tool in tools:
        checkpoint = checkpoint.begin(tool).finish(tool)
    return checkpoint


def test_fixture_planner_proposes_the_next_unfinished_tool_then_stops() -> None:
    planner = FixturePlanner()
    assert planner.propose(after()) == Proposal("extract", {})
    assert planner.propose(after("extract")) == Proposal("validate", {})
    assert planner.propose(after("extract").begin("validate")) == Proposal("validate", {})
    assert planner.propose(after("extract", "validate")) == Proposal("draft", {})
    assert planner.propose(after("extract", "validate", "draft")) is None


def test_scripted_planner_replays_by_step_index() -> None:
    script = [Proposal("extract", {}), Proposal("send_email", {"to": "x"})]
    planner = ScriptedPlanner(script)
    assert planner.propose(after()) == script[0]
    assert planner.propose(after().begin("extract")) == script[0]  # a crashed step is re-offered
    assert planner.propose(after("extract")) == script[1]
    assert planner.propose(after("extract", "validate")) is None


def test_build_planner_by_kind() -> None:
    assert isinstance(build_planner(PlannerSpec("fixture")), FixturePlanner)
    assert isinstance(build_planner(PlannerSpec("scripted", (Proposal("x", {}),))), ScriptedPlanner)
    with pytest.raises(PlannerError):
        build_planner(PlannerSpec("hosted"))  # nothing configured


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "extract",
        ["extract", {}],
        42,
        {},
        {"tool": "extract"},
        {"args": {}},
        {"tool": None, "args": {}},
        {"tool": 7, "args": {}},
        {"tool": "", "args": {}},
        {"tool": "x" * 65, "args": {}},
        {"tool": "extract\n", "args": {}},
        {"tool": "extract", "args": {}, "reason": "because"},
    ],
)
def test_parse_proposal_is_strict(raw: Any) -> None:
    with pytest.raises(PlannerError) as caught:
        parse_proposal(raw)
    assert caught.value.transient is False


def test_parse_proposal_leaves_tool_and_args_to_the_guard() -> None:
    assert parse_proposal({"tool": "send_email", "args": [1]}) == Proposal("send_email", [1])


class Raising:
    def propose(self, checkpoint: AgentCheckpoint) -> Proposal | None:
        raise RuntimeError("model exploded")


class Returning:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def propose(self, checkpoint: AgentCheckpoint) -> Any:
        return self.answer


def test_a_planner_that_raises_becomes_a_planner_error() -> None:
    with pytest.raises(PlannerError) as caught:
        next_proposal(Raising(), AgentCheckpoint())
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "model exploded" not in str(caught.value)  # only the type is recorded


@pytest.mark.parametrize(
    "garbage", ["extract", 3, ["extract"], {"tool": 1}, Proposal("x" * 100, {}), object()]
)
def test_a_planner_that_returns_garbage_becomes_a_planner_error(garbage: Any) -> None:
    with pytest.raises(PlannerError):
        next_proposal(Returning(garbage), AgentCheckpoint())


def test_next_proposal_accepts_proposals_dicts_and_none() -> None:
    assert next_proposal(Returning(None), AgentCheckpoint()) is None
    assert next_proposal(Returning({"tool": "draft", "args": {}}), AgentCheckpoint()) == Proposal(
        "draft", {}
    )
    assert next_proposal(FixturePlanner(), AgentCheckpoint()) == Proposal("extract", {})


# --- hosted adapter, with a fake transport -------------------------------------------------


class FakeTransport:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        self.calls: list[tuple[str, bytes, dict[str, str], float]] = []

    def post_json(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        self.calls.append((url, body, dict(headers), timeout_s))
        return self.status, self.body


def chat_reply(content: str, **choice: Any) -> bytes:
    return json.dumps(
        {"choices": [{"message": {"role": "assistant", "content": content}, **choice}]}
    ).encode()


def checkpoint_with_values() -> AgentCheckpoint:
    checkpoint = after().begin("extract").finish("extract", fields={"iban": SECRET_VALUE})
    return checkpoint.begin("validate").finish(
        "validate", problems=[Problem("vat_id", "missing", "The VAT id is required.")]
    )


def test_hosted_request_is_json_mode_and_carries_only_the_checkpoints_shape() -> None:
    transport = FakeTransport(200, chat_reply('{"tool": "draft", "args": {}}'))
    planner = HostedPlanner(ENDPOINT, "small-model", "sk-test-key", transport, timeout_s=4.0)
    # When it plans from a checkpoint holding a real IBAN
    proposal = planner.propose(checkpoint_with_values())
    # Then one POST went to the endpoint, with the key, JSON mode and a short timeout
    assert proposal == Proposal("draft", {})
    [(url, body, headers, timeout_s)] = transport.calls
    assert url == ENDPOINT and timeout_s == 4.0
    assert headers["Authorization"] == "Bearer sk-test-key"
    request = json.loads(body)
    assert request["model"] == "small-model"
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    # and the model saw field names and problem codes, never a value
    assert json.loads(request["messages"][1]["content"]) == {
        "next_step": 2,
        "steps_started": 2,
        "max_steps": 3,
        "tools_run": ["extract", "validate"],
        "tool_in_flight": None,
        "fields_found": ["iban"],
        "problem_codes": ["missing"],
        "draft_ready": False,
    }
    assert SECRET_VALUE.encode() not in body
    assert "sk-test-key" not in repr(planner) + repr(planner.build_request(after()))


def test_planner_view_has_no_values() -> None:
    view = planner_view(checkpoint_with_values())
    assert SECRET_VALUE not in json.dumps(view)
    assert "The VAT id is required." not in json.dumps(view)


def test_hosted_done_answer_ends_planning() -> None:
    assert parse_reply(200, chat_reply('{"done": true}')) is None


@pytest.mark.parametrize(("status", "transient"), [(429, True), (503, True), (408, True)])
def test_hosted_unavailable_is_transient(status: int, transient: bool) -> None:
    with pytest.raises(PlannerError) as caught:
        parse_reply(status, b"")
    assert caught.value.transient is transient


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, b"{}"),
        (401, b"{}"),
        (200, b"not json"),
        (200, b"[]"),
        (200, b'{"choices": []}'),
        (200, b'{"choices": ["x"]}'),
        (200, json.dumps({"choices": [{"message": None}]}).encode()),
        (200, chat_reply('{"tool": "draft", "args": {}}', finish_reason="length")),
        (200, json.dumps({"choices": [{"message": {"refusal": "no", "content": None}}]}).encode()),
        (200, chat_reply("I think you should run draft next.")),
        (200, chat_reply('["draft"]')),
        (200, chat_reply('{"tool": "draft"}')),
        (200, chat_reply('{"done": false}')),
        (200, chat_reply('{"tool": "draft", "args": {}}' + " " * 3000)),
        (200, b"x" * (64 * 1024 + 1)),
    ],
)
def test_hosted_garbage_is_a_permanent_planner_error(status: int, body: bytes) -> None:
    with pytest.raises(PlannerError) as caught:
        parse_reply(status, body)
    assert caught.value.transient is False


def test_hosted_proposal_is_still_only_a_proposal() -> None:
    # the model may name any tool; the guard (not the parser) refuses send_email
    reply = chat_reply('{"tool": "send_email", "args": {"to": "supplier@example.com"}}')
    assert parse_reply(200, reply) == Proposal("send_email", {"to": "supplier@example.com"})


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://models.example.com/v1/chat/completions",
        "ftp://models.example.com/",
        "https://user:pw@models.example.com/v1",
        "https:///v1",
        "not a url",
    ],
)
def test_hosted_endpoint_must_be_https_or_localhost(endpoint: str) -> None:
    with pytest.raises(HostedPlannerConfigError):
        HostedPlanner(endpoint, "m", "k", FakeTransport(200, b""))


def test_hosted_localhost_over_http_is_allowed() -> None:
    assert HostedPlanner(
        "http://127.0.0.1:8081/v1/chat/completions", "m", "k", FakeTransport(200, b"")
    )
