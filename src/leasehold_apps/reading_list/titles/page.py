"""From the bytes of an HTML page to its title: charset, `<title>` / `og:title`, clean-up.

Pure functions (no I/O), so the rules are tested without a server:

- **Charset**, in the HTML standard's order: a byte-order mark; else the `charset` parameter
  of the Content-Type header; else a `<meta charset>` or `<meta http-equiv="Content-Type">`
  found in the first 4 KiB; else UTF-8. Labels are read as browsers read them (`iso-8859-1`
  and `ascii` mean windows-1252; a `<meta>` saying UTF-16 means UTF-8). An unknown label falls
  through to the next source. Undecodable bytes become U+FFFD, never an error; a body cut at
  the read limit drops a trailing partial character instead.
- **Title**: the first `<title>` outside `<svg>`/`<math>` (their `<title>` is a tooltip), with
  entities decoded by the stdlib `html.parser`; when it is missing or blank, the first
  `<meta property="og:title">` (or `name=`). Control characters are dropped, whitespace
  collapsed to single spaces, and the result cut to 300 characters.
"""

from __future__ import annotations

import codecs
from html.parser import HTMLParser

MAX_TITLE_CHARS = 300
SNIFF_BYTES = 4096
_PARSE_CHUNK_CHARS = 16 * 1024

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Python codec names (after codecs.lookup) that the HTML standard decodes as windows-1252.
_WINDOWS_1252_ALIASES = frozenset({"iso8859-1", "ascii", "latin-1"})
_FOREIGN_ROOTS = frozenset({"svg", "math"})


def decode_html(body: bytes, content_type: str | None, *, complete: bool) -> str:
    """Decode a page body to text under the charset rules above.

    `complete` is False when the body was cut at the read limit: a multi-byte character split
    by the cut is then dropped rather than shown as U+FFFD.
    """
    for bom, bom_encoding in _BOMS:
        if body.startswith(bom):
            return _decode(body[len(bom) :], bom_encoding, complete=complete)
    header_label = charset_from_content_type(content_type)
    encoding = _known_encoding(header_label, from_meta=False) if header_label else None
    if encoding is None:
        meta_label = sniff_meta_charset(body[:SNIFF_BYTES])
        encoding = _known_encoding(meta_label, from_meta=True) if meta_label else None
    return _decode(body, encoding or "utf-8", complete=complete)


def charset_from_content_type(content_type: str | None) -> str | None:
    """The `charset` parameter of a Content-Type header value, unquoted, or None."""
    if not content_type:
        return None
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            label = value.strip().strip("\"'").strip()
            return label or None
    return None


def sniff_meta_charset(prefix: bytes) -> str | None:
    """The charset a `<meta>` tag declares in `prefix`, or None (read as Latin-1, which maps
    every byte to one character, so ASCII markup is found in any ASCII-compatible charset)."""
    sniffer = _MetaCharsetSniffer()
    sniffer.feed(prefix.decode("latin-1"))
    return sniffer.label


def extract_title(text: str) -> str | None:
    """The page's title (see the module docstring), or None when it has no usable one."""
    parser = _TitleParser()
    for start in range(0, len(text), _PARSE_CHUNK_CHARS):
        parser.feed(text[start : start + _PARSE_CHUNK_CHARS])
        if parser.settled:
            break
    else:
        parser.close()
    title = clean_title("".join(parser.title_parts)) if parser.title_parts else None
    if title:
        return title
    return clean_title(parser.og_title) if parser.og_title else None


def clean_title(raw: str) -> str | None:
    """Drop control characters, collapse whitespace, cut to 300 characters; None when empty."""
    visible = "".join(ch for ch in raw if ch.isspace() or not _is_control(ch))
    collapsed = " ".join(visible.split())
    cut = collapsed[:MAX_TITLE_CHARS].rstrip()
    return cut or None


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0


def _known_encoding(label: str, *, from_meta: bool) -> str | None:
    try:
        name = codecs.lookup(label).name
        b"a".decode(name, "replace")  # LookupError for bytes-to-bytes codecs (base64, rot13, zlib…)
    except LookupError:
        return None
    if name in _WINDOWS_1252_ALIASES:
        return "cp1252"
    if from_meta and name.startswith("utf-16"):
        return "utf-8"
    return name


def _decode(body: bytes, encoding: str, *, complete: bool) -> str:
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    return str(decoder.decode(body, final=complete))


class _MetaCharsetSniffer(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.label: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "meta" or self.label is not None:
            return
        values = {name: value or "" for name, value in attrs}
        if values.get("charset", "").strip():
            self.label = values["charset"].strip()
        elif values.get("http-equiv", "").strip().lower() == "content-type":
            self.label = charset_from_content_type(values.get("content"))


class _TitleParser(HTMLParser):
    """Collects the first document `<title>` and the first `og:title`; `settled` once the
    title is known to be usable, so the caller can stop feeding."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title_parts: list[str] = []
        self.og_title: str | None = None
        self._in_title = False
        self._title_closed = False
        self._foreign_depth = 0

    @property
    def settled(self) -> bool:
        return self._title_closed and bool("".join(self.title_parts).strip())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _FOREIGN_ROOTS:
            self._foreign_depth += 1
        elif tag == "title" and not self._foreign_depth and not self._title_closed:
            self._in_title = True
        elif tag == "meta" and self.og_title is None:
            values = {name: value or "" for name, value in attrs}
            kind = (values.get("property") or values.get("name") or "").strip().lower()
            if kind == "og:title" and values.get("content", "").strip():
                self.og_title = values["content"]

    def handle_endtag(self, tag: str) -> None:
        if tag in _FOREIGN_ROOTS:
            self._foreign_depth = max(0, self._foreign_depth - 1)
        elif tag == "title" and self._in_title:
            self._in_title = False
            self._title_closed = True

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
