"""Reference-free quality of a team's writing, and the per-agent feedback that explains it.

    quality = (0.5 * form + 0.5 * coverage) * originality * fluency * grounding

* ``form`` — the mean of the format terms present:
  ``length`` (mean over roles of how well each part's word count fits its range, :data:`roles.PART_SPECS`: 1 inside,
  linear towards 0 outside, :func:`~llm_marl_envs.core.rewards.bounded_length_score`), ``length_ratio`` (with both
  parts of the style's pair present, how well longer/shorter word counts fit :data:`roles.LENGTH_RATIO_BOUNDS`) and
  ``structure`` (for roles with a structure rule, the fraction of rules met: bullets, one line);
* ``coverage`` — the weighted fraction of the source's salient content the parts mention, over
  :data:`COVERAGE_TARGET` and capped at 1 (an honest summary of a 200-word article mentions about half of it);
* ``originality`` — 1 minus the share of the parts' tokens copied from the source in long spans;
* ``fluency`` — the token-weighted mean over parts of function-word presence, word order and freedom from
  repetition;
* ``grounding`` — the token-weighted mean over parts of the share of their numbers the source states (invented
  figures contradict the facts every teammate read).

The last three multiply: a pasted lead, a keyword list, or a part repeated three times scores near 0 however well it
covers the source. See :mod:`~llm_marl_envs.envs.writing.text_stats` for each measure and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from llm_marl_envs.core.rewards import bounded_length_score
from llm_marl_envs.envs.writing.roles import LENGTH_RATIO_BOUNDS, PART_SPECS, PartSpec

_WORD = re.compile(r"\b[\w'-]+\b")
_BULLET = re.compile(r"^\s*([-*•]|\d+[.)])\s+\S")


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``."""
    return [w.lower() for w in _WORD.findall(text)]


def structure_ok(text: str, rule: str | None) -> bool:
    """Whether ``text`` follows the structure ``rule`` (``None`` always holds)."""
    if rule is None:
        return True
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if rule == "bullets":
        return 3 <= len(lines) <= 5 and all(_BULLET.match(line) for line in lines)
    if rule == "one_line":
        return len(lines) == 1
    raise ValueError(f"unknown structure rule {rule!r}")


def ratio_score(ratio: float, low: float, high: float) -> float:
    """1 inside [low, high]; ratio/low below; high/ratio above (symmetric in log space around the band)."""
    if low <= ratio <= high:
        return 1.0
    return ratio / low if ratio < low else high / ratio


def combined_text(drafts: Mapping[str, str]) -> str:
    """All non-empty parts joined: the team's whole piece."""
    return "\n\n".join(text for text in drafts.values() if text.strip())


COVERAGE_TARGET = 0.5
"""Weighted salient coverage that earns the full coverage term."""


def form_terms(style: str, drafts: Mapping[str, str]) -> dict[str, float]:
    """The format terms of ``drafts`` (role -> text) in ``style``: length, length ratio, structure."""
    specs = {role: PART_SPECS[style][role] for role in drafts}
    counts = {role: len(words(text)) for role, text in drafts.items()}
    terms = {"length": sum(bounded_length_score(counts[r], s.min_words, s.max_words) for r, s in specs.items())}
    terms["length"] /= len(specs)

    shorter, longer, low, high = LENGTH_RATIO_BOUNDS[style]
    if shorter in drafts and longer in drafts:
        terms["length_ratio"] = ratio_score(counts[longer] / counts[shorter], low, high) if counts[shorter] else 0.0

    ruled = {r: s for r, s in specs.items() if s.structure}
    if ruled:
        terms["structure"] = sum(structure_ok(drafts[r], s.structure) for r, s in ruled.items()) / len(ruled)
    return terms


def quality(terms: Mapping[str, float]) -> float:
    """quality = (0.5 * mean(form) + 0.5 * coverage) * originality * fluency * grounding (see the module docstring)."""
    form = [terms[name] for name in ("length", "length_ratio", "structure") if name in terms]
    content = 0.5 * sum(form) / len(form) + 0.5 * terms["coverage"]
    return content * terms["originality"] * terms["fluency"] * terms["grounding"]


def part_feedback(text: str, spec: PartSpec, copied: float = 0.0, fluent: float = 1.0) -> str:
    """Feedback on one part (its own text only): length against the target, copying, fluency, repetition, structure."""
    if not text.strip():
        return "Your draft is empty: write your part."
    tokens = words(text)
    lines = [f"Length: {len(tokens)} words (target {spec.min_words}-{spec.max_words})."]
    if len(tokens) < spec.min_words:
        lines.append("Too short: add content.")
    elif len(tokens) > spec.max_words:
        lines.append("Too long: cut it down.")
    unique = len(set(tokens)) / len(tokens) if tokens else 0.0
    if unique < 0.5:
        lines.append(f"Repetitive: only {unique:.0%} of words are distinct.")
    if copied > 0.2:
        lines.append(f"{copied:.0%} of your words are copied from the source in long runs: rephrase in your own words.")
    if fluent < 0.8:
        lines.append("Write fluent sentences, not lists of keywords or repeated phrases.")
    if not structure_ok(text, spec.structure):
        lines.append(
            {"bullets": "Use 3-5 lines, each starting with '- '.", "one_line": "Use a single line."}[spec.structure]
        )
    return " ".join(lines)
