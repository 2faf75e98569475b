// The kinds panel of the overview: each kind running, paused (a badge: who, since when, why) or
// resuming, with Pause… / Resume… — each confirmed with a required note (POST /ops/kinds/…).

import { api, failure } from "./api.js";
import { openDialog, noteField, noteValue } from "./dialogs.js";
import { clear, el, when } from "./dom.js";
import { current, stopTimers, views } from "./shell.js";

export async function fillKinds(panel, gen) {
  const answer = await api("GET", "/ops/kinds");
  if (!current(gen)) return;
  clear(panel);
  panel.appendChild(el("h2", { text: "Kinds" }));
  if (answer.status !== 200) {
    panel.appendChild(failure(answer));
    return;
  }
  const rows = (answer.body.kinds || []).map((kind) => {
    const paused = kind.paused;
    const badge = el("span", { class: `state kind-${kind.state}`, "data-kind-state": kind.state, text: kind.state });
    const why = paused && kind.state === "paused"
      ? `by ${paused.by} since ${when(paused.since)}: ${paused.note}`
      : kind.state === "resuming" && kind.resumed ? `resumed by ${kind.resumed.by}; waking its waiting jobs` : "";
    const act = kind.state === "paused"
      ? el("button", { type: "button", class: "kind-resume", onclick: () => kindDialog(kind.kind, "resume", gen), text: "Resume…" })
      : el("button", { type: "button", class: "kind-pause danger", onclick: () => kindDialog(kind.kind, "pause", gen), text: "Pause…" });
    return el("tr", { "data-kind": kind.kind },
      el("td", { text: kind.kind }), el("td", {}, badge), el("td", { class: "muted", text: why }), el("td", {}, act));
  });
  panel.appendChild(el("table", { id: "kinds-table" },
    el("thead", {}, el("tr", {}, el("th", { text: "kind" }), el("th", { text: "state" }), el("th", { text: "why" }), el("th", { text: "" }))),
    el("tbody", {}, rows)));
}

function kindDialog(kind, act, gen) {
  const pausing = act === "pause";
  openDialog(`${pausing ? "Pause" : "Resume"} kind ${kind}?`, (body) => {
    body.appendChild(el("p", { text: pausing
      ? "No job of this kind starts until it is resumed: each waits, queued, saying so. A running job finishes its current step; its next one waits."
      : "Its jobs start again: the waiting ones are woken (the first 100 now, the sweeper the rest)." }));
    noteField(true).forEach((n) => body.appendChild(n));
  }, () => noteValue().length > 0, async () => {
    const answer = await api("POST", `/ops/kinds/${encodeURIComponent(kind)}/${act}`, { note: noteValue() });
    if (answer.status === 200 && current(gen)) {
      stopTimers();
      await views.overview(gen);
      const view = document.getElementById("overview");
      const done = answer.body;
      const text = pausing
        ? `Kind ${kind} ${done.changed ? "paused" : "was paused already"} (by ${done.paused.by}).`
        : `Kind ${kind} ${done.changed ? `resumed: ${done.woken} waiting job(s) woken${done.more ? ", the sweeper wakes the rest" : ""}` : "was not paused"}.`;
      if (view) view.insertBefore(el("p", { class: "message ok", id: "flash", text }), view.children[1] || null);
    }
    return answer;
  }, pausing ? "Pause the kind" : "Resume the kind");
}
