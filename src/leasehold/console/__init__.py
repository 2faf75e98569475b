"""The operator console's static shell (decisions C8–C14): one HTML page, its scripts and its style
sheet,
shipped inside the package (no CDN: it works offline) and served by the API function at
`GET /console` and `GET /console/{asset}`.

The shell holds no data and no secret, so it is served without identity (a browser's navigation
cannot carry a bearer token); everything it shows and does goes through the operator-only
`/ops` API with the operator's credentials, which the page keeps in `sessionStorage` and sends
as a header — never in a URL (docs/decisions.md, "The operator console").

Every response carries a Content-Security-Policy that allows no inline script or style and no
origin but the API's own, and `X-Content-Type-Options: nosniff`."""

from __future__ import annotations

from functools import cache
from importlib import resources

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

SCRIPT = "text/javascript; charset=utf-8"

ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    # The page loads console.js as an ES module (`script-src 'self'` allows it and every module
    # it imports from this origin); each module below is one concern of the console.
    "console.js": SCRIPT,
    "dom.js": SCRIPT,
    "api.js": SCRIPT,
    "shell.js": SCRIPT,
    "overview.js": SCRIPT,
    "jobs.js": SCRIPT,
    "job.js": SCRIPT,
    "dialogs.js": SCRIPT,
    "workflow.js": SCRIPT,
    "trace.js": SCRIPT,
    "kinds.js": SCRIPT,
}
"""Every file the console serves, by name, and its media type: nothing else under the package
is reachable (a name not listed is a 404, so no path can walk out of the folder). A script a
module imports must be listed here, or the browser's import of it fails (a test holds it)."""

PAGE = "index.html"


@cache
def asset(name: str) -> str | None:
    """The text of one console asset, or None when `name` is not one of ASSETS."""
    if name not in ASSETS:
        return None
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def headers(name: str) -> dict[str, str]:
    """The response headers of one asset: its type, the CSP and the hardening headers. The page
    itself is never cached (a new deployment shows at once); the scripts and style sheet are
    revalidated on each load."""
    return {
        "Content-Type": ASSETS[name],
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store" if name == PAGE else "no-cache",
    }


__all__ = ["ASSETS", "CONTENT_SECURITY_POLICY", "PAGE", "asset", "headers"]
