"""bench/README.md, bench/cost.svg and the printed table, from bench/results.json's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.scenarios import HEADLINE

SOURCES = {
    "item sizes": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html",
    "read/write units, failed conditional writes": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html",
    "conditional writes (existing vs new item)": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html#WorkingWithItems.ConditionalWrites.ReturnConsumedCapacity",
    "transactions (two underlying writes per item, prepare + commit; index propagation after commit)": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling",
    "global secondary index writes": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes",
    "a ConditionCheck in a transaction is billed as a write (measured on DynamoDB, third party)": "https://martinhicks.dev/articles/what-a-conditional-dynamodb-transaction-costs",
    "Step Functions pricing": "https://aws.amazon.com/step-functions/pricing/",
    "Lambda pricing (requests, duration; durable functions: see below)": "https://aws.amazon.com/lambda/pricing/",
}

USD = "$"


def _usd(value: float) -> str:
    return f"{value:,.2f}"


def scenario_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, s in results["scenarios"].items():
        job, usd = s["per_job"], s["usd_per_million_jobs"]
        rows.append(
            [
                name,
                str(s["jobs"]),
                f"{job['wcu']:g}",
                f"{job['rcu']:g}",
                f"{job['dynamodb_requests']:g}",
                f"{job['sqs_requests']:g}",
                f"{sum(job['lambda_invocations'].values()):.2f}",
                f"{job['log_bytes']:,.0f}",
                _usd(usd["dynamodb"]),
                _usd(usd["sqs"]),
                _usd(usd["lambda"]),
                _usd(usd["api_gateway"]),
                _usd(usd["logs"]),
                f"**{_usd(usd['total'])}**",
            ]
        )
    return rows


HEADER = [
    "scenario", "jobs", "WCU/job", "RCU/job", "DynamoDB req/job", "SQS req/job",
    "Lambda inv/job", "log B/job", "DynamoDB", "SQS", "Lambda", "API GW", "Logs",
    "total $/M jobs",
]  # fmt: skip


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def target_lines(results: dict[str, Any]) -> list[str]:
    rows = [
        [
            t["target"],
            f"{t['value']:g}",
            f"{t['op']} {t['limit']}",
            "PASS" if t["met"] else "**MISS**",
        ]
        for t in results["targets"]
    ]
    return markdown_table(
        ["target (issue 12 item 3; issue 21 item 6)", "measured", "target", ""], rows
    )


def phase_lines(results: dict[str, Any], name: str) -> list[str]:
    rows = []
    for phase, p in results["scenarios"][name]["phases"].items():
        parts = ", ".join(f"{k} {v:g}" for k, v in p["wcu_by_part"].items())
        requests = ", ".join(f"{k} {v:g}" for k, v in p["requests"].items())
        rows.append([phase, f"{p['wcu']:g}", parts or "–", f"{p['rcu']:g}", requests or "–"])
    return markdown_table(
        ["phase", "WCU/job", "where the write units go", "RCU/job", "requests/job"], rows
    )


def comparison_lines(results: dict[str, Any]) -> list[str]:
    c = results["comparison"]
    std, exp = c["standard"], c["express"]
    rows = [
        [
            "leasehold (" + c["scenario"] + ")",
            "measured on moto, priced",
            _usd(c["leasehold_usd_per_million"]),
            "1",
        ],
        [
            "Step Functions Standard",
            f"{std['model']['state_transitions']} state transitions + "
            f"{std['model']['lambda_invocations']} Lambda invocations",
            _usd(c["step_functions_standard_usd_per_million"]),
            f"{c['standard_over_leasehold']:g}",
        ],
        [
            "Step Functions Express",
            f"1 request + {exp['model']['billed_duration_ms']} ms at {exp['model']['memory_mb']} MB + "
            f"{exp['model']['lambda_invocations']} Lambda invocations",
            _usd(c["step_functions_express_usd_per_million"]),
            f"{c['express_over_leasehold']:g}",
        ],
    ]
    durable, with_start = c["durable"], c["durable_counting_the_start"]
    rows.append(
        [
            "Lambda durable functions",
            f"{durable['model']['durable_operations']} durable operations + 1 Lambda invocation of "
            f"{durable['model']['billed_duration_ms']} ms + {durable['model']['data_written_bytes']} B "
            f"written, kept {durable['model']['retention_days']} days",
            _usd(c["durable_functions_usd_per_million"]),
            f"{c['durable_over_leasehold']:g}",
        ]
    )
    lines = markdown_table(["the same 3-step job", "model", "all-in $/M jobs", "× leasehold"], rows)
    lines += ["", *durable_lines(durable, with_start)]
    ends = c["standard_counting_start_and_end"]["usd_per_million"]["total"]
    target = c["leasehold_at_wcu_target"]
    lines += [
        "",
        f"Counting a start and an end transition as well (5 per execution), Standard comes to "
        f"{USD}{_usd(ends)} per million. {c['note']}. The ratio target is checked against the "
        "3-transition model (the cheaper Step Functions). At its write-unit target "
        f"({target['wcu']} WCU, everything else as measured) the 3-step job would cost "
        f"{USD}{_usd(target['usd_per_million'])} per million: {target['standard_over_leasehold']:g}× "
        f"cheaper than Standard with 3 transitions, {target['standard_with_start_and_end_over_leasehold']:g}× "
        "with 5 — so the 8× target also needs fewer log bytes (or the 5-transition count).",
    ]
    return lines


def durable_lines(durable: dict[str, Any], with_start: dict[str, Any]) -> list[str]:
    """How the durable-functions row is made, each price with its source — or that it was not
    found."""
    usd, model, sources = durable["usd_per_million"], durable["model"], durable["sources"]
    return [
        "**Lambda durable functions** (one function whose handler runs the 3 steps with "
        "`context.step`; the same Lambda model as the Step Functions rows; no wait, so one "
        "invocation, no replay; started from the same HTTP API, whose Lambda integration invokes "
        f"synchronously). Per million jobs: durable operations {USD}{_usd(usd['durable_operations'])}, "
        f"Lambda {USD}{_usd(usd['lambda'])}, API Gateway {USD}{_usd(usd['api_gateway'])}, logs "
        f"{USD}{_usd(usd['logs'])}, data written {USD}{_usd(usd.get('durable_data_written', 0))}, "
        f"data retained {USD}{_usd(usd.get('durable_data_retained', 0))}. The total is "
        f"**{durable['total_is']}**: a job writes {model['data_written_bytes']} B of checkpoints "
        f"({model['data_written_gb'] * 1e6:.4f} GB per million jobs, at {USD}0.25 a GB) and keeps "
        f"them {model['retention_days']} days ({model['data_retained_gb_month'] * 1e6:.4f} "
        f"GB-months per million jobs, at {USD}0.15 a GB-month). Counting the execution's start "
        "as a fourth operation: "
        f"{USD}{_usd(with_start['usd_per_million']['total'])}. Sources:",
        "",
        *[f"- `{name}`: {text}" for name, text in sources.items()],
    ]


def fanout_section(results: dict[str, Any]) -> list[str]:
    fan = results.get("fanout")
    if not fan:
        return []
    from bench.fanout import report_lines

    n = fan["measured"]["children"]
    return [
        f"## A {n}-child fan-out and its join, per child (issue 31)",
        "",
        *report_lines(fan["comparison"], fan["measured"]),
        "",
    ]


def enqueue_lines(results: dict[str, Any]) -> list[str]:
    paths = results["enqueue_paths"]
    scenarios = results["scenarios"]
    rows = []
    ways = [
        ("over HTTP (POST /jobs)", paths["http"]),
        ("directly (submit_direct)", paths["direct"]),
    ]
    if "batch" in paths:
        ways.append(("over HTTP, 100 a request (POST /jobs/batch)", paths["batch"]))
    for label, name in ways:
        s = scenarios[name]
        accept = s["phases"].get("accept", {})
        usd = s["usd_per_million_jobs"]
        rows.append(
            [
                label,
                f"{s['per_job']['api_requests']:g}",
                f"{s['per_job']['lambda_invocations'].get('api', 0):g}",
                f"{sum(accept.get('requests', {}).values()):g}",
                f"{accept.get('wcu', 0):g}",
                f"{s['per_job']['wcu']:g}",
                _usd(usd["api_gateway"]),
                _usd(usd["lambda"]),
                _usd(usd["logs"]),
                f"**{_usd(usd['total'])}**",
            ]
        )
    saved = paths["saved_usd_per_million"]
    return [
        *markdown_table(
            [
                "the 1-step job, enqueued",
                "API GW req/job",
                "API inv/job",
                "accept DynamoDB req/job",
                "accept WCU/job",
                "WCU/job",
                "API GW",
                "Lambda",
                "Logs",
                "total $/M jobs",
            ],
            rows,
        ),  # fmt: skip
        "",
        f"Enqueued directly the job saves {USD}{_usd(saved['total'])} per million: API Gateway "
        f"{USD}{_usd(saved['api_gateway'])}, Lambda {USD}{_usd(saved['lambda'])}, logs "
        f"{USD}{_usd(saved['logs'])}; the transaction, the relay, the queue and the worker are "
        "the same: the user's code calls `submit_direct` from inside AWS, and its own invocation "
        "runs whether or not it enqueues a job, so it is counted to neither row.",
        *_batch_lines(paths),
    ]


def _batch_lines(paths: dict[str, Any]) -> list[str]:
    if "batch" not in paths:
        return []
    saved = paths["batch_saved_usd_per_million"]
    return [
        "",
        f"Submitted 100 a request the job saves {USD}{_usd(saved['total'])} per million against "
        f"one a request: API Gateway {USD}{_usd(saved['api_gateway'])}, Lambda "
        f"{USD}{_usd(saved['lambda'])}, logs {USD}{_usd(saved['logs'])}, DynamoDB "
        f"{USD}{_usd(saved['dynamodb'])}: one request and one API invocation carry 100 jobs, "
        "committed 50 a TransactWriteItems; each job's write units are the same (a transaction's "
        "write costs 2 units an item whether it holds 2 items or 100).",
    ]


def what_if_lines(results: dict[str, Any], name: str) -> list[str]:
    w = results["what_if"][name]
    rows = [
        [
            "today",
            f"{w['today']['wcu_per_job']:g}",
            "–",
            ", ".join(f"{p} {v:g}" for p, v in w["today"]["by_phase"].items()),
            "–",
        ]
    ]
    numbers = {o["name"]: o["number"] for o in results.get("options", [])}
    for option, entry in w["options"].items():
        label = f"{numbers[option]}. {option}" if option in numbers else option
        rows.append(
            [
                label,
                f"{entry['wcu_per_job']:g}",
                f"{entry['saves_wcu_per_job']:g}",
                ", ".join(f"{p} {v:g}" for p, v in entry["by_phase"].items()),
                entry.get("caveat", "(see the options above)"),
            ]
        )
    return markdown_table(
        [
            "store change (priced on this run's writes)",
            "WCU/job",
            "saves",
            "by phase",
            "what it costs elsewhere",
        ],
        rows,
    )


def option_set_lines(results: dict[str, Any]) -> list[str]:
    names = {o["number"]: o["name"] for o in results["options"]}
    lines = []
    for scenario, found in results["option_sets_meeting_targets"].items():
        sets = found["sets"]
        if not sets:
            lines.append(
                f"- {scenario} (≤ {found['target_wcu']} WCU): no combination of the options does it."
            )
            continue
        described = "; ".join(
            f"{{{', '.join(str(n) for n in s['options'])}}} → {s['wcu_per_job']:g}"
            for s in sets[:8]
        )
        lines.append(f"- {scenario} (≤ {found['target_wcu']} WCU): {described}")
        without = found["cheapest_without_option"]
        lines.append(
            "  - the cheapest set leaving one option out: "
            + "; ".join(
                f"without {n}: {{{', '.join(str(o) for o in w['options'])}}} → {w['wcu_per_job']:g}"
                for n, w in without.items()
            )
        )
    lines.append("")
    lines.append("Options: " + "; ".join(f"{n}. {name}" for n, name in names.items()) + ".")
    return lines


def log_lines(results: dict[str, Any]) -> list[str]:
    split = results["scenarios"][HEADLINE]["per_job"]["log_bytes_split"]
    return [
        f"CloudWatch Logs bytes per job ({HEADLINE}): "
        + ", ".join(f"{k} {v:,.0f}" for k, v in split.items())
        + "."
    ]


def moto_lines(results: dict[str, Any]) -> list[str]:
    rows = [
        [
            op,
            str(m["requests"]),
            f"{m['computed_units']:g}",
            f"{m['moto_reported_units']:g}",
            str(m["requests_without_a_moto_figure"]),
        ]
        for op, m in results["moto_consumed_capacity"].items()
    ]
    return markdown_table(
        [
            "operation",
            "requests",
            "units computed here",
            "units moto reported",
            "requests moto gave no figure for",
        ],
        rows,
    )


def write_readme(results: dict[str, Any], path: Path, *, chart_name: str | None) -> None:
    prices, lam = results["prices"], results["assumptions"]["lambda"]
    busy = next(s for n, s in results["scenarios"].items() if "50 jobs running" in n)
    sweeper = results["sweeper"]
    head = results["scenarios"][HEADLINE]
    lines = [
        "# Cost benchmark",
        "",
        "`make bench` runs every scenario below through the real Api, Relay, Worker and Sweeper "
        "handlers on **moto** (in-process), driven the way their event sources drive them, meters "
        "every AWS request at the client boundary (`bench/meter.py`), computes DynamoDB capacity "
        "units from the items each request read or wrote with DynamoDB's own size rules, and "
        "prices the counts at list prices. These are **counts measured on moto, not AWS "
        "measurements**; Lambda durations are assumptions (below). It writes `results.json`, this "
        f"file and `cost.svg`, and took {results.get('elapsed_seconds', '?')} s on this machine.",
        "",
        "Callers are shaped as deployed: an 11-character tenant, a 36-character user id (a "
        "Cognito `sub`), a 36-character `Idempotency-Key` where one is sent. *Burst*: all jobs "
        "submitted, then relayed in stream batches (template BatchSize 100) and delivered in SQS "
        "batches (WorkerBatchSize 5). *Trickle*: one job at a time — one relay invocation, one "
        "SQS receive, one worker invocation per job.",
        "",
        "## Targets",
        "",
        *target_lines(results),
        "",
        "## Per job, by scenario",
        "",
        *markdown_table(HEADER, scenario_rows(results)),
        "",
        f"Dollar columns are {USD} per million jobs. Log bytes = the handlers' own output "
        "captured during the run (log lines and EMF metric lines) + Lambda's START/END/REPORT "
        f"lines ({lam['platform_log_bytes_per_invocation']} B per invocation, modelled) + one API "
        f"access-log line ({results['assumptions']['api_access_log_bytes_per_request']} B, the "
        "template's format with typical values).",
        "",
        *log_lines(results),
        "",
    ]
    if chart_name:
        lines += [f"![cost per million jobs by scenario]({chart_name})", ""]
    lines += [
        "## leasehold against Step Functions (the same 3-step job)",
        "",
        *comparison_lines(results),
        "",
        *fanout_section(results),
        "## Enqueued over HTTP or directly (the same 1-step job)",
        "",
        *enqueue_lines(results),
        "",
        f"## Where the write units go: {HEADLINE}",
        "",
        *phase_lines(results, HEADLINE),
        "",
        f"The job item is {head['job_item_bytes_at_end']} bytes when it succeeds (payload "
        f"{head['payload_bytes']} B): every write is priced on the larger of the item before "
        "and after, so an item just over 1,024 bytes costs a second unit (two in a "
        "transaction).",
        "",
        "## A user with 50 jobs running",
        "",
        f"49 of the user's jobs hold slots (claimed by other workers) while each measured job "
        f"claims and finishes: the slot item reaches {busy['slot_item_bytes_max']} bytes, so "
        f"every slot take and release costs {-(-busy['slot_item_bytes_max'] // 1024)} write "
        f"units (a single write, not a transaction). With every slot taken, one wake-up that finds no free slot "
        f"(a *slot wait*) costs {busy['slot_wait']['wcu_per_wait']:g} WCU "
        f"({', '.join(f'{k} {v:g}' for k, v in busy['slot_wait']['wcu_by_part_per_wait'].items())}; "
        f"measured over {busy['slot_wait']['wakeups']} waits) and "
        f"{busy['slot_wait']['requests_per_wait'].get('sqs.SendMessage', 0):g} SQS send, every "
        f"SlotWaitSeconds, until a slot frees. On real DynamoDB the slot item is also a hot "
        f"key: concurrent claims of one user conflict on it (TransactionConflict), which moto "
        f"does not reproduce (see docs/capacity.md).",
        "",
        "## The sweeper",
        "",
        f"Idle table: one sweep costs {sweeper['idle_sweep']['rcu']:g} RCU "
        f"({', '.join(f'{k} {v}' for k, v in sweeper['idle_sweep']['requests'].items())}). "
        f"With {sweeper['in_flight']} jobs in flight ({sweeper['running_live']} running, "
        f"{sweeper['running_lapsed']} with lapsed leases, {sweeper['queued']} queued), one sweep "
        f"examines {sweeper['examined']} (up to {sweeper.get('sweep_budget', sweeper.get('sweep_batch'))} a run: SweepActiveRate × the sweep interval, from where the last run stopped) and "
        f"costs {sweeper['loaded_sweep']['rcu']:g} RCU and {sweeper['loaded_sweep']['wcu']:g} "
        f"WCU ({', '.join(f'{k} {v}' for k, v in sweeper['loaded_sweep']['requests'].items())}): "
        f"{sweeper['rcu_per_examined_job']:g} RCU per examined job, "
        f"{sweeper['wcu_per_rescue']:g} WCU per rescued lease. Report: {sweeper['report']}.",
        "",
        *schedule_lines(results.get("schedule")),
        "## What store changes would save (priced, not built)",
        "",
        "Each option re-prices the writes this run produced (items before and after) as the "
        "changed store would make them; nothing of it ran. Headline scenario:",
        "",
        *what_if_lines(results, HEADLINE),
        "",
        "3-step and no-limit scenarios: `results.json` → `what_if`. The smallest sets of "
        "options (by number) that meet each write-unit target, with the WCU/job they give:",
        "",
        *option_set_lines(results),
        "",
        "## Metering rules (bench/meter.py) and their sources",
        "",
        "- Item size = Σ (UTF-8 bytes of the attribute name + the value's size): string = UTF-8 "
        "bytes; number = 1 byte per two significant digits + 1; binary = raw bytes; boolean and "
        "null = 1; list and map = 3 + per element (1 + its size); a set = the sum of its elements "
        "(the documentation gives no set overhead).",
        "- Write units = ceil(size / 1 KiB), at least 1, of the larger of the item before and "
        "after the write; a failed condition still costs (the existing item, or what a Put would "
        "have written; 1 for nothing). Every item of a TransactWriteItems costs twice (prepare + "
        "commit) — ConditionCheck included, and a cancelled transaction included.",
        "- Index writes (each GSI, per entry): entry appears or disappears 1, key changes 2 "
        "(delete + put), only a projected attribute changes 1, nothing projected changes 0; "
        "ceil(entry / 1 KiB) each. Not doubled in a transaction: the documentation says "
        "transactional changes reach the index after the commit (an assumption worth checking "
        "on AWS).",
        "- Read units = ceil(size / 4 KiB), at least 1 (a missing item too); halved when "
        "eventually consistent (every index read); doubled in TransactGetItems; a Query sums its "
        "page's items before rounding and counts items a filter dropped; BatchGetItem rounds "
        "per item. DynamoDB Streams reads by Lambda's event source mapping are free.",
        "- Checked by hand-worked items in `tests/unit/test_capacity_meter.py` and at the client "
        "boundary on moto in `tests/integration/test_capacity_meter_moto.py`.",
        "",
        *[f"- {what}: <{url}>" for what, url in SOURCES.items()],
        "",
        "### What moto itself reports",
        "",
        "With `ReturnConsumedCapacity=TOTAL` on every request, moto (5.x) answers with "
        "constants, never from item sizes: 1.0 per PutItem, DeleteItem and Query, 0.5 per "
        "GetItem and UpdateItem whatever the size or consistency, 1 per key of a BatchGetItem, "
        "and nothing at all for TransactWriteItems — where most of this design's units are. "
        "Where the columns agree below, it is because the items happened to be small:",
        "",
        *moto_lines(results),
        "",
        "## Prices and assumptions",
        "",
        f"{prices['region']} list prices recorded {prices['date']}, {prices['source']}: "
        f"DynamoDB on-demand {USD}{prices['dynamodb_write_request_unit'] * 1e6:g} per million "
        f"write units and {USD}{prices['dynamodb_read_request_unit'] * 1e6:g} per million read "
        f"units; SQS {USD}{prices['sqs_standard_request'] * 1e6:g} per million requests; Lambda "
        f"{USD}{prices['lambda_request'] * 1e6:g} per million requests + "
        f"{USD}{prices['lambda_arm64_gb_second']} per GB-second (arm64); HTTP API "
        f"{USD}{prices['http_api_request'] * 1e6:g} per million; CloudWatch Logs "
        f"{USD}{prices['cloudwatch_logs_ingested_gb']:g} per GB ingested; Step Functions Standard "
        f"{USD}{prices['step_functions_standard_transition'] * 1000:g} per 1,000 state "
        f"transitions, Express {USD}{prices['step_functions_express_request'] * 1e6:g} per "
        f"million requests + {USD}{prices['step_functions_express_gb_second']} per GB-second; "
        f"Lambda durable functions {USD}{prices['lambda_durable_operation'] * 1e6:g} per million "
        "durable operations (unverified; see its source above), data written and retained not "
        "priced (not found).",
        "",
        f"Lambda (assumed, {lam['memory_mb']} MB as the template sets): Api {lam['api_ms']} ms "
        f"per request, Relay {lam['relay_ms_per_invocation']} ms per invocation, Worker "
        f"{lam['worker_ms_per_invocation']} ms per invocation + {lam['worker_ms_per_wakeup']} ms "
        f"per wake-up (the steps' own work excluded), Sweeper {lam['sweeper_ms']} ms. Step "
        f"Functions: each Task's Lambda {lam['step_lambda_ms']} ms; Express adds "
        f"{lam['express_overhead_ms_per_state']} ms per state, billed in 100 ms at "
        f"{lam['express_memory_mb']} MB; started by the HTTP API's direct integration; execution "
        f"logging off. Durable functions: each step {lam['step_lambda_ms']} ms + "
        f"{lam['durable_checkpoint_ms_per_step']} ms for its checkpoint, at {lam['memory_mb']} MB.",
        "",
        "Full figures — per phase, per operation, what-ifs, the sweeper — are in `results.json`. "
        "Capacity on paper (rates, hot keys, concurrency, the monthly bill at 1×, 10×, 100×): "
        "`docs/capacity.md`, from `python -m bench.plan [--scale N]`. Load per partition key "
        "and the AWS quotas at 1k, 10k and 50k jobs/s: `make bench-scale` (`bench/scale.py`, "
        "the key-heat model `bench/keyheat.py`) → `scale.json`.",
    ]
    local = path.parent / "local.md"  # `make bench-local`'s section, kept across regenerations
    if local.is_file():
        lines += ["", local.read_text().rstrip()]
    path.write_text("\n".join(lines) + "\n")


def write_chart(results: dict[str, Any], path: Path) -> Path | None:
    """Stacked bars of $ per million jobs by service, each scenario, then Step Functions."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib is not installed (pip install -e '.[dev]'); no chart")
        return None
    matplotlib.rcParams["svg.hashsalt"] = "leasehold-bench"
    services = ["dynamodb", "sqs", "lambda", "api_gateway", "logs"]
    names = list(results["scenarios"])
    rows = [results["scenarios"][n]["usd_per_million_jobs"] for n in names]
    c = results["comparison"]
    sfn = {
        "Step Functions Standard (3-step)": c["standard"]["usd_per_million"],
        "Step Functions Express (3-step)": c["express"]["usd_per_million"],
        "Lambda durable functions (3-step, lower bound)": c["durable"]["usd_per_million"],
    }
    labels = names + list(sfn)
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(labels) + 1.6))
    positions = list(range(len(labels)))[::-1]
    left = [0.0] * len(labels)
    colours = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#c44e52"]
    for service, colour in zip(services, colours, strict=False):
        values = [r.get(service, 0.0) for r in rows] + [s.get(service, 0.0) for s in sfn.values()]
        ax.barh(positions, values, left=left, color=colour, label=service)
        left = [a + b for a, b in zip(left, values, strict=True)]
    orchestration = [0.0] * len(names) + [
        s.get("step_functions", 0.0) + s.get("durable_operations", 0.0) for s in sfn.values()
    ]
    ax.barh(positions, orchestration, left=left, color=colours[-1], label="orchestration")
    totals = [a + b for a, b in zip(left, orchestration, strict=True)]
    for y, total in zip(positions, totals, strict=True):
        ax.text(total + max(totals) * 0.01, y, f"${total:,.1f}", va="center", fontsize=8)
    ax.set_xlim(0, max(totals) * 1.12)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_xlabel("US$ per million jobs (us-east-1 list prices; counts measured on moto)")
    ax.set_title("leasehold cost per million jobs by scenario, against Step Functions")
    ax.legend(fontsize=8, loc="center right")
    ax.grid(axis="x", alpha=0.3)
    fig.subplots_adjust(left=0.33, right=0.97, top=0.94, bottom=0.08)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


def schedule_lines(schedule: dict[str, Any] | None) -> list[str]:
    """The README's section on what a scheduled tick costs (absent from older results)."""
    if not schedule:
        return []
    parts = ", ".join(f"{k} {v:g}" for k, v in schedule["fire_wcu_by_part_per_tick"].items())
    return [
        "## A scheduled tick",
        "",
        f"A `rate(1 minute)` schedule fired {schedule['ticks']} times by the Sweeper handler "
        f"made {schedule['jobs_made']} jobs. Firing one tick costs "
        f"**{schedule['fire_wcu_per_tick']:g} WCU** ({parts}) and "
        f"{schedule['fire_rcu_per_tick']:g} RCU (the due query, the schedule read, the sweep of "
        f"the job index); the tick's 1-step job then runs for "
        f"{schedule['job_run_wcu_per_tick']:g} WCU (relay and worker). Creating the schedule: "
        f"{schedule['create_wcu']:g} WCU. A sweep with a schedule not yet due: "
        f"{schedule['idle_sweep_with_a_schedule_rcu']:g} RCU.",
        "",
    ]


def print_report(results: dict[str, Any], out: Path) -> None:
    print()
    widths = [len(h) for h in HEADER]
    rows = [[cell.replace("**", "") for cell in row] for row in scenario_rows(results)]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [HEADER, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    c = results["comparison"]
    print(
        f"\n3-step, all-in $/M jobs: leasehold {c['leasehold_usd_per_million']:.2f}, "
        f"Step Functions Standard {c['step_functions_standard_usd_per_million']:.2f} "
        f"({c['standard_over_leasehold']:g}x), Express "
        f"{c['step_functions_express_usd_per_million']:.2f} ({c['express_over_leasehold']:g}x), "
        f"Lambda durable functions {c['durable_functions_usd_per_million']:.2f} "
        f"({c['durable_over_leasehold']:g}x, data written and retained priced)"
    )
    fan = results.get("fanout")
    if fan:
        r = fan["comparison"]["ratios"]
        print(
            f"{fan['measured']['children']}-child fan-out, all-in $/M children: leasehold "
            f"{fan['comparison']['leasehold_usd_per_million_children']:.2f}; Standard Map "
            f"{r['standard_map_over_leasehold']:g}x, Distributed Map (Express) "
            f"{r['distributed_map_over_leasehold']:g}x, durable map "
            f"{r['durable_map_over_leasehold']:g}x (flat {r['durable_map_flat_over_leasehold']:g}x);"
            f" model check {'ok' if fan['measured']['model_ok'] else 'FAILED'}"
        )
    paths = results["enqueue_paths"]
    print(
        f"1-step, all-in $/M jobs: over HTTP {paths['http_usd_per_million']:.2f}, directly "
        f"{paths['direct_usd_per_million']:.2f} (saves {paths['saved_usd_per_million']['total']:.2f})"
        + (f", 100 a request {paths['batch_usd_per_million']:.2f}" if "batch" in paths else "")
    )
    schedule = results.get("schedule")
    if schedule:
        print(
            f"\nscheduled tick: {schedule['fire_wcu_per_tick']:g} WCU to fire "
            f"+ {schedule['job_run_wcu_per_tick']:g} WCU for its job's run "
            f"({schedule['ticks']} ticks, {schedule['jobs_made']} jobs)"
        )
    print("\ntargets (issue 12 item 3; issue 21 item 6):")
    for t in results["targets"]:
        verdict = "PASS" if t["met"] else "MISS"
        print(f"  {verdict}  {t['target']}: {t['value']:g} (target {t['op']} {t['limit']})")
    print(f"\nwrote {out / 'results.json'}, {out / 'README.md'}, {out / 'cost.svg'}")
