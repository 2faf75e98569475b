"""Cost benchmark: synthetic jobs through the real handlers on moto (in-process), counting every
AWS request and every DynamoDB capacity unit per job, by phase, priced with AWS's published
us-east-1 on-demand prices. Writes bench/results.json and the table in bench/README.md.

What is measured here is *counts* (requests, capacity units, invocations) — the same counts
AWS bills — on moto. Nothing here is an AWS measurement; Lambda duration is an assumption."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moto import mock_aws

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JOBS_PER_SCENARIO = 20

PRICES = {
    "date": "2026-11-29",
    "region": "us-east-1",
    "source": "AWS public on-demand price lists for us-east-1 (DynamoDB on-demand after the "
    "November 2024 reduction); recorded by hand on the date above, not fetched: this machine "
    "cannot reach AWS",
    "dynamodb_write_request_unit": 0.625 / 1e6,
    "dynamodb_read_request_unit": 0.125 / 1e6,
    "sqs_standard_request": 0.40 / 1e6,
    "lambda_request": 0.20 / 1e6,
    "lambda_arm64_gb_second": 0.0000133334,
    "http_api_request": 1.00 / 1e6,
}
ASSUMED_LAMBDA_MS = {"api": 40, "relay": 30, "worker": 60, "sweeper": 200}
"""Assumed billed duration per invocation at 256 MB (not measured: moto cannot run Lambda)."""

SCENARIOS: dict[str, dict[str, Any]] = {
    "1-step": {"steps": [{"name": "only", "cost": 1}]},
    "1-step, no per-user limit": {"steps": [{"name": "only", "cost": 1}]},
    "3-step": {
        "steps": [{"name": "a", "cost": 1}, {"name": "b", "cost": 1}, {"name": "c", "cost": 1}]
    },
    "retry-once": {"steps": [{"name": "flaky", "cost": 1, "fail_times": 1}]},
}
PHASES = ["accept", "relay", "delivery", "claim", "checkpoint", "outcome", "sweeper"]


class Meter:
    """Counts requests and capacity units through botocore's event hooks. Write units come from
    moto's own item sizes (before and after each write), by DynamoDB's rules: 1 KB per write
    unit, 4 KB per read unit, x2 in a transaction, a failed condition still costs a write, and
    each global secondary index whose keys or projected attributes change costs its own writes."""

    def __init__(self, table_name: str, indexes: dict[str, list[str]]) -> None:
        self.table_name = table_name
        self.indexes = indexes  # index name -> attributes whose change rewrites the index entry
        self.phase = "accept"
        self.requests: dict[str, Counter[str]] = defaultdict(Counter)
        self.wcu: Counter[str] = Counter()
        self.rcu: Counter[str] = Counter()
        self.invocations: dict[str, Counter[str]] = defaultdict(Counter)
        self._before: dict[int, list[tuple[dict[str, Any] | None, int]]] = {}

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build", self._before_call)
        client.meta.events.register("after-call", self._after_call)

    @contextmanager
    def during(self, phase: str):  # type: ignore[no-untyped-def]
        previous, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = previous

    # -- moto's view of an item
    def _table(self) -> Any:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(self.table_name)

    def _item(self, key: dict[str, Any]) -> Any:
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = self._table()
        return table.get_item(DynamoType(key["pk"]), DynamoType(key["sk"]))

    @staticmethod
    def _write_keys(operation: str, params: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
        if operation in {"PutItem"}:
            item = params["Item"]
            return [({"pk": item["pk"], "sk": item["sk"]}, False)]
        if operation in {"UpdateItem", "DeleteItem"}:
            return [(params["Key"], False)]
        if operation == "TransactWriteItems":
            keys = []
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                key = body.get("Key") or {"pk": body["Item"]["pk"], "sk": body["Item"]["sk"]}
                keys.append((key, True))
            return keys
        return []

    def _before_call(self, model: Any, params: dict[str, Any], context: Any, **_: Any) -> None:
        service = model.service_model.service_name
        self.requests[self.phase][f"{service}.{model.name}"] += 1
        if service != "dynamodb":
            return
        snapshot = []
        for key, in_transaction in self._write_keys(model.name, params):
            old = self._item(key)
            snapshot.append(
                (key, in_transaction, old.size() if old else 0, _index_view(old, self.indexes))
            )
        context["leasehold_before"] = snapshot

    def _after_call(self, model: Any, parsed: dict[str, Any], context: Any, **_: Any) -> None:
        if model.service_model.service_name != "dynamodb":
            return
        failed = "Error" in parsed
        for key, in_transaction, old_size, old_index in context.get("leasehold_before", []):
            new = self._item(key)
            new_size = new.size() if new else 0
            units = max(1, math.ceil(max(old_size, new_size) / 1024))
            if in_transaction:
                units *= 2
            self.wcu[self.phase] += units
            if failed:
                continue
            new_index = _index_view(new, self.indexes)
            for index, old_entry in old_index.items():
                new_entry = new_index.get(index)
                if old_entry == new_entry:
                    continue
                keys_changed = (old_entry or {}).get("_key") != (new_entry or {}).get("_key")
                both = old_entry is not None and new_entry is not None
                self.wcu[self.phase] += 2 if (keys_changed and both) else 1
        if failed:
            return
        operation = model.name
        if operation == "GetItem" and "Item" in parsed:
            self.rcu[self.phase] += _read_units(_size_json(parsed["Item"]), consistent=True)
        elif operation == "BatchGetItem":
            for items in parsed.get("Responses", {}).values():
                for item in items:
                    self.rcu[self.phase] += _read_units(_size_json(item), consistent=True)
        elif operation == "Query":
            size = sum(_size_json(item) for item in parsed.get("Items", []))
            self.rcu[self.phase] += _read_units(size, consistent=False)


def _index_view(item: Any, indexes: dict[str, list[str]]) -> dict[str, dict[str, Any] | None]:
    view: dict[str, dict[str, Any] | None] = {}
    attrs = item.attrs if item else {}
    for index, attributes in indexes.items():
        key_attr = attributes[0]
        if key_attr not in attrs:
            view[index] = None
            continue
        entry = {name: str(attrs[name].value) for name in attributes if name in attrs}
        entry["_key"] = entry.get(attributes[0], "") + "|" + entry.get(attributes[1], "")
        view[index] = entry
    return view


def _size_json(item: dict[str, Any]) -> int:
    from moto.dynamodb.models.dynamo_type import Item

    return Item(hash_key=None, range_key=None, attrs=item).size()


def _read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


def run() -> dict[str, Any]:
    from leasehold.local import moto_transactions
    from leasehold.local.resources import (
        clients,
        create_queues,
        create_table,
        relay_mapping,
        template_environment,
        worker_mapping,
    )

    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    results: dict[str, Any] = {
        "scenarios": {},
        "prices": PRICES,
        "assumed_lambda_ms": ASSUMED_LAMBDA_MS,
        "jobs_per_scenario": JOBS_PER_SCENARIO,
        "measured_on": "moto (in-process), counts only",
    }
    moto_transactions.install()
    with mock_aws():
        dynamodb, sqs = clients()
        table = create_table(dynamodb)
        queues = create_queues(sqs)
        os.environ.update(
            template_environment(
                table["TableName"],
                queues,
                BACKOFF_BASE_MS="100",
                BACKOFF_CAP_MS="1000",
                USER_CONCURRENCY_LIMIT="100",
                POWERTOOLS_METRICS_DISABLED="true",
                POWERTOOLS_LOG_LEVEL="WARNING",
            )
        )
        from leasehold.handlers import api, relay, sweeper, wiring, worker
        from leasehold.local.invoke import LocalContext
        from leasehold.local.pumps import QueuePoller, StreamPump

        rt = wiring.runtime()
        meter = Meter(
            table["TableName"],
            {"by_state": ["gsi1pk", "gsi1sk"], "by_owner": ["gsi2pk", "gsi2sk", "state"]},
        )
        meter.attach(rt.store._db)  # noqa: SLF001
        meter.attach(rt.queue._sqs)  # noqa: SLF001
        for method, phase in {
            "claim": "claim",
            "heartbeat": "checkpoint",
            "save_checkpoint": "checkpoint",
            "record_effect_intent": "checkpoint",
            "finish": "outcome",
        }.items():
            original = getattr(rt.store, method)

            def wrapped(
                *args: Any, _original: Any = original, _phase: str = phase, **kwargs: Any
            ) -> Any:
                with meter.during(_phase):
                    return _original(*args, **kwargs)

            setattr(rt.store, method, wrapped)

        def relay_handler(event: dict[str, Any], context: Any) -> Any:
            meter.invocations[meter.phase]["relay"] += 1
            return relay.handler(event, context)

        def worker_handler(event: dict[str, Any], context: Any) -> Any:
            meter.invocations[meter.phase]["worker"] += 1
            return worker.handler(event, context)

        pump = StreamPump("", relay_mapping(table["LatestStreamArn"]), relay_handler, "relay")
        poller = QueuePoller("", worker_mapping(queues["work"]), worker_handler, "worker")
        meter.attach(poller._sqs)  # noqa: SLF001 - Lambda's own SQS polling is billed too
        submit = json.loads((ROOT / "events" / "api-submit-job.json").read_text())
        submit["headers"].pop("idempotency-key", None)
        for name, payload in SCENARIOS.items():
            meter.requests.clear()
            meter.wcu.clear()
            meter.rcu.clear()
            meter.invocations.clear()
            # UserConcurrencyLimit=0: claims and outcomes are single conditional writes
            rt.store._slot_limit = 0 if "no per-user limit" in name else 100  # noqa: SLF001
            ids = []
            with meter.during("accept"):
                for _ in range(JOBS_PER_SCENARIO):
                    event = dict(submit, body=json.dumps({"kind": "synthetic", "payload": payload}))
                    meter.invocations["accept"]["api"] += 1
                    ids.append(
                        json.loads(api.handler(event, LocalContext("api"))["body"])["job_id"]
                    )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with meter.during("relay"):
                    pump.poll_once()
                with meter.during("delivery"):
                    received, _ = poller.poll_once(wait_seconds=0)
                with meter.during("observer"):  # the benchmark's own reads are not counted
                    done = [rt.store.get(j) for j in ids]
                if all(job and job.state.value == "succeeded" for job in done):
                    break
                if not received:
                    time.sleep(0.2)
            with meter.during("observer"):
                states = Counter(job.state.value for job in (rt.store.get(j) for j in ids) if job)
            with meter.during("sweeper"):
                meter.invocations["sweeper"]["sweeper"] += 1
                sweeper.handler(
                    json.loads((ROOT / "events" / "sweeper-schedule.json").read_text()),
                    LocalContext("sweeper"),
                )
            results["scenarios"][name] = summarise(meter, states)
    return results


def summarise(meter: Meter, states: Counter[str]) -> dict[str, Any]:
    n = JOBS_PER_SCENARIO
    phases: dict[str, Any] = {}
    for phase in PHASES:
        requests = meter.requests.get(phase, Counter())
        phases[phase] = {
            "requests_per_job": {op: round(count / n, 3) for op, count in sorted(requests.items())},
            "wcu_per_job": round(meter.wcu[phase] / n, 3),
            "rcu_per_job": round(meter.rcu[phase] / n, 3),
        }
    per_job = {phase: phases[phase] for phase in PHASES if phase != "sweeper"}
    wcu = sum(p["wcu_per_job"] for p in per_job.values())
    rcu = sum(p["rcu_per_job"] for p in per_job.values())
    sqs = sum(
        c
        for p in per_job.values()
        for op, c in p["requests_per_job"].items()
        if op.startswith("sqs.")
    )
    invocations: Counter[str] = Counter()
    for phase, counts in meter.invocations.items():
        if phase != "sweeper":
            invocations.update(counts)
    per_job_invocations = {fn: round(c / n, 3) for fn, c in invocations.items()}
    lambda_requests = sum(per_job_invocations.values())
    gb_seconds = sum(
        per_job_invocations[fn] * ASSUMED_LAMBDA_MS[fn] / 1000 * 0.25 for fn in per_job_invocations
    )
    cost = {
        "dynamodb": wcu * PRICES["dynamodb_write_request_unit"]
        + rcu * PRICES["dynamodb_read_request_unit"],
        "sqs": sqs * PRICES["sqs_standard_request"],
        "http_api": PRICES["http_api_request"],
        "lambda_requests": lambda_requests * PRICES["lambda_request"],
        "lambda_duration_assumed": gb_seconds * PRICES["lambda_arm64_gb_second"],
    }
    sweeper = phases.pop("sweeper")
    return {
        "final_states": dict(states),
        "phases": phases,
        "per_job": {
            "wcu": round(wcu, 3),
            "rcu": round(rcu, 3),
            "sqs_requests": round(sqs, 3),
            "lambda_invocations": per_job_invocations,
        },
        "sweeper_run": sweeper,
        "usd_per_million_jobs": {k: round(v * 1e6, 2) for k, v in cost.items()}
        | {"total": round(sum(cost.values()) * 1e6, 2)},
    }


def write_readme(results: dict[str, Any]) -> None:
    lines = [
        "# Cost benchmark",
        "",
        "`make bench` runs synthetic jobs through the real handlers on **moto** (in-process), counts every",
        "AWS request and DynamoDB capacity unit per job by phase, and prices them. These are counts",
        "measured on moto, not AWS measurements; Lambda duration is an assumption",
        f"({', '.join(f'{k} {v} ms' for k, v in ASSUMED_LAMBDA_MS.items())} at 256 MB).",
        f"Prices: {PRICES['region']}, recorded {PRICES['date']} — {PRICES['source']}.",
        "",
        "| scenario | WCU/job | RCU/job | SQS req/job | Lambda inv/job | DynamoDB $/M jobs | SQS $/M | API $/M | Lambda $/M (req + assumed duration) | total $/M jobs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in results["scenarios"].items():
        usd = s["usd_per_million_jobs"]
        lines.append(
            f"| {name} | {s['per_job']['wcu']} | {s['per_job']['rcu']} | {s['per_job']['sqs_requests']} | "
            f"{round(sum(s['per_job']['lambda_invocations'].values()), 2)} | {usd['dynamodb']} | {usd['sqs']} | "
            f"{usd['http_api']} | {round(usd['lambda_requests'] + usd['lambda_duration_assumed'], 2)} | **{usd['total']}** |"
        )
    lines += [
        "",
        "Write units per job by phase:",
        "",
        "| scenario | " + " | ".join(PHASES[:-1]) + " |",
        "|---" * len(PHASES) + "|",
    ]
    for name, s in results["scenarios"].items():
        lines.append(
            f"| {name} | "
            + " | ".join(str(s["phases"][p]["wcu_per_job"]) for p in PHASES[:-1])
            + " |"
        )
    lines += [
        "",
        "A sweeper run (once a minute whatever the load) costs "
        f"{results['scenarios']['1-step']['sweeper_run']['rcu_per_job'] * JOBS_PER_SCENARIO} RCU on an idle table.",
        "",
        "For scale (list-price arithmetic, not measured): Step Functions Standard bills $0.025 per",
        "1,000 state transitions in us-east-1, so a 3-step workflow (at least 4 transitions) is about",
        "$100 per million executions before the Lambda it calls.",
        "",
        "Where the write units go: every state change rewrites two index entries (`by_state` key,",
        "`by_owner` projected state), and with a per-user limit the claim and the outcome are",
        "two-item transactions (x2). The phase table above is the place to look before optimising.",
        "",
        "Full figures, per phase and per operation: `bench/results.json`.",
    ]
    (HERE / "README.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    sys.path.insert(0, str(ROOT))
    results = run()
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_readme(results)
    print((HERE / "README.md").read_text())
    bad = {
        n: s["final_states"]
        for n, s in results["scenarios"].items()
        if s["final_states"] != {"succeeded": JOBS_PER_SCENARIO}
    }
    if bad:
        print(f"bench: not every job succeeded: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
