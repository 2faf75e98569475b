"""The scenarios: jobs submitted through the Api function and run to the end by the Relay and
Worker functions, metered from the first request to the last. Each scenario uses its own user,
so per-user slot items never carry over; setup work (background jobs, a prepared table) runs in
the `setup` phase and is never counted."""

from __future__ import annotations

import contextlib
import copy
import io
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.meter import ReadEvent, WriteEvent, item_size, value_size
from bench.stack import Stack

PAYLOAD_BYTES = {"~200 B": 200, "1 KiB": 1024, "8 KiB": 8192}
SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: int
    steps: int = 1
    traffic: str = "burst"
    payload: str = "~200 B"
    key: bool = True
    limit: int | None = None
    """Per-user concurrency limit; None = the template's default, 0 = off."""
    shape: str = "plain"
    """plain, retry-once, approval, title, busy-user, delayed, direct (`submit_direct`: no
    API Gateway request, no API function invocation) or batch (`POST /jobs/batch`, 100 jobs a
    request)."""
    delay_seconds: int | None = None
    """`delay_seconds` on every job (shape `delayed`)."""
    kind: str = "synthetic"
    """`keyed` / `rated`: synthetic with one concurrency key / one rate (bench/kinds.py)."""


@dataclass
class Measured:
    scenario: Scenario
    jobs: int
    writes: list[WriteEvent]
    reads: list[ReadEvent]
    requests: dict[str, Counter[str]]
    invocations: dict[str, Any]
    final_states: dict[str, int]
    payload_bytes: int
    job_item_bytes: int
    limit: int
    extra: dict[str, Any] = field(default_factory=dict)


def step_list(steps: int, total_bytes: int, **fields: Any) -> list[dict[str, Any]]:
    """`steps` synthetic steps whose JSON comes near `total_bytes`: names padded (≤ 64
    characters); a single step also spells out its optional fields."""
    import json

    extra: dict[str, Any] = {"cost": 0, "duration_ms": 0}
    if steps == 1:
        extra |= {"fail_times": 0, "approval": False, "fatal": False, "effect": False}
    spec = [{"name": f"s{i}", **extra, **fields} for i in range(steps)]
    base = len(json.dumps({"steps": spec}, separators=(",", ":")))
    room = max(0, total_bytes - base) // steps
    for step in spec:
        step["name"] = (step["name"] + "-" + "x" * 64)[: min(64, len(step["name"]) + room)]
    return spec


def job_body(scenario: Scenario) -> dict[str, Any]:
    import json

    fields: dict[str, Any] = {}
    if scenario.shape == "retry-once":
        fields["fail_times"] = 1
    if scenario.shape == "approval":
        fields["approval"] = True
    target = PAYLOAD_BYTES[scenario.payload]
    steps = step_list(scenario.steps, min(target, 200), **fields)
    if target <= 200:
        body: dict[str, Any] = {"kind": scenario.kind, "payload": {"steps": steps}}
        if scenario.delay_seconds is not None:
            body["delay_seconds"] = scenario.delay_seconds
        return body
    payload: dict[str, Any] = {"steps": steps, "pad": ""}
    pad = target - len(json.dumps(payload, separators=(",", ":")))
    payload["pad"] = "x" * max(0, pad)
    return {"kind": "padded", "payload": payload}


TENANT = "tenant-0001"
"""An 11-character tenant, as `study-group` is."""


def user_of(scenario: Scenario, salt: str = "") -> str:
    """A 36-character user id, as a Cognito `sub` is (the JWT claim the API reads): the same
    length in every scenario, so item sizes differ only by what the scenario changes."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"leasehold-bench/{scenario.name}/{salt}"))


def idempotency_key(user: str, phase: str, index: int) -> str:
    """A 36-character key, as a client's UUID would be."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{user}/{phase}/{index}"))


class Runner:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.last_sweep: tuple[list[WriteEvent], list[ReadEvent]] = ([], [])
        """The loaded sweep's writes and reads (`sweeper`), for the key-heat model."""

    # ------------------------------------------------------------------ helpers

    def _start(self, scenario: Scenario, **env: str) -> tuple[Any, int]:
        limit = scenario.limit
        overrides = dict(env)
        if limit is not None:
            overrides["USER_CONCURRENCY_LIMIT"] = str(limit)
        self.stack.fresh_table()
        rt = self.stack.configure(**overrides)
        self._reset()
        return rt, rt.settings.user_concurrency_limit

    def _reset(self) -> None:
        self.stack.meter.reset()
        self.stack.invocations.clear()

    def submit(
        self, scenario: Scenario, index: int, *, phase: str = "accept", user: str | None = None
    ) -> str:
        user = user or user_of(scenario)
        key = idempotency_key(user, phase, index) if scenario.key else None
        if scenario.shape == "direct" and phase == "accept":
            return self._submit_direct(scenario, user, key)
        if phase == "setup":
            # Not measured: the API function's service, without the HTTP routing around it; its
            # metrics are dropped, not left for the next measured invocation to print.
            from leasehold.domain.job import Owner
            from leasehold.domain.options import Submission
            from leasehold.handlers import api
            from leasehold.handlers.wiring import metrics

            with self.stack.meter.during("setup"), contextlib.redirect_stdout(io.StringIO()):
                job_id = (
                    api.jobs()
                    .accept(Owner(TENANT, user), Submission.from_body(job_body(scenario), key))
                    .job_id
                )
                metrics.clear_metrics()
            return job_id
        status, body = self.stack.api(
            "api-submit-job.json", body=job_body(scenario), user=user, tenant=TENANT, key=key,
            phase=phase,
        )  # fmt: skip
        if status != 202:
            raise RuntimeError(f"{scenario.name}: POST /jobs answered {status}: {body}")
        return str(body["job_id"])

    def _submit_direct(self, scenario: Scenario, user: str, key: str | None) -> str:
        """The job committed by the user's own code inside AWS (`leasehold.apps.submit_direct`) over
        the functions' metered DynamoDB client: the same transaction as POST /jobs, metered in
        the `accept` phase, with no API request and no API invocation — the code that calls it
        already runs (its own Lambda invocation is the caller's, not the job's)."""
        from leasehold import Owner
        from leasehold.apps import submit_direct
        from leasehold.handlers import wiring

        body = job_body(scenario)
        with self.stack.meter.during("accept"):
            made = submit_direct(
                wiring.runtime().stores.table, body["kind"], body["payload"],
                Owner(TENANT, user), idempotency_key=key,
            )  # fmt: skip
        if made.state != "queued" or not made.created:
            raise RuntimeError(f"{scenario.name}: submit_direct answered {made}")
        return made.job_id

    def _submit_batches(self, scenario: Scenario) -> list[str]:
        """The jobs in `POST /jobs/batch` requests of up to 100 (each item with its own
        `idempotency_key` when the scenario has keys): one API Gateway request and one API
        invocation for up to 100 jobs, committed in as few transactions as DynamoDB allows."""
        from leasehold.domain.batch import MAX_BATCH_JOBS

        user = user_of(scenario)
        ids: list[str] = []
        for start in range(0, scenario.jobs, MAX_BATCH_JOBS):
            items = []
            for index in range(start, min(start + MAX_BATCH_JOBS, scenario.jobs)):
                item = job_body(scenario)
                if scenario.key:
                    item["idempotency_key"] = idempotency_key(user, "accept", index)
                items.append(item)
            status, body = self.stack.api(
                "api-submit-batch.json", body={"jobs": items}, user=user, tenant=TENANT
            )
            results = body.get("results") or []
            if status != 200 or not all("job_id" in r for r in results):
                raise RuntimeError(f"{scenario.name}: POST /jobs/batch answered {status}: {body}")
            ids += [str(r["job_id"]) for r in results]
        return ids

    def _measured(self, scenario: Scenario, ids: list[str], limit: int, **extra: Any) -> Measured:
        meter, stack = self.stack.meter, self.stack
        states = Counter((stack.job(j) or {}).get("state", "missing") for j in ids)
        first = stack.job(ids[0]) or {}
        from leasehold.store.items import job_key

        raw = stack.peek(stack.table["TableName"], job_key(ids[0])) or {}
        breakdown = sorted(
            ((name, len(name.encode()) + value_size(value)) for name, value in raw.items()),
            key=lambda pair: -pair[1],
        )
        extra = {"job_item_attribute_bytes": dict(breakdown), **extra}
        return Measured(
            scenario=scenario,
            jobs=len(ids),
            writes=list(meter.writes),
            reads=list(meter.reads),
            requests=copy.deepcopy(dict(meter.requests)),
            invocations={
                "count": dict(stack.invocations.count),
                "log_bytes": dict(stack.invocations.log_bytes),
                "metric_bytes": dict(stack.invocations.metric_bytes),
                "by_phase": {p: dict(c) for p, c in stack.invocations.by_phase.items()},
                "wakeups": stack.invocations.wakeups,
                "api_requests": stack.invocations.api_requests,
            },
            final_states=dict(states),
            payload_bytes=len(str(first.get("payload", "")).encode()),
            job_item_bytes=stack.item_bytes(job_key(ids[0])),
            limit=limit,
            extra=extra,
        )

    def _done(self, state: str = SUCCEEDED) -> Any:
        return lambda job: job.get("state") == state

    # ------------------------------------------------------------------ scenarios

    def run(self, scenario: Scenario) -> Measured:
        if scenario.shape == "title":
            return self.title(scenario)
        if scenario.shape == "busy-user":
            return self.busy_user(scenario)
        if scenario.shape == "delayed":
            return self.delayed(scenario)
        _, limit = self._start(scenario)
        ids: list[str] = []
        if scenario.traffic == "trickle":
            for index in range(scenario.jobs):
                ids.append(self.submit(scenario, index))
                wanted = "waiting_approval" if scenario.shape == "approval" else SUCCEEDED
                self.stack.drain(ids[-1:], self._done(wanted))
        elif scenario.shape == "batch":
            ids = self._submit_batches(scenario)
        else:
            ids = [self.submit(scenario, index) for index in range(scenario.jobs)]
        if scenario.shape == "approval":
            self.stack.drain(ids, self._done("waiting_approval"))
            for job_id in ids:
                version = (self.stack.job(job_id) or {}).get("version")
                status, body = self.stack.api(
                    "api-decide-approval.json", body={"decision": "approve", "version": version},
                    user=user_of(scenario), tenant=TENANT, path_id=job_id, phase="approve",
                )  # fmt: skip
                if status != 200:
                    raise RuntimeError(f"approval answered {status}: {body}")
        self.stack.drain(ids, self._done())
        extra: dict[str, Any] = {}
        if scenario.shape == "retry-once":
            extra["attempts"] = dict(
                Counter((self.stack.job(j) or {}).get("attempts") for j in ids)
            )
        return self._measured(scenario, ids, limit, **extra)

    def title(self, scenario: Scenario) -> Measured:
        """POST /bookmarks → the title job → the title lands on the bookmark."""
        _, limit = self._start(scenario)
        ids, bookmarks = [], []
        for index in range(scenario.jobs):
            key = idempotency_key(user_of(scenario), "bookmark", index) if scenario.key else None
            status, body = self.stack.api(
                "api-create-bookmark.json",
                body={"url": f"https://example.org/articles/durable-jobs-{index}"},
                user=user_of(scenario), tenant=TENANT, key=key,
            )  # fmt: skip
            if status not in {201, 202}:
                raise RuntimeError(f"POST /bookmarks answered {status}: {body}")
            ids.append(body["title_job"]["job_id"])
            bookmarks.append(body["id"])
        self.stack.drain(ids, self._done())
        from leasehold_apps.reading_list.codec import bookmark_key

        landed = sum(
            1
            for b in bookmarks
            if (self.stack.peek(self.stack.table["TableName"], bookmark_key(TENANT, b)) or {}).get(
                "title"
            )
        )
        return self._measured(scenario, ids, limit, titles_landed=landed)

    def delayed(self, scenario: Scenario) -> Measured:
        """Jobs delayed past SQS's 15 minutes: accepted into the due index, then the clock of
        the functions (not moto's) jumps past their due time; one sweep (`due`: the move out of
        the due index with a wake-up, priced as the job's) and the usual relay and delivery."""
        from unittest import mock

        assert scenario.delay_seconds is not None
        _, limit = self._start(scenario)
        ids = [self.submit(scenario, index) for index in range(scenario.jobs)]
        accepted = [self.stack.job(j) or {} for j in ids]
        in_due_index = sum(1 for job in accepted if job.get("gsi1pk") == "STATE#due")
        ahead = scenario.delay_seconds + 1

        class Later:
            @staticmethod
            def time() -> float:
                return time.time() + ahead

        with mock.patch("leasehold.domain.clock.time", Later):
            report = self.stack.sweep(phase="due")
            self.stack.drain(ids, self._done())
        return self._measured(
            scenario, ids, limit, accepted_into_due_index=in_due_index, due_sweep=report
        )

    def busy_user(self, scenario: Scenario) -> Measured:
        """A user with 49 jobs running (claimed by other workers, mid-step) while the measured
        jobs claim and finish: every claim and outcome rewrites a slot item holding 50 ids.
        Then the cost of a wake-up that finds every slot taken (a slot wait)."""
        rt, limit = self._start(scenario, SLOT_WAIT_SECONDS="1")
        holders = self._background(scenario, rt, limit - 1)
        self._reset()
        ids = [self.submit(scenario, index) for index in range(scenario.jobs)]
        self.stack.drain(ids, self._done())
        slot_sizes = [item_size(e.new) for e in self.stack.meter.writes if e.kind == "SLOTS"]
        measured = self._measured(
            scenario, ids, limit, slot_item_bytes_max=max(slot_sizes, default=0),
            background_running=len(holders),
        )  # fmt: skip
        measured.extra["slot_wait"] = self._slot_waits(scenario, rt, holders, waits=20)
        return measured

    def _background(self, scenario: Scenario, rt: Any, count: int, *, first: int = 0) -> list[Any]:
        """`count` jobs of the scenario's user, claimed by 'other workers' (setup, unmetered):
        their wake-ups are relayed and dropped, so no worker here ever sees them."""
        from leasehold.domain.job import Owner
        from leasehold.service.claiming import Claimer

        ids = [self.submit(scenario, first + i, phase="setup") for i in range(count)]
        self.stack.relay_once(phase="setup")
        self.stack.purge_queue()
        owner = Owner(TENANT, user_of(scenario))
        now = int(time.time() * 1000)
        with self.stack.meter.during("setup"):
            return [
                Claimer(
                    rt.stores.leases, rt.stores.claims, worker_id="other-worker", lease_ms=600_000
                ).claim(j, owner, now)
                for j in ids
            ]

    def _slot_waits(
        self, scenario: Scenario, rt: Any, holders: list[Any], *, waits: int
    ) -> dict[str, Any]:
        """Every slot taken (one more background job), then `waits` wake-ups of the same user:
        each claim is refused (SlotsFull), the job notes the dispatch and the wake-up goes
        back to the queue for later. Returns the cost of one such wait."""
        from bench.meter import totals_by_phase

        holders = holders + self._background(scenario, rt, 1, first=500)
        waiting = [self.submit(scenario, 1000 + i, phase="setup") for i in range(waits)]
        self.stack.relay_once(phase="setup")
        self._reset()
        deadline = time.monotonic() + 30
        while self.stack.invocations.wakeups < waits and time.monotonic() < deadline:
            if not self.stack.deliver_once():
                time.sleep(0.1)
        handled = self.stack.invocations.wakeups
        phases = totals_by_phase(self.stack.meter)
        requests: Counter[str] = Counter()
        for totals in phases.values():
            requests.update(totals.requests)
        wait = {
            "wakeups": handled,
            "slot_holders": len(holders),
            "wcu_per_wait": round(sum(p.wcu for p in phases.values()) / handled, 3),
            "rcu_per_wait": round(sum(p.rcu for p in phases.values()) / handled, 3),
            "requests_per_wait": {op: round(n / handled, 3) for op, n in sorted(requests.items())},
            "wcu_by_part_per_wait": {
                part: round(units / handled, 3)
                for part, units in sorted(
                    sum((p.wcu_by_part for p in phases.values()), Counter()).items()
                )
            },
        }
        # release every slot and let the waiting jobs finish (not counted)
        self._release(rt, holders)
        self.stack.drain(waiting, self._done(), timeout_s=60)
        self._reset()
        return wait

    def _release(self, rt: Any, holders: list[Any]) -> None:
        from leasehold.domain.states import JobState

        now = int(time.time() * 1000)
        with self.stack.meter.during("setup"):
            for job in holders:
                rt.stores.leases.finish(
                    job, JobState.SUCCEEDED, now=now, checkpoint=job.checkpoint,
                    result={"background": True}, history={"ev": "succeeded", "t": now},
                )  # fmt: skip

    def sweeper(self, *, running: int, expired: int, queued: int) -> dict[str, Any]:
        """One sweep with `running` live leases, `expired` lapsed ones and `queued` jobs waiting
        (all just dispatched, so none counts as a lost wake-up); and one on an idle table. The
        jobs belong to many users, so the per-user limit (the template's) never refuses one."""
        from leasehold.domain.job import Owner
        from leasehold.service.claiming import Claimer

        scenario = Scenario(name="sweeper", jobs=0)
        rt, _ = self._start(scenario)
        self.stack.sweep(phase="idle-sweep")
        idle = self._sweep_cost("idle-sweep")
        self._reset()
        slots = max(1, rt.settings.user_concurrency_limit or 1)

        def user(index: int) -> str:
            return user_of(scenario, salt=str(index // slots))

        lapsed = list(range(expired))
        live = list(range(expired, expired + running))
        ids = {i: self.submit(scenario, i, phase="setup", user=user(i)) for i in lapsed + live}
        self.stack.relay_once(phase="setup")
        self.stack.purge_queue()
        now = int(time.time() * 1000)
        with self.stack.meter.during("setup"):
            for i in lapsed + live:
                Claimer(rt.stores.leases, rt.stores.claims,
                        worker_id="gone" if i in lapsed else "busy",
                        lease_ms=1 if i in lapsed else 600_000,
                ).claim(ids[i], Owner(TENANT, user(i)), now)  # fmt: skip
        start = expired + running
        for i in range(start, start + queued):
            self.submit(scenario, i, phase="setup", user=user(i))
        self.stack.relay_once(phase="setup")
        self.stack.purge_queue()
        time.sleep(0.05)  # the lapsed leases are now in the past
        self._reset()
        report = self.stack.sweep()
        loaded = self._sweep_cost("sweeper")
        budget = rt.sweep_settings().budget(rt.settings.sweep_active_rate)
        examined = min(budget, running + expired + queued)  # one walk of the active shards
        self.last_sweep = (list(self.stack.meter.writes), list(self.stack.meter.reads))
        self._reset()
        return {
            "in_flight": running + expired + queued,
            "running_live": running,
            "running_lapsed": expired,
            "queued": queued,
            "sweep_budget": budget,
            "examined": examined,
            "report": report,
            "idle_sweep": idle,
            "loaded_sweep": loaded,
            "rcu_per_examined_job": round(loaded["rcu"] / max(1, examined), 4),
            "wcu_per_rescue": round(loaded["wcu"] / max(1, report.get("rescued", 0)), 3),
        }

    def _sweep_cost(self, phase: str) -> dict[str, Any]:
        from bench.meter import totals_by_phase

        totals = totals_by_phase(self.stack.meter).get(phase)
        if totals is None:
            return {"wcu": 0, "rcu": 0, "requests": {}, "log_bytes": 0}
        return {
            "wcu": totals.wcu,
            "rcu": totals.rcu,
            "requests": dict(sorted(totals.requests.items())),
            "wcu_by_part": dict(sorted(totals.wcu_by_part.items())),
            "log_bytes": self.stack.invocations.log_bytes.get("sweeper", 0),
        }


SCENARIOS = [
    Scenario("1-step burst, ~200 B, key", 100),
    Scenario("1-step trickle, ~200 B, key", 20, traffic="trickle"),
    Scenario("1-step burst, 1 KiB, key", 40, payload="1 KiB"),
    Scenario("1-step burst, 8 KiB, key", 40, payload="8 KiB"),
    Scenario("1-step burst, ~200 B, key, no per-user limit", 100, limit=0),
    Scenario("1-step burst, ~200 B, no key", 40, key=False),
    Scenario("3-step burst, ~200 B, key", 60, steps=3),
    Scenario("1-step burst, ~200 B, key, retry-once", 40, shape="retry-once"),
    Scenario("1-step burst, ~200 B, key, approval", 20, shape="approval"),
    Scenario("title job (POST /bookmarks), key", 20, shape="title"),
    Scenario(
        "1-step burst, ~200 B, key, a user with 50 jobs running", 30, limit=50, shape="busy-user"
    ),  # fmt: skip
    Scenario("1-step burst, ~200 B, key, enqueued directly (submit_direct)", 100, shape="direct"),
    Scenario(
        "1-step burst, ~200 B, key, delayed 1 h", 40, shape="delayed", delay_seconds=3600
    ),  # fmt: skip
    Scenario("1-step burst, ~200 B, key, one concurrency key", 100, kind="keyed"),
    Scenario("1-step burst, ~200 B, key, one rate limit", 100, kind="rated"),
    Scenario("1-step burst, ~200 B, key, batched (POST /jobs/batch of 100)", 100, shape="batch"),
]
HEADLINE = SCENARIOS[0].name
NO_LIMIT = SCENARIOS[4].name
THREE_STEP = SCENARIOS[6].name
DIRECT = SCENARIOS[11].name
"""The headline job enqueued directly: compared with HEADLINE (the same job over HTTP)."""
BATCHED = "1-step burst, ~200 B, key, batched (POST /jobs/batch of 100)"
"""The headline job submitted 100 a request: compared with HEADLINE (one a request)."""
KEYED = "1-step burst, ~200 B, key, one concurrency key"
