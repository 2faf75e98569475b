"""The local provider's actual work: a short summary and a few tags for a page, derived only from
its URL and (optional) text. Deterministic — the same input always gives the same answer — so a
test can tell "the provider's first answer" from "a fresh one" by the receipt alone."""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import unquote, urlsplit

MAX_SUMMARY_CHARS = 280
MAX_TAGS = 5
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:'[a-z]+)?")
_STOPWORDS = frozenset(
    """a about after all also an and any are as at be been but by can do for from has have how
    in into is it its just more not of on one or our out over so some than that the their them
    then there these they this to up was we were what when which who will with you your
    www com org net io html htm php asp aspx index page""".split()  # noqa: SIM905
)


def summarize(url: str, text: str | None) -> tuple[str, list[str]]:
    """(summary, tags). With text: its first two sentences, and its most frequent words. Without:
    a line naming the site and the words of the URL's path, and those words as tags."""
    if text is not None and text.strip():
        collapsed = " ".join(text.split())
        summary = " ".join(_SENTENCE_END.split(collapsed)[:2])
        return _clip(summary), _top_words(collapsed)
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    path_words = _WORD.findall(unquote(parts.path).replace("_", " "))
    topic = " ".join(
        word.lower() for word in path_words if len(word) > 1 and word.lower() not in _STOPWORDS
    )
    if topic:
        summary = f"A page on {host} about {topic}."
    elif parts.path.strip("/"):
        summary = f"A page on {host}."
    else:
        summary = f"The home page of {host}."
    host_words = " ".join(host.split(".")[:-1])  # the site's own name, not its TLD
    return _clip(summary), _top_words(" ".join(path_words) + " " + host_words)


def _top_words(text: str) -> list[str]:
    """The most frequent non-stopwords of three letters or more; ties keep first appearance
    (Counter.most_common is stable on insertion order), so the answer is deterministic."""
    words = (word.lower() for word in _WORD.findall(text))
    counts = Counter(word for word in words if len(word) >= 3 and word not in _STOPWORDS)
    return [word for word, _ in counts.most_common(MAX_TAGS)]


def _clip(summary: str) -> str:
    if len(summary) <= MAX_SUMMARY_CHARS:
        return summary
    cut = summary[: MAX_SUMMARY_CHARS - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"
