"""Shared pieces of the policy and baseline tests: one default-model load per test process, fast env settings."""

from __future__ import annotations

import functools
from typing import Any

# TF-IDF similarity keeps scripted episodes fast; the coding env runs tests on the local executor.
ENV_KWARGS: dict[str, dict[str, Any]] = {
    "writing": {"similarity": "tfidf"},
    "coding": {"similarity": "tfidf", "executor": "local"},
}


@functools.cache
def default_model(dtype: str = "auto") -> Any:
    """The offline default model (SmolLM2-135M-Instruct), loaded once per process and dtype. ``auto`` is what users
    get: bfloat16 on CPUs with native bf16, float32 elsewhere (there bf16 matmuls are emulated, about 50x slower, and
    the suite's model tests took minutes each)."""
    from llm_marl_baselines.models import load_model

    return load_model(None, dtype=dtype, device="cpu")


CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2's chat format (ChatML), so tiny-model tests render prompts the way the default model does."""


@functools.cache
def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained in milliseconds on a few sentences, with ChatML special tokens at SmolLM2's
    ids (``<|endoftext|>`` 0, ``<|im_start|>`` 1, ``<|im_end|>`` 2), left padding, and pad (0) distinct from eos (2),
    so tests can tell padding from the end of a completion. Any byte sequence encodes; random ids decode to (possibly
    odd) text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = ["You are a helpful assistant.", "Summarize the text.", "def add(a, b):\n    return a + b",
              "The cat sat on the mat all day.", "Write one line of Python."] * 4
    core.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", padding_side="left")
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def tiny_model(seed: int = 0, eos_bias: float = 0.0) -> Any:
    """A fresh random-weight 2-layer Llama (fp32, CPU) with :func:`tiny_tokenizer`, as a ``LoadedModel``.

    ``eos_bias`` adds that much to the end token's logit (through a bias on the output layer, part of the model, so a
    separate forward pass sees it too): rows then end at different steps, as a trained model's do. Not cached: adapter
    tests inject LoRA layers into it.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_marl_baselines.models import LoadedModel

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if eos_bias:
        head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        with torch.no_grad():
            head.weight.copy_(model.lm_head.weight)
            head.bias.zero_()
            head.bias[tokenizer.eos_token_id] = eos_bias
        model.lm_head = head
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return LoadedModel(model=model, tokenizer=tokenizer, source="tiny-random-llama", dtype="float32", device="cpu")


def check_replies_cut_at_their_end(cut: Any, free: Any, requests: Any, tokenizer: Any, agent: str,
                                   chars: int) -> None:
    """``cut`` (records with ``agent``'s reply end: its first ``chars`` characters) against ``free`` (the same call
    without): ``agent``'s replies are the start of the free ones, each one cut short stopped at the token where its
    text first reaches ``chars`` characters, and at least one was cut; every other agent's reply is unchanged."""
    from llm_marl_baselines.decoding import token_texts

    texts = token_texts(tokenizer)
    shorter = 0
    for mine, theirs, request in zip(cut, free, requests, strict=True):
        if request.agent != agent:
            assert (mine.completion_ids, mine.text, mine.finish_reason) == (theirs.completion_ids, theirs.text,
                                                                            theirs.finish_reason)
            continue
        ids = list(mine.completion_ids or ())
        assert ids == list(theirs.completion_ids or ())[:len(ids)]
        if len(ids) < len(theirs.completion_ids or ()):
            shorter += 1
            written = "".join(texts(t) for t in ids)
            assert mine.finish_reason == "stop"
            assert len(written) >= chars and len(written) - len(texts(ids[-1])) < chars  # at the first match
    assert shorter, f"no {agent} reply ran past its end"
