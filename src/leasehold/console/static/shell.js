// The page around the views: which view the address names (route), the timers that refresh
// it, and the pages no view can show (sign-in, 403). A view registers itself in `views`; an
// answer for a render older than the current one is dropped (current).

import { credential, errorText, signIn, signOut, whoAmI } from "./api.js";
import { clear, el } from "./dom.js";

export const main = document.getElementById("main");
let generation = 0; // each view's render; answers for an older one are dropped
let refreshTimer = null;
let countdownTimer = null;

// The views route() shows: { overview(gen), jobs(params, gen), job(jobId, gen, flash),
// trace(jobId, gen) }.
export const views = {};

// An answer no view can show: 401 back to sign-in, 403 the operators-only page.
export function handledAway(answer) {
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

export function stopTimers() {
  if (refreshTimer) clearTimeout(refreshTimer);
  if (countdownTimer) clearInterval(countdownTimer);
  refreshTimer = countdownTimer = null;
}

export function route() {
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
  if (where.startsWith("job/")) views.job(decodeURIComponent(where.slice(4)), generation);
  else if (where.startsWith("trace/")) views.trace(decodeURIComponent(where.slice(6)), generation);
  else if (where === "jobs") views.jobs(params, generation);
  else views.overview(generation);
}

export function current(gen) {
  return gen === generation;
}

export function later(fn, ms) {
  refreshTimer = setTimeout(fn, ms);
}

export function generationNow() {
return generation;
}

// One countdown at a time (the lease's), stopped with the view that started it.
export function countdown(fn, ms) {
stopCountdown();
countdownTimer = setInterval(fn, ms);
}

export function stopCountdown() {
if (countdownTimer) clearInterval(countdownTimer);
countdownTimer = null;
}

export function renderSignIn(message) {
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

export function renderForbidden(answer) {
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
