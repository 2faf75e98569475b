"""The Markdown section `make bench-local` writes into bench/README.md from its results (the
local stack or moto on this machine: never an AWS measurement)."""

from __future__ import annotations

from typing import Any


def markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"Local stack (moto) on this machine ({machine['cpus']} CPUs, load average "
        f"{machine['load_average_at_start'][0]:.1f} at the start, shared); not AWS."
    ]
    if "idle" in results:
        idle = results["idle"]
        lines += [
            "",
            f"Idle stack, {idle['jobs']} single 1-step jobs: accept → succeeded p50 "
            f"{idle['p50_s']} s, p95 {idle['p95_s']} s (job timestamps); "
            f"client-observed p50 {idle['client_seen_p50_s']} s.",
        ]
    if "titles" in results:
        t = results["titles"]
        lines += [
            "",
            f"Reading list, {t['bookmarks']} bookmarks one at a time ({t['fetcher']} fetcher): "
            f"accept → title ready p50 {t['client_seen_p50_s']} s, p95 {t['client_seen_p95_s']} s"
            f" (client-observed); title job p50 {t['job_timestamps_p50_s']} s (job timestamps).",
        ]
    if "throughput" in results:
        run = results["throughput"]
        lines += [
            "",
            f"Throughput: {run['succeeded']} of {run['jobs_asked']} jobs succeeded in "
            f"{run['seconds']} s = {run['jobs_per_s']} jobs/s ({run['clients']} clients, "
            f"{run['in_flight_per_client']} in flight each, polling every {run['poll_seconds']} s;"
            f" other outcomes {run['other_outcomes']}; stopped by time limit: "
            f"{run['stopped_by_time_limit']}).",
            "",
            "CPU: the share of one core, then milliseconds per job, of the `local up` process "
            "(gateway, API, relay, sweeper), its moto server process, and the workers together.",
            "",
            "| jobs | seconds | jobs/s | p50 s | p95 s | client-seen p50 s | stack cores | moto cores | workers cores | stack ms/job | moto ms/job | workers ms/job |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {w['jobs']} | {w['seconds']} | {w['jobs_per_s']} | {w['p50_s']} | {w['p95_s']} | "
            f"{w['client_seen_p50_s']} | {w['stack_cpu']} | {w['moto_cpu']} | {w['workers_cpu']} | "
            f"{w['stack_cpu_ms_per_job']} | {w['moto_cpu_ms_per_job']} | "
            f"{w['workers_cpu_ms_per_job']} |"
            for w in run["windows"]
        ]
    if "journal_cost" in results:
        cost = results["journal_cost"]
        lines += [
            "",
            f"The journal's cost (decision L15): {cost['jobs']} jobs on an `--in-memory` stack "
            f"{cost['in_memory_jobs_per_s']} jobs/s, against the journaled run's first "
            f"{cost['jobs']} {cost['journaled_jobs_per_s']} jobs/s: **{cost['ratio']}×** "
            f"(target ≥ 0.8×); moto CPU {cost['in_memory_moto_ms_per_job']} → "
            f"{cost['journaled_moto_ms_per_job']} ms per job.",
        ]
    if "restart" in results:
        restart = results["restart"]
        lines += [
            "",
            f"Restart with {restart['jobs_in_data']:,} jobs in the data directory (the last "
            f"{restart['topped_up_jobs']:,} submitted just before, many still in flight): "
            f"after `kill -9` of the whole group (journal {restart['journal_bytes_at_kill']:,} "
            f"bytes, snapshot {restart['snapshot_bytes_at_kill']:,} bytes) ready in "
            f"**{restart['after_sigkill']['ready_s']} s** (target ≤ 30 s) — "
            f"`{restart['after_sigkill']['said']}`; after a clean stop ready in "
            f"**{restart['after_sigterm']['ready_s']} s** — `{restart['after_sigterm']['said']}`.",
        ]
    if "transaction_cost" in results:
        lines += [
            "",
            "In-process (moto mock), median ms: one PutItem vs one 2-item transaction.",
            "",
            "| items in table | PutItem ms | 2-item transaction ms | ratio | moto's own transaction ms |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['items']} | {r['put_item_ms']} | {r['transaction_ms']} | "
            f"{r['transaction_over_put']} | {r.get('unpatched_transaction_ms', '—')} |"
            for r in results["transaction_cost"]
        ]
    return "\n".join(lines)
