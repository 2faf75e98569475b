"""schemathesis against a running local stack, from the document the stack itself serves
(`GET /openapi.yaml`), as each demo user in turn (arch §8: the `not_a_server_error` and
`response_schema_conformance` checks).

Every phase runs — the document's examples, the coverage phase (boundaries and each invalid
variant of every parameter), random generation (valid and invalid), and the stateful phase that
follows the document's `links` (create → get → cancel a job; create → get → edit → delete a
bookmark). Generated bodies also carry what a client may send but no store can hold: about one
body in four has a lone UTF-16 surrogate (`"\\ud800"`, valid JSON syntax, not Unicode) put into
one of its strings or keys (`lone_surrogates`, a `flatmap_body` hook; hypothesis's own text never
draws them), so the edge's 400 for them is fuzzed too. Every request is counted by route and
status as it is sent (an `after_call` hook), so the figures are what went over the wire, and
every failed check is counted by name.

Used by `scripts/fuzz.py` (`make fuzz`) and by tests/e2e/test_fuzz.py (a bounded run in CI).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

CHECKS = ("not_a_server_error", "response_schema_conformance")
USERS = ("alice", "carol", "ops")
PHASES = ("examples", "coverage", "fuzzing", "stateful")
LONE_SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff")


@dataclass
class FuzzReport:
    """What one or more runs sent and found."""

    requests: Counter[str] = field(default_factory=Counter)
    """Requests sent, by route (`POST /jobs`)."""
    statuses: Counter[int] = field(default_factory=Counter)
    by_user: Counter[str] = field(default_factory=Counter)
    by_phase: Counter[str] = field(default_factory=Counter)
    lone_surrogates: int = 0
    """Requests whose body carried a lone surrogate (see `lone_surrogates`)."""
    hostile_kinds: int = 0
    """Requests whose body named one of the run's `hostile` kinds (hooks that raise)."""
    links: Counter[str] = field(default_factory=Counter)
    """Links followed by the stateful phase (`POST /jobs -> 202 -> GetJob -> ...`)."""
    failures: Counter[str] = field(default_factory=Counter)
    """Failed checks, by check name (one per failing request and check)."""
    server_errors: list[str] = field(default_factory=list)
    """`METHOD path → status` of every 5xx answer, whatever the checks said."""
    examples: list[str] = field(default_factory=list)
    """A few failures in full (the request to reproduce it and what the check said)."""
    errors: list[str] = field(default_factory=list)
    """Errors of the run itself (the schema, the connection), never to be ignored."""
    seconds: float = 0.0
    seed: int | None = None

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def render(self) -> str:
        lines = [
            f"schemathesis {_version()} against the local stack: {self.total} requests "
            f"in {self.seconds:.1f} s (seed {self.seed})",
            "by user:   " + ", ".join(f"{u} {n}" for u, n in sorted(self.by_user.items())),
            "by phase:  " + ", ".join(f"{p} {n}" for p, n in sorted(self.by_phase.items())),
            "by status: " + ", ".join(f"{s} {n}" for s, n in sorted(self.statuses.items())),
            f"bodies with a lone surrogate: {self.lone_surrogates}",
            f"bodies naming a kind whose hooks raise: {self.hostile_kinds}",
            "by route:",
            *(f"  {n:6d}  {route}" for route, n in sorted(self.requests.items())),
            f"links followed (stateful): {sum(self.links.values())}",
            *(f"  {n:6d}  {link}" for link, n in sorted(self.links.items())),
            "failures by check:",
            *(f"  {self.failures.get(name, 0):6d}  {name}" for name in CHECKS),
            f"server errors (5xx): {len(self.server_errors)}",
        ]
        lines += [f"  {line}" for line in self.server_errors[:20]]
        if self.errors:
            lines.append("run errors:")
            lines += [f"  {error}" for error in self.errors[:20]]
        lines += self.examples[:10]
        return "\n".join(lines)


def _version() -> str:
    import schemathesis

    return schemathesis.__version__


def _strings(body: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Where `body`'s strings are: a path to each string value, and `(*path, key, None)` for a
    key (so a key can be altered too)."""
    if isinstance(body, str):
        return [path]
    found: list[tuple[Any, ...]] = []
    if isinstance(body, dict):
        for key, child in body.items():
            found += [(*path, key, None), *_strings(child, (*path, key))]
    elif isinstance(body, list):
        for index, child in enumerate(body):
            found += _strings(child, (*path, index))
    return found


def _inject(body: Any, where: tuple[Any, ...], lone: str, at: int) -> Any:
    """A copy of `body` with `lone` put at character `at` of the string (or key) `where`."""
    if not where:
        return body[:at] + lone + body[at:]
    if isinstance(body, dict):
        head = where[0]
        if len(where) == 2 and where[1] is None:  # the key itself
            return {(head[:at] + lone + head[at:] if k == head else k): v for k, v in body.items()}
        return {**body, head: _inject(body[head], where[1:], lone, at)}
    copied = list(body)
    copied[where[0]] = _inject(body[where[0]], where[1:], lone, at)
    return copied


def lone_surrogates(context: Any, body: Any) -> st.SearchStrategy[Any]:
    """schemathesis `flatmap_body` hook: about one body in four, a lone surrogate in one of its
    strings or keys; the others unchanged (the budget, examples per operation, is the same)."""
    places = _strings(body)
    if not places:
        return st.just(body)
    return st.tuples(
        st.integers(0, 3),
        st.sampled_from(places),
        st.sampled_from(LONE_SURROGATES),
        st.integers(0, 8),
    ).map(lambda d: body if d[0] else _inject(body, d[1], d[2], d[3]))


def with_hostile_kinds(hostile: tuple[str, ...]) -> Any:
    """A `flatmap_body` hook: `lone_surrogates`, and about one body in three that names a `kind`
    names one of `hostile` instead — kinds whose check, view or related hook raises (arch §23):
    their jobs then sit in every listing the fuzz reads, and every answer must still hold."""

    def hook(context: Any, body: Any) -> st.SearchStrategy[Any]:
        bodies = lone_surrogates(context, body)
        if not hostile or not isinstance(body, dict) or not isinstance(body.get("kind"), str):
            return bodies
        return st.tuples(bodies, st.integers(0, 2), st.sampled_from(hostile)).map(
            lambda d: d[0] if d[1] or not isinstance(d[0], dict) else {**d[0], "kind": d[2]}
        )

    return hook


def has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    return False


def config_for(
    url: str, user: str, *, max_examples: int, seed: int, phases: tuple[str, ...] = PHASES
) -> dict[str, Any]:
    """The run's settings as schemathesis's configuration file would hold them."""
    generation = {
        "mode": "all",  # valid and invalid data: a 4xx is fine, a 5xx or a broken answer is not
        "max-examples": max_examples,
        "database": "none",  # no .hypothesis/ directory left behind
        "with-security-parameters": False,  # identity is the X-Demo-User header below
    }
    config: dict[str, Any] = {
        "base-url": url,
        "headers": {"X-Demo-User": user},
        "workers": 1,
        "request-timeout": 30,
        "continue-on-failure": True,
        "suppress-health-check": ["all"],
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "generation": generation,
        "phases": {name: {"enabled": name in phases} for name in PHASES},
        "seed": seed,
    }
    config["phases"]["stateful"]["max-steps"] = 20
    return config


def run_as(
    url: str,
    user: str,
    *,
    max_examples: int,
    seed: int,
    report: FuzzReport,
    phases: tuple[str, ...] = PHASES,
    hostile: tuple[str, ...] = (),
    stateful_budget: int | None = None,
) -> None:
    """One schemathesis run as `user`; adds what it sent and found to `report`. `hostile`:
    kinds (registered on the stack) whose hooks raise, mixed into the bodies that name a kind.
    `stateful_budget`: the run ends after the scenario in which the stateful phase has sent
    this many requests (schemathesis's stateful phase learns links from the answers and may
    go on for thousands: 626 requests in one run of the bounded test, 2,312 in another)."""
    import schemathesis
    from schemathesis.engine import Status, events, from_schema

    config = schemathesis.Config.from_dict(
        config_for(url, user, max_examples=max_examples, seed=seed, phases=phases)
    )
    schema = schemathesis.openapi.from_url(f"{url}/openapi.yaml", config=config)
    phase_now = ["?"]

    stateful_sent = [0]

    def after_call(context: Any, case: Any, response: Any) -> None:
        route = case.operation.label
        if phase_now[0] == "stateful":
            stateful_sent[0] += 1
        report.requests[route] += 1
        report.statuses[response.status_code] += 1
        report.by_user[user] += 1
        report.by_phase[phase_now[0]] += 1
        if has_lone_surrogate(case.body):
            report.lone_surrogates += 1
        if isinstance(case.body, dict) and case.body.get("kind") in hostile:
            report.hostile_kinds += 1
        if response.status_code >= 500:
            report.server_errors.append(
                f"{user}: {case.method} {case.formatted_path} → "
                f"{response.status_code} {response.text[:200]}"
            )

    schema.hooks.register_hook_with_name(after_call, "after_call")
    schema.hooks.register_hook_with_name(with_hostile_kinds(hostile), "flatmap_body")
    for event in from_schema(schema).execute():
        if isinstance(event, events.PhaseStarted):
            phase_now[0] = event.phase.name.value
        elif isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            _count_failures(event.recorder, user, report, Status)
            if stateful_budget is not None and stateful_sent[0] >= stateful_budget:
                break
        elif isinstance(event, events.NonFatalError):
            report.errors.append(f"{user}: {event.label}: {event.info.format()[:500]}")
        elif isinstance(event, events.FatalError):
            report.errors.append(f"{user}: fatal: {event.exception!r}"[:500])


def _count_failures(recorder: Any, user: str, report: FuzzReport, status: Any) -> None:
    """Failed checks by name (and a few in full), and the links the stateful phase followed."""
    for case_id, node in recorder.cases.items():
        sent = case_id in recorder.interactions
        if node.transition is not None and node.is_transition_applied and sent:
            report.links[node.transition.id] += 1
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.status != status.FAILURE:
                continue
            report.failures[check.name] += 1
            if len(report.examples) < 10 and check.failure_info is not None:
                case = recorder.cases[case_id].value
                report.examples.append(
                    f"--- {user}: {check.name}: {case.operation.label}\n"
                    f"{check.failure_info.failure.title}: {check.failure_info.failure.message}"[
                        :1500
                    ]
                    + f"\n{check.failure_info.code_sample}"
                )


def fuzz(
    url: str,
    *,
    users: tuple[str, ...] = USERS,
    max_examples: int,
    seed: int | None = None,
    phases: tuple[str, ...] = PHASES,
    hostile: tuple[str, ...] = (),
    stateful_budget: int | None = None,
) -> FuzzReport:
    """Run as each user in turn against the stack at `url`; the report adds them up. Without a
    seed one is drawn (and reported, so a run can be replayed with it). `hostile`: kinds whose
    hooks raise, mixed into bodies that name a kind (`with_hostile_kinds`)."""
    report = FuzzReport(seed=random.randrange(2**31) if seed is None else seed)
    assert report.seed is not None
    started = time.monotonic()
    for user in users:
        run_as(
            url,
            user,
            max_examples=max_examples,
            seed=report.seed,
            report=report,
            phases=phases,
            hostile=hostile,
            stateful_budget=stateful_budget,
        )
    report.seconds = time.monotonic() - started
    return report
