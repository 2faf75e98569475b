// The credential (sessionStorage only, sent as a request header, never in a URL) and the /ops
// API: every request the console makes goes through api(); its answers are put into words here.

import { el } from "./dom.js";

export const CREDENTIAL_KEY = "leasehold.console.credential";

export function credential() {
  try {
    return JSON.parse(sessionStorage.getItem(CREDENTIAL_KEY) || "null");
  } catch (_) {
    return null;
  }
}

export function signIn(mode, value) {
  sessionStorage.setItem(CREDENTIAL_KEY, JSON.stringify({ mode, value }));
}

export function signOut() {
  sessionStorage.removeItem(CREDENTIAL_KEY);
}

export function whoAmI(cred) {
  if (!cred) return "";
  if (cred.mode === "demo") return cred.value;
  try { // the ID token's own claims, for the header only (the API decides, not this)
    const claims = JSON.parse(atob(cred.value.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return claims["cognito:username"] || claims.email || claims.sub || "token";
  } catch (_) {
    return "token";
  }
}

export async function api(method, path, body) {
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

export function errorText(answer) {
  const error = (answer.body && answer.body.error) || {};
  const message = error.message || (answer.body && answer.body.message) || "no reason given";
  return error.code ? `${message} (${error.code})` : message;
}

export function failure(answer) {
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
