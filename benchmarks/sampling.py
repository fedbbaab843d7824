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

``--linears ROWS [ROWS ...]``: the model's forward for one decode step on the default model (float32), its linear
layers as ``F.linear`` computes them (``x @ W.T``) against weight-first (``(W @ x.T).T``, what ``sample_rows``
decodes under: :func:`~llm_marl_baselines.decoding.weight_first_linears`, here at every row count, so that the
bench shows where its ``WEIGHT_FIRST_MAX_ROWS`` should lie), at each ROWS rows of their own
``--prompt-tokens``-token prompt, prefilled once into a static cache; ``--new-tokens`` steps per timing, the two
alternating ``--decode-repeats`` times; it prints milliseconds per step, the ratio and the largest logit difference.

``--compaction ROWS``: whole ``sample_rows`` calls on the default model (float32) over ROWS rows of chat prompts
that ask for answers of every length (a word to a page), up to ``--new-tokens`` tokens each, with finished rows
dropped from the batch (``compact=True``, the default) and kept to the end, the same seed each, alternating
``--decode-repeats`` times; it prints seconds per call, the share of row-steps that wrote a token, and whether the
samples agree.

    python -m llm_marl_benchmarks.sampling [--rows 1 8 32 64] [--vocab 49152] [--repeats 30]
                                           [--decode ROWS] [--linears ROWS [ROWS ...]] [--compaction ROWS]
                                           [--prompt-tokens 500] [--new-tokens 64] [--decode-repeats 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from llm_marl_baselines.decoding import DEFAULT_TOP_K, TopKSampler, weight_first_linears
from llm_marl_benchmarks.figures_json import write_figures_json

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


def alternate(paths: dict[str, Callable[[], Any]], repeats: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run every path ``repeats`` times, the paths alternating so that drift in the machine's speed falls on all:
    the seconds of each run per path, and each path's last result."""
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    last: dict[str, Any] = {}
    for _ in range(repeats):
        for name, run in paths.items():
            start = time.perf_counter()
            last[name] = run()
            seconds[name].append(time.perf_counter() - start)
    return seconds, last


def compare(rows: int, vocab: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Median milliseconds per step of both paths at ``rows`` rows, and their ratio."""
    generator = torch.Generator().manual_seed(seed)
    # Logits with the spread of a small LM's next-token scores (a few candidates stand out).
    logits = torch.randn(rows, vocab, generator=generator) * 3
    paths = {"full_vocabulary": full_vocabulary_sampler(TEMPERATURE, TOP_P), "top_k": TopKSampler(TEMPERATURE, TOP_P)}
    for draw in paths.values():  # warm-up
        draw(logits)
    times, _ = alternate({name: functools.partial(draw, logits) for name, draw in paths.items()}, repeats)
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

    def call(sampler: Callable[[torch.Tensor], torch.Tensor], new: int) -> None:
        sample_rows(loaded.model, prompts, row_prompt, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=new,
                    min_new_tokens=new, stop_ids=[loaded.tokenizer.eos_token_id], pad_id=pad_id, logprobs=True,
                    sampler=sampler)

    call(samplers["top_k"], 2)  # warm-up
    seconds, _ = alternate({name: functools.partial(call, sampler, new_tokens) for name, sampler in samplers.items()},
                           repeats)
    full, top_k = statistics.median(seconds["full_vocabulary"]), statistics.median(seconds["top_k"])
    saved_ms = (full - top_k) / new_tokens * 1000
    return {"rows": rows, "prompts": len(prompts), "prompt_tokens": prompt_tokens, "new_tokens": new_tokens,
            "full_vocabulary_s": round(full, 2), "top_k_s": round(top_k, 2), "speedup": round(full / top_k, 3),
            "saved_ms_per_step": round(saved_ms, 1), "seconds": seconds}


def _decode_steps(model: Any, cache: dict[str, Any], tokens: torch.Tensor, full_mask: torch.Tensor,
                  prompt_tokens: int, weight_first: bool) -> torch.Tensor:
    """One forward of one token a row per column of ``tokens`` after the prompt (the static cache is rewound to it
    first, so every call writes the same positions), weight-first at every row count or with ``F.linear``; the
    first step's logits."""
    rows, steps = tokens.shape
    for layer in next(iter(cache.values())).layers:
        layer.cumulative_length.fill_(prompt_tokens)
    first = None
    with weight_first_linears(model, max_rows=rows) if weight_first else contextlib.nullcontext():
        for t in range(steps):
            logits = model(input_ids=tokens[:, t:t + 1], attention_mask=full_mask[:, :prompt_tokens + t + 1],
                           position_ids=torch.full((rows, 1), prompt_tokens + t), logits_to_keep=1, **cache).logits
            first = logits if first is None else first
    return first


def compare_linears(row_counts: Sequence[int], prompt_tokens: int, steps: int, repeats: int,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Milliseconds per decode-step forward of the default model with ``F.linear`` and weight-first linears, at each
    row count (each row its own prompt, prefilled once; both paths run the same tokens at the same positions)."""
    from llm_marl_baselines.decoding import cache_keyword, left_pad, new_cache
    from llm_marl_baselines.models import load_model

    loaded = load_model(None, dtype="float32", device="cpu")
    model, cache_arg = loaded.model, cache_keyword(loaded.model)
    generator = torch.Generator().manual_seed(seed)
    vocab = int(model.config.vocab_size)
    results = []
    for rows in row_counts:
        prompts = [torch.randint(100, vocab, (prompt_tokens,), generator=generator).tolist() for _ in range(rows)]
        input_ids, mask = left_pad(prompts, loaded.tokenizer.pad_token_id or 0)
        positions = torch.arange(prompt_tokens).expand(rows, -1)
        tokens = torch.randint(100, vocab, (rows, steps), generator=generator)
        full_mask = torch.cat([mask, mask.new_ones(rows, steps)], dim=1)
        with torch.inference_mode():
            cache = new_cache(model, "static", prompt_tokens + steps)
            model(input_ids=input_ids, attention_mask=mask, position_ids=positions, logits_to_keep=1,
                  **{cache_arg: cache})

            step_args = (model, {cache_arg: cache}, tokens, full_mask, prompt_tokens)
            _decode_steps(*step_args, weight_first=False)  # warm-up
            seconds, logits = alternate({"linear": functools.partial(_decode_steps, *step_args, weight_first=False),
                                         "weight_first": functools.partial(_decode_steps, *step_args,
                                                                           weight_first=True)}, repeats)
        linear_ms = statistics.median(seconds["linear"]) / steps * 1000
        weight_first_ms = statistics.median(seconds["weight_first"]) / steps * 1000
        results.append({"rows": rows, "prompt_tokens": prompt_tokens, "steps": steps,
                        "linear_ms": round(linear_ms, 1), "weight_first_ms": round(weight_first_ms, 1),
                        "speedup": round(linear_ms / weight_first_ms, 3),
                        "max_logit_difference": float((logits["linear"] - logits["weight_first"]).abs().max())})
    return results


# Requests whose answers run from a word to a page, so that a batch's rows stop at very different steps.
MIXED_LENGTH_REQUESTS = (
    "Answer with one word: what colour is the sky on a clear day?",
    "Write a detailed 300-word news story about a storm that closed the coastal highway overnight.",
    "Name the capital of France in one short sentence.",
    "Explain step by step how to write a Python function that sorts a list.",
    "Give two synonyms for 'happy', separated by a comma.",
    "Describe the water cycle in detail for a school textbook.",
    "Summarize in one sentence why people recycle.",
    "Write a short poem of four lines about autumn.",
)


def compare_compaction(rows: int, new_tokens: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Seconds per ``sample_rows`` call on the default model with finished rows dropped and kept, same seed."""
    from llm_marl_baselines.decoding import sample_rows
    from llm_marl_baselines.models import load_model
    from llm_marl_baselines.policies.local import render_chat, stop_token_ids

    loaded = load_model(None, dtype="float32", device="cpu")
    tokenizer = loaded.tokenizer
    prompts = [tokenizer(render_chat(tokenizer, [{"role": "user", "content": text}]), add_special_tokens=False)
               ["input_ids"] for text in MIXED_LENGTH_REQUESTS]
    row_prompt = [row % len(prompts) for row in range(rows)]
    stop_ids = sorted(stop_token_ids(loaded.model, tokenizer))

    def call(compact: bool, new: int) -> list[list[int]]:
        torch.manual_seed(seed)
        return sample_rows(loaded.model, prompts, row_prompt, temperature=TEMPERATURE, top_p=TOP_P,
                           max_new_tokens=new, stop_ids=stop_ids, pad_id=tokenizer.pad_token_id or 0,
                           logprobs=True, compact=compact).tokens

    call(True, 2)  # warm-up
    seconds, samples = alternate({"kept": functools.partial(call, False, new_tokens),
                                  "compacted": functools.partial(call, True, new_tokens)}, repeats)
    lengths = [len(tokens) for tokens in samples["kept"]]
    kept, compacted = statistics.median(seconds["kept"]), statistics.median(seconds["compacted"])
    return {"rows": rows, "new_tokens": new_tokens, "kept_s": round(kept, 2), "compacted_s": round(compacted, 2),
            "speedup": round(kept / compacted, 3), "generated_tokens": sum(lengths), "steps": max(lengths),
            "busy_share": round(sum(lengths) / (rows * max(lengths)), 3),
            "same_samples": samples["kept"] == samples["compacted"], "seconds": seconds}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.sampling",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--vocab", type=int, default=SMOLLM2_VOCAB)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--decode", type=int, default=None, metavar="ROWS",
                        help="also time whole decodes on the default model with ROWS rows")
    parser.add_argument("--linears", type=int, nargs="+", default=None, metavar="ROWS",
                        help="also time a decode step's forward with F.linear and weight-first at these row counts")
    parser.add_argument("--compaction", type=int, default=None, metavar="ROWS",
                        help="also time whole decodes of ROWS rows with finished rows dropped and kept")
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--decode-repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.rows) < 1 or args.vocab < DEFAULT_TOP_K or args.repeats < 1:
        parser.error(f"expected --rows >= 1, --vocab >= {DEFAULT_TOP_K} and --repeats >= 1")
    if args.decode is not None and min(args.decode, args.prompt_tokens, args.new_tokens, args.decode_repeats) < 1:
        parser.error("expected --decode, --prompt-tokens, --new-tokens and --decode-repeats >= 1")
    if args.linears is not None and min(*args.linears, args.prompt_tokens, args.new_tokens, args.decode_repeats) < 1:
        parser.error("expected --linears, --prompt-tokens, --new-tokens and --decode-repeats >= 1")
    if args.compaction is not None and min(args.compaction, args.new_tokens, args.decode_repeats) < 1:
        parser.error("expected --compaction, --new-tokens and --decode-repeats >= 1")
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
    linears = None
    if args.linears is not None:
        print(f"[sampling] a decode step's forward on the default model (float32), F.linear vs weight-first: "
              f"{args.prompt_tokens}-token prompts, {args.new_tokens} steps, median of {args.decode_repeats}",
              flush=True)
        linears = compare_linears(args.linears, args.prompt_tokens, args.new_tokens, args.decode_repeats)
        for row in linears:
            print(f"[sampling] {row['rows']:>4} rows: F.linear {row['linear_ms']:7.1f} ms/step, weight-first "
                  f"{row['weight_first_ms']:7.1f} ms/step, {row['speedup']:.2f}x; largest logit difference "
                  f"{row['max_logit_difference']:.1e}")
    compaction = None
    if args.compaction is not None:
        print(f"[sampling] decode on the default model (float32), finished rows kept vs dropped: {args.compaction} "
              f"rows of mixed-length requests, up to {args.new_tokens} new tokens, median of {args.decode_repeats}",
              flush=True)
        compaction = compare_compaction(args.compaction, args.new_tokens, args.decode_repeats)
        print(f"[sampling] compaction: kept {compaction['kept_s']:.2f} s a call, dropped "
              f"{compaction['compacted_s']:.2f} s ({compaction['speedup']:.2f}x); {compaction['busy_share']:.0%} of "
              f"row-steps wrote a token ({compaction['generated_tokens']} tokens, {compaction['steps']} steps); "
              f"same samples: {compaction['same_samples']}")
    if args.json is not None:
        payload = {"benchmark": "sampling", "temperature": TEMPERATURE, "top_p": TOP_P, "top_k": DEFAULT_TOP_K,
                   "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
                   "torch": torch.__version__, "results": results, "decode": decode,
                   "linears": linears, "compaction": compaction}
        write_figures_json(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
