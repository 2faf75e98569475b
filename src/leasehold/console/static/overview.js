// The overview: counts by state, the last hour's chart, the queues and the dead-letter queue.

import { api, failure } from "./api.js";
import { redriveDialog } from "./dialogs.js";
import { ALL_STATES, LISTED_STATES, age, clear, el, jobLink, svg, text, when } from "./dom.js";
import { current, handledAway, later, main } from "./shell.js";

// The overview's summary is a few dozen read units whatever the table holds (bench/ops_summary.py):
// every 30 s, and not while the tab is hidden, an open tab costs cents a month.
export const OVERVIEW_REFRESH_MS = 30000;

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
  }
  view.appendChild(el("p", { class: "refreshed", id: "refreshed",
    text: `refreshed ${new Date().toISOString().slice(11, 19)}Z · every ${OVERVIEW_REFRESH_MS / 1000} s` }));
  later(function again() {
    if (!current(gen)) return;
    if (document.hidden) { later(again, OVERVIEW_REFRESH_MS); return; } // nobody is looking
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
  const shown = (name) => {
    const n = counts[name];
    if (n === null || n === undefined) return "n/a";
    return capped.has(name) ? `${n.toLocaleString("en-US")}+` : n;
  };
  view.appendChild(el("h2", { text: "Jobs by state" }));
  const cards = ALL_STATES.map((state) => {
    const listed = LISTED_STATES.includes(state);
    const c = card(state, shown(state),
      { name: state, href: listed ? `#/jobs?state=${state}` : null });
    c.setAttribute("data-state", state);
    return c;
  });
  if (counts.active !== undefined) {
    cards.splice(2, 0, card("active (queued + running)", shown("active"), { name: "active" }));
  }
  view.appendChild(el("div", { class: "cards", id: "counts" }, cards));
  if (summary.counts_note) view.appendChild(el("p", { class: "muted", text: summary.counts_note }));
  const sqs = summary.sqs || {};
  view.appendChild(el("h2", { text: "Queue" }));
  view.appendChild(el("div", { class: "cards", id: "queue" },
    card("queue depth (queued jobs)", summary.queue_depth, { name: "queue_depth" }),
    card("SQS visible", sqs.visible, { name: "visible" }),
    card("SQS in flight", sqs.in_flight, { name: "in_flight" }),
    card("SQS delayed", sqs.delayed, { name: "delayed" }),
    card("DLQ depth", sqs.dead_letter, { name: "dead_letter" })));
  view.appendChild(el("div", { class: "actions" },
    el("button", { id: "redrive", type: "button", class: "danger",
      disabled: !sqs.dead_letter, onclick: () => redriveDialog(sqs.dead_letter),
      text: "Redrive the DLQ…" })));
  const oldest = summary.oldest_queued;
  view.appendChild(el("h2", { text: "Oldest queued job" }));
  const panel = el("div", { class: "panel", id: "oldest-queued" });
  if (!oldest) {
    panel.appendChild(el("span", { class: "muted", text: "Nothing is queued." }));
  } else {
    panel.appendChild(el("dl", { class: "facts" },
      el("dt", { text: "job" }), el("dd", {}, jobLink(oldest.job_id)),
      el("dt", { text: "age" }), el("dd", { id: "oldest-age", text: age(oldest.age_seconds) }),
      el("dt", { text: "kind · tenant" }), el("dd", { text: `${oldest.kind} · ${oldest.tenant}` }),
      el("dt", { text: "attempts" }), el("dd", { text: oldest.attempts }),
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
    chartPanel.appendChild(el("div", { class: "legend" },
      hour.series.map((s) => el("span", { class: `s-${s}`, text: s }))));
    chartPanel.appendChild(el("p", { class: "muted", text: hour.scope || "" }));
  } else {
    chartPanel.appendChild(el("span", { class: "muted", text: "This API gives no hourly figures." }));
  }
  view.appendChild(chartPanel);
  const totals = summary.totals || {};
  view.appendChild(el("p", { class: "muted",
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
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "outcomes and retries per five minutes over the last hour" });
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
    if (index % 3 === 0) {
      root.appendChild(svg("text", { class: "tick", x: left + index * slot, y: height - 6,
        text: String(bucket.start || "").slice(11, 16) }));
    }
  });
  return root;
}
