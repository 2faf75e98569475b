"""What a scheduled tick costs (issue 21 item 6): a schedule created over the API, then `ticks`
ticks fired by the real Sweeper handler, each tick's job run to `succeeded`. The fire — the
schedule's conditional advance, the job and its wake-up in one transaction, plus the due
query — is metered apart from the job's own run, which costs what a 1-step job costs."""

from __future__ import annotations

import time
from typing import Any

from bench.meter import totals_by_phase
from bench.scenarios import Runner, Scenario

TENANT = "bench"
USER = "scheduler"


def schedule_ticks(runner: Runner, *, ticks: int) -> dict[str, Any]:
    from leasehold.store.schedules import schedule_key

    stack = runner.stack
    rt, _ = runner._start(Scenario(name="schedule", jobs=0))  # noqa: SLF001 - same harness
    body = {
        "kind": "synthetic",
        "payload": {"steps": [{"name": "tick"}]},
        "expression": "rate(1 minute)",
        "missed": "skip",
    }
    status, view = stack.api(
        "api-create-schedule.json", body=body, user=USER, tenant=TENANT, phase="schedule-create"
    )
    assert status == 201, view
    sid = view["schedule_id"]
    fired: dict[str, int] = {}
    job_ids: list[str] = []
    for _ in range(ticks):
        # The tick comes: put the schedule's next tick in the past (an unmetered client), as
        # waiting a minute would.
        due = int(time.time() * 1000) - 1_000
        stack.raw_dynamodb.update_item(
            TableName=stack.table["TableName"],
            Key=schedule_key(TENANT, USER, sid),
            UpdateExpression="SET next_tick_at = :t, gsi1sk = :s",
            ExpressionAttributeValues={":t": {"N": str(due)}, ":s": {"S": f"{due:013d}#{sid}"}},
        )
        report = stack.sweep(phase="schedule-fire")
        for name, value in report.items():
            if isinstance(value, int):  # the counts; `passes` is what each walk did (SP4)
                fired[name] = fired.get(name, 0) + value
        item = rt.stores.table.get(schedule_key(TENANT, USER, sid)) or {}
        job_ids.append(item["last_job_id"]["S"])
        stack.drain(job_ids[-1:], lambda job: job.get("state") == "succeeded")
    stack.sweep(phase="schedule-idle")  # nothing due: what a run with schedules costs
    phases = totals_by_phase(stack.meter)
    fire, idle = phases["schedule-fire"], phases["schedule-idle"]
    own = {"schedule-create", "schedule-fire", "schedule-idle"}
    job_wcu = sum(totals.wcu for phase, totals in phases.items() if phase not in own)
    states = {stack.job(job_id)["state"] for job_id in job_ids}  # type: ignore[index]
    final = rt.stores.table.get(schedule_key(TENANT, USER, sid))
    runner._reset()  # noqa: SLF001
    return {
        "ticks": ticks,
        "jobs_made": fired.get("schedule_jobs", 0),
        "ticks_fired_on_the_schedule": int(final["ticks_fired"]["N"]) if final else None,
        "create_wcu": phases["schedule-create"].wcu,
        "fire_wcu_per_tick": round(fire.wcu / ticks, 3),
        "fire_rcu_per_tick": round(fire.rcu / ticks, 3),
        "fire_wcu_by_part_per_tick": {
            part: round(units / ticks, 3) for part, units in sorted(fire.wcu_by_part.items())
        },
        "job_run_wcu_per_tick": round(job_wcu / ticks, 3),
        "job_states": sorted(states),
        "idle_sweep_with_a_schedule_rcu": idle.rcu,
        "note": "fire = the sweeper run that fires the tick (its sweep of an idle job index "
        "included); job run = relay, worker and queue for the tick's 1-step job, run to succeeded",
    }
