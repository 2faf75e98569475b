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
//
// This file starts the console; each view and each concern is a module of its own (dom, api,
// shell, overview, jobs, job, dialogs, trace), served from /console/ as this one is.

import { signOut } from "./api.js";
import { renderJob } from "./job.js";
import { renderJobs } from "./jobs.js";
import { renderOverview } from "./overview.js";
import { route, views } from "./shell.js";
import { renderTrace } from "./trace.js";

views.overview = renderOverview;
views.jobs = renderJobs;
views.job = renderJob;
views.trace = renderTrace;

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
