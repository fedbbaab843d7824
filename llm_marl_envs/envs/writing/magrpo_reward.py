"""MAGRPO's level-gated writing rewards (TLDR and arXiv), re-implemented so results compare with that paper's.

Source of the formulas: Liu et al. 2025, "LLM Collaboration with Multi-Agent Reinforcement Learning" (MAGRPO);
repository ``OpenMLRL/LLM_Collab_Writing``, files ``rewards/tldr_rewards.py`` (``tldr_combined_reward``) and
``rewards/arxiv_rewards.py`` (``arxiv_combined_reward``). The same files sat in ``LLM_Collab_Code_Generation`` at its
first commit (Aug 2025, the paper's v1). The code here is ours; thresholds, weights and word lists carry over.

Both rewards score a pair of texts ``(first, second)`` in four gated levels; a level that fails stops the scoring:

1. *structure* (+0.5): both texts have a whitespace-token count within a range, else the reward is 0.
2. *coordination* (0..1): the character-length ratio ``len(second) / len(first)`` on a trapezoid (1 inside the
   optimal band, linear to 0 at the acceptable edges); outside the acceptable band scoring stops.
3. *vocabulary* (0..0.5): the ratio of unique lower-cased words (``\\b\\w+\\b``, stopwords *kept*, as the original's
   code does although its docstring says otherwise) on another band; outside it scoring stops.
4. *style* (0..1): ``0.4 * transition + 0.6 * jaccard`` where ``transition`` is 0.4 for one category of transition
   words found plus 0.05 per further category (12 categories, so at most 0.95; words match as plain substrings of the
   lower-cased text, as in the original) and ``jaccard`` the stopword-free word-set Jaccard similarity of the two
   texts divided by a cap (and clipped at 1).

The nominal maximum is 3.0; with 12 categories the reachable maximum is 2.98.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from llm_marl_envs.core.rewards import MagrpoReward

_WORD = re.compile(r"\b\w+\b")

# The original's stopword list (used for the Jaccard term only).
MAGRPO_STOPWORDS: frozenset[str] = frozenset(
    """a all also an and any are as at bad be been being both but by can could did do does each few first for from
    good great had has have he her here him his how i if in is it its just last left little long low many may me
    might more most much must my new no not now of old on only or other our own right same shall should so some such
    than that the their them then there these they this those to too us very was we were what when where which who
    why will with would you your""".split()  # noqa: SIM905 (a word list reads better as one string)
)

# The original's twelve transition-word categories (phrases separated by "|"), matched as substrings.
_TRANSITIONS = {
    "elaboration": "additionally|along with|also|analogously|as well as|besides|by the same token|comparatively|"
    "correspondingly|coupled with|equally important|furthermore|in addition|in like manner|in the same way|"
    "likewise|moreover|not only|similarly|together with|what is more",
    "examples": "above all|as an illustration|as evidence|case in point|chiefly|especially|for example|for instance|"
    "in particular|including|mainly|markedly|most importantly|namely|notably|particularly|primarily|specifically|"
    "such as|to demonstrate|to exemplify|to illustrate",
    "explanation": "actually|at its core|basically|clearly|essentially|fundamentally|in essence|in fact|"
    "in other words|indeed|more precisely|obviously|simply put|specifically speaking|stated differently|that is|"
    "the point is|to clarify|to put it another way|to put it simply|to rephrase|what this means is",
    "cause_effect": "accordingly|as a consequence|as a result|because of this|consequently|due to this|ergo|"
    "for this reason|hence|in consequence|it follows that|on account of|owing to|resulting from|so|thanks to|then|"
    "thence|thereby|therefore|this brings about|this causes|this leads to|this results in|thus|wherefore",
    "contrast": "all the same|alternatively|although|at any rate|be that as it may|but|by contrast|contrarily|"
    "conversely|despite this|even so|even though|however|in any case|in contrast|in opposition|instead|"
    "nevertheless|nonetheless|notwithstanding|on the contrary|on the other hand|otherwise|rather|regardless|still|"
    "whereas|while|yet",
    "sequence": "after that|afterward|at first|at the outset|at the same time|concurrently|finally|first|"
    "following this|in conclusion|in summary|in the beginning|in the end|in the meantime|initially|lastly|later|"
    "later on|meanwhile|next|primarily|second|secondly|simultaneously|subsequently|then|third|thirdly|"
    "to begin with|to conclude|to start with|to summarize|ultimately",
    "emphasis": "absolutely|admittedly|as a matter of fact|certainly|clearly|definitely|evidently|granted|in fact|"
    "indeed|indubitably|manifestly|naturally|notably|obviously|of course|positively|significantly|surely|"
    "to be sure|undeniably|undoubtedly|unquestionably|without doubt",
    "summary": "after all|all in all|basically|briefly|essentially|fundamentally|in brief|in conclusion|in essence|"
    "in short|in summary|in the end|in the final analysis|on the whole|overall|the bottom line is|to conclude|"
    "to sum up|to summarize|ultimately|when all is said and done",
    "comparison": "along the same lines|analogously|as with|by analogy|by the same token|comparable to|"
    "correspondingly|equally|in comparison|in like manner|in similar fashion|in the same way|just as|just like|"
    "likewise|much like|similarly",
    "concession": "admittedly|all the same|although|be that as it may|despite|even if|even though|granted|however|"
    "in spite of|nevertheless|nonetheless|notwithstanding|regardless of|still|though|whereas|while|yet",
    "condition": "as long as|assuming that|even if|given that|had|if|in case|in the event that|on condition that|"
    "only if|or else|otherwise|provided that|should|so long as|supposing that|unless|were|whether or not",
    "time": "after|afterward|as|at the same time|before|concurrently|currently|during|earlier|eventually|finally|"
    "formerly|immediately|lately|later|meanwhile|nowadays|presently|previously|recently|simultaneously|since|"
    "subsequently|until|when|while",
}
MAGRPO_TRANSITION_CATEGORIES: dict[str, tuple[str, ...]] = {
    name: tuple(phrases.split("|")) for name, phrases in _TRANSITIONS.items()
}

Band = tuple[float, float, float, float]
"""``(zero_low, full_low, full_high, zero_high)``: 0 at the outer edges, 1 between the inner ones, linear between."""

# arXiv length-ratio bands: the paper's v1 code (Aug 2025) and upstream since commit 38252a5 (2025-12-31).
ARXIV_LENGTH_BAND_PAPER: Band = (0.8, 1.0, 1.3, 1.5)
ARXIV_LENGTH_BAND_UPSTREAM: Band = (0.8, 1.3, 1.6, 2.0)


@dataclass(frozen=True)
class _WritingGates:
    tokens: tuple[int, int]
    length_band: Band
    vocabulary_band: Band
    jaccard_cap: float
    transitions_in_both: bool


TLDR_GATES = _WritingGates((8, 256), (1.1, 1.6, 3.2, 5.0), (1.3, 2.0, math.inf, math.inf), 0.03, False)
ARXIV_GATES = _WritingGates((128, 256), ARXIV_LENGTH_BAND_PAPER, (0.5, 0.7, 1.3, 1.7), 0.23, True)
WRITING_MAXIMUM = 3.0


def band_score(value: float, band: Band) -> float | None:
    """``value`` on the trapezoid ``band``: ``None`` outside ``[zero_low, zero_high]`` (the gate fails), else 0..1."""
    zero_low, full_low, full_high, zero_high = band
    if not zero_low <= value <= zero_high:
        return None
    if value < full_low:
        return (value - zero_low) / (full_low - zero_low)
    if value > full_high:
        return 1.0 - (value - full_high) / (zero_high - full_high)
    return 1.0


def transition_categories(text: str) -> set[str]:
    """The transition-word categories with at least one phrase occurring (as a substring) in lower-cased ``text``."""
    lowered = text.lower()
    return {name for name, phrases in MAGRPO_TRANSITION_CATEGORIES.items() if any(p in lowered for p in phrases)}


def transition_scale(categories: int) -> float:
    """0 with no category, else 0.4 plus 0.05 per category beyond the first (capped at 1)."""
    return 0.0 if categories <= 0 else min(0.4 + min(0.05 * (categories - 1), 0.6), 1.0)


def content_jaccard(first: str, second: str) -> float:
    """Jaccard similarity of the two texts' lower-cased word sets without stopwords (1.0 when both are empty)."""
    words_a = {w for w in _WORD.findall(first.lower()) if w not in MAGRPO_STOPWORDS}
    words_b = {w for w in _WORD.findall(second.lower()) if w not in MAGRPO_STOPWORDS}
    union = words_a | words_b
    return 1.0 if not union else len(words_a & words_b) / len(union)


def _require_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected str, got {type(value).__name__}")
    return value


def _score_pair(first: str, second: str, gates: _WritingGates) -> MagrpoReward:
    levels: dict[str, float] = {
        "structure": 0.0,
        "coordination": 0.0,
        "vocabulary": 0.0,
        "transition": 0.0,
        "jaccard": 0.0,
    }

    def done(passed: int) -> MagrpoReward:
        return MagrpoReward(sum(levels.values()), dict(levels), WRITING_MAXIMUM, passed)

    low, high = gates.tokens
    if not (low <= len(first.split()) <= high and low <= len(second.split()) <= high):
        return done(0)
    levels["structure"] = 0.5

    # Level 1 guarantees at least `low` >= 1 tokens, so `first` is non-empty here.
    coordination = band_score(len(second) / len(first), gates.length_band)
    if coordination is None:
        return done(1)
    levels["coordination"] = coordination

    unique_first = len(set(_WORD.findall(first.lower())))
    unique_second = len(set(_WORD.findall(second.lower())))
    vocabulary = band_score(unique_second / unique_first, gates.vocabulary_band) if unique_first else None
    if vocabulary is None:
        return done(2)
    levels["vocabulary"] = 0.5 * vocabulary

    # The arXiv reward looks for transitions in both texts glued together (no separator), TLDR in the second only.
    styled = first + second if gates.transitions_in_both else second
    levels["transition"] = 0.4 * transition_scale(len(transition_categories(styled)))
    levels["jaccard"] = 0.6 * min(content_jaccard(first, second), gates.jaccard_cap) / gates.jaccard_cap
    return done(4)


def magrpo_tldr_reward(concise: str, detailed: str) -> MagrpoReward:
    """MAGRPO's TLDR reward for a concise summary (agent 1) and a detailed one (agent 2).

    Gates: 8..256 whitespace tokens each; length ratio band (1.1, 1.6, 3.2, 5.0); unique-word ratio at least 1.3
    (full at 2.0); style with transitions counted in ``detailed`` and the Jaccard term capped at 0.03.
    """
    return _score_pair(_require_text(concise, "concise"), _require_text(detailed, "detailed"), TLDR_GATES)


def magrpo_arxiv_reward(background: str, method: str, *, length_band: Band = ARXIV_LENGTH_BAND_PAPER) -> MagrpoReward:
    """MAGRPO's arXiv reward for a background paragraph (agent 1) and a method paragraph (agent 2).

    Gates: 128..256 whitespace tokens each; length ratio band ``length_band`` (default the paper's (0.8, 1.0, 1.3,
    1.5); pass :data:`ARXIV_LENGTH_BAND_UPSTREAM` for the repository's current one); unique-word ratio band
    (0.5, 0.7, 1.3, 1.7); style with transitions counted in both texts and the Jaccard term capped at 0.23.
    """
    if len(length_band) != 4 or list(length_band) != sorted(length_band):
        raise ValueError(f"length_band: expected 4 ascending ratios, got {length_band!r}")
    gates = dataclasses.replace(ARXIV_GATES, length_band=tuple(length_band))
    return _score_pair(_require_text(background, "background"), _require_text(method, "method"), gates)
