"""Each task's story, in time order, from what the system recorded — not from sampling:

- every state change from the job's own **history** (`GET /ops/jobs/{id}`: each attempt's end,
  pause, approval, retry, cancel, rescue, replay, resolve, with its ISO time) and its creation;
- what is not a state change from the **function logs** (Powertools JSON lines, each with its
  `timestamp`): the workers' `.leasehold/demo/worker-N.log` (claims, effect intents, provider
  operations, tools, refused late writes, store outages) and the in-process functions'
  `functions.log` (the API, the relay, the sweeper), merged;
- the demo's own acts (requests, signals), kept with their time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from leasehold_dev.demo.session import Session, Task

# Log lines that say something the history does not (the history has every state change).
_TOLD = {
    "claimed": lambda e: f"claimed → running (epoch {e.get('epoch')}, attempt {e.get('attempt')})",
    "effect intent recorded": lambda e: (
        f"effect intent recorded: operation {e.get('operation_id')}"
    ),
    "operation submitted": lambda e: f"operation {e.get('operation_id')} submitted to the provider",
    "operation confirmed": lambda e: f"operation {e.get('operation_id')} confirmed (receipt saved)",
    "operation failed": lambda e: f"operation {e.get('operation_id')} failed at the provider",
    "operation released": lambda e: f"operation {e.get('operation_id')} released (never sent)",
    "stale write rejected": lambda e: (
        f"late {e.get('write', 'write')} of epoch {e.get('epoch')} refused by the fence"
    ),
    "lease lost during the step": lambda e: f"epoch {e.get('epoch')} saw its lease gone; stops",
    "claim rejected": lambda e: (
        f"wake-up acknowledged, no claim ({e.get('reason')}; job {e.get('state')}, "
        f"epoch {e.get('epoch')})"
    ),
    "wake-up handed off": lambda e: f"wake-up put back on the queue ({e.get('why')})",
    "claim: store unavailable": lambda _: "claim failed: the table is unavailable",
    "store unavailable; message kept": lambda _: "the table is unavailable: message kept",
    "heartbeat failed; retrying while the lease holds": lambda _: (
        "heartbeat failed (table unavailable); the lease still holds"
    ),
    "agent started": lambda e: "agent starts (no tool run yet)",
    "agent resumed": lambda e: f"agent resumes after {e.get('tools_run')}",
    "tool started": lambda e: f"tool {e.get('tool')} started (operation {e.get('operation_id')})",
    "tool finished": lambda e: f"tool {e.get('tool')} finished",
    "tool rejected": lambda e: f"proposal {e.get('tool')} refused by the guard: {e.get('reason')}",
    "outcome refused by a related item": lambda e: (
        f"outcome refused: the bookmark changed ({e.get('why')})"
    ),
}


@dataclass(frozen=True, order=True)
class Line:
    at_ms: int
    who: str
    text: str


def log_time(stamp: str) -> int | None:
    """Powertools' `2026-11-30 01:57:11,506+0000` as epoch milliseconds."""
    try:
        return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f%z").timestamp() * 1000)
    except (TypeError, ValueError):
        return None


def iso_ms(stamp: str | None) -> int | None:
    """The API's ISO 8601 UTC (`2026-11-30T01:57:11.506Z`) as epoch milliseconds."""
    if not stamp:
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def log_entries(log_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(who, entry) for every JSON line of the workers' and functions' logs."""
    for path in sorted(log_dir.glob("*.log")):
        source = path.stem
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for raw in text.splitlines():
            if not raw.startswith("{"):
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield _who(source, entry), entry


def _who(source: str, entry: dict[str, Any]) -> str:
    if source != "functions":
        return source
    function = str(entry.get("function_name", ""))
    for part in ("Api", "Relay", "Sweeper"):
        if f"-{part}Function-" in function:
            return part.lower()
    return "function"


def log_lines(log_dir: Path, job_ids: Iterable[str]) -> list[Line]:
    wanted = set(job_ids)
    lines = []
    for who, entry in log_entries(log_dir):
        tell = _TOLD.get(str(entry.get("message")))
        at = log_time(str(entry.get("timestamp")))
        if tell is None or at is None or entry.get("job_id") not in wanted:
            continue
        lines.append(Line(at, who, f"{entry['job_id']} {tell(entry)}"))
    return lines


def history_lines(view: dict[str, Any]) -> list[Line]:
    """The job's creation and every entry of its history, as the operator view gives them."""
    job_id = view.get("job_id", "?")
    lines = []
    created = iso_ms(view.get("created_at"))
    if created is not None:
        lines.append(Line(created, "api", f"{job_id} accepted → queued ({view.get('kind')})"))
    for entry in view.get("history") or []:
        at = iso_ms(entry.get("at"))
        if at is None:
            continue
        text = f"{job_id} {entry.get('event')} → {entry.get('state')}"
        details = [
            f"{name} {entry[name]}"
            for name in ("epoch", "attempt", "reason", "operation_id", "by", "note")
            if entry.get(name) not in (None, "")
        ]
        if details:
            text += f" ({', '.join(details)})"
        who = str(entry.get("worker") or entry.get("by") or "store").partition("@")[0]
        lines.append(Line(at, who, text + "  [history]"))
    if view.get("history_dropped"):
        lines.append(Line(0, "history", f"{job_id}: {view['history_dropped']} older entries"))
    return lines


def task_story(session: Session, task: Task) -> list[str]:
    """The task's story, every line in time order, ready to print."""
    lines = [Line(a.at_ms, "demo", a.text) for a in task.acts]
    lines += log_lines(session.log_dir, task.jobs)
    for job_id in task.jobs:
        lines += history_lines(session.ops_job(job_id))
    out = [f"── {task.key} {task.title}: the story in time order (history + function logs)"]
    for line in sorted(lines):
        offset = (line.at_ms - session.started_ms) / 1000 if line.at_ms else 0.0
        out.append(f"   {offset:+8.3f}s  {line.who:<9} {line.text}")
    return out


def print_story(session: Session, task: Task) -> None:
    lines = task_story(session, task)
    with session.print_lock:
        print("\n".join(lines), flush=True)
