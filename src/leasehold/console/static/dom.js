// The console's one way to put anything on the page: elements built with DOM calls, every
// string as text (textContent), never parsed as markup; and how a job's state looks.


const SVG = "http://www.w3.org/2000/svg";
export const LISTED_STATES = ["dead", "unknown", "failed", "queued", "running", "waiting_approval"];
export const ALL_STATES = [
  "queued", "running", "waiting_approval", "succeeded", "failed", "cancelled", "dead", "unknown",
];

export function el(tag, attrs, ...children) {
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

export function append(node, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) child.forEach((c) => append(node, c));
  else if (child instanceof Node) node.appendChild(child);
  else node.appendChild(document.createTextNode(String(child)));
}

export function text(value) {
  return document.createTextNode(value === null || value === undefined ? "" : String(value));
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, String(value));
  }
  children.forEach((child) => child && node.appendChild(child));
  return node;
}

export function stateBadge(state) {
  return el("span", { class: `state state-${ALL_STATES.includes(state) ? state : "other"}`,
    text: state });
}

export function jobLink(jobId) {
  return el("a", { href: `#/job/${encodeURIComponent(jobId)}`, class: "job-link mono",
    text: jobId });
}

export function when(iso) {
  if (!iso) return "—";
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? String(iso) : at.toISOString().replace("T", " ").replace(".000Z", "Z");
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Number(seconds);
  if (s < 90) return `${s.toFixed(1)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

export function safeHref(url) {
  // Only a web address becomes a link (never javascript: or data:)
  return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
}

// What a queued job waits for (`waiting_for`), whatever its keys: `time 2026-…`,
// `concurrency tenant:acme`, `rate …`, and kinds of wait this console does not know yet.
export function waits(waitingFor) {
  if (!waitingFor || typeof waitingFor !== "object" || !Object.keys(waitingFor).length) return "—";
  return Object.entries(waitingFor).map(([why, what]) =>
    `${why} ${typeof what === "string" ? (why === "time" ? when(what) : what) : JSON.stringify(what)}`).join(" · ");
}
