"""Local Hugging Face model policy: chat template, batched generation across agents and episodes (left padding).

The default model is the offline SmolLM2-135M-Instruct (see :mod:`baselines.models`); any local folder or hub id
works too. :func:`generate_actions` is shared with the adapter policy, which runs it once per role sub-batch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from baselines.models import LoadedModel, load_model
from baselines.policies.base import ActionRequest, GenerationSettings, Policy

DEFAULT_BATCH_SIZE = 16


def render_prompts(tokenizer: Any, requests: Sequence[ActionRequest]) -> list[str]:
    """Each request's chat messages through the model's chat template, ending with the assistant turn's header."""
    return [
        tokenizer.apply_chat_template(request.messages(), tokenize=False, add_generation_prompt=True)
        for request in requests
    ]


def encode_prompts(tokenizer: Any, prompts: Sequence[str], max_prompt_tokens: int) -> list[list[int]]:
    """Token ids per prompt. A prompt over ``max_prompt_tokens`` keeps its head (role, instruction, protocol) and its
    tail (latest draft, feedback and the assistant header) and loses the middle (the long task text) instead of
    failing the whole batch."""
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    kept = []
    for ids in encoded:
        if len(ids) > max_prompt_tokens:
            head = max_prompt_tokens // 2
            ids = ids[:head] + ids[len(ids) - (max_prompt_tokens - head):]
        kept.append(list(ids))
    return kept


def generate_actions(
    loaded: LoadedModel,
    requests: Sequence[ActionRequest],
    settings: GenerationSettings,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    model: Any = None,
) -> list[str]:
    """Generate one completion per request with ``model`` (default ``loaded.model``), ``batch_size`` rows at a time.

    Rows are grouped by prompt length so padding stays small; results come back in request order.
    """
    return generate_with_counts(loaded, requests, settings, batch_size=batch_size, model=model)[0]


def generate_with_counts(
    loaded: LoadedModel,
    requests: Sequence[ActionRequest],
    settings: GenerationSettings,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    model: Any = None,
) -> tuple[list[str], list[int]]:
    """:func:`generate_actions` plus, per request, how many tokens were generated (through the first end token)."""
    import torch

    model = loaded.model if model is None else model
    tokenizer = loaded.tokenizer
    context = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    max_prompt_tokens = max(16, context - settings.max_new_tokens)
    encoded = encode_prompts(tokenizer, render_prompts(tokenizer, requests), max_prompt_tokens)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    outputs: list[str] = [""] * len(encoded)
    counts: list[int] = [0] * len(encoded)
    sampling: dict[str, Any] = {"do_sample": False}
    if not settings.greedy:
        sampling = {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p}
    # A private RNG state: seeding for this call must not reset the caller's global torch RNG.
    with torch.random.fork_rng(devices=[] if loaded.device == "cpu" else None):
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            texts, lengths = _generate_batch(loaded, model, [encoded[i] for i in rows], sampling,
                                             settings.max_new_tokens)
            for row, text, length in zip(rows, texts, lengths, strict=True):
                outputs[row], counts[row] = text, length
    return outputs, counts


def _generate_batch(loaded: LoadedModel, model: Any, encoded: list[list[int]], sampling: dict[str, Any],
                    max_new_tokens: int) -> tuple[list[str], list[int]]:
    """One left-padded ``generate`` call: each row's text and its generated token count (through the first end)."""
    import torch

    tokenizer = loaded.tokenizer
    stop_ids = _stop_token_ids(model, tokenizer)
    batch = tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt")
    batch = {key: value.to(loaded.device) for key, value in batch.items()}
    with torch.inference_mode():
        generated = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                   **sampling)
    new_tokens = generated[:, batch["input_ids"].shape[1]:]
    texts = [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
    lengths = []
    for tokens in new_tokens.tolist():
        ends = [i for i, token in enumerate(tokens) if token in stop_ids]
        lengths.append(ends[0] + 1 if ends else len(tokens))
    return texts, lengths


def _stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    return ids | ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())


class LocalModelPolicy(Policy):
    """A local transformers causal LM acting for every agent (one shared model; batched across requests).

    Args:
        model: a local folder, a hub id, or None for the offline default SmolLM2-135M-Instruct.
        dtype: ``"auto"`` (bf16 where the hardware supports it), ``"bfloat16"``, ``"float32"`` or ``"float16"``.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        batch_size: the most rows per ``generate`` call.
        loaded: an already loaded model to share (then ``model``/``dtype``/``device`` are ignored).
    """

    name = "local"

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        loaded: LoadedModel | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
        self.loaded = loaded if loaded is not None else load_model(model, dtype=dtype, device=device)
        self.batch_size = batch_size

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        return generate_actions(self.loaded, requests, settings, batch_size=self.batch_size)
