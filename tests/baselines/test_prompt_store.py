"""Reusing earlier prompts' keys and values (``baselines/prompt_store.py`` and ``sample_rows(prompt_store=...)``).

The store itself: longest-prefix lookup per model and route key, least-recently-used eviction, refusals. The sampler
with a store, on the tiny random-weight Llama of the baseline tests: over calls that extend, cut, repeat and replace
earlier prompts (an episode's turns), and prompts that share a head within a call (a task text every agent reads), it
must give the samples and log-probabilities the sampler gives without a store, while the model reads fewer tokens.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from baseline_helpers import tiny_model

from llm_marl_baselines.decoding import sample_rows
from llm_marl_baselines.models import LoadedModel
from llm_marl_baselines.policies.base import ActionRequest, GenerationSettings
from llm_marl_baselines.policies.local import LocalModelPolicy
from llm_marl_baselines.prompt_store import PromptStore

STOP, PAD = [2], 0
LAYERS, KV_HEADS, HEAD_DIM = 2, 2, 8  # the tiny model's cache shape (2 layers, 2 key/value heads of 8)


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    return tiny_model(eos_bias=1.5)  # rows end at different steps


def tokens(seed: int, n: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(5, 200, (n,), generator=generator).tolist()


def kv(n: int, fill: float = 0.0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Keys and values shaped like the tiny model's for ``n`` tokens (4 bytes x 2 x 2 x 8 x 2 layers = 128 B/token,
    twice over)."""
    return ([torch.full((KV_HEADS, n, HEAD_DIM), fill) for _ in range(LAYERS)],
            [torch.full((KV_HEADS, n, HEAD_DIM), fill) for _ in range(LAYERS)])


# ------------------------------------------------------------------------------------------------------- the store
class Model:
    """Stands for a model: the store only needs an object it can hold a weak reference to."""


def test_the_longest_stored_prefix_of_the_same_model_and_route_key_is_found() -> None:
    store, model, other = PromptStore(min_tokens=4), Model(), Model()
    task = tokens(0, 20)
    store.put(model, "a", [*task, 1, 2, 3], *kv(23, 1.0))
    store.put(model, "a", [*task, 1, 2, 9, 9], *kv(24, 2.0))
    store.put(model, "b", [*task, 1, 2, 3, 4, 5], *kv(25, 3.0))
    entry, length = store.longest_prefix(model, "a", [*task, 1, 2, 3, 7])
    assert length == 23 and entry is not None and float(entry.keys[0][0, 0, 0]) == 1.0
    entry, length = store.longest_prefix(model, "a", [*task, 1, 2, 9, 9, 9])
    assert length == 24 and entry is not None and float(entry.keys[0][0, 0, 0]) == 2.0
    # The whole of a stored prompt again: its last token is left to prefill (it gives the next-token logits).
    assert store.longest_prefix(model, "a", [*task, 1, 2, 3])[1] == 22
    assert store.longest_prefix(model, "b", [*task, 1, 2, 3, 4, 5, 6])[1] == 25
    assert store.longest_prefix(model, "c", [*task, 1, 2, 3, 7]) == (None, 0)  # another adapter's keys differ
    assert store.longest_prefix(other, "a", [*task, 1, 2, 3, 7]) == (None, 0)  # and another model's
    assert store.longest_prefix(model, "a", task[:3] + [0] * 20) == (None, 0)  # under min_tokens in common
    assert store.longest_prefix(model, "a", task[:4]) == (None, 0)  # too short to reuse anything


def test_of_equally_long_prefixes_the_first_stored_wins_in_every_process() -> None:
    """Two stored prompts share a query's prefix equally far; the first stored must win, for every model object.
    The lookup once iterated a set whose order followed the hash of a name holding ``id(model)`` (an address), so
    which entry won changed from process to process, and with it (by rounding) what a study sampled. Over 32 fresh
    models, a hash-ordered choice would pick the first stored in all of them about once in 4 billion."""
    task = tokens(1, 20)
    for _ in range(32):
        store, model = PromptStore(min_tokens=4), Model()
        store.put(model, "a", [*task, 5, 6], *kv(22, 1.0))
        store.put(model, "a", [*task, 7, 8], *kv(22, 2.0))
        entry, length = store.longest_prefix(model, "a", [*task, 9, 9])
        assert length == 20 and entry is not None and float(entry.keys[0][0, 0, 0]) == 1.0


def test_the_least_recently_used_prompts_leave_to_make_room() -> None:
    per_token = 2 * LAYERS * KV_HEADS * HEAD_DIM * 4
    store, model = PromptStore(max_bytes=100 * per_token, min_tokens=4), Model()
    first, second, third = tokens(1, 40), tokens(2, 40), tokens(3, 40)
    store.put(model, None, first, *kv(40))
    store.put(model, None, second, *kv(40))
    assert len(store) == 2 and store.nbytes == 80 * per_token
    assert store.longest_prefix(model, None, [*first, 7])[1] == 40  # first is now the most recently used
    store.put(model, None, third, *kv(40))  # 120 tokens would not fit: second, the least recently used, leaves
    assert len(store) == 2 and store.nbytes == 80 * per_token
    assert store.longest_prefix(model, None, [*second, 7]) == (None, 0)
    assert store.longest_prefix(model, None, [*first, 7])[1] == 40
    store.put(model, None, tokens(4, 101), *kv(101))  # larger than the whole store: not kept, nothing evicted
    assert len(store) == 2
    store.put(model, None, first, *kv(40, 5.0))  # the same prompt again replaces its entry
    entry, _ = store.longest_prefix(model, None, [*first, 7])
    assert len(store) == 2 and entry is not None and float(entry.values[1][0, 0, 0]) == 5.0
    store.clear()
    assert len(store) == 0 and store.nbytes == 0 and store.longest_prefix(model, None, [*first, 7]) == (None, 0)


def test_bad_settings_and_mismatched_keys_are_refused() -> None:
    for bad in ({"max_bytes": -1}, {"min_tokens": 0}, {"max_bytes": 1.5}, {"min_tokens": True}):
        with pytest.raises(ValueError, match="expected an int"):
            PromptStore(**bad)
    with pytest.raises(ValueError, match="one per token"):
        PromptStore().put(Model(), None, tokens(0, 20), *kv(19))


# ----------------------------------------------------------------------------------------- the sampler with a store
def turns_of_an_episode() -> list[list[list[int]]]:
    """Three calls' prompts: two agents whose prompts open with one task text, then turns that keep that text and
    change what follows, an agent whose prompt is cut back, one that repeats itself, and an unrelated prompt."""
    task, other = tokens(10, 48), tokens(11, 30)
    first = [task + tokens(12, 9), task + tokens(13, 14), other]
    second = [first[0] + tokens(14, 11), task + tokens(15, 20), other, tokens(16, 26)]
    third = [second[0][:60] + tokens(17, 5), second[1], task[:20] + tokens(18, 30)]
    return [first, second, third]


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_a_store_gives_the_samples_of_the_whole_prefill_and_reads_fewer_tokens(loaded: LoadedModel,
                                                                                temperature: float) -> None:
    store = PromptStore(min_tokens=4)
    prompt_tokens = prefilled = 0
    for call, prompts in enumerate(turns_of_an_episode()):
        rows = [r for r in range(len(prompts)) for _ in range(2)]
        results = []
        for given in (store, None):
            torch.manual_seed(call)
            results.append(sample_rows(loaded.model, prompts, rows, temperature=temperature, top_p=0.95,
                                       max_new_tokens=12, stop_ids=STOP, pad_id=PAD, prompt_store=given))
        reused, whole = results
        assert reused.tokens == whole.tokens and reused.stopped == whole.stopped
        for a, b in zip(reused.logprobs or [], whole.logprobs or [], strict=True):
            assert a == pytest.approx(b, abs=1e-5)
        assert store.prompt_tokens - prompt_tokens == sum(len(p) for p in prompts)
        # The forward reads, for every prompt, the last positions that cover each prompt's new tokens.
        read = store.prefilled_tokens - prefilled
        if call == 0:  # the task text once for both agents (48), then the last 30 of each (the unrelated prompt's 30)
            assert read == 48 + 3 * 30
        elif call == 1:  # the new prompt's 26 cover the others' 11 and 20 new tokens and the repeat's last token
            assert read == 4 * 26
        else:  # 30 after the first 20 task tokens cover the 5 after a cut and a repeat's last token
            assert read == 3 * 30
        prompt_tokens, prefilled = store.prompt_tokens, store.prefilled_tokens
    assert store.prompt_tokens == 149 + 192 + 183 and store.prefilled_tokens == 138 + 104 + 90


def test_the_static_and_dynamic_decode_caches_agree_with_a_store(loaded: LoadedModel) -> None:
    first, second, _ = turns_of_an_episode()
    results: dict[str, Any] = {}
    for cache in ("static", "dynamic"):
        store = PromptStore(min_tokens=4)
        sample_rows(loaded.model, first, [0, 1, 2], temperature=0.0, top_p=1.0, max_new_tokens=4, stop_ids=STOP,
                    pad_id=PAD, prompt_store=store, cache=cache)
        results[cache] = sample_rows(loaded.model, second, [3, 0, 1, 2, 0], temperature=0.0, top_p=1.0,
                                     max_new_tokens=12, stop_ids=STOP, pad_id=PAD, prompt_store=store, cache=cache)
    assert results["static"].tokens == results["dynamic"].tokens


def test_prompts_routed_apart_reuse_only_their_own_keys(loaded: LoadedModel) -> None:
    """The same tokens under two route keys (two adapters): neither reads the other's stored prompt."""
    first, second, _ = turns_of_an_episode()
    store = PromptStore(min_tokens=4)
    sample_rows(loaded.model, first[:1], [0], temperature=0.0, top_p=1.0, max_new_tokens=2, stop_ids=STOP,
                pad_id=PAD, prompt_store=store, prompt_keys=["a"])
    before = store.prefilled_tokens
    sample_rows(loaded.model, [second[0]], [0], temperature=0.0, top_p=1.0, max_new_tokens=2, stop_ids=STOP,
                pad_id=PAD, prompt_store=store, prompt_keys=["b"])
    assert store.prefilled_tokens - before == len(second[0])
    with pytest.raises(ValueError, match="prompt_keys"):
        sample_rows(loaded.model, first, [0], temperature=0.0, top_p=1.0, max_new_tokens=2, stop_ids=STOP,
                    pad_id=PAD, prompt_store=store, prompt_keys=["a"])


def test_the_local_policy_reuses_its_prompts_across_calls_without_changing_the_texts(loaded: LoadedModel) -> None:
    settings = GenerationSettings(temperature=0.0, max_new_tokens=8, seed=0)
    task = "Source text:\n" + "The council met on Tuesday and voted to repair the bridge. " * 4
    turns = [[ActionRequest("a", task + "\nWrite a headline."), ActionRequest("b", task + "\nWrite a summary.")],
             [ActionRequest("a", task + "\nYour draft: Bridge vote.\nWrite a headline."),
              ActionRequest("b", task + "\nYour draft: The council met.\nWrite a summary.")]]
    reusing = LocalModelPolicy(loaded=loaded)
    plain = LocalModelPolicy(loaded=loaded, reuse_prompts=False)
    assert reusing.prompt_store is not None and plain.prompt_store is None
    for requests in turns:
        assert reusing.act(requests, settings) == plain.act(requests, settings)
    store = reusing.prompt_store
    assert len(store) >= 4 and store.prefilled_tokens < 0.7 * store.prompt_tokens
