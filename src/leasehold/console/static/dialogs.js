// The confirmed actions: replay, resolve, cancel, signal and redrive, each in one dialog that says
// why it cannot happen now (a 409) in words, not as an error page.

import { api, credential, errorText, whoAmI } from "./api.js";
import { clear, el } from "./dom.js";
import { current, generationNow, handledAway, stopTimers, views } from "./shell.js";

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

export function openDialog(title, build, check, submit, confirmText) {
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

export function noteField(required, placeholder) {
  return [
    el("label", { for: "dialog-note", text: required ? "Note (required: why)" : "Note (why; recorded in the history)" }),
    el("textarea", { id: "dialog-note", maxlength: "500", placeholder: placeholder || "" }),
  ];
}

export function noteValue() {
  const node = document.getElementById("dialog-note");
  return node ? node.value.trim() : "";
}

// `page`: the job whose page to show after the act (a branch's acts stay on its parent's page).
export function afterAct(job, gen, answer, what, page) {
  if (answer.status >= 200 && answer.status < 300 && current(gen)) {
    stopTimers();
    const whose = page && page !== job.job_id ? `job ${job.job_id}` : "the job";
    views.job(page || job.job_id, gen, `${what} by ${whoAmI(credential())}: ${whose} is now ${answer.body.state}.`);
  }
  return answer;
}

export function replayDialog(job, gen, page) {
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
    return afterAct(job, gen, answer, "Replayed", page);
  }, "Replay");
}

export function resolveDialog(job, gen) {
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

export function cancelDialog(job, gen, page) {
  openDialog(`Cancel job ${job.job_id}?`, (body) => {
    body.appendChild(el("p", { text: job.state === "running"
      ? "It is running: the worker is asked to stop before its next step."
      : `It is ${job.state}: it becomes cancelled at once.` }));
    noteField(true).forEach((n) => body.appendChild(n));
  }, () => noteValue().length > 0, async () => {
    const answer = await api("POST", `/ops/jobs/${encodeURIComponent(job.job_id)}/cancel`, { note: noteValue() });
    return afterAct(job, gen, answer, "Cancelled", page);
  }, "Cancel the job");
}

// A signal for the job, as its owner would send it: a name, a JSON body, and the operator's
// note (recorded in the job's history as `signaled`).
export function signalDialog(job, gen, page) {
  const waited = job.waiting_for && job.waiting_for.signal;
  const bodyText = () => document.getElementById("dialog-signal-body").value.trim();
  const parsed = () => {
    if (!bodyText()) return { ok: true, value: null };
    try { return { ok: true, value: JSON.parse(bodyText()) }; } catch (_) { return { ok: false }; }
  };
  const name = () => document.getElementById("dialog-signal-name").value.trim();
  openDialog(`Signal job ${job.job_id}?`, (body) => {
    body.appendChild(el("p", { text: waited
      ? `It waits for the signal "${waited}": it resumes once it comes.`
      : "It does not wait for a signal now: one sent is kept for the step that waits for it." }));
    body.appendChild(el("label", { for: "dialog-signal-name", text: "Signal name" }));
    body.appendChild(el("input", { id: "dialog-signal-name", maxlength: "100", value: waited || "" }));
    body.appendChild(el("label", { for: "dialog-signal-body", text: "Body (JSON; empty: null)" }));
    body.appendChild(el("textarea", { id: "dialog-signal-body", placeholder: '{"approved": true}' }));
    noteField(true).forEach((n) => body.appendChild(n));
  }, () => name().length > 0 && parsed().ok && noteValue().length > 0, async () => {
    const path = `/ops/jobs/${encodeURIComponent(job.job_id)}/signals/${encodeURIComponent(name())}`;
    const answer = await api("POST", path, { note: noteValue(), body: parsed().value });
    return afterAct(job, gen, answer, `Signal "${name()}" sent`, page);
  }, "Send the signal");
}

export function redriveDialog(depth) {
  const gen = generationNow();
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
      await views.overview(gen);
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
