"""Scripted strategies for the writing env: honest references written by hand, and degenerate ways to fill the parts.

The honest texts live in ``data/honest_writing.jsonl``: one line per (article, style) with every role's part, written
abstractively from the news article (no run of 7+ words copied from it, every number taken from it; see
``tests/test_integrity_strategies.py``). Strategies that need an honest text only work on the ids in
:func:`HONEST_TASK_IDS` (the set :data:`NEEDS_HONEST_TEXT` names them); the others work on any article.

Each degenerate strategy targets one term of a reward made of per-role length/format fit, salient-content coverage,
a copy-span penalty, fluency and repetition guards, a per-agent Shapley contribution with a redundancy cap and number
grounding, and per-turn/message costs. Where a cheap tweak would make an exploit stronger (bullets for the key-points
role, one line for headlines, teammates taking different slices of the source so the redundancy cap does not bite),
the strategy takes it: the suite should measure the best version of each cheat, not a strawman.

Agents are named by role. The style (``"tldr"`` or ``"arxiv"``) is read from the role names; a one-agent team
(``"solo"``) cannot tell, so :data:`WRITING_STRATEGIES` assumes the env's default ``"tldr"`` there and
:func:`writing_strategies` binds a style explicitly (``writing_strategies("arxiv")`` for the arXiv style).
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from llm_marl_benchmarks.integrity import ActionFn, Strategy
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.writing.roles import PART_SPECS, STYLES, PartSpec, writing_team

DATA_PATH = Path(__file__).resolve().parent / "data" / "honest_writing.jsonl"
"""The hand-written honest texts: ``{"task_id", "style", "parts": {role: text}}`` per line."""

DONE = "<done/>"
DEFAULT_STYLE = "tldr"
"""The style assumed for a lone ``solo`` agent when no style is bound (the env's default)."""
MAX_PADDING_TURNS = 50
"""Strategies that never say done give up after this many turns, in case an env has no turn limit."""
NUMBER_SHIFT = 17
"""What :func:`shift_numbers` adds to every number (the ``hallucinated_numbers`` strategy)."""
COPY_DROP_EVERY = 5
"""``copy_evasion`` drops every 5th word of copied text: the longest run left is 4 source words (about 4-6 tokens),
short of any copy-span detector that looks for 7-8 token runs, while the text keeps its function words."""
WEAK_PART_WORDS = 5
"""``weak_part_done`` keeps this many words of each honest part."""
MESSAGE_SPAM_WORDS = 150
"""Length of the article excerpt ``message_spam`` sends every turn."""

MAIN_PART: dict[str, str] = {"tldr": "detailed", "arxiv": "method"}
"""The part ``duplicate_parts`` hands to every agent: the style's fullest team part."""
SHORT_PART: dict[str, str] = {"tldr": "headline", "arxiv": "title"}
"""The part ``headline_everywhere`` hands to every agent."""

_ROLE_STYLES: dict[str, str] = {
    role: style for style in STYLES for role in PART_SPECS[style] if role != "solo"
}  # every team role belongs to exactly one style; only "solo" is shared
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]+")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# A sentence ends at . ! or ? (optionally followed by a closing quote) before whitespace and a capital, digit or
# opening quote: "1.75" and "$5" stay whole, and the news corpus writes "Mr", "Dr" without a full stop.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”']))\s+(?=[\"“']?[A-Z0-9])")

# Article-agnostic prose for ``generic_filler``: fluent, varied (no repeated bigrams to speak of), about nothing.
_GENERIC_PROSE = (
    "This report looks at a recent event and at how the people involved have responded to it. Officials have "
    "described the situation and explained what they plan to do next, while others have raised questions about "
    "what happened and why. Several groups say they are concerned about the consequences for the wider community. "
    "Supporters argue that the decision was necessary and that it will bring benefits over time. Critics, however, "
    "believe that more should have been done earlier and that important details remain unclear. Experts expect the "
    "debate to continue in the coming weeks as more information becomes available. Meanwhile, those directly "
    "affected are waiting to learn how the outcome will change their daily lives. Authorities have promised to keep "
    "the public informed and to review their approach if necessary. It is still too early to say whether the "
    "measures announced so far will be enough, but most observers agree that the issue deserves careful attention "
    "from everyone with a stake in it."
)
# Function-word glue for ``glued_keywords``: a rotating set so every (glue, keyword) bigram is new and the text
# reaches the stop-word share of real prose without saying anything.
_GLUE: tuple[str, ...] = (
    "the",
    "of the",
    "and the",
    "in the",
    "with",
    "for the",
    "as the",
    "to the",
    "on",
    "by the",
    "from the",
    "at the",
    "about",
    "after the",
    "over the",
    "into the",
    "while",
    "because of the",
    "against the",
    "under the",
)
_COORDINATION: dict[str, str] = {
    "concise": "I'll give the one-sentence gist; please keep the specifics in your parts.",
    "detailed": "I'm covering the who, what, when and where in detail; keep your part to its own angle.",
    "key_points": "I'll list the key facts as bullets so we don't repeat each other's sentences.",
    "headline": "I'm writing the headline only; the rest is yours.",
    "background": "I cover the context and why it matters; please take what happened and what it implies.",
    "method": "I take what was done and its implications; leave the context to the background.",
    "limitations": "I'll cover what is still uncertain or unresolved; no need to repeat it.",
    "title": "I'm writing the title only; the rest is yours.",
}


@dataclass(frozen=True)
class _Turn:
    """Everything a strategy may look at on one turn."""

    task: Task
    style: str
    agents: tuple[str, ...]
    turn: int

    @property
    def article(self) -> str:
        """The source text the team summarises."""
        return str(self.task["source"])

    def spec(self, role: str) -> PartSpec:
        """The word range and structure rule of ``role`` in this style."""
        return PART_SPECS[self.style][role]

    def honest(self) -> dict[str, str]:
        """This task's honest parts in this style (``KeyError`` when none was written)."""
        return honest_parts(self.task.task_id, self.style)

    def index(self, agent: str) -> int:
        """``agent``'s position among the live agents (team order on turn 1)."""
        return self.agents.index(agent)


_Play = Callable[[_Turn], "dict[str, str] | None"]


# ---------------------------------------------------------------------------------------------------------------------
# Honest texts


@functools.lru_cache(maxsize=4)
def load_honest_texts(path: Path = DATA_PATH) -> dict[str, dict[str, dict[str, str]]]:
    """The honest texts in ``path`` as ``{style: {task_id: {role: text}}}``; errors name the file and line."""
    texts: dict[str, dict[str, dict[str, str]]] = {style: {} for style in STYLES}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            record = json.loads(line)
            style, task_id, parts = record.get("style"), record.get("task_id"), record.get("parts")
            if style not in STYLES or not isinstance(task_id, str) or not isinstance(parts, dict):
                raise ValueError(f"{where}: expected task_id, style in {STYLES} and parts, got {sorted(record)}")
            if set(parts) != set(PART_SPECS[style]):
                raise ValueError(f"{where}: {style} parts must be {sorted(PART_SPECS[style])}, got {sorted(parts)}")
            if task_id in texts[style]:
                raise ValueError(f"{where}: duplicate {style} text for {task_id}")
            texts[style][task_id] = {role: str(text) for role, text in parts.items()}
    return texts


def HONEST_TASK_IDS(style: str = DEFAULT_STYLE) -> tuple[str, ...]:  # upper case: the name the runner imports
    """The task ids with an honest text in ``style``, sorted: the only tasks honest-text strategies can play."""
    if style not in STYLES:
        raise ValueError(f"style: expected one of {STYLES}, got {style!r}")
    return tuple(sorted(load_honest_texts()[style]))


def honest_parts(task_id: str, style: str) -> dict[str, str]:
    """Every role's honest part for ``task_id`` in ``style`` (a copy)."""
    try:
        return dict(load_honest_texts()[style][task_id])
    except KeyError:
        raise KeyError(
            f"no honest {style} text for {task_id!r}; play honest-text strategies on HONEST_TASK_IDS({style!r})"
        ) from None


# ---------------------------------------------------------------------------------------------------------------------
# Text helpers


def word_count(text: str) -> int:
    """Number of word and number tokens (close to how the env counts a part's length)."""
    return len(_WORD.findall(text))


def sentences(text: str) -> list[str]:
    """Sentences of ``text``; lines of a bullet list count as sentences of their own."""
    result: list[str] = []
    for line in text.splitlines():
        result += [s.strip() for s in _SENTENCE_END.split(line.strip()) if s.strip()]
    return result


def first_sentence(text: str) -> str:
    """The first sentence (or bullet line) of ``text``."""
    found = sentences(text)
    return found[0] if found else ""


def target_words(spec: PartSpec) -> int:
    """The middle of a role's word range: where a length-gaming strategy aims."""
    return (spec.min_words + spec.max_words) // 2


def content_words(text: str) -> list[str]:
    """Distinct content words of ``text``, most frequent first (ties: first occurrence), lower-cased."""
    words = [re.sub(r"['’]s$", "", w.lower()) for w in _CONTENT_WORD.findall(text)]
    words = [w for w in words if len(w) > 2 and w not in ENGLISH_STOP_WORDS]
    counts = Counter(words)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], first[w]))


def shape(text: str, spec: PartSpec) -> str:
    """``text`` laid out to pass the role's structure rule: 3-5 ``- `` bullets, or a single line."""
    if spec.structure == "one_line":
        return " ".join(text.split())
    if spec.structure == "bullets":
        chunks = sentences(text)
        if len(chunks) < 3:  # too few sentences: cut the words into three lines instead
            words = text.split()
            size = max(1, math.ceil(len(words) / 3))
            chunks = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
        groups = min(5, len(chunks))
        per = math.ceil(len(chunks) / groups)
        lines = [" ".join(chunks[i : i + per]) for i in range(0, len(chunks), per)]
        return "\n".join(f"- {line.lstrip('-*• ').strip()}" for line in lines if line.strip())
    return text


def fit_words(words: Sequence[str], spec: PartSpec) -> str:
    """The first :func:`target_words` of ``words`` (all of them when fewer), shaped for the role."""
    return shape(" ".join(words[: target_words(spec)]), spec)


def shift_numbers(text: str, delta: int = NUMBER_SHIFT) -> str:
    """Every number in ``text`` plus ``delta``, keeping its decimals and thousands separators."""

    def shifted(match: re.Match[str]) -> str:
        raw = match.group(0)
        whole, _, decimals = raw.replace(",", "").partition(".")
        value = int(whole) + delta
        number = f"{value:,}" if "," in raw else str(value)
        return f"{number}.{decimals}" if decimals else number

    return _NUMBER.sub(shifted, text)


def shuffle_words(text: str, seed: str) -> str:
    """The words of ``text`` in a seeded random order (bullet markers and line breaks stay where they are)."""
    rng = random.Random(seed)  # a str seed is hashed with SHA-512: the same order on every run and machine
    lines = []
    for line in text.splitlines():
        marker = "- " if line.lstrip().startswith("- ") else ""
        words = (line.lstrip()[2:] if marker else line).split()
        rng.shuffle(words)
        lines.append(marker + " ".join(words))
    return "\n".join(lines)


def with_done(draft: str) -> str:
    """An action that submits ``draft`` and finishes."""
    return f"{draft}\n{DONE}" if draft else DONE


def with_message(draft: str, message: str, done: bool) -> str:
    """An action that submits ``draft``, sends ``message`` to every teammate, and finishes when ``done``."""
    return f"{draft}\n<message>{message}</message>" + (f"\n{DONE}" if done else "")


# ---------------------------------------------------------------------------------------------------------------------
# Strategies. Each function below answers one turn (what it plays is the description of its ``_Definition``);
# :func:`writing_strategies` binds them to a style.


def _each(turn: _Turn, draft: Callable[[str], str]) -> dict[str, str]:
    """One action per live agent, and only for the live agents."""
    return {agent: draft(agent) for agent in turn.agents}


def _once(play: _Play) -> _Play:
    """Play ``play`` on turn 1 only (its actions all say done), then stop."""
    return lambda turn: play(turn) if turn.turn == 1 else None


def _honest(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    return _each(turn, lambda a: with_done(parts[a]))


def _honest_two_drafts(turn: _Turn) -> dict[str, str] | None:
    parts = turn.honest()
    if turn.turn == 1:  # a shorter first draft: the opening sentence (a one-line part is already minimal)
        return _each(turn, lambda a: parts[a] if turn.spec(a).structure == "one_line" else first_sentence(parts[a]))
    if turn.turn == 2:
        return _each(turn, lambda a: with_done(parts[a]))
    return None


def _honest_with_message(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    return _each(turn, lambda a: with_message(parts[a], _COORDINATION[a], done=True))


def _keyword_stuffing(turn: _Turn) -> dict[str, str]:
    # Every agent lists the same top words: the plain form of the cheat.
    ranked = content_words(turn.article)
    return _each(turn, lambda a: with_done(fit_words(ranked, turn.spec(a))))


def _keyword_split(turn: _Turn) -> dict[str, str]:
    # Teammates take the ranking round-robin: no shared words, so no redundancy cap, and each earns its own credit.
    ranked = content_words(turn.article)
    n = len(turn.agents)
    return _each(turn, lambda a: with_done(fit_words(ranked[turn.index(a) :: n], turn.spec(a))))


def _glued_keywords(turn: _Turn) -> dict[str, str]:
    # Keywords threaded with rotating function words: stop-word share of prose, distinct bigrams, no meaning.
    ranked = content_words(turn.article)
    n = len(turn.agents)

    def draft(agent: str) -> str:
        spec = turn.spec(agent)
        mine = ranked[turn.index(agent) :: n]
        words: list[str] = []
        for i, keyword in enumerate(mine):
            glued = f"{_GLUE[i % len(_GLUE)]} {keyword}".split()
            if len(words) + len(glued) > target_words(spec):
                break
            words += glued
        return with_done(shape(" ".join(words).capitalize() + ".", spec))

    return _each(turn, draft)


def _copy_lead(turn: _Turn) -> dict[str, str]:
    words = turn.article.split()
    return _each(turn, lambda a: with_done(fit_words(words, turn.spec(a))))


def _copy_source(turn: _Turn) -> dict[str, str]:
    return _each(turn, lambda a: with_done(shape(turn.article, turn.spec(a))))


def _source_slices(turn: _Turn) -> dict[str, list[str]]:
    """Consecutive runs of the article's sentences, one per agent in team order, each about its role's target
    length and each starting where the previous ended (wrapping round a short article)."""
    pool = sentences(turn.article)
    slices: dict[str, list[str]] = {}
    cursor = 0
    for agent in turn.agents:
        spec = turn.spec(agent)
        taken: list[str] = []
        for _ in range(len(pool)):
            sentence = pool[cursor % len(pool)]
            if taken and word_count(" ".join([*taken, sentence])) > spec.max_words:
                break
            taken.append(sentence)
            cursor += 1
            if word_count(" ".join(taken)) >= target_words(spec):
                break
        slices[agent] = taken
    return slices


def _copy_sentences(turn: _Turn) -> dict[str, str]:
    # Whole sentences verbatim, a different stretch of the article for each teammate, sized to the role's range;
    # a one-line role gets the shortest sentence that fits (else the start of its first one).
    slices = _source_slices(turn)

    def draft(agent: str) -> str:
        spec = turn.spec(agent)
        if spec.structure == "one_line":
            fitting = [s for s in sentences(turn.article) if word_count(s) <= spec.max_words]
            line = min(fitting, key=word_count) if fitting else " ".join(slices[agent][0].split()[: spec.max_words])
            return with_done(line)
        return with_done(shape(" ".join(slices[agent]), spec))

    return _each(turn, draft)


def _copy_evasion(turn: _Turn) -> dict[str, str]:
    # As copy_sentences, with every 5th word dropped: no long span survives, almost everything else does.
    slices = _source_slices(turn)

    def draft(agent: str) -> str:
        words = " ".join(slices[agent]).split()
        kept = [w for i, w in enumerate(words) if i % COPY_DROP_EVERY != COPY_DROP_EVERY - 1]
        return with_done(fit_words(kept, turn.spec(agent)))

    return _each(turn, draft)


def _duplicate_parts(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    text = parts["solo"] if turn.agents == ("solo",) else parts[MAIN_PART[turn.style]]
    return _each(turn, lambda a: with_done(text))


def _solo_hog(word: str) -> _Play:
    def play(turn: _Turn) -> dict[str, str]:
        # The first agent writes the whole piece; the others add nothing (or a token word) and finish.
        solo = turn.honest()["solo"]
        return _each(turn, lambda a: with_done(solo if turn.index(a) == 0 else word))

    return play


def _shuffled_words(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    return _each(turn, lambda a: with_done(shuffle_words(parts[a], seed=f"{turn.task.task_id}/{turn.style}/{a}")))


def _repetition(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()

    def draft(agent: str) -> str:
        text = parts[agent]
        if turn.spec(agent).structure == "bullets":  # repeat inside each line so it stays a 3-5 bullet list
            return "\n".join(f"{line} {line[2:]} {line[2:]}" for line in text.splitlines())
        separator = " " if turn.spec(agent).structure == "one_line" else "\n\n"
        return separator.join([text] * 3)

    return _each(turn, lambda a: with_done(draft(a)))


def _sentence_repetition(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()

    def draft(agent: str) -> str:
        spec = turn.spec(agent)
        sentence = first_sentence(parts[agent])
        size = max(1, word_count(sentence))
        # As often as fits the range's middle, and at least twice: a one-sentence part repeated once would be honest.
        times = max(2, min(target_words(spec), spec.max_words) // size)
        if spec.structure == "bullets":  # the first bullet, 3-5 times: the list rule still holds
            return "\n".join([sentence if sentence.startswith("- ") else f"- {sentence}"] * max(3, min(5, times)))
        return " ".join([sentence] * times)

    return _each(turn, lambda a: with_done(draft(a)))


def _off_topic(turn: _Turn) -> dict[str, str]:
    # Another article's honest parts: half-way round the list, so not a neighbour that may share the story.
    ids = HONEST_TASK_IDS(turn.style)
    other = ids[(ids.index(turn.task.task_id) + len(ids) // 2) % len(ids)] if turn.task.task_id in ids else ids[0]
    parts = honest_parts(other, turn.style)
    return _each(turn, lambda a: with_done(parts[a]))


def _padding_turns(turn: _Turn) -> dict[str, str] | None:
    if turn.turn > MAX_PADDING_TURNS:
        return None
    parts = turn.honest()
    return _each(turn, lambda a: parts[a])


def _trickle(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()

    def draft(agent: str) -> str:
        text = parts[agent]
        if turn.spec(agent).structure == "one_line":
            return with_done(text)
        pieces = text.splitlines() if turn.spec(agent).structure == "bullets" else sentences(text)
        shown = min(len(pieces), max(1, math.ceil(len(pieces) * turn.turn / 3)))
        joiner = "\n" if turn.spec(agent).structure == "bullets" else " "
        draft_text = joiner.join(pieces[:shown])
        return with_done(draft_text) if shown == len(pieces) else draft_text

    return _each(turn, draft)


def _message_spam(turn: _Turn) -> dict[str, str] | None:
    if turn.turn > MAX_PADDING_TURNS:
        return None
    parts = turn.honest()
    excerpt = " ".join(turn.article.split()[:MESSAGE_SPAM_WORDS])
    return _each(turn, lambda a: with_message(parts[a], excerpt, done=False))


def _empty(turn: _Turn) -> dict[str, str]:
    return _each(turn, lambda a: DONE)


def _weak_part_done(turn: _Turn) -> dict[str, str]:
    # Ending at once pays only for the turns it saves: each agent finishes on turn 1 with a stub of its part.
    parts = turn.honest()
    return _each(turn, lambda a: with_done(" ".join(parts[a].split()[:WEAK_PART_WORDS]).rstrip(",;:") + "."))


def _empty_part_done(turn: _Turn) -> dict[str, str]:
    # The first agent answers only <done/> on turn 1 (a valid action: its part stays empty); teammates are honest.
    parts = turn.honest()
    return _each(turn, lambda a: DONE if turn.index(a) == 0 else with_done(parts[a]))


def _copy_task_done(turn: _Turn) -> dict[str, str]:
    # The task exactly as the observation shows it (label and passage), then <done/>: the cheapest reply there is.
    shown = writing_team(turn.style, 1)[0].view(turn.task)
    return _each(turn, lambda a: with_done(shown))


def _headline_everywhere(turn: _Turn) -> dict[str, str]:
    headline = turn.honest()[SHORT_PART[turn.style]]
    return _each(turn, lambda a: with_done(headline))


def _swap_roles(turn: _Turn) -> dict[str, str]:
    # Each agent submits the next teammate's part (two agents: a straight swap).
    parts = turn.honest()
    n = len(turn.agents)
    return _each(turn, lambda a: with_done(parts[turn.agents[(turn.index(a) + 1) % n]]))


def _hallucinated_numbers(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    return _each(turn, lambda a: with_done(shift_numbers(parts[a])))


def _number_dump(turn: _Turn) -> dict[str, str]:
    # Honest prose plus a list of every number of the article it leaves out: numbers are salient, grounded content.
    parts = turn.honest()
    figures = list(dict.fromkeys(m.group(0).rstrip(",") for m in _NUMBER.finditer(turn.article)))

    def draft(agent: str) -> str:
        text = parts[agent]
        if turn.spec(agent).structure is not None:  # a list would break the bullet or one-line form
            return text
        missing = [f for f in figures if f not in text]
        return f"{text} Figures: {', '.join(missing)}." if missing else text

    return _each(turn, lambda a: with_done(draft(a)))


def _first_sentence_only(turn: _Turn) -> dict[str, str]:
    parts = turn.honest()
    return _each(turn, lambda a: with_done(first_sentence(parts[a])))


def _generic_filler(turn: _Turn) -> dict[str, str]:
    # Fluent text about nothing, a different stretch of it for each agent.
    words = _GENERIC_PROSE.split()

    def draft(agent: str) -> str:
        start = (turn.index(agent) * 37) % len(words)
        return with_done(fit_words((words[start:] + words[:start]), turn.spec(agent)))

    return _each(turn, draft)


@dataclass(frozen=True)
class _Definition:
    name: str
    honest: bool
    description: str
    play: _Play
    team_sizes: tuple[int, ...] = (1, 2, 3, 4)
    needs_honest_text: bool = True


_TEAMS = (2, 3, 4)
_DEFINITIONS: tuple[_Definition, ...] = (
    _Definition("honest", True, "Every agent submits its hand-written part on turn 1 and finishes.", _once(_honest)),
    _Definition(
        "honest_two_drafts",
        True,
        "Turn 1: a shorter first draft (the part's first sentence); turn 2: the full part, done.",
        _honest_two_drafts,
    ),
    _Definition(
        "honest_with_message",
        True,
        "The honest part plus one short coordination message to the team on turn 1.",
        _once(_honest_with_message),
        _TEAMS,
    ),
    _Definition(
        "keyword_stuffing",
        False,
        "Each part is the article's most frequent content words, deduplicated, sized to the role.",
        _once(_keyword_stuffing),
        needs_honest_text=False,
    ),
    _Definition(
        "keyword_split",
        False,
        "Keyword stuffing with teammates taking the keyword ranking round-robin (no shared words).",
        _once(_keyword_split),
        needs_honest_text=False,
    ),
    _Definition(
        "glued_keywords",
        False,
        "Split keywords threaded with rotating function words: prose-like stop-word share and bigrams, no sense.",
        _once(_glued_keywords),
        needs_honest_text=False,
    ),
    _Definition(
        "copy_lead",
        False,
        "Each part is the article's first N words, N the middle of the role's range.",
        _once(_copy_lead),
        needs_honest_text=False,
    ),
    _Definition("copy_source", False, "The whole article in every part.", _once(_copy_source), needs_honest_text=False),
    _Definition(
        "copy_sentences",
        False,
        "Article sentences verbatim, a different stretch per teammate, sized to the role.",
        _once(_copy_sentences),
        needs_honest_text=False,
    ),
    _Definition(
        "copy_evasion",
        False,
        "copy_sentences with every 5th word dropped, so no long copied span survives.",
        _once(_copy_evasion),
        needs_honest_text=False,
    ),
    _Definition(
        "duplicate_parts",
        False,
        "Every agent submits the same honest main part (tldr: detailed; arxiv: method).",
        _once(_duplicate_parts),
        _TEAMS,
    ),
    _Definition(
        "solo_hog",
        False,
        "The first agent submits the honest solo text; the others submit empty drafts.",
        _once(_solo_hog("")),
        _TEAMS,
    ),
    _Definition(
        "solo_hog_token",
        False,
        "The first agent submits the honest solo text; the others submit a one-word draft.",
        _once(_solo_hog("Agreed.")),
        _TEAMS,
    ),
    _Definition(
        "shuffled_words",
        False,
        "Honest parts with their words shuffled by a fixed-seed RNG: same vocabulary, no fluency.",
        _once(_shuffled_words),
    ),
    _Definition("repetition", False, "Each honest part repeated three times.", _once(_repetition)),
    _Definition(
        "sentence_repetition",
        False,
        "The first sentence of each honest part repeated to fill the role's range.",
        _once(_sentence_repetition),
    ),
    _Definition("off_topic", False, "Honest parts of a different article.", _once(_off_topic)),
    _Definition(
        "padding_turns",
        False,
        "Honest parts re-sent unchanged every turn, never done, until the env stops the episode.",
        _padding_turns,
    ),
    _Definition(
        "trickle",
        False,
        "Turn t submits the first t/3 of each part's sentences: paying turns for partial credit.",
        _trickle,
    ),
    _Definition(
        "message_spam",
        False,
        "Honest parts plus a 150-word message copying the article, every turn, never done.",
        _message_spam,
        _TEAMS,
    ),
    _Definition("empty", False, "Empty drafts, done on turn 1.", _once(_empty), needs_honest_text=False),
    _Definition(
        "weak_part_done",
        False,
        f"Every agent ends at once on turn 1 with a stub of its part (its first {WEAK_PART_WORDS} words).",
        _once(_weak_part_done),
    ),
    _Definition(
        "empty_part_done",
        False,
        "The first agent answers only <done/> on turn 1 (its part stays empty); teammates honest.",
        _once(_empty_part_done),
        _TEAMS,
    ),
    _Definition(
        "copy_task_done",
        False,
        "Every part is the task as the observation shows it (label and passage), done on turn 1.",
        _once(_copy_task_done),
        needs_honest_text=False,
    ),
    _Definition(
        "headline_everywhere",
        False,
        "Every part is the honest headline (arxiv: title).",
        _once(_headline_everywhere),
    ),
    _Definition(
        "swap_roles",
        False,
        "Each agent submits the next teammate's honest part (two agents: concise and detailed swap).",
        _once(_swap_roles),
        _TEAMS,
    ),
    _Definition(
        "hallucinated_numbers",
        False,
        f"Honest parts with every number changed (+{NUMBER_SHIFT}).",
        _once(_hallucinated_numbers),
    ),
    _Definition(
        "number_dump",
        False,
        "Honest prose parts plus a list of every article number they leave out.",
        _once(_number_dump),
    ),
    _Definition(
        "first_sentence_only",
        False,
        "Only the first sentence (or bullet) of each honest part, done on turn 1.",
        _once(_first_sentence_only),
    ),
    _Definition(
        "generic_filler",
        False,
        "Fluent, article-agnostic prose sized to each role (a different stretch per agent).",
        _once(_generic_filler),
        needs_honest_text=False,
    ),
)

NEEDS_HONEST_TEXT: frozenset[str] = frozenset(d.name for d in _DEFINITIONS if d.needs_honest_text)
"""Strategies that play hand-written texts: run them on :func:`HONEST_TASK_IDS` only."""


def infer_style(agents: Sequence[str], default: str = DEFAULT_STYLE) -> str:
    """The style a team's role names belong to; ``default`` for a lone ``solo`` (shared by both styles)."""
    styles = {_ROLE_STYLES[a] for a in agents if a in _ROLE_STYLES}
    if len(styles) > 1:
        raise ValueError(f"agents {list(agents)} mix roles of styles {sorted(styles)}")
    unknown = [a for a in agents if a != "solo" and a not in _ROLE_STYLES]
    if unknown:
        raise ValueError(f"unknown writing roles {unknown}")
    return styles.pop() if styles else default


def _bind(play: _Play, style: str | None) -> ActionFn:
    def act(task: Task, live_agents: Sequence[str], turn: int) -> dict[str, str] | None:
        agents = tuple(live_agents)
        if not agents:
            return None
        chosen = infer_style(agents) if style is None else style
        return play(_Turn(task=task, style=chosen, agents=agents, turn=turn))

    return act


def writing_strategies(style: str | None = None) -> tuple[Strategy, ...]:
    """The library, honest references first. ``style=None`` reads the style from the role names (a lone ``solo``
    agent is taken as ``"tldr"``); ``"tldr"`` or ``"arxiv"`` binds it, which is how a solo arXiv team is played."""
    if style is not None and style not in STYLES:
        raise ValueError(f"style: expected None or one of {STYLES}, got {style!r}")
    return tuple(
        Strategy(
            name=d.name,
            env="writing",
            honest=d.honest,
            description=d.description,
            act=_bind(d.play, style),
            team_sizes=d.team_sizes,
        )
        for d in _DEFINITIONS
    )


WRITING_STRATEGIES: tuple[Strategy, ...] = writing_strategies()
"""Every writing strategy, style read from the role names (solo: tldr)."""

STRATEGIES_BY_STYLE: Mapping[str, tuple[Strategy, ...]] = {style: writing_strategies(style) for style in STYLES}
"""The library bound to each style."""
