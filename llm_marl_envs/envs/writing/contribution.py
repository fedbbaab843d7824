"""Each writer's contribution to the team's piece, measured by the content the team would lose without it.

Consistency in the writing env is not the similarity of the parts (similar parts are what copying produces). For a
team of two or more, each agent ``i`` gets a contribution in [0, 1] as the product of five factors, and consistency
is the team's salient-content coverage score times their mean:

* **Credit for content** — the Shapley value of the coverage game (Shapley 1953): the weight of every salient unit of
  the source (:mod:`~llm_marl_envs.envs.writing.text_stats`) is split equally among the parts that mention it, so a
  part is credited for what it adds and shares credit for what others also say. This is leave-one-out coverage
  averaged over every order in which the parts could be added; plain leave-one-out would give a TL;DR nothing
  whenever the detailed summary repeats its gist, which is what a TL;DR is for. A part's credit is scaled by its own
  validity (fluency times one minus its copied fraction), so stuffed or pasted text earns none.
* **Share against the role's size** — ``min(1, share_i / target_i)`` where ``share_i`` is the part's fraction of the
  team's credit and ``target_i`` its role's expected fraction (the middle of its word range over the team's) times
  :data:`ROLE_SHARE_SLACK` (parts of one story overlap, so a short part that restates the gist falls short of its
  word share). An agent that leaves the content to a teammate ("going solo" inside a team) gets 0.
* **Validity** — the part's fluency times one minus its copied fraction, as above.
* **Agreement on shared facts** — the fraction of the part's numbers that the source states: a number no one else
  can confirm contradicts the facts the whole team shares (all of them read the same source).
* **Non-redundancy** — ``1 - max_j excess_ij`` where ``excess_ij`` is how far the similarity of parts ``i`` and ``j``
  rises above the redundancy cap of the similarity backend (:data:`REDUNDANCY_CAPS`), rescaled to [0, 1], or how far
  their shared 4-grams (of the shorter part) rise above :data:`SHARED_NGRAM_CAP`, whichever is larger. Duplicated
  parts score 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from llm_marl_envs.envs.writing.text_stats import SalientContent, content_stems, numbers, tokens

REDUNDANCY_CAPS: dict[str, float] = {"minilm": 0.9, "tfidf": 0.6}
"""Pairwise similarity above which two parts start to count as redundant, per similarity backend (MiniLM scores
paraphrases of one story about 0.6-0.85; TF-IDF, which sees only shared words, lower)."""
ROLE_SHARE_SLACK = 0.5
"""A part earns full share credit at half its role's word share of the team's content."""
SHARED_NGRAM_CAP = 0.3
"""Fraction of the shorter part's 4-grams that may also be in another part before it counts as redundant."""
_SHARED_NGRAM = 4


def shapley_credit(
    salient: SalientContent, parts: Mapping[str, str], validity: Mapping[str, float]
) -> dict[str, float]:
    """Each part's Shapley share of the salient weight it covers, times its validity (see the module docstring)."""
    covered = {agent: content_stems(text) & salient.weights.keys() for agent, text in parts.items()}
    sharers: dict[str, int] = {}
    for units in covered.values():
        for unit in units:
            sharers[unit] = sharers.get(unit, 0) + 1
    total = sum(salient.weights.values()) or 1.0
    return {
        agent: validity[agent] * sum(salient.weights[u] / sharers[u] for u in units) / total
        for agent, units in covered.items()
    }


def role_shares(credit: Mapping[str, float], targets: Mapping[str, float]) -> dict[str, float]:
    """``min(1, share_i / target_i)``; all 0 when no part earned credit."""
    total = sum(credit.values())
    if total <= 0:
        return dict.fromkeys(credit, 0.0)
    return {agent: min(1.0, credit[agent] / total / targets[agent]) for agent in credit}


def grounding(text: str, source_numbers: set[str]) -> float:
    """Fraction of the numbers ``text`` states that the source states too (1 when it states none)."""
    stated = numbers(text)
    return len(stated & source_numbers) / len(stated) if stated else 1.0


def _shared_ngram_fraction(a: list[str], b: list[str]) -> float:
    grams_a = {tuple(a[i : i + _SHARED_NGRAM]) for i in range(len(a) - _SHARED_NGRAM + 1)}
    grams_b = {tuple(b[i : i + _SHARED_NGRAM]) for i in range(len(b) - _SHARED_NGRAM + 1)}
    smaller = min(len(grams_a), len(grams_b))
    return len(grams_a & grams_b) / smaller if smaller else 0.0


def redundancy(parts: Mapping[str, str], sims: np.ndarray, cap: float) -> dict[str, float]:
    """Per part, the largest excess over the redundancy caps against any other part, in [0, 1]."""
    agents = list(parts)
    words = {agent: tokens(text) for agent, text in parts.items()}
    result = dict.fromkeys(agents, 0.0)
    for i, first in enumerate(agents):
        for j in range(i + 1, len(agents)):
            second = agents[j]
            if not words[first] or not words[second]:
                continue
            semantic = max(0.0, (float(sims[i, j]) - cap) / (1.0 - cap))
            shared = _shared_ngram_fraction(words[first], words[second])
            lexical = max(0.0, (shared - SHARED_NGRAM_CAP) / (1.0 - SHARED_NGRAM_CAP))
            excess = min(1.0, max(semantic, lexical))
            result[first] = max(result[first], excess)
            result[second] = max(result[second], excess)
    return result
