// The leasehold operator console: a page that reads and acts only through the /ops API.
//
// Rules this file keeps (docs/decisions.md, "The operator console"):
// - every string that comes from the API is put on the page with textContent (through el() and
//   text() below), never parsed as markup: a payload, error, note or URL holding HTML shows as
//   text;
// - no inline script or style (the CSP forbids both): behaviour is attached here, looks live in
//   console.css, the chart is SVG built with DOM calls;
// - the credential (a demo user locally, an ID token deployed) lives in sessionStorage and goes
//   out only as a request header: never in a URL, never logged.
"use strict";

(function () {
  const CREDENTIAL_KEY = "leasehold.console.credential";
  const LISTED_STATES = ["dead", "unknown", "failed", "queued", "running", "waiting_approval"];
  const ALL_STATES = [
    "queued", "running", "waiting_approval", "succeeded", "failed", "cancelled", "dead", "unknown",
  ];
  const REPLAYABLE = new Set(["dead", "failed", "unknown"]);
  const CANCELLABLE = new Set(["queued", "running", "waiting_approval"]);
  // The overview's summary is a few dozen read units whatever the table holds (bench/ops_summary.py):
  // every 30 s, and not while the tab is hidden, an open tab costs cents a month.
  const OVERVIEW_REFRESH_MS = 30000;
  const SETTLED_JOB_REFRESH_MS = 5000;
  const JOB_REFRESH_MS = 1000;
  const SVG = "http://www.w3.org/2000/svg";

  const main = document.getElementById("main");
  let generation = 0; // each view's render; answers for an older one are dropped
  let refreshTimer = null;
  let countdownTimer = null;

  // ---------------------------------------------------------------- DOM, as text only

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "onclick") node.addEventListener("click", value);
      else if (name === "oninput") node.addEventListener("input", value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) append(node, child);
    return node;
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) child.forEach((c) => append(node, c));
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }

  function text(value) {
    return document.createTextNode(value === null || value === undefined ? "" : String(value));
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "text") node.textContent = String(value);
      else node.setAttribute(name, String(value));
    }
    children.forEach((child) => child && node.appendChild(child));
    return node;
  }

  function stateBadge(state) {
    return el("span", { class: `state state-${ALL_STATES.includes(state) ? state : "other"}`,
      text: state });
  }

  function jobLink(jobId) {
    return el("a", { href: `#/job/${encodeURIComponent(jobId)}`, class: "job-link mono",
      text: jobId });
  }

  function when(iso) {
    if (!iso) return "—";
    const at = new Date(iso);
    return Number.isNaN(at.getTime()) ? String(iso) : at.toISOString().replace("T", " ").replace(".000Z", "Z");
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    const s = Number(seconds);
    if (s < 90) return `${s.toFixed(1)} s`;
    if (s < 5400) return `${(s / 60).toFixed(1)} min`;
    if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} d`;
  }

  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function safeHref(url) {
    // Only a web address becomes a link (never javascript: or data:)
    return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
  }

  // ---------------------------------------------------------------- the credential and the API

  function credential() {
    try {
      return JSON.parse(sessionStorage.getItem(CREDENTIAL_KEY) || "null");
    } catch (_) {
      return null;
    }
  }

  function signIn(mode, value) {
    sessionStorage.setItem(CREDENTIAL_KEY, JSON.stringify({ mode, value }));
  }

  function signOut() {
    sessionStorage.removeItem(CREDENTIAL_KEY);
  }

  function whoAmI(cred) {
    if (!cred) return "";
    if (cred.mode === "demo") return cred.value;
    try { // the ID token's own claims, for the header only (the API decides, not this)
      const claims = JSON.parse(atob(cred.value.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      return claims["cognito:username"] || claims.email || claims.sub || "token";
    } catch (_) {
      return "token";
    }
  }

  async function api(method, path, body) {
    const cred = credential();
    const headers = { Accept: "application/json" };
    if (cred && cred.mode === "demo") headers["X-Demo-User"] = cred.value;
    if (cred && cred.mode === "token") headers.Authorization = `Bearer ${cred.value}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let answer;
    try {
      answer = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer",
      });
    } catch (_) {
      return { status: 0, body: { error: { code: "unreachable", message: "the API did not answer" } } };
    }
    let parsed = {};
    try {
      parsed = await answer.json();
    } catch (_) {
      parsed = {};
    }
    return { status: answer.status, body: parsed };
  }

  function errorText(answer) {
    const error = (answer.body && answer.body.error) || {};
    const message = error.message || (answer.body && answer.body.message) || "no reason given";
    return error.code ? `${message} (${error.code})` : message;
  }

  // An answer no view can show: 401 back to sign-in, 403 the operators-only page.
  function handledAway(answer) {
    if (answer.status === 401) {
      signOut();
      renderSignIn(`Not signed in: the API refused the credential (401). ${errorText(answer)}`);
      return true;
    }
    if (answer.status === 403) {
      renderForbidden(answer);
      return true;
    }
    return false;
  }

  function failure(answer) {
    const box = el("p", { class: "message error", id: "view-error" });
    if (answer.status === 503) {
      box.textContent = `The store is unavailable (503): nothing was changed. It refreshes by itself. ${errorText(answer)}`;
    } else if (answer.status === 404) {
      box.textContent = `Not found (404): ${errorText(answer)}`;
    } else {
      box.textContent = `The API answered ${answer.status || "nothing"}: ${errorText(answer)}`;
    }
    return box;
  }

  // ---------------------------------------------------------------- routing

  function stopTimers() {
    if (refreshTimer) clearTimeout(refreshTimer);
    if (countdownTimer) clearInterval(countdownTimer);
    refreshTimer = countdownTimer = null;
  }

  function route() {
    stopTimers();
    generation += 1;
    const cred = credential();
    const nav = document.getElementById("nav");
    if (!cred) {
      nav.hidden = true;
      renderSignIn();
      return;
    }
    nav.hidden = false;
    document.getElementById("who").textContent = whoAmI(cred);
    const hash = location.hash.replace(/^#\/?/, "");
    const [where, query] = hash.split("?");
    const params = new URLSearchParams(query || "");
    if (where.startsWith("job/")) renderJob(decodeURIComponent(where.slice(4)), generation);
    else if (where === "jobs") renderJobs(params, generation);
    else renderOverview(generation);
  }

  function current(gen) {
    return gen === generation;
  }

  function later(fn, ms) {
    refreshTimer = setTimeout(fn, ms);
  }

  // ---------------------------------------------------------------- sign-in and 403

  function renderSignIn(message) {
    stopTimers();
    document.getElementById("nav").hidden = true;
    clear(main);
    const user = el("input", { id: "signin-user", value: "ops", autocomplete: "off", spellcheck: "false" });
    const token = el("textarea", { id: "signin-token", autocomplete: "off", spellcheck: "false",
      placeholder: "eyJraWQiOi…" });
    main.appendChild(el("section", { class: "signin panel", id: "signin" },
      el("h1", { text: "Sign in" }),
      message ? el("p", { class: "message error", id: "signin-message", text: message }) : null,
      el("label", { for: "signin-token", text: "ID token (a deployed stack)" }),
      token,
      el("p", { class: "hint", text: "An ID token of a user in the stack's operators group, from " +
        "`aws cognito-idp initiate-auth` (README, \"Deploy\"). It is kept in this tab's " +
        "sessionStorage only, sent as an Authorization header, and gone when the tab closes." }),
      el("label", { for: "signin-user", text: "Demo user (the local stack)" }),
      user,
      el("p", { class: "hint", text: "Locally the gateway maps X-Demo-User to an identity: ops is " +
        "the operator; alice, bob and carol are not." }),
      el("div", { class: "actions" },
        el("button", { id: "signin-go", type: "button", class: "primary", text: "Sign in",
          onclick: () => {
            const jwt = token.value.trim();
            if (jwt) signIn("token", jwt);
            else if (user.value.trim()) signIn("demo", user.value.trim());
            else return;
            if (!location.hash || location.hash === "#") location.hash = "#/overview";
            route();
          } }))));
  }

  function renderForbidden(answer) {
    stopTimers();
    clear(main);
    main.appendChild(el("section", { class: "forbidden panel", id: "forbidden" },
      el("p", { class: "code", text: "403" }),
      el("h1", { text: "Operators only" }),
      el("p", { text: `You are signed in as ${whoAmI(credential())}, who is not an operator. ` +
        "The console shows every tenant's jobs and repairs them, so only the operators group " +
        "may use it." }),
      el("p", { class: "muted", text: errorText(answer) }),
      el("button", { id: "forbidden-sign-out", type: "button",
        onclick: () => { signOut(); route(); }, text: "Sign in as someone else" })));
  }

  // ---------------------------------------------------------------- overview

  async function renderOverview(gen) {
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

  function card(label, value, attrs) {
    const shown = value === null || value === undefined ? "—" : value;
    const valueNode = attrs && attrs.href
      ? el("a", { class: "value", href: attrs.href, text: shown })
      : el("div", { class: "value", text: shown });
    return el("div", { class: "card", "data-card": (attrs && attrs.name) || label },
      el("div", { class: "label", text: label }), valueNode);
  }

  function fillOverview(view, summary) {
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

  function chart(hour) {
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

  // ---------------------------------------------------------------- jobs

  async function renderJobs(params, gen, cursors) {
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
        "last error", "next attempt"].map((h) => el("th", { text: h })))),
      el("tbody", {}, jobs.map((job) => el("tr", { "data-job-id": job.job_id },
        el("td", {}, jobLink(job.job_id)),
        el("td", {}, stateBadge(job.state)),
        el("td", { text: job.priority && job.priority !== "normal" ? `${job.kind} · ${job.priority}` : job.kind }),
        el("td", { text: `${job.tenant} · ${job.user_id}` }),
        el("td", { text: age(job.age_seconds) }),
        el("td", { text: `${job.attempts}/${job.max_attempts}` }),
        el("td", { class: "last-error", text: job.last_error ? `${job.last_error.code}: ${job.last_error.message}` : "—" }),
        el("td", { text: when(job.next_attempt_at) })))));
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

  // ---------------------------------------------------------------- one job

  async function renderJob(jobId, gen, flash) {
    const answer = await api("GET", `/ops/jobs/${encodeURIComponent(jobId)}`);
    if (!current(gen) || handledAway(answer)) return;
    if (countdownTimer) clearInterval(countdownTimer);
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
    view.appendChild(belongsTo(job));
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
    }
    const settled = ["succeeded", "cancelled"].includes(job.state);
    later(() => { if (current(gen)) renderJob(jobId, gen, flash); }, settled ? SETTLED_JOB_REFRESH_MS : JOB_REFRESH_MS);
  }

  function actions(job, gen) {
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
    if (!bar.firstChild) bar.appendChild(el("span", { class: "muted", text: "No operator action applies to a " + job.state + " job." }));
    return bar;
  }

  function facts(job) {
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

  function belongsTo(job) {
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

  function lease(job) {
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
    countdownTimer = setInterval(tick, 200);
    box.appendChild(el("b", { text: "Lease holder " }));
    box.appendChild(el("span", { class: "mono", id: "lease-holder", text: job.lease.holder }));
    box.appendChild(text(` · epoch ${job.lease.epoch} · claimed ${when(job.lease.claimed_at)} · until ${when(job.lease.expires_at)} · `));
    box.appendChild(counter);
    return box;
  }

  const OPERATOR_EVENTS = new Set(["replayed", "resolved", "redriven", "cancel_requested"]);

  function timeline(job) {
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

  function checkpoint(job) {
    const progress = job.progress || {};
    const budget = job.budget || {};
    return el("dl", { class: "facts panel", id: "checkpoint" },
      el("dt", { text: "next step" }), el("dd", { text: `${progress.step} of ${progress.steps_total}` }),
      el("dt", { text: "cost used" }), el("dd", { text: `${budget.cost_used}${budget.max_cost !== null && budget.max_cost !== undefined ? ` of ${budget.max_cost}` : ""}` }),
      el("dt", { text: "steps used" }), el("dd", { text: `${budget.steps_used}${budget.max_steps !== null && budget.max_steps !== undefined ? ` of ${budget.max_steps}` : ""}` }),
      job.approval ? [el("dt", { text: "waiting for approval" }), el("dd", { text: `step ${job.approval.step} (${job.approval.step_name || ""}) since ${when(job.approval.requested_at)}` })] : null,
      job.agent ? [el("dt", { text: "agent" }), el("dd", {}, el("pre", { text: pretty(job.agent) }))] : null);
  }

  function operations(job) {
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

  // ---------------------------------------------------------------- confirmed actions

  const dialog = document.getElementById("dialog");
  const dialogBody = document.getElementById("dialog-body");
  const dialogMessage = document.getElementById("dialog-message");
  const confirmButton = document.getElementById("dialog-confirm");
  let onConfirm = null;
  let canConfirm = () => true;

  document.getElementById("dialog-cancel").addEventListener("click", () => dialog.close());
  confirmButton.addEventListener("click", async () => {
    if (!onConfirm || !canConfirm()) return;
    confirmButton.disabled = true;
    const answer = await onConfirm();
    if (answer.status >= 200 && answer.status < 300) {
      dialog.close();
      return;
    }
    if (answer.status === 401 || answer.status === 403) {
      dialog.close();
      handledAway(answer);
      return;
    }
    // A 409 is the reason the act cannot happen now (another operator was first, the job moved
    // on): said in the dialog, in words, not as an error page.
    dialogMessage.hidden = false;
    dialogMessage.className = answer.status === 409 ? "message conflict" : "message error";
    dialogMessage.textContent = answer.status === 409
      ? `Not done: ${errorText(answer)}. Nothing was changed; look at the job again.`
      : `The API answered ${answer.status || "nothing"}: ${errorText(answer)}`;
    confirmButton.disabled = !canConfirm();
  });

  function openDialog(title, build, check, submit, confirmText) {
    document.getElementById("dialog-title").textContent = title;
    clear(dialogBody);
    dialogMessage.hidden = true;
    dialogMessage.textContent = "";
    build(dialogBody);
    canConfirm = check;
    onConfirm = submit;
    confirmButton.textContent = confirmText;
    const refresh = () => { confirmButton.disabled = !canConfirm(); };
    dialogBody.oninput = refresh; // one listener per dialog, replaced by the next
    dialogBody.onchange = refresh;
    refresh();
    if (!dialog.open) dialog.showModal();
  }

  function noteField(required, placeholder) {
    return [
      el("label", { for: "dialog-note", text: required ? "Note (required: why)" : "Note (why; recorded in the history)" }),
      el("textarea", { id: "dialog-note", maxlength: "500", placeholder: placeholder || "" }),
    ];
  }

  function noteValue() {
    const node = document.getElementById("dialog-note");
    return node ? node.value.trim() : "";
  }

  function afterAct(job, gen, answer, what) {
    if (answer.status >= 200 && answer.status < 300 && current(gen)) {
      stopTimers();
      renderJob(job.job_id, gen, `${what} by ${whoAmI(credential())}: the job is now ${answer.body.state}.`);
    }
    return answer;
  }

  function replayDialog(job, gen) {
    const unknown = job.state === "unknown";
    openDialog(`Replay job ${job.job_id}?`, (body) => {
      body.appendChild(el("p", { text: `It goes back to queued under the same id; its history stays. It is ${job.state}` +
        (job.stop_reason ? ` (${job.stop_reason})` : "") + "." }));
      if (unknown) {
        body.appendChild(el("p", { class: "message conflict", text: "This job is unknown: its external effect may have " +
          "happened. A replay calls the provider again with the same key. Check the provider first." }));
        body.appendChild(el("label", { class: "check" },
          el("input", { type: "checkbox", id: "dialog-checked" }), "I checked the provider"));
      }
      if (job.stop_reason === "kind_changed") {
        body.appendChild(el("p", { class: "message", text: "A deploy changed this kind's steps inside the part the job " +
          "had done. From its checkpoint it stops again unless the kind now declares a migration; from the start it " +
          "runs every step of the new list." }));
      }
      body.appendChild(el("label", { class: "check" },
        el("input", { type: "checkbox", id: "dialog-from-start" }),
        "From the start: drop the checkpoint and run every step again"));
      noteField(unknown).forEach((n) => body.appendChild(n));
    }, () => (!unknown || document.getElementById("dialog-checked").checked) && (!unknown || noteValue().length > 0),
    async () => {
      const payload = {};
      if (noteValue()) payload.note = noteValue();
      if (unknown) payload.checked_provider = true;
      if (document.getElementById("dialog-from-start").checked) payload.from = "start";
      const answer = await api("POST", `/ops/jobs/${encodeURIComponent(job.job_id)}/replay`, payload);
      return afterAct(job, gen, answer, "Replayed");
    }, "Replay");
  }

  function resolveDialog(job, gen) {
    openDialog(`Resolve job ${job.job_id}?`, (body) => {
      body.appendChild(el("p", { text: "Settle it on your word: what the provider says happened." }));
      body.appendChild(el("label", { class: "check" },
        el("input", { type: "radio", name: "outcome", id: "dialog-outcome-succeeded", value: "succeeded" }),
        "succeeded (the effect happened)"));
      body.appendChild(el("label", { class: "check" },
        el("input", { type: "radio", name: "outcome", id: "dialog-outcome-failed", value: "failed" }),
        "failed (it did not)"));
      body.appendChild(el("label", { for: "dialog-receipt", text: "Receipt (the provider's, if it succeeded)" }));
      body.appendChild(el("input", { id: "dialog-receipt", maxlength: "200" }));
      noteField(true).forEach((n) => body.appendChild(n));
    }, () => Boolean(document.querySelector("input[name=outcome]:checked")) && noteValue().length > 0,
    async () => {
      const outcome = document.querySelector("input[name=outcome]:checked").value;
      const payload = { outcome, note: noteValue() };
      const receipt = document.getElementById("dialog-receipt").value.trim();
      if (receipt) payload.receipt = receipt;
      const answer = await api("POST", `/ops/jobs/${encodeURIComponent(job.job_id)}/resolve`, payload);
      return afterAct(job, gen, answer, `Resolved as ${outcome}`);
    }, "Resolve");
  }

  function cancelDialog(job, gen) {
    openDialog(`Cancel job ${job.job_id}?`, (body) => {
      body.appendChild(el("p", { text: job.state === "running"
        ? "It is running: the worker is asked to stop before its next step."
        : `It is ${job.state}: it becomes cancelled at once.` }));
      noteField(true).forEach((n) => body.appendChild(n));
    }, () => noteValue().length > 0, async () => {
      const answer = await api("POST", `/ops/jobs/${encodeURIComponent(job.job_id)}/cancel`, { note: noteValue() });
      return afterAct(job, gen, answer, "Cancelled");
    }, "Cancel the job");
  }

  function redriveDialog(depth) {
    const gen = generation;
    openDialog("Redrive the dead-letter queue?", (body) => {
      body.appendChild(el("p", { text: `${depth} message(s) in the DLQ. Wake-ups go back to the work queue (each names ` +
        "its job, so it finds the same job); a message that is not a wake-up is set aside in the table, never sent round again." }));
      body.appendChild(el("label", { for: "dialog-max", text: "At most (1–100)" }));
      body.appendChild(el("input", { id: "dialog-max", type: "number", min: "1", max: "100", value: "100" }));
      noteField(true).forEach((n) => body.appendChild(n));
    }, () => noteValue().length > 0, async () => {
      const most = Number(document.getElementById("dialog-max").value) || 100;
      const answer = await api("POST", "/ops/dlq/redrive", { note: noteValue(), max: most });
      if (answer.status === 200 && current(gen)) {
        stopTimers();
        await renderOverview(gen);
        const report = answer.body;
        const view = document.getElementById("overview");
        if (view) {
          view.insertBefore(el("p", { class: "message ok", id: "flash", text: `Redriven by ${report.by}: ` +
            `moved ${report.moved}, set aside ${(report.set_aside || []).length}; the DLQ now holds ${report.dead_letter_after}.` }),
          view.children[1] || null);
        }
      }
      return answer;
    }, "Redrive");
  }

  // ---------------------------------------------------------------- start

  document.getElementById("sign-out").addEventListener("click", () => { signOut(); route(); });
  const search = document.getElementById("search-id");
  const openSearched = () => {
    const id = search.value.trim();
    if (id) location.hash = `#/job/${encodeURIComponent(id)}`;
  };
  document.getElementById("search-go").addEventListener("click", openSearched);
  search.addEventListener("keydown", (event) => { if (event.key === "Enter") openSearched(); });
  window.addEventListener("hashchange", route);
  route();
})();
