"""Text statistics the writing reward is built from: salient content of a source, copying, fluency, repetition.

Each measure is chosen so that the cheapest way to game one reward term fails another:

* **Salient content** (:func:`salient_units`): the source's most informative word stems — log term frequency in the
  source times inverse document frequency over the env's whole dataset (Spärck Jones 1972; the tf-idf weighting of
  Salton & Buckley 1988) — and its numbers. Coverage counts which of them a text mentions. Listing them (keyword
  stuffing) covers them all, so coverage alone is never paid: it is multiplied by fluency.
* **Copying** (:func:`copied_fraction`): the share of a text's tokens that sit inside a run of
  :data:`COPY_SPAN_TOKENS` or more consecutive tokens that also occurs in the source. Pasting the lead or whole
  sentences scores near 1; abstractive writing near 0 (names and short phrases are far shorter than the span).
* **Fluency** (:func:`fluency`): prose is made of function words as much as content words (about 40–55 % of running
  English text are stop words); a keyword list has almost none. Prose parts score 0 at a stop-word ratio of 0.1 or
  less, rising linearly to 1 at 0.25; bullet and one-line parts are allowed to be telegraphic, so only their lines of
  6+ words are checked, against a lower ramp (0.05 to 0.15). Times a repetition score: distinct bigrams / bigrams
  (Li et al. 2016's distinct-2), ``min(1, d / 0.8)``, so pasting a part twice or repeating a sentence costs.

Stems come from gensim's Porter stemmer and its stop-word list (gensim is already a dependency for the news corpus;
imported on first use, about 1 s).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

COPY_SPAN_TOKENS = 8
"""A run of this many consecutive tokens shared with the source counts as copied."""
SALIENT_UNITS = 20
"""How many of the source's top-weighted stems (plus all its numbers) make up its salient content."""
PROSE_STOPWORD_RATIO = (0.1, 0.25)
"""Stop-word ratios between which a prose part's function-word score rises from 0 to 1 (honest prose: 0.3-0.5)."""
TELEGRAPHIC_STOPWORD_RATIO = (0.05, 0.15)
"""The same for a long bullet or title line, which may be telegraphic."""
TELEGRAPHIC_MIN_WORDS = 6
"""Bullet and title lines shorter than this are not checked for fluency."""
DISTINCT_BIGRAMS_FULL = 0.8
"""Distinct-2 at which a part counts as free of repetition."""
IDF_MAX_DOCUMENTS = 2000
"""At most this many documents of a dataset (the first ones) estimate the inverse document frequencies."""

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@functools.lru_cache(maxsize=1)
def _stemmer_and_stopwords() -> tuple[object, frozenset[str]]:
    from gensim.parsing.porter import PorterStemmer
    from gensim.parsing.preprocessing import STOPWORDS

    return PorterStemmer(), frozenset(STOPWORDS)


def tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens of ``text`` (possessive ``'s`` dropped)."""
    return [re.sub(r"['’]s$", "", t.lower()) for t in _TOKEN.findall(text)]


def stopwords() -> frozenset[str]:
    """The stop-word list (gensim's)."""
    return _stemmer_and_stopwords()[1]


@functools.lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """Porter stem of a lower-cased token."""
    stemmer, _ = _stemmer_and_stopwords()
    return stemmer.stem(token)  # type: ignore[attr-defined]


def numbers(text: str) -> set[str]:
    """The numbers written in ``text`` as digits, normalised (``1,500`` → ``1500``)."""
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def content_stems(text: str) -> set[str]:
    """Stems of the content words of ``text`` (stop words and one-letter tokens dropped), plus its numbers."""
    stop = stopwords()
    stems = {stem(t) for t in tokens(text) if t not in stop and len(t) > 1 and not t[0].isdigit()}
    return stems | numbers(text)


class DocumentFrequencies:
    """In how many documents of a dataset each stem occurs (the corpus side of tf-idf)."""

    def __init__(self, documents: Iterable[str]) -> None:
        counts: Counter[str] = Counter()
        total = 0
        for document in documents:
            counts.update(content_stems(document))
            total += 1
        self.counts, self.documents = counts, max(total, 1)

    def idf(self, unit: str) -> float:
        """Smoothed inverse document frequency ``log((1 + N) / (1 + df)) + 1`` (scikit-learn's form)."""
        return math.log((1 + self.documents) / (1 + self.counts.get(unit, 0))) + 1.0


@dataclass(frozen=True)
class SalientContent:
    """The weighted units a summary of one source should mention."""

    weights: dict[str, float]

    def coverage(self, units: set[str]) -> float:
        """Weighted fraction of the salient units found in ``units`` (0 when there are none)."""
        total = sum(self.weights.values())
        return sum(w for u, w in self.weights.items() if u in units) / total if total else 0.0


def salient_units(source: str, frequencies: DocumentFrequencies, top: int = SALIENT_UNITS) -> SalientContent:
    """The ``top`` stems of ``source`` by ``(1 + log tf) * idf``, plus every number it states (weighted likewise)."""
    stop = stopwords()
    counts = Counter(stem(t) for t in tokens(source) if t not in stop and len(t) > 1 and not t[0].isdigit())
    scored = {u: (1.0 + math.log(c)) * frequencies.idf(u) for u, c in counts.items()}
    chosen = dict(sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:top])
    for number in numbers(source):
        chosen[number] = frequencies.idf(number)
    return SalientContent(chosen)


def copied_fraction(text: str, source_ngrams: set[tuple[str, ...]], span: int = COPY_SPAN_TOKENS) -> float:
    """Share of ``text``'s tokens inside a run of ``span``+ tokens that also occurs in the source (0 for no tokens)."""
    words = tokens(text)
    if not words:
        return 0.0
    copied = [False] * len(words)
    for start in range(len(words) - span + 1):
        if tuple(words[start : start + span]) in source_ngrams:
            copied[start : start + span] = [True] * span
    return sum(copied) / len(words)


def ngrams(text: str, span: int = COPY_SPAN_TOKENS) -> set[tuple[str, ...]]:
    """All runs of ``span`` consecutive tokens of ``text``."""
    words = tokens(text)
    return {tuple(words[i : i + span]) for i in range(len(words) - span + 1)}


def _stopword_score(words: Sequence[str], ramp: tuple[float, float]) -> float:
    if not words:
        return 0.0
    stop = stopwords()
    ratio = sum(1 for w in words if w in stop) / len(words)
    low, high = ramp
    return min(1.0, max(0.0, (ratio - low) / (high - low)))


def distinct_bigrams(words: Sequence[str]) -> float:
    """Distinct bigrams / bigrams of ``words`` (1 for fewer than two words)."""
    pairs = list(itertools.pairwise(words))
    return len(set(pairs)) / len(pairs) if pairs else 1.0


def fluency(text: str, telegraphic: bool) -> float:
    """Fluency in [0, 1]: function words present (see the module docstring) times freedom from repetition."""
    words = tokens(text)
    if not words:
        return 0.0
    if telegraphic:
        lines = [tokens(line) for line in text.splitlines()]
        long_lines = [line for line in lines if len(line) >= TELEGRAPHIC_MIN_WORDS]
        checked = [_stopword_score(line, TELEGRAPHIC_STOPWORD_RATIO) for line in long_lines]
        function_words = sum(checked) / len(checked) if checked else 1.0
    else:
        function_words = _stopword_score(words, PROSE_STOPWORD_RATIO)
    repetition = min(1.0, distinct_bigrams(words) / DISTINCT_BIGRAMS_FULL)
    return function_words * repetition
