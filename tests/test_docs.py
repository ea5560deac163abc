"""The README is the front door: short, with both set-up commands, and one click from every
docs page; no relative link in the docs points at a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+://|#|mailto:", t)]


def test_the_readme_is_a_front_door_with_both_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "bash scripts/install.sh && .venv/bin/lactchain-tui" in text
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = "bash scripts/install.sh --test && .venv/bin/python -m pytest -q -n 2 --dist loadgroup"
    assert test_command in text
    assert ".venv/bin/python -m pytest -q -n 2 --dist loadgroup" in ci


def test_every_docs_page_is_one_click_from_the_readme():
    linked = {(ROOT / t.split("#")[0]).resolve() for t in _relative_links(ROOT / "README.md")}
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages
    assert [p.name for p in pages if p.resolve() not in linked] == []


def test_no_relative_link_in_the_docs_is_broken():
    broken = []
    for page in [ROOT / "README.md", ROOT / "tui" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in _relative_links(page):
            path = target.split("#")[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
