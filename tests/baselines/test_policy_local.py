"""The local model backend with the real default model (SmolLM2-135M-Instruct, offline), few tokens per call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baseline_helpers import default_model

from llm_marl_baselines import models
from llm_marl_baselines.policies import ActionRequest, GenerationSettings, make_policy
from llm_marl_baselines.policies.local import LocalModelPolicy, encode_prompts, render_prompts
from llm_marl_baselines.prompt_store import PromptStore

pytestmark = pytest.mark.model

REQUESTS = [
    ActionRequest("concise", "Summarize in one sentence: the cat sat on the mat all day."),
    ActionRequest("detailed", "Write one line of Python that adds two numbers."),
    ActionRequest("headline", "Hi"),
]


def test_default_model_resolves_offline_with_left_padding() -> None:
    loaded = default_model("bfloat16")
    assert Path(loaded.source) == models.default_model_cache_dir()
    assert loaded.tokenizer.padding_side == "left" and loaded.tokenizer.pad_token is not None
    assert loaded.dtype == "bfloat16" and loaded.device == "cpu"
    assert str(next(loaded.model.parameters()).dtype) == "torch.bfloat16"
    assert default_model().dtype == models.choose_dtype("auto", "cpu")  # what the other model tests run in
    marker = json.loads((models.default_model_cache_dir() / "llm_marl_conversion.json").read_text())
    assert marker["source"].endswith(models.DEFAULT_GGUF_FILE)


def test_chat_template_and_long_prompt_truncation() -> None:
    tokenizer = default_model().tokenizer
    prompt = render_prompts(tokenizer, [ActionRequest("a", "USER TEXT", system="SYSTEM TEXT")])[0]
    assert prompt.index("SYSTEM TEXT") < prompt.index("USER TEXT") < prompt.index("<|im_start|>assistant")
    long_prompt = render_prompts(tokenizer, [ActionRequest("a", "HEAD " + "filler " * 3000 + " TAIL")])[0]
    (ids,) = encode_prompts(tokenizer, [long_prompt], max_prompt_tokens=200)
    assert len(ids) == 200
    text = tokenizer.decode(ids)
    assert "<|im_start|>system" in text and "HEAD" in text and text.rstrip().endswith("assistant")


def test_batched_generation_is_reproducible_and_bounded() -> None:
    """Without the prompt store every seeded call replays exactly; with it (the default) a fresh policy replays a fresh
    policy's call, since a second call on one policy reads the first's prefixes (logits equal up to rounding, which in
    bf16 can change a draw: the docstring says so)."""
    policy = LocalModelPolicy(loaded=default_model(), batch_size=2, reuse_prompts=False)  # 3 requests: two calls
    tokenizer = policy.loaded.tokenizer
    sampled = GenerationSettings(temperature=1.0, top_p=0.95, max_new_tokens=8, seed=11)
    first = policy.act(REQUESTS, sampled)
    assert len(first) == 3 and all(isinstance(text, str) and text for text in first)
    assert all(len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= 9 for text in first)
    assert policy.act(REQUESTS, sampled) == first  # same seed, same batch: same actions
    other_seed = policy.act(REQUESTS, GenerationSettings(temperature=1.0, top_p=0.95, max_new_tokens=8, seed=12))
    assert other_seed != first
    stored = [LocalModelPolicy(loaded=default_model(), batch_size=2).act(REQUESTS, sampled) for _ in range(2)]
    assert stored[0] == stored[1]


def test_greedy_batch_matches_single_requests_in_float32() -> None:
    # Left padding plus the attention mask must not change a row's greedy continuation (exact in fp32).
    policy = LocalModelPolicy(loaded=default_model("float32"))
    greedy = GenerationSettings(temperature=0.0, max_new_tokens=6)
    batched = policy.act(REQUESTS, greedy)
    singles = [policy.act([request], greedy)[0] for request in REQUESTS]
    assert batched == singles


def test_local_policy_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size: expected an int >= 1"):
        LocalModelPolicy(loaded=default_model(), batch_size=0)
    with pytest.raises(models.ModelUnavailableError, match=r"expected a config\.json"):
        make_policy("local", model=tmp_path)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        models.choose_dtype("int4")
    with pytest.raises(TypeError, match="model: expected a path"):
        models.resolve_model_source(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt_store: expected a PromptStore or None, got dict"):
        LocalModelPolicy(loaded=default_model(), prompt_store={})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_store needs share_prefix=True"):
        LocalModelPolicy(loaded=default_model(), share_prefix=False, prompt_store=PromptStore(1 << 20))
    with pytest.raises(TypeError, match="logprobs: expected True or False, got 1"):
        LocalModelPolicy(loaded=default_model(), logprobs=1)  # type: ignore[arg-type]


def test_records_without_logprobs_keep_ids_and_the_given_store_is_the_one_read() -> None:
    """``logprobs=False``: records keep prompt and completion ids (token counts) and the same texts as with
    log-probabilities, without them; a store passed in is the policy's store, and its prefills are counted there."""
    settings = GenerationSettings(temperature=1.0, top_p=0.95, max_new_tokens=6, seed=5)
    full = LocalModelPolicy(loaded=default_model(), prompt_store=PromptStore(1 << 26)).generate(REQUESTS, settings)
    store = PromptStore(1 << 26)
    lean_policy = LocalModelPolicy(loaded=default_model(), prompt_store=store, logprobs=False)
    assert lean_policy.prompt_store is store
    lean = lean_policy.generate(REQUESTS, settings)
    assert [g.text for g in lean] == [g.text for g in full]
    assert [g.completion_ids for g in lean] == [g.completion_ids for g in full]
    assert all(g.completion_ids and g.prompt_ids and g.logprobs is None for g in lean)
    assert all(g.logprobs is not None for g in full)
    assert store.prompt_tokens == sum(len(g.prompt_ids) for g in lean)
    # reuse_prompts=False with no store passed in keeps none.
    assert LocalModelPolicy(loaded=default_model(), reuse_prompts=False).prompt_store is None


def test_the_recipes_name_for_the_default_model_loads_it_offline() -> None:
    # Recipes and the trainer say `model: default`; a policy given that name once asked the hub for a repo "default".
    assert models.resolve_model_source("default") == models.resolve_model_source(None) == str(
        models.ensure_default_model())


@pytest.mark.slow  # converts the GGUF into a fresh cache and loads it (10-20 s)
def test_conversion_cache_is_atomic_and_repairs_a_broken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv(models.CACHE_ENV_VAR, str(tmp_path))
    broken = models.default_model_cache_dir()
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")  # what a crashed conversion of an older version could leave
    converted = models.ensure_default_model()
    assert converted == tmp_path / "models" / models.DEFAULT_MODEL
    assert sorted(p.name for p in converted.parent.iterdir()) == [models.DEFAULT_MODEL]  # no temp folder left
    assert models.ensure_default_model() == converted  # complete now: no second conversion
    fresh = models.load_model(None, dtype="float32", device="cpu")
    shared = default_model("float32")
    ids = shared.tokenizer("The quick brown fox", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(fresh.model(ids).logits, shared.model(ids).logits)
