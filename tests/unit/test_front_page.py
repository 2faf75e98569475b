"""The README is a front page, not the manual (docs/decisions.md DS1–DS3): at most 300 lines,
the two commands CI and new machines rely on, a "Can leasehold do X?" table near the top that
answers every question a Step Functions, Temporal, Celery or River user asks first, and links
into the manual that resolve. The manual itself is checked by `make docs` (mkdocs --strict)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pymdownx.slugs import slugify
from scripts.mkdocs_hooks import home_page

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TABLE_HEADING = "## Can leasehold do X?"

# Each question as a word or phrase its row's first cell must hold.
QUESTIONS = (
    "retry",
    "exactly once",
    "submit twice",
    "unique jobs",
    "start a job later",
    "durable sleep",
    "schedules",
    "priorities",
    "rate limits",
    "concurrency keys",
    "approval",
    "cancel",
    "budgets",
    "deadlines",
    "replay",
    "dead-letter queue",
    "child jobs",
    "signals",
    "payloads over 16 kib",
    "batch",
    "pause",
    "tracing",
    "tenants",
    "without aws",
    "cost",
)

_GITHUB_SLUG = slugify(case="lower")


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def _capability_rows() -> list[list[str]]:
    rows = [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        for line in _section(README, TABLE_HEADING).splitlines()
        if line.startswith("|")
    ]
    return rows[2:]  # below the header and its rule


def test_the_readme_is_a_front_page_of_at_most_300_lines() -> None:
    assert len(README.splitlines()) <= 300


def test_the_readme_keeps_its_two_commands() -> None:
    block = _section(README, "## Two commands").split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert "make demo" in commands and "make test" in commands


def test_the_capability_table_comes_near_the_top() -> None:
    headings = re.findall(r"^## .+$", README, flags=re.MULTILINE)
    # after what leasehold is and its two commands, before anything else
    assert headings.index(TABLE_HEADING) <= 1
    assert README.splitlines().index(TABLE_HEADING) < 50


def test_each_row_answers_yes_partly_or_no_and_says_how() -> None:
    rows = _capability_rows()
    assert len(rows) >= len(QUESTIONS)
    for question, answer, how in rows:
        assert answer in {"yes", "partly", "no"}, question
        assert len(how) > 30, question


def test_the_table_answers_every_question_a_newcomer_asks_first() -> None:
    asked = " · ".join(row[0].lower() for row in _capability_rows())
    missing = [question for question in QUESTIONS if question not in asked]
    assert not missing


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    headings = re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)
    return {_GITHUB_SLUG(re.sub(r"[`*]", "", heading), "-") for heading in headings}


def test_every_link_of_the_readme_leads_into_the_manual_and_resolves() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        # the site's home page is the README: a link outside docs/ would lead nowhere there
        assert link.startswith("docs/"), link
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            assert anchor in _anchors(target), link


def test_the_sites_home_page_is_the_readme_with_its_links_made_relative_to_docs() -> None:
    text = "[a](docs/guide/cost.md#x) ![b](docs/console/o.png) [c](https://example.org/docs/y)"
    assert home_page(text) == (
        "[a](guide/cost.md#x) ![b](console/o.png) [c](https://example.org/docs/y)"
    )


class _IgnoringPythonTags(yaml.SafeLoader):
    """mkdocs.yml names Python objects (`!!python/name:`) that only MkDocs should build."""


def _python_tag(loader: Any, suffix: str, node: Any) -> None:
    return None


_IgnoringPythonTags.add_multi_constructor("tag:yaml.org,2002:python/", _python_tag)


def test_the_site_is_built_strict_and_checks_every_link_and_anchor() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_IgnoringPythonTags)
    assert config["strict"] is True
    validation = config["validation"]
    for check in ("not_found", "anchors", "unrecognized_links", "omitted_files"):
        assert validation[check] == "warn", check  # a warning fails a strict build
    makefile = (ROOT / "Makefile").read_text()
    assert "mkdocs build --strict" in makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "make docs" in (ROOT / ".ci" / "run").read_text()
