// A job's trace: where to see it (X-Ray deployed, the trace file locally) and, locally, its
// spans drawn as a tree from the local gateway's GET /local/traces/{trace_id} (decision TR7).

import { api, failure } from "./api.js";
import { clear, el, jobLink, safeHref } from "./dom.js";
import { current, handledAway, main } from "./shell.js";

const SHOWN = ["function", "attempt", "epoch", "outcome", "step_outcome", "schedule_id"];

// The job page's trace panel: the trace id, and the link the API gave, if any.
export function tracePanel(job) {
  const box = el("div", { class: "panel", id: "job-trace" }, el("b", { text: "Trace " }));
  if (!job.trace_id) {
    box.appendChild(el("span", { class: "muted", text: "none: this job was accepted before traces." }));
    return box;
  }
  box.appendChild(el("span", { class: "mono", id: "trace-id", text: job.trace_id }));
  box.appendChild(document.createTextNode(" · "));
  const href = job.trace_source === "xray" ? safeHref(job.trace_url) : null;
  if (href) {
    box.appendChild(el("a", { id: "trace-link", "data-source": "xray", href, target: "_blank",
      rel: "noopener noreferrer", text: "X-Ray: the invocations that served it" }));
    box.appendChild(el("span", { class: "muted", text: " (annotation.leasehold_trace_id; sampled: the logs have every line)" }));
  } else if (job.trace_source === "trace_file") {
    box.appendChild(el("a", { id: "trace-link", "data-source": "trace_file",
      href: `#/trace/${encodeURIComponent(job.job_id)}`, text: "its spans in the trace file" }));
  } else {
    box.appendChild(el("span", { class: "muted", id: "trace-none",
      text: "no trace recorder on this stack (Tracing: PassThrough, or local up without --traces): " +
        "search the logs for this trace_id (runbook, \"Follow a job by its trace\")." }));
  }
  return box;
}

function attributes(span) {
  const found = {};
  for (const entry of span.attributes || []) {
    const value = entry.value || {};
    found[String(entry.key).replace(/^leasehold\./, "")] = Object.values(value)[0];
  }
  return found;
}

function spanItem(span, children, jobId) {
  const a = attributes(span);
  const ms = (Number(span.endTimeUnixNano) - Number(span.startTimeUnixNano)) / 1e6;
  const facts = SHOWN.filter((k) => a[k] !== undefined).map((k) => `${k} ${a[k]}`);
  const item = el("li", { class: a.job_id === jobId ? "span mine" : "span", "data-span": span.name,
    "data-function": a.function || null, "data-span-id": span.spanId },
    el("span", { class: "span-name", text: span.name }),
    el("span", { class: "muted", text: ` ${Number.isFinite(ms) ? ms.toFixed(1) : "?"} ms` }),
    facts.length ? el("span", { class: "span-facts", text: ` · ${facts.join(" · ")}` }) : null,
    a.job_id && a.job_id !== jobId ? el("span", {}, " · job ", jobLink(String(a.job_id))) : null);
  const mine = children.get(span.spanId) || [];
  if (mine.length) item.appendChild(el("ul", { class: "tree" }, mine.map((c) => spanItem(c, children, jobId))));
  return item;
}

export async function renderTrace(jobId, gen) {
  const answer = await api("GET", `/ops/jobs/${encodeURIComponent(jobId)}`);
  if (!current(gen) || handledAway(answer)) return;
  clear(main);
  const view = el("section", { id: "trace" });
  main.appendChild(view);
  view.appendChild(el("h1", {}, "Trace of job ", jobLink(jobId)));
  if (answer.status !== 200) { view.appendChild(failure(answer)); return; }
  const job = answer.body;
  view.appendChild(tracePanel(job));
  if (job.trace_source !== "trace_file") return;
  const spans = await api("GET", job.trace_url);
  if (!current(gen) || handledAway(spans)) return;
  if (spans.status !== 200) { view.appendChild(failure(spans)); return; }
  const list = spans.body.spans || [];
  const ids = new Set(list.map((s) => s.spanId));
  const children = new Map();
  const roots = [];
  for (const span of list) {
    if (span.parentSpanId && ids.has(span.parentSpanId)) {
      if (!children.has(span.parentSpanId)) children.set(span.parentSpanId, []);
      children.get(span.parentSpanId).push(span);
    } else {
      roots.push(span);
    }
  }
  view.appendChild(el("p", { class: "muted", id: "trace-source",
    text: `${list.length} span${list.length === 1 ? "" : "s"} from ${spans.body.file}` +
      (spans.body.truncated ? " (the first ones only: the trace is longer)" : "") +
      "; a span whose parent is not in the file (the caller's) is shown as a root." }));
  view.appendChild(el("button", { id: "trace-refresh", type: "button", text: "Refresh",
    onclick: () => renderTrace(jobId, gen) }));
  view.appendChild(list.length
    ? el("ul", { class: "tree spans", id: "spans" }, roots.map((s) => spanItem(s, children, jobId)))
    : el("p", { class: "muted", id: "spans", text: "No span of this trace is in the file yet." }));
}
