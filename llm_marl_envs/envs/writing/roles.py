"""Writing roles, their instructions and the length each part should have.

Two styles follow MAGRPO's writing tasks (Liu et al., 2025):

* ``"tldr"`` — its TLDR pair: a concise summary and a detailed one of the same source; 3 agents add a key-points
  list, 4 a headline.
* ``"arxiv"`` — its arXiv pair: background/motivation and method/implications paragraphs of a paper introduction
  written from the abstract; 3 agents add limitations, 4 a title.

One agent (``"solo"``) writes the whole piece: the single-agent baseline and the GRPO case.
Every role sees the whole source; what teammates write is private (see ``observability``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_marl_envs.core.roles import Role, team_for
from llm_marl_envs.core.tasks import Task

STYLES: tuple[str, ...] = ("tldr", "arxiv")


@dataclass(frozen=True)
class PartSpec:
    """What one role's part must look like: a word range and an optional structure rule."""

    min_words: int
    max_words: int
    structure: str | None = None
    """``"bullets"``: 3–5 lines starting with ``-``/``*``/``•``; ``"one_line"``: a single line."""


def _source_view(task: Task) -> str:
    title = task.fields.get("title")
    heading = f"Title: {title}\n\n" if title else ""
    return f"{heading}Source text:\n{task['source']}"


def _role(name: str, title: str, instruction: str) -> Role:
    return Role(name=name, title=title, instruction=instruction, view=_source_view)


_TLDR_ROLES: tuple[Role, ...] = (
    _role(
        "concise",
        "Concise summary",
        "Write a TL;DR of the text above in your own words: one or two sentences, 15-40 words.",
    ),
    _role(
        "detailed",
        "Detailed summary",
        "Write a detailed summary of the text above in your own words: one paragraph of 60-150 words covering "
        "who, what, when, where and why.",
    ),
    _role(
        "key_points",
        "Key points",
        "List the 3-5 key facts of the text above, one per line, each line starting with '- '.",
    ),
    _role("headline", "Headline", "Write a headline for the text above: one line of at most 12 words."),
)
_TLDR_SOLO = _role(
    "solo",
    "Summary writer",
    "Summarise the text above in your own words: a TL;DR sentence (15-40 words), then a detailed paragraph "
    "(60-150 words).",
)

_ARXIV_ROLES: tuple[Role, ...] = (
    _role(
        "background",
        "Background and motivation",
        "Write the first paragraph of the paper's introduction: the background and why the problem matters, "
        "60-150 words.",
    ),
    _role(
        "method",
        "Method and implications",
        "Write the second paragraph of the introduction: what the paper does and what it implies, 60-150 words.",
    ),
    _role(
        "limitations",
        "Limitations",
        "Write a short paragraph on the work's limitations and open questions, 30-90 words.",
    ),
    _role("title", "Title", "Write a title for the paper: one line of at most 15 words."),
)
_ARXIV_SOLO = _role(
    "solo",
    "Introduction writer",
    "Write the paper's introduction alone: background and motivation, then method and implications, 120-300 words.",
)

PART_SPECS: dict[str, dict[str, PartSpec]] = {
    "tldr": {
        "concise": PartSpec(15, 40),
        "detailed": PartSpec(60, 150),
        "key_points": PartSpec(15, 90, "bullets"),
        "headline": PartSpec(3, 12, "one_line"),
        "solo": PartSpec(75, 190),
    },
    "arxiv": {
        "background": PartSpec(60, 150),
        "method": PartSpec(60, 150),
        "limitations": PartSpec(30, 90),
        "title": PartSpec(3, 15, "one_line"),
        "solo": PartSpec(120, 300),
    },
}

LENGTH_RATIO_BOUNDS: dict[str, tuple[str, str, float, float]] = {
    # style: (shorter role, longer role, min ratio, max ratio) of word counts longer/shorter.
    "tldr": ("concise", "detailed", 2.0, 6.0),
    "arxiv": ("background", "method", 0.67, 1.5),
}


def writing_team(style: str, num_agents: int) -> tuple[Role, ...]:
    """The roles of a writing team of ``num_agents`` (1..4) in ``style``."""
    if style not in STYLES:
        raise ValueError(f"style: expected one of {STYLES}, got {style!r}")
    catalogue, solo = (_TLDR_ROLES, _TLDR_SOLO) if style == "tldr" else (_ARXIV_ROLES, _ARXIV_SOLO)
    return team_for(catalogue, solo, num_agents)
