// A workflow on the job page: its parent (a link), what it waits for, its children as a tree
// (expandable where a child started children of its own, 100 at a time with "more"), the
// selected branch's timeline and the acts on that branch. The page re-renders every second:
// what is expanded, how many pages are shown and which branch is selected live here, per job.

import { api } from "./api.js";
import { cancelDialog, replayDialog, signalDialog } from "./dialogs.js";
import { el, jobLink, stateBadge, waits, when } from "./dom.js";

export const CHILDREN_PAGE = 100;
const ENDED = new Set(["succeeded", "failed", "cancelled", "dead"]);
let kept = { jobId: null, expanded: new Set(), pages: new Map(), selected: null };

function stateFor(jobId) {
  if (kept.jobId !== jobId) kept = { jobId, expanded: new Set(), pages: new Map(), selected: null };
  return kept;
}

async function pagesOf(parentId, count) {
  const rows = [];
  let cursor = null;
  for (let page = 0; page < count; page += 1) {
    const query = `limit=${CHILDREN_PAGE}` + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "");
    const answer = await api("GET", `/ops/jobs/${encodeURIComponent(parentId)}/children?${query}`);
    if (answer.status !== 200) return { rows, more: null, failed: answer.status };
    rows.push(...answer.body.items);
    cursor = answer.body.next_cursor;
    if (!cursor) break;
  }
  return { rows, more: cursor, failed: null };
}

// Everything the panel shows, read before the page is cleared (no flicker on refresh).
export async function loadWorkflow(job) {
  const state = stateFor(job.job_id);
  const tree = new Map();
  const load = async (parentId) => {
    const got = await pagesOf(parentId, state.pages.get(parentId) || 1);
    tree.set(parentId, got);
    for (const row of got.rows) if (state.expanded.has(row.job_id) && row.children > 0) await load(row.job_id);
  };
  await load(job.job_id);
  let branch = null;
  if (state.selected) {
    const answer = await api("GET", `/ops/jobs/${encodeURIComponent(state.selected)}`);
    if (answer.status === 200) branch = answer.body;
  }
  return { tree, branch };
}

export function waitText(waitingFor) {
  if (!waitingFor) return "—";
  if (waitingFor.children) {
    const c = waitingFor.children;
    return `children: ${c.done === undefined ? "?" : c.done} of ${c.total} done`;
  }
  if (waitingFor.signal) return `signal "${waitingFor.signal}" until ${when(waitingFor.until)}`;
  if (waitingFor.time && Object.keys(waitingFor).length === 1) return `time: ${when(waitingFor.time)}`;
  return waits(waitingFor);
}

export function workflowPanel(job, loaded, gen, rerender, timeline, replayable, cancellable) {
  const state = stateFor(job.job_id);
  const root = loaded.tree.get(job.job_id);
  const wait = job.waiting_for || {};
  // Only a workflow's job gets the panel: a plain job's page stays as it was.
  if (!job.parent && !(root && root.rows.length) && !wait.signal && !wait.children) return null;
  const box = el("section", { class: "panel", id: "workflow" });
  box.appendChild(el("div", { id: "wf-parent" }, el("b", { text: "Parent " }), job.parent
    ? [jobLink(job.parent.job_id), ` (its step ${job.parent.step})`] : el("span", { class: "muted", text: "none" })));
  box.appendChild(el("div", { id: "wf-waiting" }, el("b", { text: "Waiting for " }), waitText(job.waiting_for)));
  if (root && root.rows.length) {
    box.appendChild(el("h2", { text: "Children" }));
    box.appendChild(branchList(job.job_id, loaded.tree, state, rerender));
  }
  if (loaded.branch) {
    const child = loaded.branch;
    box.appendChild(el("h2", {}, "Branch ", jobLink(child.job_id), " ", stateBadge(child.state)));
    const acts = el("div", { class: "actions", id: "branch-actions" });
    if (replayable.has(child.state)) acts.appendChild(el("button", { id: "branch-replay", type: "button",
      onclick: () => replayDialog(child, gen, job.job_id), text: "Replay this branch…" }));
    if (cancellable.has(child.state)) acts.appendChild(el("button", { id: "branch-cancel", type: "button", class: "danger",
      onclick: () => cancelDialog(child, gen, job.job_id), text: "Cancel this branch…" }));
    if (!ENDED.has(child.state)) acts.appendChild(el("button", { id: "branch-signal", type: "button",
      onclick: () => signalDialog(child, gen, job.job_id), text: "Signal…" }));
    box.appendChild(acts);
    const line = timeline(child);
    line.id = "branch-timeline";
    box.appendChild(line);
  }
  return box;
}

function branchList(parentId, tree, state, rerender) {
  const got = tree.get(parentId) || { rows: [], more: null, failed: null };
  const list = el("ul", { class: "tree", "data-parent": parentId });
  for (const row of got.rows) {
    const open = state.expanded.has(row.job_id);
    const item = el("li", { "data-child-id": row.job_id, "data-state": row.state,
      class: state.selected === row.job_id ? "selected" : null });
    if (row.children > 0) {
      item.appendChild(el("button", { type: "button", class: "expand", "aria-expanded": open ? "true" : "false",
        text: open ? "▾" : "▸", onclick: () => { (open ? state.expanded.delete(row.job_id) : state.expanded.add(row.job_id)); rerender(); } }));
    }
    item.appendChild(jobLink(row.job_id));
    item.appendChild(stateBadge(row.state));
    if (row.waiting_for) item.appendChild(el("span", { class: "muted", text: ` ${waitText(row.waiting_for)}` }));
    if (row.children > 0) item.appendChild(el("span", { class: "muted", text: ` · ${row.children} children` }));
    item.appendChild(el("button", { type: "button", class: "select-branch", text: "timeline",
      onclick: () => { state.selected = row.job_id; rerender(); } }));
    if (open && tree.has(row.job_id)) item.appendChild(branchList(row.job_id, tree, state, rerender));
    list.appendChild(item);
  }
  if (got.more) {
    list.appendChild(el("li", {}, el("button", { type: "button", class: "more", text: `more (next ${CHILDREN_PAGE})`,
      onclick: () => { state.pages.set(parentId, (state.pages.get(parentId) || 1) + 1); rerender(); } })));
  }
  if (got.failed) list.appendChild(el("li", { class: "message error", text: `The API answered ${got.failed} for more children.` }));
  return list;
}
