// The jobs list: filtered by state, kind and tenant, a page at a time.

import { api, failure } from "./api.js";
import { LISTED_STATES, age, clear, el, jobLink, stateBadge, waits, when } from "./dom.js";
import { current, handledAway, main } from "./shell.js";

export async function renderJobs(params, gen, cursors) {
  const state = params.get("state") || "dead";
  const kind = params.get("kind") || "";
  const tenant = params.get("tenant") || "";
  const stack = cursors || [];
  const query = new URLSearchParams({ state, limit: "25" });
  if (kind) query.set("kind", kind);
  if (tenant) query.set("tenant", tenant);
  if (stack.length) query.set("cursor", stack[stack.length - 1]);
  const answer = await api("GET", `/ops/jobs?${query.toString()}`);
  if (!current(gen) || handledAway(answer)) return;
  clear(main);
  const view = el("section", { id: "jobs" });
  main.appendChild(view);
  view.appendChild(el("h1", { text: "Jobs" }));
  const stateSelect = el("select", { id: "filter-state" },
    LISTED_STATES.map((s) => el("option", { value: s, selected: s === state, text: s })));
  const kindInput = el("input", { id: "filter-kind", value: kind, placeholder: "any kind" });
  const tenantInput = el("input", { id: "filter-tenant", value: tenant, placeholder: "any tenant" });
  const apply = () => {
    const next = new URLSearchParams({ state: stateSelect.value });
    if (kindInput.value.trim()) next.set("kind", kindInput.value.trim());
    if (tenantInput.value.trim()) next.set("tenant", tenantInput.value.trim());
    location.hash = `#/jobs?${next.toString()}`;
  };
  view.appendChild(el("div", { class: "filters" },
    el("label", {}, "state", stateSelect),
    el("label", {}, "kind", kindInput),
    el("label", {}, "tenant", tenantInput),
    el("button", { id: "filter-go", type: "button", class: "primary", onclick: apply, text: "Show" })));
  view.appendChild(el("p", { class: "muted", text: "succeeded and cancelled jobs leave the state " +
    "index: open one by its id (the search box above)." }));
  if (answer.status !== 200) {
    view.appendChild(failure(answer));
    return;
  }
  const jobs = answer.body.jobs || [];
  const table = el("table", { id: "jobs-table" },
    el("thead", {}, el("tr", {}, ["job", "state", "kind", "tenant · user", "age", "attempts",
      "last error", "next attempt", "waiting for"].map((h) => el("th", { text: h })))),
    el("tbody", {}, jobs.map((job) => el("tr", { "data-job-id": job.job_id },
      el("td", {}, jobLink(job.job_id)),
      el("td", {}, stateBadge(job.state)),
      el("td", { text: job.priority && job.priority !== "normal" ? `${job.kind} · ${job.priority}` : job.kind }),
      el("td", { text: `${job.tenant} · ${job.user_id}` }),
      el("td", { text: age(job.age_seconds) }),
      el("td", { text: `${job.attempts}/${job.max_attempts}` }),
      el("td", { class: "last-error", text: job.last_error ? `${job.last_error.code}: ${job.last_error.message}` : "—" }),
      el("td", { text: when(job.next_attempt_at) }),
      el("td", { class: "waiting-for", text: waits(job.waiting_for) })))));
  view.appendChild(table);
  if (!jobs.length) view.appendChild(el("p", { class: "muted", id: "jobs-empty", text: `No ${state} jobs on this page.` }));
  const pager = el("div", { class: "pager" },
    el("button", { id: "page-first", type: "button", disabled: !stack.length,
      onclick: () => renderJobs(params, gen, []), text: "First page" }),
    el("button", { id: "page-next", type: "button", disabled: !answer.body.next_cursor,
      onclick: () => renderJobs(params, gen, [...stack, answer.body.next_cursor]), text: "Next page" }),
    el("span", { class: "muted", text: `page ${stack.length + 1}` }));
  view.appendChild(pager);
}
