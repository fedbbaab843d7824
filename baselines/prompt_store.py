"""Keys and values of recent prompts, kept so that a later prompt that begins like one of them prefills only the rest.

Why: an episode's observation at turn t+1 begins with the text its observation at turn t began with (role, task,
protocol: the envs put the stable part first), and a prompt's keys and values depend only on its tokens, their
positions and the weights, not on what follows them. On the 2-core CPU the prefill was about half of a turn in the
study's main preset (``docs/study.md``). :func:`~llm_marl_baselines.decoding.sample_rows`, given a
:class:`PromptStore`, looks up each prompt's longest token prefix among the stored prompts of the same model and
*route key* (the adapter that computed them; ``None`` for a plain model), copies those positions' keys and values into
its cache and prefills only the tokens after them; then it stores every prompt it prefilled. vLLM and SGLang call the
idea automatic prefix caching and radix attention; this is the plain form: a least-recently-used set of whole prompts
and a longest-common-prefix lookup.

A stored prompt is right only for the weights that computed it. A store is therefore for sampling with fixed weights
(evaluation, the study's batches): it keeps each model's prompts apart, and whoever changes a model's weights (a
training step) must :meth:`PromptStore.clear` it or use a new one; training passes none.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

DEFAULT_MAX_BYTES = 1 << 30
"""1 GiB of keys and values: about 45 prompts of 500 tokens of SmolLM2-135M in float32 (46 KB per token)."""

DEFAULT_MIN_TOKENS = 16
"""Common prefixes shorter than this are prefilled again rather than looked up and copied. SmolLM2's chat template
opens every prompt with the same 24 tokens (its default system prompt and the user header), so those alone count."""


@dataclass(frozen=True)
class StoredPrompt:
    """One prompt's keys and values, per layer ``(kv_heads, tokens, head_dim)``, as its prefill computed them."""

    tokens: np.ndarray
    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]

    @property
    def nbytes(self) -> int:
        """Memory held by the keys and values."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class PromptStore:
    """The keys and values of recently prefilled prompts, by model, route key and tokens, least recently used out
    first.

    Args:
        max_bytes: the most memory the stored keys and values may hold; the least recently used prompts leave to make
            room, and a prompt larger than this is not stored.
        min_tokens: the shortest common prefix worth reusing.

    Over the store's life, ``prompt_tokens`` counts the tokens of the distinct prompts that
    :func:`~llm_marl_baselines.decoding.sample_rows` prefilled with it, and ``prefilled_tokens`` the tokens the model
    read for them (shared heads included): one minus their ratio is the share of the prefill the store saved.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, min_tokens: int = DEFAULT_MIN_TOKENS) -> None:
        for name, value, least in (("max_bytes", max_bytes, 0), ("min_tokens", min_tokens, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")
        self.max_bytes = max_bytes
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[Hashable, bytes], StoredPrompt] = OrderedDict()
        # Candidates by (model and route key, first min_tokens tokens): a prompt shares a usable prefix only with these.
        # Each is an insertion-ordered dict used as a set: among stored prompts sharing equally long prefixes, the
        # first stored wins. (A set iterated in its hash order, and the hash of a name holds the model's id(), an
        # address, so each process broke such ties its own way; the tied entries' keys and values differ by rounding,
        # which was enough for one study command to sample different texts in two processes.)
        self._by_head: dict[tuple[Hashable, bytes], dict[tuple[Hashable, bytes], None]] = {}
        self._models: dict[int, weakref.ref[Any]] = {}
        self.nbytes = 0
        self.prompt_tokens = 0
        self.prefilled_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every stored prompt (after the weights changed); the counters and the bound model stay."""
        self._entries.clear()
        self._by_head.clear()
        self.nbytes = 0

    def longest_prefix(self, model: Any, route_key: Hashable,
                       tokens: Sequence[int]) -> tuple[StoredPrompt | None, int]:
        """The stored prompt of ``model`` under ``route_key`` sharing the longest token prefix with ``tokens``, and
        that length; ``(None, 0)`` below ``min_tokens``. At least the last token is left to prefill: its forward gives
        the next-token logits."""
        ids = _as_ids(tokens)
        limit = len(ids) - 1
        if limit < self.min_tokens:
            return None, 0
        best, best_length = None, 0
        route = self._route(model, route_key)
        for name in self._by_head.get((route, ids[:self.min_tokens].tobytes()), ()):
            entry = self._entries[name]
            length = common_prefix_length(entry.tokens, ids[:limit])
            if length > best_length:
                best, best_length = entry, length
        if best is None:
            return None, 0
        self._entries.move_to_end((route, best.tokens.tobytes()))
        return best, best_length

    def put(self, model: Any, route_key: Hashable, tokens: Sequence[int], keys: Sequence[Tensor],
            values: Sequence[Tensor]) -> None:
        """Store the keys and values ``model`` computed for a prompt (per layer ``(kv_heads, tokens, head_dim)``,
        tensors the store may keep), replacing an entry with the same route key and tokens; the least recently used
        leave to make room."""
        ids = _as_ids(tokens)
        entry = StoredPrompt(ids, tuple(keys), tuple(values))
        if any(t.shape[-2] != len(ids) for t in (*entry.keys, *entry.values)):
            raise ValueError(f"keys and values: expected {len(ids)} positions per layer, one per token")
        route = self._route(model, route_key)
        name = (route, ids.tobytes())
        self._drop(name)
        if entry.nbytes > self.max_bytes or len(ids) < self.min_tokens:
            return
        while self._entries and self.nbytes + entry.nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[name] = entry
        self._by_head.setdefault((route, ids[:self.min_tokens].tobytes()), {})[name] = None
        self.nbytes += entry.nbytes

    def _route(self, model: Any, route_key: Hashable) -> Hashable:
        """``route_key`` within ``model``'s own namespace. A model is known by its ``id`` while it lives; when a new
        object reuses a dead model's ``id``, the dead model's prompts go first."""
        known = self._models.get(id(model))
        if known is None or known() is not model:
            for name in [name for name in self._entries if name[0][0] == id(model)]:
                self._drop(name)
            self._models[id(model)] = weakref.ref(model)
        return (id(model), route_key)

    def _drop(self, name: tuple[Hashable, bytes]) -> None:
        entry = self._entries.pop(name, None)
        if entry is None:
            return
        self.nbytes -= entry.nbytes
        head = (name[0], entry.tokens[:self.min_tokens].tobytes())
        self._by_head[head].pop(name, None)
        if not self._by_head[head]:
            del self._by_head[head]


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def _as_ids(tokens: Sequence[int]) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int64)
