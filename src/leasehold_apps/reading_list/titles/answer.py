"""One HTTP answer as the live fetcher judges it: the request it sends, the statuses and media
types it accepts, and a bounded decoder for the body's Content-Encoding."""

from __future__ import annotations

import zlib

import urllib3

from leasehold_apps.reading_list.titles.errors import TitleFetchError
from leasehold_apps.reading_list.titles.urls import HttpUrl

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_RETRYABLE_STATUSES = frozenset({408, 429})
_HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_DECOMPRESSED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate"})
_USER_AGENT = "leasehold-titles/1 (reading-list title lookup)"


class BodyDecoder:
    """Identity, or gzip/deflate inflated with a bound on the output (no decompression bomb)."""

    def __init__(self, host: str, content_encoding: str | None) -> None:
        encoding = (content_encoding or "identity").strip().lower()
        self._host = host
        self._inflater: zlib._Decompress | None = None
        if encoding in _DECOMPRESSED_ENCODINGS:
            self._inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header
        elif encoding not in {"identity", ""}:
            raise TitleFetchError(
                "unsupported_encoding",
                f"{host} sent Content-Encoding {encoding[:40]!r}",
                retryable=False,
            )

    def feed(self, chunk: bytes, room: int) -> bytes:
        """At most `room` (> 0) bytes of decoded body from `chunk`."""
        if self._inflater is None:
            return chunk[:room]
        try:
            return self._inflater.decompress(chunk, room)
        except zlib.error as exc:
            raise TitleFetchError(
                "unsupported_encoding",
                f"{self._host} sent a corrupt compressed body",
                retryable=False,
            ) from exc


def request_headers(target: HttpUrl) -> dict[str, str]:
    return {
        "Host": target.host_header,
        "User-Agent": _USER_AGENT,
        "Accept": "text/html, application/xhtml+xml;q=0.9",
        "Accept-Encoding": "identity",
        "Connection": "close",
    }


def check_answer(target: HttpUrl, response: urllib3.BaseHTTPResponse) -> str:
    """Refuse a non-2xx status or a non-HTML body; return the Content-Type header value."""
    status = response.status
    if not 200 <= status < 300:
        retryable = status >= 500 or status in _RETRYABLE_STATUSES
        raise TitleFetchError(
            "http_status", f"{target.host} answered HTTP {status}", retryable=retryable
        )
    content_type = response.headers.get("Content-Type") or ""
    media_type = content_type.split(";")[0].strip().lower()
    if media_type not in _HTML_MEDIA_TYPES:
        shown = media_type[:60] or "no Content-Type"
        raise TitleFetchError("not_html", f"{target.host} sent {shown}, not HTML", retryable=False)
    return content_type
