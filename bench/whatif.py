"""What-if pricing: the write stream a scenario really produced (every item before and after
every write), priced again as if the store were built differently. Nothing here runs the
changed design; it applies DynamoDB's rules (bench/meter.py) to the same writes with the items,
indexes or transactions changed as each option would change them, so the lead can compare store
changes before making one. Each option states what it would cost in correctness elsewhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from bench.meter import IndexSpec, TableSpec, WriteEvent, price_write

Transform = Callable[[list[WriteEvent]], list[WriteEvent]]

ACTIVE = "STATE#active"
SHARED = {"STATE#queued", "STATE#running"}
LEAVING = {"STATE#succeeded", "STATE#cancelled"}


@dataclass(frozen=True)
class Option:
    name: str
    change: str
    caveat: str
    table: Callable[[TableSpec], TableSpec] | None = None
    transform: Transform | None = None


def _items(event: WriteEvent, edit: Callable[[Mapping[str, Any]], dict[str, Any]]) -> WriteEvent:
    return replace(
        event,
        old=edit(event.old) if event.old is not None else None,
        new=edit(event.new) if event.new is not None else None,
    )


# ------------------------------------------------------------------------------ the options


def by_owner_keys_only(table: TableSpec) -> TableSpec:
    return table.with_index(IndexSpec("by_owner", "gsi2pk", "gsi2sk", "KEYS_ONLY"))


def _active_key(item: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(item)
    state_key = str(out.get("gsi1pk", {}).get("S", ""))
    if state_key in SHARED:
        out["gsi1pk"] = {"S": ACTIVE}
    elif state_key in LEAVING:
        out.pop("gsi1pk", None)
        out.pop("gsi1sk", None)
    return out


def one_active_state_key(events: list[WriteEvent]) -> list[WriteEvent]:
    return [_items(e, _active_key) if e.kind == "JOB" else e for e in events]


def _without(event: WriteEvent, kind: str) -> WriteEvent:
    """`event` as if its transaction had no item of `kind`: a transaction left with one item
    is a single write."""
    if kind not in event.transaction_kinds:
        return event
    if event.kind == kind:
        return replace(event, transactional=False, transaction_kinds=())
    kinds = list(event.transaction_kinds)
    kinds.remove(kind)
    if len(kinds) < 2:
        return replace(event, transactional=False, transaction_kinds=())
    return replace(event, transaction_kinds=tuple(kinds))


def slots_outside_transactions(events: list[WriteEvent]) -> list[WriteEvent]:
    """A transaction of the job's write and the slot's becomes two single writes; a
    transaction that also carries a wake-up (a retry) keeps the job and the wake-up together."""
    return [_without(e, "SLOTS") for e in events]


def slot_release_outside_outcome(events: list[WriteEvent]) -> list[WriteEvent]:
    """Only the release leaves the transaction: the claim still takes its slot atomically (the
    limit is never exceeded); the outcome commits without the slot, which is freed by a single
    write after it."""
    return [_without(e, "SLOTS") if e.phase == "outcome" else e for e in events]


def key_in_job_item(events: list[WriteEvent]) -> list[WriteEvent]:
    """No idempotency-key item: the job item carries the key and the body's fingerprint (its
    key derived from them), so every later write of that job item carries them too."""
    extra_by_request: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.kind == "IDEMP" and event.new is not None:
            pk = str(event.key["pk"]["S"])
            extra_by_request[event.request] = {
                "idempotency_key": {"S": pk.rsplit("#", 1)[-1]},
                "fingerprint": event.new.get("fingerprint", {"S": ""}),
            }
    extra_by_job: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.kind == "JOB" and event.request in extra_by_request:
            extra_by_job[str(event.key["pk"]["S"])] = extra_by_request[event.request]
    out = []
    for original in events:
        if original.kind == "IDEMP":
            continue
        event = _without(original, "IDEMP")
        extra = extra_by_job.get(str(event.key["pk"]["S"])) if event.kind == "JOB" else None
        out.append(_items(event, _adding(extra)) if extra else event)
    return out


def _adding(extra: dict[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def add(item: Mapping[str, Any]) -> dict[str, Any]:
        return {**item, **extra}

    return add


def wakeup_on_job_stream(events: list[WriteEvent]) -> list[WriteEvent]:
    """No outbox item: the relay takes the wake-up from the job item's own stream record (a
    dispatch counter that changes), so a dispatch costs no second item."""
    out = []
    for event in events:
        if event.kind != "OUTBOX":
            out.append(_without(event, "OUTBOX"))
    return out


def result_replaces_outputs(events: list[WriteEvent]) -> list[WriteEvent]:
    """The success write stores `result` (which holds the step outputs) and removes the
    checkpoint's `outputs` instead of keeping both."""

    def lean(item: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(item)
        if "result" in out:
            out.pop("outputs", None)
        return out

    return [_items(e, lean) if e.kind == "JOB" else e for e in events]


KEPT_NAMES = {"pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "state", "expires_at"}


def short_attribute_names(events: list[WriteEvent]) -> list[WriteEvent]:
    """Every job-item attribute but the keys, the projected `state` and the TTL attribute named
    with at most 2 characters (names count toward an item's size)."""
    aliases: dict[str, str] = {}

    def alias(name: str) -> str:
        if name in KEPT_NAMES:
            return name
        if name not in aliases:
            index = len(aliases)
            aliases[name] = chr(ord("a") + index % 26) + (str(index // 26) if index >= 26 else "")
        return aliases[name]

    def renamed(item: Mapping[str, Any]) -> dict[str, Any]:
        return {alias(name): value for name, value in item.items()}

    return [_items(e, renamed) if e.kind == "JOB" else e for e in events]


def _chain(*transforms: Transform) -> Transform:
    def run(events: list[WriteEvent]) -> list[WriteEvent]:
        for transform in transforms:
            events = transform(events)
        return events

    return run


OPTIONS: list[Option] = [
    Option(
        "by_owner KEYS_ONLY",
        "project only keys into by_owner (GET /jobs?state= then reads the state from the items "
        "it already batch-gets)",
        "the state filter moves from the index query to the client: a page may hold fewer matches",
        table=by_owner_keys_only,
    ),
    Option(
        "one by_state key for queued+running; succeeded/cancelled leave by_state",
        "gsi1pk = STATE#active while queued or running; removed on success or cancel",
        "the sweeper already reads each job it lists, so it can tell queued from running; the "
        "ops summary's counts of queued vs running need the items (or a projected state)",
        transform=one_active_state_key,
    ),
    Option(
        "slot take/release as single writes",
        "the claim and the outcome write the job item and the slot item separately",
        "not atomic any more: a crash between the two leaves a slot held by a finished job "
        "(or a running job without one) until a repair pass; decision D4 must change",
        transform=slots_outside_transactions,
    ),
    Option(
        "idempotency key folded into the job item",
        "no IDEMP item: the job item's key is derived from (tenant, user, key) and carries the "
        "fingerprint",
        "GET /jobs/{id} and the id itself must be derivable, or a second (key → id) lookup is "
        "needed; jobs without a key keep a random id",
        transform=key_in_job_item,
    ),
    Option(
        "wake-up on the job item's stream (no outbox item)",
        "the relay reads dispatches from the job item's MODIFY/INSERT records (a dispatch "
        "counter), not from outbox items",
        "every job write reaches the relay's filter (filter on the dispatch attribute); the "
        "relay must compare old and new images",
        transform=wakeup_on_job_stream,
    ),
    Option(
        "result replaces outputs on success",
        "the success write sets `result` and removes `outputs` (the result already holds them)",
        "a replay of a succeeded job must rebuild its checkpoint from `result`",
        transform=result_replaces_outputs,
    ),
    Option(
        "short attribute names on the job item",
        "every job-item attribute but the keys, `state` and `expires_at` named with ≤ 2 characters",
        "items are harder to read in the console; the codec (store/items.py) maps the names",
        transform=short_attribute_names,
    ),
    Option(
        "slot release as a single write after the outcome",
        "the claim keeps its transaction with the slot take; the outcome commits alone and the "
        "slot is released by a single write after it",
        "a crash between the outcome and the release leaves a finished job holding a slot: "
        "the sweeper (or the next claim) must drop holders that are no longer running; the "
        "limit itself is never exceeded",
        transform=slot_release_outside_outcome,
    ),
]
EXCLUSIVE = {frozenset({3, 8})}
"""Options that are alternatives to each other: never priced together."""
COMBINATIONS = {
    "options 1-4 together": [0, 1, 2, 3],
    "options 1-4 and 6": [0, 1, 2, 3, 5],
    "options 1-7 together": list(range(7)),
}


def apply(
    chosen: list[Option], events: list[WriteEvent], table: TableSpec
) -> tuple[list[WriteEvent], TableSpec]:
    """The writes and the table as the chosen options (applied in OPTIONS order) make them."""
    for option in sorted(chosen, key=OPTIONS.index):
        table = option.table(table) if option.table else table
        events = option.transform(events) if option.transform else events
    return events, table


SAMPLE_JOBS = 20
"""Jobs whose writes the exhaustive search prices (every job of a scenario writes alike)."""


def sample_jobs(events: list[WriteEvent], jobs: int, wanted: int) -> tuple[list[WriteEvent], int]:
    """The writes of the first `wanted` jobs: every request that wrote one of their job items
    (with the other items of that request: outbox, key, slot, bookmark)."""
    job_keys: list[str] = []
    for event in events:
        pk = str(event.key["pk"].get("S", ""))
        if event.kind == "JOB" and pk not in job_keys:
            job_keys.append(pk)
    if len(job_keys) <= wanted or len(job_keys) != jobs:
        return events, jobs
    chosen = set(job_keys[:wanted])
    requests = {e.request for e in events if e.kind == "JOB" and str(e.key["pk"]["S"]) in chosen}
    return [e for e in events if e.request in requests], wanted


def smallest_sets(
    events: list[WriteEvent], table: TableSpec, jobs: int, phases: list[str], target: float
) -> dict[str, Any]:
    """Every combination of options (but EXCLUSIVE pairs) priced: the smallest sets that meet
    `target` WCU/job (and those one option larger), and, for each option, the cheapest set
    without it — which changes are enough, and which one could be left out."""
    kept, jobs = sample_jobs([e for e in events if e.phase in phases], jobs, SAMPLE_JOBS)
    priced_sets: list[tuple[list[int], float]] = []
    for mask in range(1 << len(OPTIONS)):
        chosen = [option for i, option in enumerate(OPTIONS) if mask >> i & 1]
        numbers = [OPTIONS.index(o) + 1 for o in chosen]
        if any(pair <= set(numbers) for pair in EXCLUSIVE):
            continue
        changed, spec = apply(chosen, kept, table)
        wcu = round(sum(priced(changed, spec).values()) / jobs, 3)
        priced_sets.append((numbers, wcu))
    meeting = sorted(
        (entry for entry in priced_sets if entry[1] <= target),
        key=lambda entry: (len(entry[0]), entry[1]),
    )
    smallest = len(meeting[0][0]) if meeting else 0
    without: dict[str, Any] = {}
    for number in range(1, len(OPTIONS) + 1):
        numbers, wcu = min(
            (entry for entry in priced_sets if number not in entry[0]),
            key=lambda entry: (entry[1], len(entry[0])),
        )
        without[str(number)] = {"options": numbers, "wcu_per_job": wcu}
    return {
        "target_wcu": target,
        "sets": [
            {"options": numbers, "wcu_per_job": wcu}
            for numbers, wcu in meeting
            if len(numbers) <= smallest + 1
        ],
        "cheapest_without_option": without,
    }


def priced(events: list[WriteEvent], table: TableSpec) -> dict[str, float]:
    """Write units by phase."""
    by_phase: dict[str, float] = defaultdict(float)
    for event in events:
        by_phase[event.phase] += price_write(table, event).total
    return dict(by_phase)


def what_if(
    events: list[WriteEvent], table: TableSpec, jobs: int, phases: list[str]
) -> dict[str, Any]:
    """Write units per job today and under each option, alone and in COMBINATIONS, by phase."""
    kept = [e for e in events if e.phase in phases]

    def per_job(option_events: list[WriteEvent], spec: TableSpec) -> dict[str, Any]:
        by_phase = priced(option_events, spec)
        return {
            "wcu_per_job": round(sum(by_phase.values()) / jobs, 3),
            "by_phase": {p: round(by_phase.get(p, 0) / jobs, 3) for p in phases if p in by_phase},
        }

    today = per_job(kept, table)
    results: dict[str, Any] = {"today": today, "options": {}}
    combos = {name: [OPTIONS[i] for i in chosen] for name, chosen in COMBINATIONS.items()}
    for option in OPTIONS:
        spec = option.table(table) if option.table else table
        changed = option.transform(kept) if option.transform else kept
        entry = per_job(changed, spec)
        entry |= {
            "saves_wcu_per_job": round(today["wcu_per_job"] - entry["wcu_per_job"], 3),
            "change": option.change,
            "caveat": option.caveat,
        }
        results["options"][option.name] = entry
    for name, chosen in combos.items():
        changed, spec = apply(chosen, kept, table)
        entry = per_job(changed, spec)
        entry["saves_wcu_per_job"] = round(today["wcu_per_job"] - entry["wcu_per_job"], 3)
        results["options"][name] = entry
    return results
