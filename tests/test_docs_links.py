"""Every relative link in the project's Markdown (the README, docs/, each results folder's notes) points at a file or
folder that exists, so moving a page or a results folder cannot leave the front door pointing nowhere. The study's
generated ``report.md`` files are left out: they link plots most results folders do not commit."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Not the project's own pages: tools' folders, and run and build outputs a session may leave in the tree.
SKIPPED_PARTS = {".git", ".venv", "node_modules", ".pytest_cache", "runs", "build", "dist"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def markdown_files() -> list[Path]:
    """The project's Markdown pages; skipped folders are not walked at all (the venv alone holds thousands of files)."""
    pages = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_PARTS]
        pages += [Path(folder) / name for name in files if name.endswith(".md") and name != "report.md"]
    return sorted(pages)


def broken_links(page: Path) -> list[str]:
    """The relative link targets in ``page`` (code blocks aside) that name no existing path."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    return broken


def test_the_front_door_and_docs_are_checked() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "docs/results.md", "docs/figures.md", "docs/study.md"} <= pages


def test_every_relative_link_in_the_markdown_resolves() -> None:
    broken = {p.relative_to(ROOT).as_posix(): b for p in markdown_files() if (b := broken_links(p))}
    assert not broken, f"links to nothing: {broken}"


def test_a_link_to_nothing_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md) [anchor](there.md#a) [web](https://example.org) [gone](missing/)\n"
                    "```\n[in code](also-missing.md)\n```\n")
    assert broken_links(page) == ["missing/"]
