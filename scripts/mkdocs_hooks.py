"""MkDocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md itself.

The README is the front page a newcomer reads in the repository; the site shows the same text
rather than a copy that could drift from it. Its links are written from the repository's root
(`docs/guide/cost.md`), so they are made relative to `docs/` (`guide/cost.md`) on the way in.
A link from the README to anything outside `docs/` would then point nowhere on the site, and
`mkdocs build --strict` fails on it: the README links only into the manual.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# A Markdown link or image target that starts with docs/ (inline form only: the README uses no
# reference-style links).
_INTO_DOCS = re.compile(r"(\]\()docs/")


def home_page(readme: str) -> str:
    """README.md's text as docs/index.md would say it: links into docs/ made relative to it."""
    return _INTO_DOCS.sub(r"\1", readme)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    server.watch(str(README))
    return server
