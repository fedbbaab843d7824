"""Writing roles, their instructions and the length each part should have.

Two styles follow MAGRPO's writing tasks (Liu et al., 2025):

* ``"tldr"`` — its TLDR pair: a concise summary and a detailed one of the same source; 3 agents add a key-points
  list, 4 a headline.
* ``"arxiv"`` — its arXiv pair: background/motivation and method/implications paragraphs of a paper introduction
  written from the abstract; 3 agents add limitations, 4 a title.

One agent (``"solo"``) writes the whole piece: the single-agent baseline and the GRPO case.
Every role sees the whole passage (the text's lead, see ``tasks.py``); what teammates write is private (see
``observability``).
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
        "Write a TL;DR of the text above in your own words: one sentence of 10-30 words.",
    ),
    _role(
        "detailed",
        "Detailed summary",
        "Write a detailed summary of the text above in your own words: one paragraph of 30-70 words on who, what, "
        "when, where and why.",
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
    "Summarise the text above in your own words: a TL;DR sentence (10-30 words), then a paragraph (30-70 words).",
)

_ARXIV_ROLES: tuple[Role, ...] = (
    _role(
        "background",
        "Background and motivation",
        "Write the first paragraph of the paper's introduction: the background and why the problem matters, "
        "40-90 words.",
    ),
    _role(
        "method",
        "Method and implications",
        "Write the second paragraph of the introduction: what the paper does and what it implies, 40-90 words.",
    ),
    _role(
        "limitations",
        "Limitations",
        "Write a short paragraph on the work's limitations and open questions, 20-60 words.",
    ),
    _role("title", "Title", "Write a title for the paper: one line of at most 15 words."),
)
_ARXIV_SOLO = _role(
    "solo",
    "Introduction writer",
    "Write the paper's introduction alone: background and motivation, then method and implications, 80-180 words.",
)

PART_SPECS: dict[str, dict[str, PartSpec]] = {
    # Sized for a passage of about 90 words (the text's lead, tasks.SOURCE_WORDS): a one-sentence TL;DR, a paragraph
    # that restates the lead in fewer words, a few key facts, a headline.
    "tldr": {
        "concise": PartSpec(10, 30),
        "detailed": PartSpec(30, 70),
        "key_points": PartSpec(12, 50, "bullets"),
        "headline": PartSpec(3, 12, "one_line"),
        "solo": PartSpec(40, 100),
    },
    "arxiv": {
        "background": PartSpec(40, 90),
        "method": PartSpec(40, 90),
        "limitations": PartSpec(20, 60),
        "title": PartSpec(3, 15, "one_line"),
        "solo": PartSpec(80, 180),
    },
}

LENGTH_RATIO_BOUNDS: dict[str, tuple[str, str, float, float]] = {
    # style: (shorter role, longer role, min ratio, max ratio) of word counts longer/shorter.
    "tldr": ("concise", "detailed", 1.5, 5.0),
    "arxiv": ("background", "method", 0.67, 1.5),
}


def writing_team(style: str, num_agents: int) -> tuple[Role, ...]:
    """The roles of a writing team of ``num_agents`` (1..4) in ``style``."""
    if style not in STYLES:
        raise ValueError(f"style: expected one of {STYLES}, got {style!r}")
    catalogue, solo = (_TLDR_ROLES, _TLDR_SOLO) if style == "tldr" else (_ARXIV_ROLES, _ARXIV_SOLO)
    return team_for(catalogue, solo, num_agents)
