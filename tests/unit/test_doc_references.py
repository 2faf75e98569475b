"""Every reference to the docs in src/ names something that exists: a file under docs/, a
heading in it (`docs/architecture.md "External effects"`), one of the durability rules
(`docs/architecture.md rule 3`, `rules 2–5`) or a decisions entry (`decision F4`,
`decisions KV1–KV4`, `docs/decisions.md CL3`). The old `arch §N` form is refused outright: its
numbers pointed at sections that were renumbered or never existed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIPPED = ("leasehold_dev/scaffold/template/", ".egg-info/")  # a generated project's own files
RULES_HEADING = "The rules that make it durable"

GAP = r"\s+(?:#\s+)?"  # between two words of a reference: a space, or a wrapped line
ID = r"[A-Z]{1,3}\d+"
IDS = rf"{ID}(?:\s*[–-]\s*{ID})?(?:\s*(?:,|and)\s*{ID}(?:\s*[–-]\s*{ID})?)*"
OLD_FORM = re.compile(r"\barch(?:itecture)?\s+§")
DOC_FILE = re.compile(r"\bdocs/([\w/-]+\.(?:md|ya?ml|json|png|svg))")
QUOTED = re.compile(rf'^(?:,?{GAP})"([^"]{{1,120}})"')
RULES = re.compile(rf"^{GAP}rules?{GAP}(\d+(?:\s*[–-]\s*\d+|(?:,\s*\d+)*))")
DECISIONS = re.compile(rf"\bdecisions?{GAP}({IDS})")
DECISIONS_FILE_IDS = re.compile(rf"^{GAP}({IDS})\b")


def _words(text: str) -> str:
    return re.sub(r"\s+(?:#\s+)?", " ", text).strip()


def _heading_names(heading: str) -> set[str]:
    """A heading as a reference may name it: as written, without its number (`4. HTTP API`),
    without a closing parenthesis (`… agent (`doc_prep`)`) or what follows a colon (`The
    client: `leasehold.client``)."""
    text = heading.strip()
    unnumbered = re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", text)
    return {
        text,
        unnumbered,
        re.sub(r"\s*\([^()]*\)$", "", unnumbered),
        unnumbered.split(":")[0].strip(),
    }


@cache
def headings(path: Path) -> frozenset[str]:
    names: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6}\s+(.+?)\s*#*$", line)):
            names |= _heading_names(match.group(1))
    return frozenset(names)


@cache
def durability_rules() -> frozenset[int]:
    text = (DOCS / "architecture.md").read_text()
    start = next(
        m.end()
        for m in re.finditer(r"^##\s+(.+)$", text, re.M)
        if RULES_HEADING in _heading_names(m.group(1))
    )
    section = text[start : text.find("\n## ", start)]
    return frozenset(int(n) for n in re.findall(r"^(\d+)\.\s", section, re.M))


@cache
def decision_ids() -> frozenset[str]:
    text = (DOCS / "decisions.md").read_text()
    return frozenset(re.findall(rf"^\*\*({ID})\.", text, re.M))


def _expand(ids: str) -> Iterator[str]:
    """`KV1–KV4, F2` → KV1, KV2, KV3, KV4, F2 (a range means every entry between its ends)."""
    for part in re.split(r"\s*(?:,|and)\s*", ids):
        ends = re.split(r"\s*[–-]\s*", part)
        if len(ends) == 2:
            low, high = (re.fullmatch(r"([A-Z]+)(\d+)", end) for end in ends)
            if low is None or high is None or low.group(1) != high.group(1):
                yield part  # a range across prefixes names nothing
                continue
            prefix = low.group(1)
            yield from (f"{prefix}{n}" for n in range(int(low.group(2)), int(high.group(2)) + 1))
        else:
            yield part


def _numbers(rules: str) -> Iterator[int]:
    for part in rules.split(","):
        ends = [int(n) for n in re.split(r"\s*[–-]\s*", part.strip())]
        yield from range(ends[0], ends[-1] + 1)


def broken_references(text: str) -> Iterator[str]:
    """What in `text` cites the docs and does not resolve (empty when everything does)."""
    for match in OLD_FORM.finditer(text):
        yield f'`{match.group(0)}`: name the section (docs/<file>.md "Heading", a decision id)'
    for match in DOC_FILE.finditer(text):
        path = DOCS / match.group(1)
        if not path.is_file():
            yield f"docs/{match.group(1)} does not exist"
            continue
        after = text[match.end() : match.end() + 300]
        while quoted := QUOTED.match(after):
            heading = _words(quoted.group(1))
            if heading not in headings(path):
                yield f'docs/{match.group(1)} has no heading "{heading}"'
            after = after[quoted.end() :]
        if rules := RULES.match(after):
            if path.name != "architecture.md":
                yield f"docs/{match.group(1)} has no numbered rules"
            for number in _numbers(rules.group(1)):
                if number not in durability_rules():
                    yield f'docs/architecture.md "{RULES_HEADING}" has no rule {number}'
        if path.name == "decisions.md" and (ids := DECISIONS_FILE_IDS.match(after)):
            yield from _unknown_decisions(ids.group(1))
    for match in DECISIONS.finditer(text):
        yield from _unknown_decisions(match.group(1))


def _unknown_decisions(ids: str) -> Iterator[str]:
    for entry in _expand(_words(ids)):
        if entry not in decision_ids():
            yield f"docs/decisions.md has no entry {entry}"


def source_files() -> list[Path]:
    return sorted(
        path
        for pattern in ("*.py", "*.js")
        for path in (ROOT / "src").rglob(pattern)
        if not any(skip in path.as_posix() for skip in SKIPPED)
    )


def test_the_checker_finds_each_kind_of_broken_reference() -> None:
    bad = (
        'see arch §10; docs/nowhere.md; docs/architecture.md "No such heading"; '
        "docs/architecture.md rule 42; docs/sdk.md rules 1–2; decision ZZ9; decisions KV1–KV99; "
        "docs/decisions.md QQ1"
    )
    found = list(broken_references(bad))
    for expected in (
        "arch §",
        "docs/nowhere.md",
        "No such heading",
        "no rule 42",
        "sdk.md has no numbered",
        "entry ZZ9",
        "entry KV99",
        "entry QQ1",
    ):
        assert any(expected in problem for problem in found), (expected, found)
    good = (
        'docs/architecture.md "External effects", rules 2–5; docs/architecture.md "HTTP API", '
        '"The reading list"; decisions KV1–KV4; decision F4; docs/decisions.md CL3; '
        'docs/architecture.md\n    # "The document-preparation agent"; docs/openapi.yaml'
    )
    assert list(broken_references(good)) == []


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_every_doc_reference_in_src_resolves(path: Path) -> None:
    problems = list(broken_references(path.read_text()))
    assert not problems, "\n".join(problems)


def test_src_cites_the_docs_often_enough_for_this_check_to_matter() -> None:
    """A guard on the scanner itself: if the patterns stopped matching, every file would pass."""
    text = "\n".join(path.read_text() for path in source_files())
    cited = len(DOC_FILE.findall(text)) + len(DECISIONS.findall(text))
    assert cited > 100
