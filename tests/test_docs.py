"""The README is the front door: short, with both set-up commands, and one click from every
docs page; no relative link in the docs points at a file that is not there, and no command
they show names an option the CLI lacks."""

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


COMMAND = re.compile(r"(?:^|[`\s(])(?:\S*/)?(?:lactchain|\$lc)\s+([^`\n|]*)")


def _documented_commands(page: Path) -> list[list[str]]:
    """The argument lists of every `lactchain ...` (or the README's `$lc ...`) a page shows,
    backslash continuations joined, up to the first shell operator or comment."""
    import shlex

    text = re.sub(r"\\\n\s*", " ", page.read_text())
    found = []
    for match in COMMAND.finditer(text):
        rest = re.split(r"\s(?:&&|\|\||;|#|>)|\)", match.group(1))[0]
        try:
            found.append(shlex.split(rest))
        except ValueError:  # an unbalanced quote in prose
            found.append(rest.split())
    return found


def test_every_documented_command_and_option_exists_in_the_cli():
    """Docs drift silently when an option is renamed: every `lactchain` command shown in the
    README and docs (result folders included) must name a real command and real options."""
    import typer

    from lactchain.cli import app

    root = typer.main.get_command(app)
    unknown, checked = [], 0
    for page in [ROOT / "README.md", ROOT / "tui" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for tokens in _documented_commands(page):
            command, path = root, []
            while tokens and hasattr(command, "commands") and tokens[0] in command.commands:
                command = command.commands[tokens[0]]
                path.append(tokens.pop(0))
            where = f"{page.relative_to(ROOT)}: lactchain {' '.join(path)}"
            if hasattr(command, "commands"):  # a group: the next word, if a word, must be one of its commands
                if tokens and re.fullmatch(r"[a-z][a-z-]+", tokens[0]):
                    unknown.append(f"{where} {tokens[0]} (no such command)")
                continue
            checked += 1
            options = {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            unknown += [f"{where} {t}" for t in tokens if t.startswith("--") and t.split("=")[0] not in options]
    assert checked > 100  # the pattern still finds the docs' commands
    assert unknown == []
