"""The one error a title fetcher raises on purpose.

A fetch ends in a title or in a `TitleFetchError`. The `title` job kind needs exactly two facts
from a failure: a stable `code` to show as the bookmark's `title_error`, and whether another
attempt could succeed (`retryable`, which the kind maps to a retry with backoff or a final
failure). Messages name the host only, never the path or query, because they end up in job
errors and logs.
"""

from __future__ import annotations

from leasehold import LeaseholdError

#: Every code a fetcher may raise, for the kind and the API to rely on.
TITLE_ERROR_CODES = frozenset(
    {
        "bad_url",  # not an http(s) URL the fetcher accepts (syntax, userinfo, odd numeric host)
        "blocked_port",  # a port other than 80 or 443
        "blocked_address",  # the host is, or resolves to, an address that is not global unicast
        "dns_failure",  # the name did not resolve (retryable unless the name does not exist)
        "connection_failed",  # refused, reset or broken mid-answer (retryable)
        "tls_error",  # the certificate did not verify for the host name
        "timeout",  # the connect or the whole-fetch deadline passed (retryable)
        "http_status",  # a non-2xx answer (retryable for 408, 429 and 5xx)
        "too_many_redirects",  # more redirects than allowed
        "not_html",  # neither text/html nor application/xhtml+xml
        "unsupported_encoding",  # a Content-Encoding other than identity, gzip or deflate
        "no_title",  # the page (as far as read) has no usable <title> nor og:title
    }
)


class TitleFetchError(LeaseholdError):
    """A title fetch failed; `code` says how and `retryable` whether trying again can help."""

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        if code not in TITLE_ERROR_CODES:
            raise ValueError(f"unknown title fetch error code {code!r}")
        super().__init__(message)
        self.code = code
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"TitleFetchError({self.code!r}, {str(self)!r}, retryable={self.retryable})"


def timeout_error(host: str, seconds: float | None, phase: str = "fetch") -> TitleFetchError:
    """The retryable `timeout` error, worded the same wherever a deadline passes."""
    limit = f" within {seconds:g} s" if seconds is not None else " in time"
    return TitleFetchError("timeout", f"{host}: the {phase} did not finish{limit}", retryable=True)
