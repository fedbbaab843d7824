"""Sampling cost per decode step: the draw over the whole vocabulary (``generate``'s way) against the draw over each
row's top-k candidates (:class:`llm_marl_baselines.decoding.TopKSampler`, what :func:`~llm_marl_baselines.decoding.
sample_rows` uses), side by side in one run, on logits shaped like the default model's (49,152 entries).

Both take the same raw logits and draw from the same distribution (temperature 0.7, top-k 50, top-p 0.95: the study's
settings); the full path is transformers' own warpers, ``softmax`` and ``torch.multinomial`` over the vocabulary, as
``generate`` runs them. Each size runs ``--repeats`` timed steps after a warm-up, the two paths alternating so that
drift in the machine's speed falls on both.

``--decode ROWS``: also the whole decode on the default model (float32): ``sample_rows`` with each sampler over the
same ROWS rows (4 per prompt of ``--prompt-tokens`` random tokens) and ``--new-tokens`` tokens each (no early stop),
``--decode-repeats`` times alternating; it prints seconds per call and per decode step and the share of a step the
whole-vocabulary draw took.

    python -m llm_marl_benchmarks.sampling [--rows 1 8 32 64] [--vocab 49152] [--repeats 30]
                                           [--decode ROWS] [--prompt-tokens 500] [--new-tokens 64]
                                           [--decode-repeats 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from llm_marl_baselines.decoding import DEFAULT_TOP_K, TopKSampler

TEMPERATURE, TOP_P = 0.7, 0.95
SMOLLM2_VOCAB = 49_152


def full_vocabulary_probs(scores: torch.Tensor, temperature: float, top_p: float,
                          top_k: int = DEFAULT_TOP_K) -> torch.Tensor:
    """What ``generate`` samples from: transformers' warpers over the whole vocabulary, in its order, then softmax."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)):
        scores = warper(None, scores)
    return torch.softmax(scores, dim=-1)


def full_vocabulary_sampler(temperature: float, top_p: float, top_k: int = DEFAULT_TOP_K) -> Callable[[torch.Tensor],
                                                                                                       torch.Tensor]:
    """``generate``'s draw: ``torch.multinomial`` over :func:`full_vocabulary_probs`."""

    def draw(scores: torch.Tensor) -> torch.Tensor:
        probs = full_vocabulary_probs(scores, temperature, top_p, top_k)
        return torch.multinomial(probs, num_samples=1).squeeze(1)

    return draw


def time_step(draw: Callable[[torch.Tensor], torch.Tensor], logits: torch.Tensor) -> float:
    """Seconds for one draw over ``logits``."""
    start = time.perf_counter()
    draw(logits)
    return time.perf_counter() - start


def compare(rows: int, vocab: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Median milliseconds per step of both paths at ``rows`` rows, and their ratio."""
    generator = torch.Generator().manual_seed(seed)
    # Logits with the spread of a small LM's next-token scores (a few candidates stand out).
    logits = torch.randn(rows, vocab, generator=generator) * 3
    paths = {"full_vocabulary": full_vocabulary_sampler(TEMPERATURE, TOP_P), "top_k": TopKSampler(TEMPERATURE, TOP_P)}
    for draw in paths.values():  # warm-up
        draw(logits)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(repeats):
        for name, draw in paths.items():
            times[name].append(time_step(draw, logits))
    full_ms = statistics.median(times["full_vocabulary"]) * 1000
    top_k_ms = statistics.median(times["top_k"]) * 1000
    return {"rows": rows, "vocab": vocab, "full_vocabulary_ms": round(full_ms, 3), "top_k_ms": round(top_k_ms, 3),
            "speedup": round(full_ms / top_k_ms, 2)}


def compare_decode(rows: int, prompt_tokens: int, new_tokens: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Seconds per ``sample_rows`` call on the default model with each sampler (same prompts, same fixed lengths)."""
    from llm_marl_baselines.decoding import sample_rows
    from llm_marl_baselines.models import load_model

    loaded = load_model(None, dtype="float32", device="cpu")
    generator = torch.Generator().manual_seed(seed)
    vocab = int(loaded.model.config.vocab_size)
    prompts = [torch.randint(100, vocab, (prompt_tokens,), generator=generator).tolist()
               for _ in range(max(1, rows // 4))]
    row_prompt = [row % len(prompts) for row in range(rows)]
    samplers = {"full_vocabulary": full_vocabulary_sampler(TEMPERATURE, TOP_P),
                "top_k": TopKSampler(TEMPERATURE, TOP_P)}
    pad_id = loaded.tokenizer.pad_token_id or 0

    def call(sampler: Callable[[torch.Tensor], torch.Tensor], new: int) -> float:
        start = time.perf_counter()
        sample_rows(loaded.model, prompts, row_prompt, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=new,
                    min_new_tokens=new, stop_ids=[loaded.tokenizer.eos_token_id], pad_id=pad_id, logprobs=True,
                    sampler=sampler)
        return time.perf_counter() - start

    call(samplers["top_k"], 2)  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in samplers}
    for _ in range(repeats):
        for name, sampler in samplers.items():
            seconds[name].append(call(sampler, new_tokens))
    full, top_k = statistics.median(seconds["full_vocabulary"]), statistics.median(seconds["top_k"])
    saved_ms = (full - top_k) / new_tokens * 1000
    return {"rows": rows, "prompts": len(prompts), "prompt_tokens": prompt_tokens, "new_tokens": new_tokens,
            "full_vocabulary_s": round(full, 2), "top_k_s": round(top_k, 2), "speedup": round(full / top_k, 3),
            "saved_ms_per_step": round(saved_ms, 1), "seconds": seconds}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.sampling",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--vocab", type=int, default=SMOLLM2_VOCAB)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--decode", type=int, default=None, metavar="ROWS",
                        help="also time whole decodes on the default model with ROWS rows")
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--decode-repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.rows) < 1 or args.vocab < DEFAULT_TOP_K or args.repeats < 1:
        parser.error(f"expected --rows >= 1, --vocab >= {DEFAULT_TOP_K} and --repeats >= 1")
    if args.decode is not None and min(args.decode, args.prompt_tokens, args.new_tokens, args.decode_repeats) < 1:
        parser.error("expected --decode, --prompt-tokens, --new-tokens and --decode-repeats >= 1")
    print(f"[sampling] temperature {TEMPERATURE}, top-k {DEFAULT_TOP_K}, top-p {TOP_P}, vocabulary {args.vocab}, "
          f"{torch.get_num_threads()} torch threads; median of {args.repeats} steps")
    results = []
    for rows in args.rows:
        result = compare(rows, args.vocab, args.repeats)
        results.append(result)
        print(f"[sampling] {rows:>4} rows: full vocabulary {result['full_vocabulary_ms']:8.3f} ms/step, "
              f"top-k {result['top_k_ms']:7.3f} ms/step, {result['speedup']:.1f}x")
    decode = None
    if args.decode is not None:
        print(f"[sampling] decode on the default model (float32): {args.decode} rows, {args.prompt_tokens}-token "
              f"prompts, {args.new_tokens} new tokens, {args.decode_repeats} repeats per sampler", flush=True)
        decode = compare_decode(args.decode, args.prompt_tokens, args.new_tokens, args.decode_repeats)
        full_step = decode["full_vocabulary_s"] / args.new_tokens * 1000
        print(f"[sampling] decode: full vocabulary {decode['full_vocabulary_s']:.2f} s a call, top-k "
              f"{decode['top_k_s']:.2f} s ({decode['speedup']:.2f}x); {decode['saved_ms_per_step']:.1f} ms saved per "
              f"step, {decode['saved_ms_per_step'] / full_step:.0%} of the whole-vocabulary call's time per step "
              "(prefill included)")
    if args.json is not None:
        payload = {"benchmark": "sampling", "temperature": TEMPERATURE, "top_p": TOP_P, "top_k": DEFAULT_TOP_K,
                   "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
                   "torch": torch.__version__, "results": results, "decode": decode}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
