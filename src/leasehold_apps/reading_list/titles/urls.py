"""URL rules for the reading list: what the API accepts, and what the live fetcher will request.

Two layers share one parser so they can never disagree on what a URL means:

- `validate_bookmark_url` is the API's input rule (docs/architecture.md "The reading list"): a
string, http or https, a
  host, at most 2048 characters, no userinfo, no whitespace or control characters, no
  backslash, and no host spelled as an odd number (`http://2130706433/`, `http://0x7f.1/`,
  `http://127.1/`). It returns the URL exactly as given; nothing is normalised.
- `parse_fetch_url` adds the fetch policy (ports 80 and 443 only; an IP literal is vetted by
  `addresses.refusal_reason`) and gives the live fetcher what it needs to connect: the ASCII
  host for `Host` and TLS, the port, and the request target.

Hosts are reduced to one canonical ASCII form *before* any decision: IDNA-encoded (which also
folds full-width digits and ideographic dots, `１２７．０．０．１` → `127.0.0.1`), lower-cased,
one trailing dot dropped. A host whose last label is numeric (decimal, or `0x` hex, as the
WHATWG URL standard and `inet_aton` read it) must be a canonical dotted quad; anything else is
refused without a DNS lookup, because resolvers disagree on what such names mean.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, urlsplit

from leasehold import ValidationError
from leasehold_apps.reading_list.titles.errors import TitleFetchError

MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
FETCH_PORTS = frozenset({80, 443})

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_DOTTED_QUAD_PART = re.compile(r"0|[1-9][0-9]{0,2}")
_MAX_HOST_LENGTH = 253
# Printable ASCII stays as sent (the URL was checked for spaces and controls already); only
# characters outside ASCII are percent-encoded (as UTF-8) so the request line is pure ASCII.
_TARGET_SAFE = "".join(chr(code) for code in range(0x21, 0x7F))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class HttpUrl:
    """An http(s) URL taken apart, with the host in its one canonical ASCII form."""

    scheme: str
    host: str  # ASCII, lower-case, no trailing dot; an IPv6 literal without brackets
    ip: IPAddress | None  # set when the host is an IP literal
    port: int  # the effective port (the scheme's default when none is written)
    target: str  # path and query for the request line, ASCII, at least "/"

    @property
    def host_header(self) -> str:
        """The `Host` header value: the name (bracketed when IPv6), with the port if not default."""
        name = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        if self.port == DEFAULT_PORTS[self.scheme]:
            return name
        return f"{name}:{self.port}"


def validate_bookmark_url(url: object) -> str:
    """The API's rule for a bookmark URL (docs/architecture.md "The reading list"); returns `url`
    unchanged when it passes.

    Raises `ValidationError` (code `invalid_url`, HTTP 400) with a message that says which rule
    failed. Deliberately *not* checked here: the port and what the host resolves to. Those are
    fetch-time facts (DNS changes; the fixture fetcher never connects), enforced by the live
    fetcher, which fails the title with `blocked_port` / `blocked_address` instead.
    """
    if not isinstance(url, str):
        raise ValidationError("'url' must be a string", code="invalid_url")
    parse_http_url(url)
    return url


def parse_http_url(url: str) -> HttpUrl:
    """Take an http(s) URL apart under the bookmark rules; `ValidationError` when it breaks one."""
    if not url:
        raise _invalid("'url' must not be empty")
    if len(url) > MAX_URL_LENGTH:
        raise _invalid(f"'url' must be at most {MAX_URL_LENGTH} characters")
    for char in url:
        if char.isspace() or unicodedata.category(char) in {"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"}:
            raise _invalid("'url' must not contain whitespace or control characters")
    if "\\" in url:
        raise _invalid("'url' must not contain a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _invalid("'url' is not a well-formed URL") from exc
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise _invalid("'url' must start with http:// or https://")
    if not parts.netloc:
        raise _invalid("'url' must name a host")
    if "@" in parts.netloc:
        raise _invalid("'url' must not contain a user name or password")
    host, ip = _canonical_host(parts)
    port = _port(parts, scheme)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    return HttpUrl(
        scheme=scheme, host=host, ip=ip, port=port, target=quote(target, safe=_TARGET_SAFE)
    )


def parse_fetch_url(url: str, *, allow_any_port: bool = False) -> HttpUrl:
    """The live fetcher's view of a URL (the first one or a redirect's): the bookmark rules plus
    ports 80/443. Raises `TitleFetchError` (`bad_url`, `blocked_port`), never retryable: the
    same URL fails the same way every time. Addresses are vetted by the caller."""
    try:
        parsed = parse_http_url(url)
    except ValidationError as exc:
        raise TitleFetchError(
            "bad_url", str(exc).replace("'url'", "the URL"), retryable=False
        ) from exc
    if parsed.port not in FETCH_PORTS and not allow_any_port:
        raise TitleFetchError(
            "blocked_port",
            f"{parsed.host}: port {parsed.port} is not fetched (only 80 and 443)",
            retryable=False,
        )
    return parsed


def _canonical_host(parts: SplitResult) -> tuple[str, IPAddress | None]:
    netloc_host = parts.netloc.rpartition(":")[0] if _has_port(parts.netloc) else parts.netloc
    raw = parts.hostname
    if not raw:
        raise _invalid("'url' must name a host")
    if netloc_host.startswith("["):
        if "%" in raw:
            raise _invalid("'url' must not name an IPv6 zone")
        try:
            return raw, ipaddress.IPv6Address(raw)
        except ValueError as exc:
            raise _invalid("'url' has a malformed IPv6 address in brackets") from exc
    if "[" in netloc_host or "]" in netloc_host:
        raise _invalid("'url' has a malformed host")
    host = raw
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise _invalid("'url' has a host name that is not a valid international name") from exc
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    labels = host.split(".")
    if not host or len(host) > _MAX_HOST_LENGTH or not all(_LABEL.fullmatch(x) for x in labels):
        raise _invalid("'url' has a malformed host name")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        if len(labels) != 4 or not all(_DOTTED_QUAD_PART.fullmatch(x) for x in labels):
            raise _invalid("'url' has a numeric host that is not a plain dotted IPv4 address")
        try:
            return host, ipaddress.IPv4Address(host)
        except ValueError as exc:  # a part above 255
            raise _invalid("'url' has a numeric host that is not a valid IPv4 address") from exc
    return host, None


def _has_port(netloc: str) -> bool:
    tail = netloc.rpartition("]")[2] if netloc.startswith("[") else netloc
    return ":" in tail


def _port(parts: SplitResult, scheme: str) -> int:
    try:
        port = parts.port
    except ValueError as exc:  # not a number, or outside 0–65535
        raise _invalid("'url' has an invalid port") from exc
    if port is None:
        return DEFAULT_PORTS[scheme]
    if port == 0:
        raise _invalid("'url' has an invalid port")
    return port


def _invalid(message: str) -> ValidationError:
    return ValidationError(message, code="invalid_url")
