"""Text statistics the writing reward is built from: salient content of a source, copying, fluency, repetition.

Each measure is chosen so that the cheapest way to game one reward term fails another:

* **Salient content** (:func:`salient_units`): the source's most informative word stems — log term frequency in the
  source times inverse document frequency over the env's whole dataset (Spärck Jones 1972; the tf-idf weighting of
  Salton & Buckley 1988) — and its numbers. Coverage counts which of them a text mentions. Listing them (keyword
  stuffing) covers them all, so coverage alone is never paid: it is multiplied by fluency.
* **Copying** (:func:`copied_fraction`): the share of a text's tokens that sit inside a run of
  :data:`COPY_SPAN_TOKENS` or more consecutive tokens that also occurs in the source, or, when larger, how far its
  share of tokens inside source trigrams exceeds what abstractive writing reaches (:data:`GAPPED_COPY_RAMP`: copied
  text with every fifth word dropped has no long run left but stays above 85 % in trigrams). Pasting the lead or
  whole sentences scores near 1; abstractive writing 0 (names and short phrases are far shorter than the span).
* **Fluency** (:func:`fluency`): prose is made of function words as much as content words (about 40–55 % of running
  English text are stop words); a keyword list has almost none. Each prose sentence scores 0 at a stop-word ratio of
  0.05 or less, rising linearly to 1 at 0.2; sentences are weighed by their tokens but at least 8, and the mean is
  squared, so a keyword list or a list of figures appended to good prose costs well beyond its share of the tokens.
  Word order (:func:`word_order`) must look like the language: enough of the part's bigrams occur somewhere in the
  dataset, and content words sometimes stand together (shuffled words and keywords threaded with "of the" fail).
  Bullet and one-line parts may be telegraphic: only their lines of 6+ words are checked, against a lower ramp (0.05
  to 0.15). Everything is multiplied by a repetition score: distinct bigrams / bigrams (Li et al. 2016's
  distinct-2), ``min(1, d / 0.8)``, so pasting a part twice or repeating a sentence costs.

The thresholds were set on the honest texts of the integrity suite (``benchmarks/integrity/data``) and the
degenerate strategies that imitate them; they are heuristics, documented with the values they separate.

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
PROSE_STOPWORD_RATIO = (0.05, 0.2)
"""Stop-word ratios between which a prose sentence's function-word score rises from 0 to 1 (honest prose: 0.3-0.5
per part; short sentences vary more)."""
KNOWN_BIGRAM_RAMP = (0.15, 0.3)
"""Shares of a prose part's bigrams found in the dataset between which its word-order score rises from 0 to 1
(honest summaries: 0.36-0.69; the same words shuffled: 0.00-0.34, mean 0.13)."""
CONTENT_PAIR_RAMP = (0.0, 0.15)
"""Shares of content words next to another content word between which the second word-order factor rises
(honest summaries: 0.31 and more; keywords threaded with function words: 0)."""
GAPPED_COPY_RAMP = (0.7, 0.9)
"""Shares of tokens inside source trigrams between which text counts as copied from 0 to 1."""
TELEGRAPHIC_STOPWORD_RATIO = (0.05, 0.15)
"""The same for a long bullet or title line, which may be telegraphic."""
FRAGMENT_MIN_WEIGHT = 8
"""A prose sentence weighs at least this many tokens in the fluency mean."""
TELEGRAPHIC_MIN_WORDS = 6
"""Bullet and title lines shorter than this are not checked for fluency."""
DISTINCT_BIGRAMS_FULL = 0.8
"""Distinct-2 at which a part counts as free of repetition."""
CORPUS_MAX_DOCUMENTS = 2000
"""At most this many documents of a dataset (the first ones) give its document frequencies and bigrams."""

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@functools.lru_cache(maxsize=1)
def _stemmer_and_stopwords() -> tuple[object, frozenset[str]]:
    from gensim.parsing.porter import PorterStemmer
    from gensim.parsing.preprocessing import STOPWORDS

    return PorterStemmer(), frozenset(STOPWORDS)


def tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens of ``text`` (possessive ``'s`` dropped)."""
    return list(_tokens(text))


@functools.lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    # Cached: one draft is read by several measures, and drafts repeat across turns and group samples.
    words = _TOKEN.findall(text.lower())
    return tuple(w[:-2] if w.endswith(("'s", "’s")) else w for w in words)


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


class CorpusStats:
    """What the env's whole dataset says about language: document frequencies of stems (the corpus side of tf-idf)
    and the set of word bigrams its documents use (the reference for word order)."""

    def __init__(self, documents: Iterable[str]) -> None:
        counts: Counter[str] = Counter()
        bigrams: set[int] = set()
        total = 0
        for document in documents:
            words = tokens(document)
            counts.update(content_stems(document))
            # Hashes, not tuples: a few hundred thousand bigrams stay a few MB (built per process, never pickled).
            bigrams.update(hash(pair) for pair in itertools.pairwise(words))
            total += 1
        self.counts, self.documents, self._bigrams = counts, max(total, 1), bigrams

    def idf(self, unit: str) -> float:
        """Smoothed inverse document frequency ``log((1 + N) / (1 + df)) + 1`` (scikit-learn's form)."""
        return math.log((1 + self.documents) / (1 + self.counts.get(unit, 0))) + 1.0

    def known_bigram(self, pair: tuple[str, str]) -> bool:
        """Whether some document of the dataset has these two tokens next to each other."""
        return hash(pair) in self._bigrams


@dataclass(frozen=True)
class SalientContent:
    """The weighted units a summary of one source should mention."""

    weights: dict[str, float]

    def coverage(self, units: set[str]) -> float:
        """Weighted fraction of the salient units found in ``units`` (0 when there are none)."""
        total = sum(self.weights.values())
        return sum(w for u, w in self.weights.items() if u in units) / total if total else 0.0


def salient_units(source: str, frequencies: CorpusStats, top: int = SALIENT_UNITS) -> SalientContent:
    """The ``top`` stems of ``source`` by ``(1 + log tf) * idf``, plus every number it states (weighted likewise)."""
    stop = stopwords()
    counts = Counter(stem(t) for t in tokens(source) if t not in stop and len(t) > 1 and not t[0].isdigit())
    scored = {u: (1.0 + math.log(c)) * frequencies.idf(u) for u, c in counts.items()}
    chosen = dict(sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:top])
    for number in numbers(source):
        chosen[number] = frequencies.idf(number)
    return SalientContent(chosen)


def _covered(words: Sequence[str], grams: set[tuple[str, ...]], span: int) -> list[bool]:
    covered = [False] * len(words)
    for start in range(len(words) - span + 1):
        if tuple(words[start : start + span]) in grams:
            covered[start : start + span] = [True] * span
    return covered


def copied_fraction(text: str, source: SourceGrams) -> float:
    """How much of ``text`` is lifted from the source, in [0, 1] (0 for no tokens).

    The larger of: the share of tokens inside a run of :data:`COPY_SPAN_TOKENS`+ tokens that also occurs in the
    source, and the share inside source *trigrams* rescaled from :data:`GAPPED_COPY_RAMP` (honest summaries reuse
    names and short phrases, up to about 60 % of their tokens in shared trigrams; copied text with every few words
    dropped, which breaks every long run, still sits above 85 %).
    """
    words = tokens(text)
    if not words:
        return 0.0
    long_runs = sum(_covered(words, source.long, COPY_SPAN_TOKENS)) / len(words)
    trigrams = sum(_covered(words, source.short, 3)) / len(words)
    low, high = GAPPED_COPY_RAMP
    return max(long_runs, min(1.0, max(0.0, (trigrams - low) / (high - low))))


@dataclass(frozen=True)
class SourceGrams:
    """The source's runs of :data:`COPY_SPAN_TOKENS` tokens (``long``) and its trigrams (``short``)."""

    long: set[tuple[str, ...]]
    short: set[tuple[str, ...]]

    @classmethod
    def of(cls, source: str) -> SourceGrams:
        """The n-grams of ``source``."""
        return cls(ngrams(source, COPY_SPAN_TOKENS), ngrams(source, 3))


def ngrams(text: str, span: int = COPY_SPAN_TOKENS) -> set[tuple[str, ...]]:
    """All runs of ``span`` consecutive tokens of ``text``."""
    words = tokens(text)
    return {tuple(words[i : i + span]) for i in range(len(words) - span + 1)}


def _stopword_score(words: Sequence[str], ramp: tuple[float, float]) -> float:
    if not words:
        return 0.0
    stop = stopwords()
    ratio = sum(1 for w in words if w in stop) / len(words)
    return _ramp(ratio, ramp)


def _ramp(value: float, ramp: tuple[float, float]) -> float:
    low, high = ramp
    return min(1.0, max(0.0, (value - low) / (high - low)))


def distinct_bigrams(words: Sequence[str]) -> float:
    """Distinct bigrams / bigrams of ``words`` (1 for fewer than two words)."""
    pairs = list(itertools.pairwise(words))
    return len(set(pairs)) / len(pairs) if pairs else 1.0


def word_order(words: Sequence[str], corpus: CorpusStats) -> float:
    """Whether the words come in an order the language uses, in [0, 1]: the share of bigrams some document of the
    dataset also has (:data:`KNOWN_BIGRAM_RAMP`), times the share of content words standing next to another content
    word (:data:`CONTENT_PAIR_RAMP`; compounds, adjective-noun, verb-object — a keyword list threaded with function
    words has none). Shuffled words and keywords glued with "of the" score 0; honest prose 1."""
    pairs = list(itertools.pairwise(words))
    if not pairs:
        return 1.0
    stop = stopwords()
    known = sum(1 for pair in pairs if corpus.known_bigram(pair)) / len(pairs)
    content = [w for w in words if w not in stop]
    adjacent = sum(1 for a, b in pairs if a not in stop and b not in stop)
    return _ramp(known, KNOWN_BIGRAM_RAMP) * _ramp(adjacent / len(content) if content else 0.0, CONTENT_PAIR_RAMP)


_SENTENCE_END = re.compile(r"[.!?;:\n]+")


def sentence_content(text: str, telegraphic: bool) -> str:
    """The part of ``text`` that can carry content: for prose, its sentences with enough function words to be
    sentences (a list of keywords or figures tacked on adds no coverage); telegraphic parts whole."""
    if telegraphic:
        return text
    kept = [s for s in _SENTENCE_END.split(text) if _stopword_score(tokens(s), PROSE_STOPWORD_RATIO) >= 0.5]
    return ". ".join(kept)


def fluency(text: str, telegraphic: bool, corpus: CorpusStats) -> float:
    """Fluency in [0, 1]: function words in every sentence, a natural word order, and no repetition (see the
    module docstring). Telegraphic parts (bullets, titles) are checked only on their lines of 6+ words."""
    words = tokens(text)
    if not words:
        return 0.0
    if telegraphic:
        long_lines = [line for line in map(tokens, text.splitlines()) if len(line) >= TELEGRAPHIC_MIN_WORDS]
        checked = [_stopword_score(line, TELEGRAPHIC_STOPWORD_RATIO) for line in long_lines]
        structure = sum(checked) / len(checked) if checked else 1.0
    else:
        # Sentence by sentence, weighted by length but never less than FRAGMENT_MIN_WEIGHT tokens, so a short list of
        # figures or keywords tacked onto good prose costs more than its few tokens; the mean is then squared.
        sentences = [tokens(sentence) for sentence in _SENTENCE_END.split(text)]
        weighted = [(max(len(s), FRAGMENT_MIN_WEIGHT), _stopword_score(s, PROSE_STOPWORD_RATIO)) for s in sentences]
        weighted = [(weight, score) for (weight, score), s in zip(weighted, sentences, strict=True) if s]
        function_words = (sum(w * score for w, score in weighted) / sum(w for w, _ in weighted)) ** 2
        structure = function_words * word_order(words, corpus)
    repetition = min(1.0, distinct_bigrams(words) / DISTINCT_BIGRAMS_FULL)
    return structure * repetition
