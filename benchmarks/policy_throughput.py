"""Policy throughput: generated tokens/s of the local backend at batch 1, 4 and 16 (bf16 and fp32 side by side), and
episodes/min of each collaboration baseline with the default model.

Token counts are the new tokens actually generated (up to each row's end-of-sequence), so early stops are not
counted as work. Sampling is seeded; every generation configuration runs ``--repeats`` times after a warm-up call,
and each env first runs one scripted warm-up episode. ``--batches`` with no value skips the tokens/s part.

    python -m llm_marl_benchmarks.policy_throughput [--batches 1 4 16] [--dtypes bfloat16 float32] [--max-new-tokens 64]
                                           [--repeats 2] [--episodes 2] [--num-agents 2] [--envs writing coding]
                                           [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl_baselines.collaboration import BASELINES, run_episodes
from llm_marl_baselines.models import load_model
from llm_marl_baselines.policies import ActionRequest, GenerationSettings
from llm_marl_baselines.policies.local import LocalModelPolicy, generate_records
from llm_marl_baselines.policies.scripted import ScriptedPolicy
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.registry import ENV_NAMES

# Prompts that ask for long answers, so most rows use their whole token budget (early stops idle a batch's rows).
PROMPTS = (
    "Write a detailed 300-word news story about a storm that closed the coastal highway overnight.",
    "Explain step by step, in at least 300 words, how to write a Python function that sorts a list.",
    "Describe the water cycle in detail for a school textbook, in at least 300 words.",
    "Write a long story of at least 300 words about a new library opening downtown.",
)


def tokens_per_second(policy: LocalModelPolicy, batch: int, max_new_tokens: int, repeats: int) -> dict[str, float]:
    """Generate ``repeats`` batches of ``batch`` rows (new seed each) and return tokens, seconds and tokens/s."""
    requests = [ActionRequest(f"agent{i}", PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    policy.act(requests[:1], GenerationSettings(temperature=0.7, max_new_tokens=4, seed=0))  # warm-up
    tokens, seconds = 0, 0.0
    for seed in range(repeats):
        settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=max_new_tokens, seed=seed)
        start = time.perf_counter()
        records = generate_records(policy.loaded, requests, settings, batch_size=batch, logprobs=False)
        seconds += time.perf_counter() - start
        tokens += sum(len(r.completion_ids or ()) for r in records)  # through each row's first end token
    return {"batch": batch, "tokens": tokens, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1)}


def episodes_per_minute(policy: LocalModelPolicy, env: str, name: str, episodes: int, num_agents: int,
                        max_new_tokens: int) -> dict[str, Any]:
    """Run ``episodes`` lockstep episodes of baseline ``name`` on ``env`` and return the rate and mean return."""
    settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=max_new_tokens, seed=0)
    env_kwargs = {"executor": "local"} if env == "coding" else {}
    start = time.perf_counter()
    # Texts only (records=False), as the baselines were measured before records existed: no logits kept per step.
    results = run_episodes(name, env, policy, settings, seeds=list(range(episodes)), num_agents=num_agents,
                           env_kwargs=env_kwargs, records=False)
    seconds = time.perf_counter() - start
    return {
        "env": env,
        "baseline": name,
        "episodes": episodes,
        "seconds": round(seconds, 2),
        "episodes_per_min": round(60 * episodes / seconds, 2),
        "mean_turns": round(sum(r.turns for r in results) / len(results), 2),
        "mean_return": round(sum(r.episode_return for r in results) / len(results), 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the figures and optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 4, 16], help="none: skip tokens/s")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="generation runs per (dtype, batch)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per (env, baseline); 0 skips episodes")
    parser.add_argument("--episode-tokens", type=int, default=64, help="max new tokens per action in episodes")
    parser.add_argument("--num-agents", type=int, default=2)
    parser.add_argument("--envs", nargs="+", choices=ENV_NAMES, default=list(ENV_NAMES))
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)

    report: dict[str, Any] = {
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "generation": [],
        "episodes": [],
    }
    policy = None
    for dtype in args.dtypes if args.batches else []:
        policy = LocalModelPolicy(loaded=load_model(None, dtype=dtype, device="cpu"), batch_size=max(args.batches))
        for batch in args.batches:
            row = {"dtype": dtype, **tokens_per_second(policy, batch, args.max_new_tokens, args.repeats)}
            report["generation"].append(row)
            print(f"local {dtype:9s} batch {batch:3d}: {row['tokens_per_s']:7.1f} tokens/s "
                  f"({row['tokens']} tokens in {row['seconds']} s)", flush=True)
    if args.episodes > 0:
        policy = LocalModelPolicy(loaded=load_model(None, dtype="auto", device="cpu"))
        report["episode_dtype"] = policy.loaded.dtype
        for env in args.envs:
            # One scripted episode first, so one-time costs (executor start, similarity model) hit no baseline.
            run_episodes("naive_concatenation", env, ScriptedPolicy(), GenerationSettings(), seeds=[10_000],
                         num_agents=args.num_agents, env_kwargs={"executor": "local"} if env == "coding" else {})
            for name in BASELINES:
                row = episodes_per_minute(policy, env, name, args.episodes, args.num_agents, args.episode_tokens)
                report["episodes"].append(row)
                print(f"{env:8s} {name:21s}: {row['episodes_per_min']:6.2f} episodes/min "
                      f"({row['episodes']} episodes in {row['seconds']} s, mean turns {row['mean_turns']}, "
                      f"mean return {row['mean_return']:+.3f})", flush=True)
    if args.json:
        write_figures_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
