"""From page bytes to a title: charset, `<title>` / `og:title`, clean-up (no network)."""

from __future__ import annotations

import codecs

import pytest

from leasehold_apps.reading_list.titles.page import (
    MAX_TITLE_CHARS,
    charset_from_content_type,
    clean_title,
    decode_html,
    extract_title,
    sniff_meta_charset,
)


def title_of(
    body: bytes, content_type: str | None = "text/html", complete: bool = True
) -> str | None:
    return extract_title(decode_html(body, content_type, complete=complete))


@pytest.mark.parametrize(
    ("html", "title"),
    [
        ("<title>Plain</title>", "Plain"),
        ("<html><head><TITLE>Upper case tag</TITLE></head></html>", "Upper case tag"),
        ("<title>  Lots \n\t of   space \r\n </title>", "Lots of space"),
        (
            "<title>Fish &amp; Chips &#8211; &eacute;t&eacute; &#x1F600;</title>",
            "Fish & Chips – été 😀",
        ),
        ("<title>Bell\x07 and\x00 nul</title>", "Bell and nul"),
        ("<title>First</title><title>Second</title>", "First"),
        ("<svg><title>icon</title></svg><title>Page</title>", "Page"),
        ("<title>Unclosed title at the end", "Unclosed title at the end"),
        ('<meta property="og:title" content="Open Graph &amp; co"><p>no title', "Open Graph & co"),
        ('<title> </title><meta name="og:title" content="Fallback">', "Fallback"),
        ('<meta property="og:title" content="Ignored"><title>Wins</title>', "Wins"),
        ("<script>document.title = '<title>not this</title>'</script><title>This</title>", "This"),
    ],
)
def test_the_title_is_parsed_decoded_and_collapsed(html: str, title: str) -> None:
    assert title_of(html.encode()) == title


@pytest.mark.parametrize(
    "html",
    ["", "<p>no title here</p>", "<title>   </title>", '<meta property="og:title" content=" ">'],
)
def test_a_page_without_a_usable_title_has_none(html: str) -> None:
    assert title_of(html.encode()) is None


def test_titles_are_cut_to_300_characters() -> None:
    long_title = "word " * 200
    title = title_of(f"<title>{long_title}</title>".encode())
    assert title is not None and len(title) == MAX_TITLE_CHARS - 1  # the trailing space is cut
    assert clean_title("x" * 1000) == "x" * MAX_TITLE_CHARS


def test_charset_from_the_header_wins_over_the_meta_tag() -> None:
    body = '<meta charset="utf-8"><title>caf\u00e9</title>'.encode("latin-1")
    assert title_of(body, "text/html; charset=ISO-8859-1") == "café"


def test_charset_from_a_meta_tag_when_the_header_has_none() -> None:
    body = '<meta charset="iso-8859-1"><title>Br\u00fbl\u00e9e</title>'.encode("latin-1")
    assert title_of(body, "text/html") == "Brûlée"
    http_equiv = (
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
        "<title>\u041f\u0440\u0438\u0432\u0435\u0442</title>"
    ).encode("cp1251")
    assert title_of(http_equiv, None) == "Привет"


def test_latin_1_labels_decode_as_windows_1252_like_browsers() -> None:
    body = b"<title>\x93quoted\x94 \x80</title>"
    assert title_of(body, "text/html; charset=iso-8859-1") == "\u201cquoted\u201d €"


def test_utf8_is_the_default_and_bad_bytes_become_replacement_characters() -> None:
    assert title_of("<title>na\u00efve</title>".encode()) == "naïve"
    assert title_of(b"<title>bad \xff byte</title>") == "bad \ufffd byte"


def test_a_byte_order_mark_wins_over_everything() -> None:
    body = codecs.BOM_UTF16_LE + "<title>\u00fcber</title>".encode("utf-16-le")
    assert title_of(body, "text/html; charset=iso-8859-1") == "über"


def test_unknown_or_non_text_charsets_fall_back() -> None:
    assert title_of("<title>caf\u00e9</title>".encode(), "text/html; charset=klingon") == "café"
    assert title_of("<title>caf\u00e9</title>".encode(), "text/html; charset=base64") == "café"
    utf16_meta = b'<meta charset="utf-16"><title>caf\xc3\xa9</title>'
    assert title_of(utf16_meta, None) == "café"


def test_a_character_cut_by_the_read_limit_is_dropped_not_replaced() -> None:
    body = "<title>caf\u00e9".encode()[:-1]
    assert title_of(body, complete=False) == "caf"
    assert title_of(body, complete=True) == "caf\ufffd"


def test_content_type_and_meta_sniffing_parse_parameters() -> None:
    assert charset_from_content_type('text/html; charset="UTF-8"') == "UTF-8"
    assert charset_from_content_type("text/html;CHARSET=latin1;q=1") == "latin1"
    assert charset_from_content_type("text/html") is None
    assert charset_from_content_type(None) is None
    assert sniff_meta_charset(b"<head><meta charset='koi8-r'>") == "koi8-r"
    assert sniff_meta_charset(b"<head><meta name='x' content='y'>") is None
