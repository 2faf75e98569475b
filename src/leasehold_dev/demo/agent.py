"""A1–A3: the document-preparation agent as a durable job — a model may propose a tool, only
trusted code allows it, and progress survives a crash between two tools."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from leasehold_dev.demo.session import SETTLED, Session, Task
from leasehold_dev.demo.story import log_entries

TOOLS = ["extract", "validate", "draft"]


def sample_document(s: Session, name: str) -> str:
    """A sample supplier document from the repository's `samples/documents/`."""
    path = Path(s.stack.template).resolve().parent / "samples" / "documents" / name
    return path.read_text(encoding="utf-8")


def _doc_prep(document: str, planner: dict[str, Any] | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"document": {"text": document}}
    if planner:
        payload["planner"] = planner
    return {"kind": "doc_prep", "payload": payload}


def a1_prepared(s: Session, task: Task) -> None:
    name = "03-wrong-iban.txt"
    job = s.submit(
        task,
        f"doc_prep of samples/documents/{name}",
        _doc_prep(sample_document(s, name)),
        user="carol",
    )
    done = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=30)
    result = done.get("result") or {}
    fields = result.get("fields") or {}
    problems = [f"{p.get('field')}:{p.get('code')}" for p in result.get("problems") or []]
    first_line = str(result.get("draft_note") or "").splitlines()[:1]
    s.check(
        task,
        "A1",
        "a sample supplier document is prepared end to end (extract, validate, draft)",
        f"{done.get('state')}; tools {result.get('tools_run')}; {len(fields)} fields found "
        f"({', '.join(sorted(fields))}); problems {problems}; draft starts {first_line}",
        done.get("state") == "succeeded"
        and result.get("tools_run") == TOOLS
        and fields.get("supplier_name") is not None
        and "iban:iban_checksum" in problems
        and bool(first_line and first_line[0].strip()),
    )


def a2_refused(s: Session, task: Task) -> None:
    planner = {
        "kind": "scripted",
        "proposals": [
            {"tool": "extract", "args": {}},
            {"tool": "send_email", "args": {"to": "supplier@example.org"}},
        ],
    }
    document = sample_document(s, "01-clean-invoice-en.txt")
    job = s.submit(
        task,
        "doc_prep whose planner proposes send_email",
        _doc_prep(document, planner),
        user="carol",
    )
    done = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=30)
    error = done.get("error") or {}
    agent = done.get("agent") or {}
    s.check(
        task,
        "A2",
        "a planner that proposes send_email is refused: failed / tool_rejected, the reason shown",
        f"{done.get('state')}/{done.get('stop_reason')}; the caller sees error "
        f"{error.get('code')}: {str(error.get('message'))[:80]!r}; "
        f"tools run {agent.get('tools_run')}",
        done.get("state") == "failed"
        and done.get("stop_reason") == "tool_rejected"
        and error.get("code") == "tool_rejected"
        and "tool_not_allowed" in str(error.get("message"))
        and "send_email" in str(error)
        and agent.get("tools_run") == ["extract"],
    )


def a3_resumed(s: Session, task: Task) -> None:
    """The fixture planner "thinks" 2 s before each proposal (`step_delay_ms`), so the worker
    can be killed between the second tool and the third."""
    document = sample_document(s, "02-rechnung-de.txt")
    job = s.submit(
        task,
        "doc_prep with a planner that thinks 2 s between tools",
        _doc_prep(document, {"kind": "fixture", "step_delay_ms": 2000}),
        user="carol",
    )

    def two_done(view: dict[str, Any]) -> bool:
        agent = view.get("agent") or {}
        return agent.get("tools_run") == TOOLS[:2] and agent.get("tool_in_flight") is None

    s.wait_job(job, "carol", lambda v: two_done(v) or v.get("state") in SETTLED, timeout=30)
    victim = s.signal_holder(task, job, signal.SIGKILL, "killed after extract and validate")
    at_kill = s.job(job, "carol").get("agent") or {}
    done = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=40)
    agent = done.get("agent") or {}
    resumed = [
        e.get("tool")
        for _, e in log_entries(s.log_dir)
        if e.get("message") == "tool started" and e.get("job_id") == job and e.get("epoch") == 2
    ]
    s.check(
        task,
        "A3",
        "a worker killed after two tools: the resume runs only the third",
        f"killed {victim} at tools_run {at_kill.get('tools_run')} (steps_started "
        f"{at_kill.get('steps_started')}); {done.get('state')} at epoch {done.get('epoch')}; "
        f"epoch 2 ran {resumed}; final tools_run {agent.get('tools_run')}, steps_started "
        f"{agent.get('steps_started')}",
        victim is not None
        and at_kill.get("tools_run") == TOOLS[:2]
        and at_kill.get("steps_started") == 2
        and done.get("state") == "succeeded"
        and done.get("epoch") == 2
        and resumed == ["draft"]
        and agent.get("tools_run") == TOOLS
        and agent.get("steps_started") == 3,
    )
