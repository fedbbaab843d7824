"""The graph decoder on a GPU: the same distribution as the eager decode, and its speed against the memory floor.

Two parts, one model (``--model``: a folder; on the device machine a random-weight model of SmolLM2-135M's shape):

- **agreement** (``--check``): a two-agent team (random LoRA ``B``, so each agent's adapter is its own policy) samples
  the same requests through the graph decoder and through the eager decode with the same seed; in float32 the samples
  must be equal and the log-probabilities agree to 1e-3, in bfloat16 the report gives the share of equal rows and the
  largest log-probability difference on the rows' common prefix; and the captured step's next-token logits against
  the model's own forward (a static cache) at every position, float32 and bfloat16.
- **speed**: :func:`~llm_marl_baselines.decoding.sample_rows` at R rows (``--rows``), prompts of ``--prompt-tokens``,
  ``--new-tokens`` tokens pinned (min = max), eager against graphs in one run, medians of ``--repeats`` calls after a
  warm-up (which captures the graph): seconds a call, decode tokens/s, and the floor, the bytes a decode step must read
  (weights, keys and values) over the device's memory bandwidth.

- **compiled** (``--compile``): the same, with a third decoder whose step ``torch.compile`` (Inductor) compiled before
  it was captured: its logits against the forward's in the check (``--compile-check``), and its time a call beside
  the other two (its warm-up call compiles; ``compile_s`` says how long that took).

    python -m llm_marl_benchmarks.graph_decode --model /tmp/smollm2-random --check --json results/graph_decode.json

On a CPU the decoder runs uncaptured (the same step, for comparison only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def check_agreement(model_path: str, device: str, dtypes: Sequence[str] = ("float32", "bfloat16"),
                    compiled: bool = False) -> dict[str, Any]:
    """Graph vs eager samples of a two-agent team, and captured-step vs forward logits, in each of ``dtypes``;
    ``compiled``: the compiled step's logits against the forward's too."""
    import torch

    from llm_marl_baselines.decoding import cache_keyword, left_pad, new_cache
    from llm_marl_baselines.graph_decode import GraphDecoder
    from llm_marl_baselines.models import load_model
    from llm_marl_baselines.policies.base import GenerationSettings
    from llm_marl_envs.rollout import ChatRequest
    from llm_marl_trainers.generation import LoraSettings, TeamModel

    report: dict[str, Any] = {}
    texts = ["Summarize: the council met on Monday and voted to open the library on Sundays from May.",
             "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n", "Hi", "Write one line of Python. " * 8]
    requests = [ChatRequest(i // 2, ("concise", "detailed")[i % 2], 1, ({"role": "user", "content": text},))
                for i, text in enumerate(texts)]
    settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=48, seed=5)
    for dtype in dtypes:
        lora = LoraSettings(r=8, alpha=16, init_lora_weights=False)
        records = {}
        for graphs in (False, True):
            team = TeamModel(load_model(model_path, dtype=dtype, device=device), ["concise", "detailed"], lora=lora,
                             seed=0, graph_decode=graphs)
            records[graphs] = [r for rs in team.generate(requests, settings, samples_per_request=4) for r in rs]
        equal = [a.completion_ids == b.completion_ids for a, b in zip(records[False], records[True], strict=True)]
        largest = 0.0
        for a, b in zip(records[False], records[True], strict=True):
            common = next((i for i, (x, y) in enumerate(zip(a.completion_ids, b.completion_ids, strict=False))
                           if x != y), min(len(a.completion_ids), len(b.completion_ids)))
            for x, y in zip(a.logprobs[:common + 1], b.logprobs[:common + 1], strict=False):
                largest = max(largest, abs(x - y))
        # The step's logits against the model's own forward over a static cache, the same tokens fed to both.
        loaded = load_model(model_path, dtype=dtype, device=device)
        model, tokenizer = loaded.model, loaded.tokenizer
        prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        pad = tokenizer.pad_token_id or 0
        ids, mask = left_pad(prompts, pad, device)
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        steps = 16
        generator = torch.Generator(device="cpu").manual_seed(0)
        vocab = int(model.config.vocab_size)
        feed = torch.randint(3, min(1000, vocab), (len(prompts), steps), generator=generator).to(device)
        decoders = {"graphs": GraphDecoder(model)}
        if compiled:
            decoders["compiled"] = GraphDecoder(model, compile=True)
        worst = dict.fromkeys(decoders, 0.0)
        with torch.inference_mode():
            prefill = new_cache(model, "dynamic")
            model(input_ids=ids, attention_mask=mask, position_ids=positions, **{cache_keyword(model): prefill})
            reference = new_cache(model, "static", ids.shape[1] + steps)
            model(input_ids=ids, attention_mask=mask, position_ids=positions, **{cache_keyword(model): reference})
            sessions = {name: decoder.start(prefill, torch.arange(len(prompts), device=device), mask, positions,
                                            steps, [decoder.base_slot] * len(prompts))
                        for name, decoder in decoders.items()}
            full = mask
            for t in range(steps):
                full = torch.cat([full, torch.ones_like(full[:, :1])], dim=1)
                after = positions[:, -1:] + 1 + t
                expected = model(input_ids=feed[:, t:t + 1], attention_mask=full, position_ids=after,
                                 **{cache_keyword(model): reference}).logits[:, -1]
                for name, session in sessions.items():
                    got = session.step(feed[:, t])
                    worst[name] = max(worst[name], float((got - expected.float()).abs().max()))
        decoder = decoders["graphs"]
        report[dtype] = {"rows": len(equal), "equal_rows": sum(equal),
                         "max_logprob_diff_on_common_prefix": largest,
                         "max_step_logit_diff": worst["graphs"], "captured": decoder.stats.captures > 0,
                         "capture_error": decoder.stats.capture_error,
                         "logit_scale": float(expected.float().abs().max())}
        if compiled:
            stats = decoders["compiled"].stats
            report[dtype].update({"compiled_max_step_logit_diff": worst["compiled"], "compiled": stats.compiled,
                                  "compile_error": stats.compile_error, "compile_s": stats.compile_s,
                                  "compiled_captured": stats.captures > 0})
    return report


def time_decode(model_path: str, device: str, dtype: str, rows: Sequence[int], prompt_tokens: int, new_tokens: int,
                repeats: int, compiled: bool = False) -> list[dict[str, Any]]:
    """Eager vs graph decode (and the compiled graph decode, ``compiled``) of ``sample_rows`` calls at each row count
    (see the module docstring)."""
    import torch

    from llm_marl_baselines.decoding import sample_rows
    from llm_marl_baselines.graph_decode import GraphDecoder
    from llm_marl_baselines.models import load_model
    from llm_marl_benchmarks.trainer_step import memory_bandwidth

    loaded = load_model(model_path, dtype=dtype, device=device)
    model = loaded.model
    decoder = GraphDecoder(model)
    variants: list[tuple[str, Any]] = [("eager", None), ("graphs", decoder)]
    if compiled:
        variants.append(("compiled", GraphDecoder(model, compile=True)))
    bandwidth = memory_bandwidth()
    generator = torch.Generator().manual_seed(0)
    results = []
    for count in rows:
        vocab = min(1000, int(model.config.vocab_size))
        prompts = [torch.randint(3, vocab, (prompt_tokens - 7 * i,), generator=generator).tolist()
                   for i in range(max(1, count // 4))]
        row_prompt = [r % len(prompts) for r in range(count)]
        timings: dict[str, list[float]] = {name: [] for name, _ in variants}
        before = (decoder.stats.steps, decoder.stats.bytes_read)
        for repeat in range(repeats + 1):
            for name, graphs in variants:
                _sync()
                started = time.perf_counter()
                sample_rows(model, prompts, row_prompt, temperature=0.7, top_p=0.95, max_new_tokens=new_tokens,
                            min_new_tokens=new_tokens, stop_ids=[0], pad_id=0, graphs=graphs)
                _sync()
                if repeat:  # the first call of each warms up (and captures the graph)
                    timings[name].append(time.perf_counter() - started)
        steps = decoder.stats.steps - before[0]
        bytes_per_step = (decoder.stats.bytes_read - before[1]) / max(steps, 1)
        eager, graphs_s = statistics.median(timings["eager"]), statistics.median(timings["graphs"])
        floor_step = bytes_per_step / bandwidth if bandwidth else None
        results.append({
            "rows": count, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "dtype": dtype,
            "captured": decoder.stats.captures > 0, "capture_error": decoder.stats.capture_error,
            "eager_s": eager, "graphs_s": graphs_s, "speedup": eager / graphs_s,
            "eager_tokens_per_s": count * new_tokens / eager, "graphs_tokens_per_s": count * new_tokens / graphs_s,
            "graphs_ms_per_step": 1e3 * graphs_s / new_tokens, "bytes_per_step": bytes_per_step,
            "floor_ms_per_step": None if floor_step is None else 1e3 * floor_step,
            "floor_tokens_per_s": None if floor_step is None else count / floor_step,
        })
        if compiled:
            compiled_s, stats = statistics.median(timings["compiled"]), variants[2][1].stats
            results[-1].update({"compiled_s": compiled_s, "compiled_ms_per_step": 1e3 * compiled_s / new_tokens,
                                "ratio_compiled_vs_graphs": compiled_s / graphs_s, "compiled": stats.compiled,
                                "compile_error": stats.compile_error, "compile_s_so_far": stats.compile_s})
            print(f"[graph_decode] {count} rows: compiled {compiled_s:.3f} s ({1e3 * compiled_s / new_tokens:.2f} ms a "
                  f"step; compiled {stats.compiled}, {stats.compile_s:.0f} s compiling so far)", file=sys.stderr,
                  flush=True)
        print(f"[graph_decode] {count} rows: eager {eager:.3f} s, graphs {graphs_s:.3f} s "
              f"({eager / graphs_s:.1f}x), {1e3 * graphs_s / new_tokens:.2f} ms a step"
              + ("" if floor_step is None else f", floor {1e3 * floor_step:.3f} ms"), file=sys.stderr, flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agreement check (``--check``) and the timing, print the figures, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a model folder (Llama architecture)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--prompt-tokens", type=int, default=600)
    parser.add_argument("--new-tokens", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="also compare graph and eager samples and logits")
    parser.add_argument("--check-dtypes", nargs="+", default=["float32", "bfloat16"], metavar="DTYPE",
                        help="the precisions --check runs in")
    parser.add_argument("--compile", action="store_true",
                        help="also the graph decoder with its step compiled by torch.compile, in the check and timing")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(list(argv) if argv is not None else None)
    import platform

    import torch

    report: dict[str, Any] = {"benchmark": "graph_decode", "model": args.model, "device": args.device,
                              "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                              "host": platform.platform(), "torch": torch.__version__}
    if args.check:
        report["agreement"] = check_agreement(args.model, args.device, args.check_dtypes, args.compile)
        print(f"[graph_decode] agreement: {json.dumps(report['agreement'])}", file=sys.stderr, flush=True)
        if args.json:
            write_figures_json(args.json, report)
    report["timing"] = time_decode(args.model, args.device, args.dtype, args.rows, args.prompt_tokens,
                                   args.new_tokens, args.repeats, args.compile)
    print(json.dumps(report, indent=2))
    if args.json:
        write_figures_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
