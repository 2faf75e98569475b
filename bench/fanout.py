"""The cost of a fan-out and its join, per child (issue 31, item 8): one `fanout` parent
(bench/kinds.py) submitted over HTTP starts 100 one-step children with `ctx.map`, waits for
them, and joins them; everything from the POST to the parent's end is metered on moto.

Phases: the worker's store calls are labelled by whose wake-up the worker was handling
(`parent:` or `child:`) and by what they did — `spawn` (the children, 98 a transaction with a
fence of the parent and one wake-up item naming them), `park` (the parent's checkpoint with its
wait, and any re-park),
`fanin-read` (the reads that decide whether the set is over), `wake` (the last child waking the
parent), `join-read` (the join step reading the children's views), and the usual `claim`,
`steps`, `outcome` (a child's end commits its fan-in count with it: a 2-item transaction).

The per-child figure is measured; `check_model` compares the writes measured with what the
design says they must be (WF4, WF7): a different count fails the bench."""

from __future__ import annotations

import contextlib
import functools
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench.meter import totals_by_phase
from bench.pricing import GIB, PLATFORM_LOG_BYTES, PRICES, JobProfile, per_million, usd_per_job
from bench.scenarios import TENANT, Runner, Scenario, idempotency_key, user_of

CHILDREN = 100
CHILDREN_PER_TRANSACTION = 98
FUNCTIONS = ("api", "relay", "worker")

WAIT_STORE_PHASES = {
    "write_children": "spawn",
    "park": "park",
    "fanin_one": "fanin-read",
    "fanin": "fanin-read",
    "wake": "wake",
    "children_states": "join-read",
}
"""WaitStore methods by the phase they are metered in (prefixed by the role)."""


@dataclass(frozen=True)
class Expected:
    """Writes the design says a fan-out of `n` children makes: (phase, item kind, action,
    transactional) → how many items."""

    what: str
    phase: str
    kind: str
    action: str
    transactional: bool
    count: Callable[[int], int]


MODEL: list[Expected] = [
    Expected("each child written once, in the spawn (WF7)", "parent:spawn", "JOB", "Put", True,
             lambda n: n),
    Expected("one wake-up item per 98 children, naming them (WF43)", "parent:spawn", "OUTBOX",
             "Put", True, lambda n: math.ceil(n / CHILDREN_PER_TRANSACTION)),
    Expected("a fence of the parent per 98 children", "parent:spawn", "JOB", "ConditionCheck",
             True, lambda n: math.ceil(n / CHILDREN_PER_TRANSACTION)),
    Expected("each child's end counted once, with the end (WF4)", "child:outcome", "FANIN",
             "Update", True, lambda n: n),
    Expected("the parent woken once, by the last end", "child:wake", "JOB", "Update", True,
             lambda n: 1),
]  # fmt: skip
"""The model the measured writes are checked against (see `check_model`)."""


def check_model(writes: list[Any], n: int, model: list[Expected] = MODEL) -> list[dict[str, Any]]:
    """Each modelled row against the writes measured; and every FANIN write measured must be a
    modelled one (a second count of an end, or a count the model forgot, fails)."""
    seen: Counter[tuple[str, str, str, bool]] = Counter(
        (w.phase, w.kind, w.action, w.transactional) for w in writes if not w.failed
    )
    rows = []
    for row in model:
        measured = seen[(row.phase, row.kind, row.action, row.transactional)]
        want = row.count(n)
        rows.append({"what": row.what, "expected": want, "measured": measured,
                     "ok": measured == want})  # fmt: skip
    modelled_fanin = sum(r.count(n) for r in model if r.kind == "FANIN")
    measured_fanin = sum(c for (_, kind, _, _), c in seen.items() if kind == "FANIN")
    rows.append({
        "what": "every fan-in write measured is in the model", "expected": modelled_fanin,
        "measured": measured_fanin, "ok": measured_fanin == modelled_fanin,
    })  # fmt: skip
    return rows


@contextlib.contextmanager
def labelled(runner: Runner, parent: list[str]) -> Iterator[None]:
    """Label the worker's calls by role (the wake-up's job is the parent or a child) and the
    WaitStore's calls by what they do; undone on exit."""
    from leasehold.service.worker import WorkerService
    from leasehold.store.waits import WaitStore

    meter = runner.stack.meter
    originals: dict[tuple[Any, str], Any] = {}

    def wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        originals[(owner, name)] = getattr(owner, name)
        setattr(owner, name, make(getattr(owner, name)))

    def role_of(handle: Any) -> Any:
        def handled(self: Any, wakeup: Any, *args: Any, **kwargs: Any) -> Any:
            if meter.phase != "worker":
                return handle(self, wakeup, *args, **kwargs)
            role = "parent" if wakeup.job_id in parent else "child"
            with meter.during(f"worker/{role}"):
                return handle(self, wakeup, *args, **kwargs)

        return handled

    def phase_of(method: Any, what: str) -> Any:
        def labelled_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            current = meter.phase
            if not current.startswith("worker/"):
                return method(self, *args, **kwargs)
            with meter.during(f"{current.partition('/')[2]}:{what}"):
                return method(self, *args, **kwargs)

        return labelled_call

    wrap(WorkerService, "handle", role_of)
    for name, what in WAIT_STORE_PHASES.items():
        wrap(WaitStore, name, functools.partial(phase_of, what=what))
    try:
        yield
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)


def measure(runner: Runner, children: int = CHILDREN) -> dict[str, Any]:
    """One fan-out of `children`, metered from the POST to the parent's end."""
    stack = runner.stack
    scenario = Scenario(f"{children}-child fan-out and join", 1)
    runner._start(scenario)  # noqa: SLF001 - the bench's own runner: a fresh table and runtime
    user = user_of(scenario)
    parent: list[str] = []
    with labelled(runner, parent):
        status, body = stack.api(
            "api-submit-job.json", body={"kind": "fanout", "payload": {"children": children}},
            user=user, tenant=TENANT, key=idempotency_key(user, "accept", 0),
        )  # fmt: skip
        if status != 202:
            raise RuntimeError(f"fan-out: POST /jobs answered {status}: {body}")
        parent.append(str(body["job_id"]))
        stack.drain(parent, lambda job: job.get("state") in {"succeeded", "failed"}, timeout_s=300)
    job = stack.job(parent[0]) or {}
    return {**summarise(runner, job, children), "parent_id": parent[0]}


def summarise(runner: Runner, job: dict[str, Any], n: int) -> dict[str, Any]:
    stack = runner.stack
    meter, inv = stack.meter, stack.invocations
    phases = {
        name: totals
        for name, totals in sorted(totals_by_phase(meter).items())
        if name not in {"setup", "idle-poll"}
    }
    requests: Counter[str] = Counter()
    for name in phases:
        requests.update({k: v for k, v in meter.requests.get(name, {}).items() if v})
    wcu = sum(t.wcu for t in phases.values())
    rcu = sum(t.rcu for t in phases.values())
    sqs = sum(v for k, v in requests.items() if k.startswith("sqs."))
    invocations = {fn: inv.count.get(fn, 0) for fn in FUNCTIONS}
    captured = sum(inv.log_bytes.get(fn, 0) for fn in FUNCTIONS)
    platform = sum(invocations.values()) * PLATFORM_LOG_BYTES
    from bench.pricing import access_log_bytes

    access = inv.api_requests * access_log_bytes(
        stack.template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]
    )
    per_child = JobProfile(
        wcu=wcu / n,
        rcu=rcu / n,
        sqs_requests=sqs / n,
        lambda_invocations={fn: c / n for fn, c in invocations.items()},
        wakeups=inv.wakeups / n,
        api_requests=inv.api_requests / n,
        log_bytes=(captured + platform + access) / n,
    )
    usd = usd_per_job(per_child)
    checks = check_model(meter.writes, n)
    from leasehold.domain.waits import child_id

    parent_id = str(job.get("job_id", ""))
    states = Counter(
        (stack.job(child_id(parent_id, 0, i)) or {}).get("state", "missing") for i in range(n)
    )
    return {
        "children": n,
        "parent_state": job.get("state"),
        "children_succeeded": states.get("succeeded", 0),
        "children_states": dict(states),
        "total": {
            "wcu": round(wcu, 3),
            "rcu": round(rcu, 3),
            "sqs_requests": sqs,
            "lambda_invocations": invocations,
            "worker_wakeups": inv.wakeups,
            "api_requests": inv.api_requests,
            "usd": round(sum(usd.values()) * n, 8),
        },
        "per_child": {
            "wcu": round(wcu / n, 3),
            "rcu": round(rcu / n, 3),
            "sqs_requests": round(sqs / n, 3),
            "lambda_invocations": round(sum(invocations.values()) / n, 3),
            "log_bytes": round(per_child.log_bytes, 1),
        },
        "usd_per_million_children": per_million(usd),
        "phases": {
            name: {
                "wcu": round(t.wcu, 3),
                "rcu": round(t.rcu, 3),
                "requests": dict(sorted(meter.requests.get(name, {}).items())),
                "wcu_by_part": dict(sorted(t.wcu_by_part.items())),
            }
            for name, t in phases.items()
        },
        "model_check": checks,
        "model_ok": all(row["ok"] for row in checks),
        "note": "moto (in-process), counts priced at list prices; the parent's accept, spawn, "
        "waits, wake and join are shared by the children (per child = total / children)",
    }


def step_functions_map(n: int, *, lam: Any = None) -> dict[str, Any]:
    """The same fan-out as a Step Functions Map state, per child. Standard, Inline Map: each
    iteration's Task state is one state transition (iterations themselves are not charged);
    plus the parent's own states (the Map state and a join Task: 2 transitions a fan-out).
    Distributed Map, Express children: one state transition per child execution started, and
    each child an Express execution (one request + its duration at 64 MB, 100 ms minimum).
    Each child's Lambda as in the 3-step rows."""
    from bench.pricing import LAMBDA

    lam = lam or LAMBDA
    gb = lam.memory_mb / 1024
    child_lambda = (
        PRICES["lambda_request"] + lam.step_lambda_ms / 1000 * gb * PRICES["lambda_arm64_gb_second"]
    )
    logs = PLATFORM_LOG_BYTES / GIB * PRICES["cloudwatch_logs_ingested_gb"]
    start = PRICES["http_api_request"] / n
    standard_transitions = n + 2
    standard = {
        "step_functions": standard_transitions / n * PRICES["step_functions_standard_transition"],
        "lambda": child_lambda,
        "api_gateway": start,
        "logs": logs,
    }
    billed_ms = math.ceil((lam.step_lambda_ms + lam.express_overhead_ms_per_state) / 100) * 100
    express_child = (
        PRICES["step_functions_express_request"]
        + billed_ms
        / 1000
        * (lam.express_memory_mb / 1024)
        * PRICES["step_functions_express_gb_second"]
    )
    distributed = {
        "step_functions": (n + 2) / n * PRICES["step_functions_standard_transition"]
        + express_child,
        "lambda": child_lambda,
        "api_gateway": start,
        "logs": logs,
    }
    return {
        "standard_inline_map": {
            "model": {"state_transitions_per_fanout": standard_transitions, "children": n},
            "usd_per_million_children": per_million(standard),
        },
        "distributed_map_express_children": {
            "model": {
                "state_transitions_per_fanout": n + 2,
                "express_executions_per_fanout": n,
                "express_billed_ms_each": billed_ms,
                "express_memory_mb": lam.express_memory_mb,
            },
            "usd_per_million_children": per_million(distributed),
        },
        "source": SFN_MAP_SOURCE,
    }


SFN_MAP_SOURCE = (
    "https://docs.aws.amazon.com/ko_kr/step-functions/latest/dg/concepts-transitions.html "
    "(AWS's Step Functions guide, 'Transitions', machine-translated Korean copy — the copy the "
    "docs corpus holds): in Distributed mode one state transition is charged for each child "
    "workflow execution the Map state starts; in Inline mode an iteration is not itself "
    "charged a transition (its states are). Prices: the 3-step rows' (bench/pricing.py)"
)


DURABLE_OVER_LEASEHOLD_TARGET = 3
"""Issue 31, item 8: per child at least 3× cheaper than durable functions' `map`."""


def compare(measured: dict[str, Any]) -> dict[str, Any]:
    """The measured fan-out against Step Functions' Map (Standard; Distributed with Express
    children) and durable functions' `map`, per child, same units ($ per million children)."""
    import json

    from bench.pricing import durable_map

    n = int(measured["children"])
    child = {"steps": [{"name": "s0", "cost": 0, "duration_ms": 0}]}
    item_in = len(json.dumps(child, separators=(",", ":")))
    item_out = len(json.dumps({"step": "s0", "cost": 0}, separators=(",", ":")))
    leasehold = measured["usd_per_million_children"]["total"]
    sfn = step_functions_map(n)
    nested = durable_map(n, item_input_bytes=item_in, item_output_bytes=item_out)
    flat = durable_map(n, item_input_bytes=item_in, item_output_bytes=item_out, flat=True)

    def total(row: dict[str, Any]) -> float:
        return float(row["usd_per_million_children"]["total"])

    ratio = round(total(nested) / leasehold, 2)
    return {
        "children": n,
        "leasehold_usd_per_million_children": leasehold,
        "step_functions_standard_inline_map": sfn["standard_inline_map"],
        "step_functions_distributed_map_express": sfn["distributed_map_express_children"],
        "step_functions_source": sfn["source"],
        "durable_map": nested,
        "durable_map_flat_nesting": flat,
        "ratios": {
            "standard_map_over_leasehold": round(total(sfn["standard_inline_map"]) / leasehold, 2),
            "distributed_map_over_leasehold": round(
                total(sfn["distributed_map_express_children"]) / leasehold, 2
            ),
            "durable_map_over_leasehold": ratio,
            "durable_map_flat_over_leasehold": round(total(flat) / leasehold, 2),
        },
        "target": {
            "target": "fan-out per child: durable functions' map / leasehold",
            "value": ratio,
            "op": ">=",
            "limit": DURABLE_OVER_LEASEHOLD_TARGET,
            "met": ratio >= DURABLE_OVER_LEASEHOLD_TARGET,
        },
    }


def report_lines(fan: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """bench/README.md's fan-out section."""
    n = fan["children"]
    std = fan["step_functions_standard_inline_map"]
    dist = fan["step_functions_distributed_map_express"]
    nested, flat = fan["durable_map"], fan["durable_map_flat_nesting"]
    r = fan["ratios"]
    dm, nm, fm = dist["model"], nested["model"], flat["model"]
    per, total = measured["per_child"], measured["total"]

    def usd(row: dict[str, Any]) -> str:
        return f"{row['usd_per_million_children']['total']:.2f}"

    rows = [
        ["leasehold (measured on moto, priced)",
         f"{per['wcu']:g} WCU, {per['rcu']:g} RCU, {per['sqs_requests']:g} SQS requests, "
         f"{per['lambda_invocations']:g} Lambda invocations a child",
         f"{fan['leasehold_usd_per_million_children']:.2f}", "1"],
        ["Step Functions Standard, Inline Map",
         f"{std['model']['state_transitions_per_fanout']} transitions a fan-out + a Lambda a child",
         usd(std), f"{r['standard_map_over_leasehold']:g}"],
        ["Step Functions Distributed Map, Express children",
         f"{dist['model']['state_transitions_per_fanout']} transitions + {n} Express executions "
         f"({dm['express_billed_ms_each']} ms at {dm['express_memory_mb']} MB) "
         "+ a Lambda a child", usd(dist), f"{r['distributed_map_over_leasehold']:g}"],
        ["Lambda durable functions `map`",
         f"{nm['durable_operations']} operations ({nm['operations_counted']})"
         f" + {nested['model']['data_written_bytes']} B written, kept "
         f"{nested['model']['retention_days']} days + 1 invocation", usd(nested),
         f"{r['durable_map_over_leasehold']:g}"],
        ["… the same, flat nesting",
         f"{fm['durable_operations']} operations ({fm['operations_counted']})",
         usd(flat), f"{r['durable_map_flat_over_leasehold']:g}"],
    ]  # fmt: skip
    head = ["a 100-child fan-out and its join", "per child", "all-in $/M children", "× leasehold"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    t = fan["target"]
    phases = measured["phases"]
    lines += [
        "",
        f"The whole fan-out (the parent's POST, its spawn of {n} children 98 a transaction with a "
        "fence, each child's claim, step and end with its fan-in count, the reads that decide "
        "whether it is the last, the parent's wake, re-claim and join) measured "
        f"{total['wcu']:g} WCU, {total['rcu']:g} RCU, {total['sqs_requests']} SQS requests and "
        f"{sum(total['lambda_invocations'].values())} Lambda invocations "
        f"({total['worker_wakeups']} wake-ups) on moto: {USD}{total['usd']:.6f} a fan-out. "
        f"Target: durable `map` at least {t['limit']}× a child's cost — "
        f"**{'PASS' if t['met'] else 'MISS'}** ({t['value']:g}×). The model check "
        f"({'passed' if measured['model_ok'] else 'FAILED'}): "
        + "; ".join(f"{row['what']}: {row['measured']} of {row['expected']}"
                    for row in measured["model_check"]) + ".",
        "",
        "| phase | WCU | RCU | write units by part |",
        "|---|---|---|---|",
        *(f"| {name} | {p['wcu']:g} | {p['rcu']:g} | "
          + ", ".join(f"{k} {v:g}" for k, v in p["wcu_by_part"].items()) + " |"
          for name, p in phases.items() if p["wcu"] or p["rcu"]),
        "",
        f"Step Functions: {fan['step_functions_source']}. Durable functions' operations: "
        f"{nested['sources']['operations']}; its prices as in the 3-step section.",
    ]  # fmt: skip
    return lines


USD = "$"


def record_heat(runner: Runner, children: int = CHILDREN, shards: int = 16) -> Any:
    """One fan-out on moto with its counters spread over `shards` items (FANIN_SHARE lowered
    for the recording, so 100 children take the path a 10,000-child set takes): per child, the
    units each key the set shares took — the counter items, the parent's item and outbox, the
    user's slot item — while the children ended, and the parent's item during the spawn.
    Children's own keys (one per child) are left out: they are the mix's `job` spread."""
    from unittest import mock

    from bench.capacity import price_write
    from bench.keyheat import FanoutRecording
    from leasehold.domain import waits

    share = max(1, children // shards)
    with mock.patch.object(waits, "FANIN_SHARE", share):
        assert waits.fanin_shards(children) == shards
        measured = measure(runner, children)
    parent = measured["parent_id"]
    meter, spec = runner.stack.meter, runner.stack.spec

    def pattern(pk: str) -> str | None:
        prefix, _, rest = pk.partition("#")
        if prefix == "FANIN":
            return "FANIN#<parent>#<step>#<shard>"
        if prefix in {"JOB", "OUTBOX"}:
            return f"{prefix}#<parent>" if rest == parent else None
        if prefix == "SLOTS":
            return "SLOTS#<tenant>#<user> (the parent's owner)"
        return None

    ends: dict[str, list[float]] = {}
    once: dict[str, list[float]] = {}
    spawn: dict[str, list[float]] = {}

    def bucket(name: str, phase: str, operation: str) -> dict[str, list[float]]:
        if phase == "parent:spawn":
            return spawn
        # a child's end: its counter's count, its own counter read, its slot given back; the
        # rest (a shard's sum when it completes, the parent's own writes and checks) is once
        # a set (or once a shard: at most `shards` times a set)
        per_end = name.startswith("SLOTS#") or (
            name.startswith("FANIN#") and operation in {"TransactWriteItems", "GetItem"}
        )
        return ends if per_end else once

    for event in meter.writes:
        name = pattern(str(next(iter(event.key.values())).get("S", "")))
        if name is None or event.phase == "accept":
            continue
        into = bucket(name, event.phase, event.operation)
        into.setdefault(name, [0.0, 0.0])[0] += price_write(spec, event).base
    for read in meter.reads:
        name = pattern(read.key) if read.index == "table" else None
        if name is None or read.phase == "accept":
            continue
        into = bucket(name, read.phase, read.operation)
        into.setdefault(name, [0.0, 0.0])[1] += read.units
    # a counter pattern's once-a-set units fall on `shards` items: one item's share
    items = {name: (shards if name.startswith("FANIN#") else 1) for name in once}
    return FanoutRecording(
        children=children,
        shards=shards,
        per_end={k: (w / children, r / children) for k, (w, r) in ends.items()},
        per_set={k: (w / items[k], r / items[k]) for k, (w, r) in once.items()},
        spawn={k: (w / children, r / children) for k, (w, r) in spawn.items()},
    ), measured
