// The overview: counts by state, the last hour's chart, the queues and the dead-letter queue.

import { api, failure } from "./api.js";
import { redriveDialog } from "./dialogs.js";
import { fillKinds } from "./kinds.js";
import { ALL_STATES, LISTED_STATES, age, clear, el, jobLink, svg, text, waits, when } from "./dom.js";
import { current, handledAway, later, main } from "./shell.js";

// One summary is ~282 read units at the template's 64 index shards (29 at 1 shard), whatever
// the table holds (bench/ops_summary.py, moto). Every 5 minutes while the tab is visible that
// is at most 8,640 refreshes in a 30-day month: 2.44 M read units, $0.30 at $0.125 per million
// (bench/pricing.py) — cents a month per open tab, nothing while it is hidden (decision OS4).
// "Refresh now" reads it at once.
export const OVERVIEW_REFRESH_MS = 300000;
const OUTCOME_STATES = new Set(["succeeded", "cancelled"]);

export async function renderOverview(gen) {
  const answer = await api("GET", "/ops/summary");
  if (!current(gen) || handledAway(answer)) return;
  clear(main);
  const view = el("section", { id: "overview" });
  main.appendChild(view);
  view.appendChild(el("h1", { text: "Overview" }));
  if (answer.status !== 200) {
    view.appendChild(failure(answer));
  } else {
    fillOverview(view, answer.body);
    const kinds = el("section", { class: "panel", id: "kinds" });
    view.appendChild(kinds);
    fillKinds(kinds, gen);
  }
  view.appendChild(el("p", { class: "refreshed", id: "refreshed" },
    `refreshed ${new Date().toISOString().slice(11, 19)}Z · every ${OVERVIEW_REFRESH_MS / 60000} min while this tab is visible (paused while hidden) `,
    el("button", { id: "refresh-now", type: "button", onclick: () => renderOverview(gen), text: "Refresh now" })));
  let due = Date.now() + OVERVIEW_REFRESH_MS;
  const onShow = () => {
    // back in sight after its refresh fell due: refreshed now, not at the next tick
    if (document.visibilityState === "visible" && Date.now() >= due && current(gen)) {
      document.removeEventListener("visibilitychange", onShow);
      renderOverview(gen);
    }
  };
  document.addEventListener("visibilitychange", onShow);
  later(function again() {
    if (!current(gen)) { document.removeEventListener("visibilitychange", onShow); return; }
    if (document.visibilityState === "hidden") { due = Date.now(); return; } // nobody is looking
    document.removeEventListener("visibilitychange", onShow);
    renderOverview(gen);
  }, OVERVIEW_REFRESH_MS);
}

export function card(label, value, attrs) {
  const shown = value === null || value === undefined ? "—" : value;
  const valueNode = attrs && attrs.href
    ? el("a", { class: "value", href: attrs.href, text: shown })
    : el("div", { class: "value", text: shown });
  return el("div", { class: "card", "data-card": (attrs && attrs.name) || label },
    el("div", { class: "label", text: label }), valueNode);
}

export function fillOverview(view, summary) {
  const counts = summary.counts || {};
  const capped = new Set(summary.counts_capped || []);
  const number = (n, name) => {
    if (n === null || n === undefined) return "n/a";
    return capped.has(name) ? `${n.toLocaleString("en-US")}+` : n;
  };
  view.appendChild(el("h2", { text: "Jobs by state" }));
  // every state the API counts, those this console does not know yet too (a new state shows)
  const states = [...ALL_STATES, ...Object.keys(counts).filter((s) => s !== "active" && !ALL_STATES.includes(s))];
  const delayed = summary.delayed ?? 0;
  const cards = [];
  for (const state of states) {
    const listed = LISTED_STATES.includes(state);
    let label = state, value = number(counts[state], state);
    if (state === "queued") {
      // a delayed job is queued, but shown as delayed: the queued card is what is not delayed
      label = "queued (not delayed)";
      value = summary.queue_depth === null || summary.queue_depth === undefined ? "n/a" : summary.queue_depth;
    } else if (OUTCOME_STATES.has(state)) {
      label = `${state} · last hour`;
    }
    const c = card(label, value, { name: state, href: listed ? `#/jobs?state=${state}` : null });
    c.setAttribute("data-state", state);
    cards.push(c);
    if (state === "queued") {
      const d = card("delayed", number(delayed, "delayed"), { name: "delayed", href: "#/jobs?state=queued" });
      d.setAttribute("data-state", "delayed");
      cards.push(d);
    }
  }
  if (counts.active !== undefined) {
    cards.splice(3, 0, card("active (queued + running)", number(counts.active, "active"), { name: "active" }));
  }
  view.appendChild(el("div", { class: "cards", id: "counts" }, cards));
  if (summary.counts_note) view.appendChild(el("p", { class: "muted", text: summary.counts_note }));
  const sqs = summary.sqs || {};
  view.appendChild(el("h2", { text: "Queue" }));
  view.appendChild(el("div", { class: "cards", id: "queue" },
    card("queued (not delayed)", summary.queue_depth, { name: "queue_depth" }),
    card("delayed (due index)", delayed, { name: "due_delayed" }),
    card("SQS visible", sqs.visible, { name: "visible" }),
    card("SQS in flight", sqs.in_flight, { name: "in_flight" }),
    card("SQS delayed", sqs.delayed, { name: "delayed" }),
    card("DLQ depth", sqs.dead_letter, { name: "dead_letter" })));
  const waiting = summary.queued_waiting || {};
  const waitCards = Object.keys(waiting).sort().map((why) => {
    const c = card(`waiting for ${why}`, waiting[why], { name: `waiting-${why}` });
    c.setAttribute("data-waiting", why);
    return c;
  });
  const waitPanel = el("div", { class: "cards", id: "waiting" }, waitCards);
  view.appendChild(waitPanel);
  view.appendChild(el("p", { class: "muted", id: "waiting-scope",
    text: (waitCards.length
      ? `queued jobs by what they wait for, among ${summary.queued_waiting_scope || "the sample"}`
      : `no queued job waits for a time, a limit, a rate, a signal or children, among ${summary.queued_waiting_scope || "the sample"}`) +
      "; a delay due more than 15 minutes ahead is in the delayed card, a longer wait (a signal, children, a paused kind) under its own name" }));
  view.appendChild(el("div", { class: "actions" },
    el("button", { id: "redrive", type: "button", class: "danger",
      disabled: !sqs.dead_letter, onclick: () => redriveDialog(sqs.dead_letter),
      text: "Redrive the DLQ…" })));
  const oldest = summary.oldest_queued;
  view.appendChild(el("h2", { text: "Oldest queued job" }));
  const panel = el("div", { class: "panel", id: "oldest-queued" });
  if (!oldest) {
    let why = "Nothing is queued.";
    if (summary.queue_depth === null || summary.queue_depth === undefined) why = "No queued job among the oldest active jobs: they are running.";
    if (delayed) why += ` ${delayed} delayed job${delayed === 1 ? "" : "s"} wait${delayed === 1 ? "s" : ""} for ${delayed === 1 ? "its" : "their"} time in the due index.`;
    if (summary.queue_depth === 0 && delayed) why = `Nothing is ready to run: ${delayed} delayed job${delayed === 1 ? " waits" : "s wait"} for ${delayed === 1 ? "its" : "their"} time in the due index.`;
    panel.appendChild(el("span", { class: "muted", id: "oldest-none", text: why }));
  } else {
    panel.appendChild(el("dl", { class: "facts" },
      el("dt", { text: "job" }), el("dd", {}, jobLink(oldest.job_id)),
      el("dt", { text: "age" }), el("dd", { id: "oldest-age", text: age(oldest.age_seconds) }),
      el("dt", { text: "kind · tenant" }), el("dd", { text: `${oldest.kind} · ${oldest.tenant}` }),
      el("dt", { text: "attempts" }), el("dd", { text: oldest.attempts }),
      el("dt", { text: "waiting for" }), el("dd", { id: "oldest-waiting", text: waits(oldest.waiting_for) }),
      el("dt", { text: "last error" }),
      el("dd", { text: oldest.last_error ? `${oldest.last_error.code}: ${oldest.last_error.message}` : "—" }),
      el("dt", { text: "next attempt" }), el("dd", { text: when(oldest.next_attempt_at) })));
  }
  if (summary.oldest_scope) panel.appendChild(el("p", { class: "muted", text: `among ${summary.oldest_scope}` }));
  view.appendChild(panel);
  const hour = summary.last_hour;
  view.appendChild(el("h2", { text: "The last hour" }));
  const chartPanel = el("div", { class: "panel chart", id: "chart" });
  if (hour && Array.isArray(hour.buckets)) {
    chartPanel.appendChild(chart(hour));
    const outcomes = summary.outcomes_last_hour || {};
    chartPanel.appendChild(el("div", { class: "legend" },
      hour.series.map((s) => el("span", { class: `s-${s}`, "data-series": s,
        text: outcomes[s] === undefined ? s : `${s} ${outcomes[s]}` }))));
    chartPanel.appendChild(el("p", { class: "muted", text: hour.scope || "" }));
  } else {
    chartPanel.appendChild(el("span", { class: "muted", text: "This API gives no hourly figures." }));
  }
  view.appendChild(chartPanel);
  const totals = summary.totals || {};
  view.appendChild(el("p", { class: "muted", id: "totals",
    text: `retries ${totals.retries ?? "—"} · budget exhausted ${totals.budget_exhausted ?? "—"} (${totals.scope || ""})` }));
}

export function chart(hour) {
  const width = 720, height = 180, left = 34, bottom = 22, top = 8;
  const buckets = hour.buckets;
  const series = hour.series;
  const totals = buckets.map((b) => series.reduce((sum, s) => sum + (Number(b[s]) || 0), 0));
  const most = Math.max(1, ...totals);
  const slot = (width - left) / buckets.length;
  const scale = (height - bottom - top) / most;
  const minutes = Math.round((Number(hour.bucket_seconds) || 60) / 60);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `outcomes and retries per ${minutes === 1 ? "minute" : `${minutes} minutes`} over the last hour` });
  root.appendChild(svg("line", { class: "axis", x1: left, y1: height - bottom, x2: width, y2: height - bottom }));
  root.appendChild(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }));
  root.appendChild(svg("text", { class: "tick", x: 2, y: top + 8, text: String(most) }));
  root.appendChild(svg("text", { class: "tick", x: 2, y: height - bottom, text: "0" }));
  buckets.forEach((bucket, index) => {
    let y = height - bottom;
    const x = left + index * slot + slot * 0.15;
    const group = svg("g", { "data-bucket": index });
    const parts = [];
    series.forEach((name) => {
      const n = Number(bucket[name]) || 0;
      if (!n) return;
      const h = n * scale;
      y -= h;
      group.appendChild(svg("rect", { class: `s-${name}`, x, y, width: slot * 0.7, height: h }));
      parts.push(`${name} ${n}`);
    });
    group.appendChild(svg("title", { text: `${when(bucket.start)}: ${parts.join(", ") || "nothing"}` }));
    root.appendChild(group);
    if (index % Math.max(1, Math.round(buckets.length / 6)) === 0) {
      root.appendChild(svg("text", { class: "tick", x: left + index * slot, y: height - 6,
        text: String(bucket.start || "").slice(11, 16) }));
    }
  });
  return root;
}
