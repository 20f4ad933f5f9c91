"""The front door and the docs: the README stays short with the two commands CI runs first,
and every relative link in README.md and docs/ leads to a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to '-'."""
    text = FENCE.sub("", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail under docs/"


def test_the_readmes_first_code_block_is_the_two_commands_ci_runs():
    first = re.search(r"^```\w*\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for page in PAGES:
        if not page.exists():
            continue
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)} → {target}"
            if not resolved.exists():
                broken.append(f"{where}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where}: no such heading")
    assert not broken, "broken links:\n" + "\n".join(broken)
