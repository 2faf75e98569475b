"""docs/capacity.md's tables from bench/scale.json: `python -m bench.scale_tables [FILE]` prints
them as Markdown (the key heat at the target rate, the ceiling before and after, what each
shard count costs the readers, the quotas and the price per million jobs at each rate)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}" if isinstance(value, int | float) else str(value)


def keys_table(scale: dict[str, Any], top: int = 12) -> list[str]:
    lines = [
        "| partition key | where | keys | WCU/s a key | RCU/s a key | share of a partition |",
        "|---|---|---|---|---|---|",
    ]
    for row in scale["keys"][:top]:
        keys = row.get("keys", 1)
        lines.append(
            f"| `{row['key']}` | {row['index']} | {_n(keys)} | {_n(row['wcu_per_second'], 2)} "
            f"| {_n(row['rcu_per_second'], 2)} | **{row['share']:.3f}** |"
        )
    return lines


def ceiling_table(scale: dict[str, Any]) -> list[str]:
    lines = ["| layout | first key at 80 % of its partition | at |", "|---|---|---|"]
    for label, c in scale["ceiling"].items():
        lines.append(
            f"| {label}: {c['index_shards']} shard(s) | `{c['key']}` "
            f"| **{_n(c['jobs_per_second_at_80_percent'])} jobs/s** |"
        )
    return lines


def readers_table(scale: dict[str, Any]) -> list[str]:
    lines = [
        "| `IndexShards` | sweep: queries / RRU a pass | sweep $ a month (every minute) "
        "| summary: queries / RRU | summary $ a month (a tab, every 30 s) |",
        "|---|---|---|---|---|",
    ]
    for row in scale["readers"]:
        s, m = row["sweep"], row["summary"]
        lines.append(
            f"| {row['index_shards']} | {s['queries']} / {_n(s['rcu'], 1)} | "
            f"${s['usd_per_month']:.2f} | {m['queries']} / {_n(m['rcu'], 1)} | "
            f"${m['usd_per_month']:.2f} |"
        )
    return lines


def quotas_table(scale: dict[str, Any]) -> list[str]:
    rates = list(scale["at_rates"])
    lines = [
        "| quota (default) | " + " | ".join(f"{int(r):,} jobs/s" for r in rates) + " |",
        "|---|" + "---|" * len(rates),
    ]
    names = [q["name"] for q in scale["at_rates"][rates[0]]["quotas"]]
    for i, name in enumerate(names):
        default = scale["at_rates"][rates[0]]["quotas"][i]["default"]
        cells = []
        for r in rates:
            q = scale["at_rates"][r]["quotas"][i]
            over = q["default"] is not None and q["needed"] > q["default"]
            cells.append(f"**{_n(q['needed'])}** (over)" if over else _n(q["needed"]))
        lines.append(
            f"| {name} ({_n(default) if default else 'no limit'}) | " + " | ".join(cells) + " |"
        )
    return lines


def prices_table(scale: dict[str, Any]) -> list[str]:
    lines = [
        "| jobs/s (sustained) | hottest key's share | DynamoDB on demand | DynamoDB provisioned "
        "| other services | **$ per million, on demand** | **provisioned** |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, at in scale["at_rates"].items():
        p = at["prices"]
        lines.append(
            f"| {int(r):,} | {at['hottest']['share']:.3f} (`{at['hottest']['key']}`) "
            f"| ${p['dynamodb_on_demand_usd_per_million']:.2f} "
            f"| ${p['dynamodb_provisioned_usd_per_million']:.2f} "
            f"| ${p['other_services_usd_per_million']:.2f} | ${p['on_demand_usd_per_million']:.2f} "
            f"| ${p['provisioned_usd_per_million']:.2f} |"
        )
    return lines


def fanout_table(scale: dict[str, Any]) -> list[str]:
    """A 10,000-child fan-out's own keys at 1,000 child ends a second (issue 31, WF4)."""
    fan = scale.get("fanout")
    if not fan:
        return ["(no fan-out in this scale.json: run `make bench-scale`)"]
    lines = [
        "| key | while | keys | share of the ends | WCU / RCU an end | once a set (WCU / RCU) "
        "| WCU/s on one key | RCU/s on one key | share of a partition |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in fan["rows"]:
        per_end = (
            f"{row['wcu_per_end']:g} / {row['rcu_per_end']:g}"
            if row["wcu_per_end"] is not None
            else "—"
        )
        once = f"{row['wcu_once']:g} / {row['rcu_once']:g}" if row["wcu_once"] is not None else "—"
        share = f"{row['share_of_ends']:.4f}" if row["share_of_ends"] is not None else "—"
        lines.append(
            f"| `{row['key']}` | {row['phase']} | {row['keys']} | {share} | {per_end} | {once} "
            f"| {_n(row['wcu_per_second'], 1)} | {_n(row['rcu_per_second'], 1)} "
            f"| **{row['share']:.3f}** |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    scale = json.loads(Path(args[0] if args else HERE / "scale.json").read_text())
    for title, table in (
        ("ceiling", ceiling_table),
        ("keys", keys_table),
        ("readers", readers_table),
        ("quotas", quotas_table),
        ("prices", prices_table),
        ("fanout", fanout_table),
    ):
        print(f"<!-- {title} -->")
        print("\n".join(table(scale)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
