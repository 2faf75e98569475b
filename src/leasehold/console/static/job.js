// One job: its facts, lease, timeline, checkpoint and operations, and the actions an operator
// may take on it (each through a confirmed dialog).

import { api, failure } from "./api.js";
import { cancelDialog, replayDialog, resolveDialog, signalDialog } from "./dialogs.js";
import { clear, el, pretty, safeHref, text, waits, when } from "./dom.js";
import { countdown, current, handledAway, later, main, stopCountdown, stopTimers } from "./shell.js";
import { tracePanel } from "./trace.js";
import { loadWorkflow, workflowPanel } from "./workflow.js";

export const REPLAYABLE = new Set(["dead", "failed", "unknown"]);
export const CANCELLABLE = new Set(["queued", "running", "waiting_approval"]);
export const SETTLED_JOB_REFRESH_MS = 5000;
export const JOB_REFRESH_MS = 1000;

let renders = 0; // the latest render wins: one started since (a click in the tree) drops this one

export async function renderJob(jobId, gen, flash) {
  const mine = ++renders;
  const answer = await api("GET", `/ops/jobs/${encodeURIComponent(jobId)}`);
  if (!current(gen) || mine !== renders || handledAway(answer)) return;
  const flow = answer.status === 200 ? await loadWorkflow(answer.body) : null;
  if (!current(gen) || mine !== renders) return;
  stopCountdown();
  clear(main);
  if (answer.status !== 200) {
    main.appendChild(el("h1", {}, "Job ", el("span", { class: "mono", text: jobId })));
    main.appendChild(failure(answer));
    if (answer.status >= 500 || answer.status === 0) later(() => { if (current(gen)) renderJob(jobId, gen); }, 3000);
    return;
  }
  const job = answer.body;
  const view = el("section", { id: "job", "data-state": job.state, "data-job-id": job.job_id });
  main.appendChild(view);
  view.appendChild(el("h1", {}, "Job ", el("span", { class: "mono", id: "job-id", text: job.job_id }), " ",
    el("span", { id: "job-state", class: `state state-${job.state}`, text: job.state })));
  if (flash) view.appendChild(el("p", { class: "message ok", id: "flash", text: flash }));
  view.appendChild(actions(job, gen));
  view.appendChild(facts(job));
  view.appendChild(tracePanel(job));
  view.appendChild(belongsTo(job));
  const flowPanel = workflowPanel(job, flow, gen, () => { stopTimers(); renderJob(jobId, gen, flash); }, timeline, REPLAYABLE, CANCELLABLE);
  if (flowPanel) view.appendChild(flowPanel);
  view.appendChild(lease(job));
  view.appendChild(el("h2", { text: "Timeline" }));
  view.appendChild(timeline(job));
  view.appendChild(el("h2", { text: "Checkpoint" }));
  view.appendChild(checkpoint(job));
  view.appendChild(el("h2", { text: "Operations" }));
  view.appendChild(operations(job));
  if (job.payload !== null && job.payload !== undefined) {
    view.appendChild(el("h2", { text: "Payload" }));
    view.appendChild(el("pre", { id: "payload", text: pretty(job.payload) }));
  }
  if (job.result !== undefined) {
    view.appendChild(el("h2", { text: "Result" }));
    view.appendChild(el("pre", { id: "result", text: pretty(job.result) }));
  } else if (job.result_url !== undefined) {
    view.appendChild(el("h2", { text: "Result" }));
    view.appendChild(largeResult(job));
  }
  const settled = ["succeeded", "cancelled"].includes(job.state);
  later(() => { if (current(gen)) renderJob(jobId, gen, flash); }, settled ? SETTLED_JOB_REFRESH_MS : JOB_REFRESH_MS);
}

// A result too large for the view (DESIGN §20): its size, and a download read through the
// operator's route with the console's credential (the owner's result_url would be a 404 here).
export function largeResult(job) {
  const status = el("span", { class: "muted", id: "result-status" });
  const download = el("button", { id: "result-download", type: "button", text: "Download",
    onclick: async () => {
      status.textContent = " reading…";
      const answer = await api("GET", `/ops/jobs/${encodeURIComponent(job.job_id)}/result`);
      if (answer.status !== 200) { status.textContent = ` ${answer.status}: not read`; return; }
      const file = new Blob([JSON.stringify(answer.body)], { type: "application/json" });
      const link = el("a", { href: URL.createObjectURL(file), download: `${job.job_id}-result.json` });
      link.click();
      URL.revokeObjectURL(link.href);
      status.textContent = "";
    } });
  return el("p", { id: "result-large" },
    `${job.result_size.toLocaleString("en")} bytes of JSON, kept in the data bucket `, download, status);
}

export function actions(job, gen) {
  const bar = el("div", { class: "actions", id: "job-actions" });
  if (REPLAYABLE.has(job.state)) {
    bar.appendChild(el("button", { id: "act-replay", type: "button", class: "primary",
      onclick: () => replayDialog(job, gen), text: "Replay…" }));
  }
  if (job.state === "unknown") {
    bar.appendChild(el("button", { id: "act-resolve", type: "button",
      onclick: () => resolveDialog(job, gen), text: "Resolve…" }));
  }
  if (CANCELLABLE.has(job.state)) {
    bar.appendChild(el("button", { id: "act-cancel", type: "button", class: "danger",
      onclick: () => cancelDialog(job, gen), text: job.state === "running" ? "Ask to cancel…" : "Cancel…" }));
  }
  if (["queued", "running"].includes(job.state)) {
    bar.appendChild(el("button", { id: "act-signal", type: "button",
      onclick: () => signalDialog(job, gen), text: "Signal…" }));
  }
  if (!bar.firstChild) bar.appendChild(el("span", { class: "muted", text: "No operator action applies to a " + job.state + " job." }));
  return bar;
}

export function facts(job) {
  const rows = [
    ["kind", job.kind],
    ["priority", job.priority || "normal"],
    ["tenant · user", `${job.tenant} · ${job.user_id}`],
    ["attempts", `${job.attempts} of ${job.max_attempts}`],
    ["epoch · version", `${job.epoch} · ${job.version}`],
    ["replays", job.replays],
    ["created", when(job.created_at)],
    ["updated", when(job.updated_at)],
    ["deadline", when(job.deadline_at)],
    ["next attempt", when(job.next_attempt_at)],
    // why a queued (or waiting) job is not running: any kind of wait the API names
    ["waiting for", waits(job.waiting_for)],
    ["stop reason", job.stop_reason || "—"],
    ["error", job.error ? `${job.error.code}: ${job.error.message}` : "—"],
  ];
  if (job.cancel_requested) rows.push(["cancel", "requested"]);
  if (job.resolution) {
    const r = job.resolution;
    rows.push(["resolution", `${r.outcome} by ${r.by} at ${when(r.at)}: ${r.note}` + (r.receipt ? ` (receipt ${r.receipt})` : "")]);
  }
  if (job.effect) rows.push(["effect in flight", `${job.effect.operation_id} (key ${job.effect.idempotency_key}) since ${when(job.effect.started_at)}`]);
  return el("dl", { class: "facts panel", id: "job-facts" }, rows.map(([k, v]) => [
    el("dt", { text: k }), el("dd", { "data-fact": k, text: v })]));
}

export function belongsTo(job) {
  const box = el("div", { class: "panel", id: "belongs-to" });
  const url = job.payload && typeof job.payload === "object" ? job.payload.url : null;
  if (job.bookmark_id) {
    box.appendChild(el("b", { text: "Belongs to bookmark " }));
    box.appendChild(el("span", { class: "mono", id: "bookmark-id", text: job.bookmark_id }));
    box.appendChild(text(` (tenant ${job.tenant}: GET /bookmarks/${job.bookmark_id} as one of its members)`));
  } else if (job.document_key) {
    box.appendChild(el("b", { text: "Belongs to document " }));
    box.appendChild(el("span", { class: "mono", id: "document-key", text: job.document_key }));
    box.appendChild(text(" (a key in the stack's documents bucket)"));
  } else {
    box.appendChild(el("span", { class: "muted", text: "This job belongs to no bookmark or document." }));
  }
  if (url) {
    const href = safeHref(url);
    box.appendChild(el("div", {}, "page: ", href
      ? el("a", { href, id: "job-url", rel: "noopener noreferrer", target: "_blank", text: url })
      : el("span", { id: "job-url", text: url })));
  }
  return box;
}

export function lease(job) {
  const box = el("div", { class: "panel", id: "lease" });
  if (!job.lease) {
    box.appendChild(el("span", { class: "muted", text: "No worker holds this job." }));
    return box;
  }
  const counter = el("span", { class: "countdown", id: "countdown" });
  const expires = new Date(job.lease.expires_at).getTime();
  const tick = () => {
    const left = (expires - Date.now()) / 1000;
    counter.textContent = left >= 0 ? `expires in ${left.toFixed(1)} s` : `expired ${(-left).toFixed(1)} s ago`;
    counter.classList.toggle("expired", left < 0);
  };
  tick();
  countdown(tick, 200);
  box.appendChild(el("b", { text: "Lease holder " }));
  box.appendChild(el("span", { class: "mono", id: "lease-holder", text: job.lease.holder }));
  box.appendChild(text(` · epoch ${job.lease.epoch} · claimed ${when(job.lease.claimed_at)} · until ${when(job.lease.expires_at)} · `));
  box.appendChild(counter);
  return box;
}

export const OPERATOR_EVENTS = new Set(["replayed", "resolved", "redriven", "cancel_requested", "signaled"]);

export function timeline(job) {
  const list = el("ol", { class: "timeline", id: "timeline" });
  const entries = [...(job.history || [])].sort((a, b) => String(a.at).localeCompare(String(b.at)));
  if (job.history_dropped) {
    list.appendChild(el("li", { class: "muted", text: `${job.history_dropped} older entries were dropped (the history keeps the last ten).` }));
  }
  entries.forEach((entry) => {
    const operatorAct = OPERATOR_EVENTS.has(entry.event) || entry.reason === "cancelled_by_operator";
    const item = el("li", { class: operatorAct ? "operator" : (entry.attempt ? "attempt" : "event"),
      "data-event": entry.event });
    item.appendChild(el("div", { class: "when", text: when(entry.at) }));
    item.appendChild(el("div", { class: "what", text: entry.state ? `${entry.event} → ${entry.state}` : entry.event }));
    const details = [];
    if (operatorAct) {
      if (entry.attempt) details.push(`after attempt ${entry.attempt} (epoch ${entry.epoch})`);
    } else {
      if (entry.attempt) details.push(`attempt ${entry.attempt}`);
      if (entry.epoch) details.push(`epoch ${entry.epoch}`);
      if (entry.worker) details.push(`worker ${entry.worker}`);
      if (entry.started) details.push(`started ${when(entry.started)}`);
      if (entry.attempt) details.push(`ended ${when(entry.at)}`);
    }
    if (entry.reason) details.push(`${operatorAct ? "reason" : "error"} ${entry.reason}`);
    if (entry.operation_id) details.push(`operation ${entry.operation_id}`);
    if (details.length) item.appendChild(el("div", { class: "details", text: details.join(" · ") }));
    if (entry.by) item.appendChild(el("div", { class: "by", text: `by ${entry.by}` }));
    if (entry.note) item.appendChild(el("div", { class: "note" }, "note: ", el("q", { class: "note-text", text: entry.note })));
    list.appendChild(item);
  });
  if (job.state === "running" && job.lease) {
    list.appendChild(el("li", { class: "attempt", "data-event": "running" },
      el("div", { class: "when", text: when(job.lease.claimed_at) }),
      el("div", { class: "what", text: `attempt ${job.attempts} running` }),
      el("div", { class: "details", text: `epoch ${job.lease.epoch} · worker ${job.lease.holder} · started ${when(job.lease.claimed_at)}` })));
  }
  if (!list.firstChild) list.appendChild(el("li", { class: "muted", text: "Nothing has happened to this job yet." }));
  return list;
}

export function checkpoint(job) {
  const progress = job.progress || {};
  const budget = job.budget || {};
  return el("dl", { class: "facts panel", id: "checkpoint" },
    el("dt", { text: "next step" }), el("dd", { text: `${progress.step} of ${progress.steps_total}` }),
    el("dt", { text: "cost used" }), el("dd", { text: `${budget.cost_used}${budget.max_cost !== null && budget.max_cost !== undefined ? ` of ${budget.max_cost}` : ""}` }),
    el("dt", { text: "steps used" }), el("dd", { text: `${budget.steps_used}${budget.max_steps !== null && budget.max_steps !== undefined ? ` of ${budget.max_steps}` : ""}` }),
    job.approval ? [el("dt", { text: "waiting for approval" }), el("dd", { text: `step ${job.approval.step} (${job.approval.step_name || ""}) since ${when(job.approval.requested_at)}` })] : null,
    job.agent ? [el("dt", { text: "agent" }), el("dd", {}, el("pre", { text: pretty(job.agent) }))] : null);
}

export function operations(job) {
  const ops = job.operations || [];
  if (!ops.length) return el("p", { class: "muted", id: "operations", text: "No external operations." });
  return el("table", { id: "operations" },
    el("thead", {}, el("tr", {}, ["operation", "provider", "provider key", "state", "receipt", "submitted", "settled"].map((h) => el("th", { text: h })))),
    el("tbody", {}, ops.map((op) => el("tr", { "data-operation": op.operation_id },
      el("td", { class: "mono", text: op.operation_id }),
      el("td", { text: op.provider || "—" }),
      el("td", { class: "mono", text: op.provider_key || op.key || "—" }),
      el("td", {}, el("span", { class: "state", text: op.state })),
      el("td", {}, op.receipt ? el("pre", { text: pretty(op.receipt) }) : text("—")),
      el("td", { text: when(op.submitted_at) }),
      el("td", { text: when(op.settled_at) })))));
}
