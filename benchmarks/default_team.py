"""Can the untrained default team play? The share of untrained episodes that produce something the reward can see.

Before training means anything, the untrained model must be able to do the task. This plays the untrained default
model (SmolLM2-135M-Instruct) on held-out tasks under the study's untrained condition (``prompt_collaboration``: the
team sees each other's drafts, 2 turns), as a single agent, and under the env's own prompts (``plain``: what a
trained team plays), and reports per env:

- writing: the share of episodes with quality > 0 (a part echoing the prompt's scaffolding, a copied lead or a
  repeated sentence scores 0), and the mean quality;
- coding: the share of final programs that parse and define the entry point (the env's ``syntax`` term), the mean
  held-out pass rate, and (teams) the share of episodes whose helper agent's part defines ``aux`` at all — the
  helper can only count for the team (be load-bearing) when it does.

Sampling as in the study (temperature 0.7, top-p 0.95, seeded); new tokens: each env's budget for its roles unless
``--max-new-tokens`` says otherwise. The same command measured the prompts before and after they were rewritten for
small models (see the README).

    python -m benchmarks.default_team [--episodes 24] [--split eval] [--max-new-tokens N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl_envs.registry import ENV_NAMES

CONDITIONS: tuple[tuple[str, str, int], ...] = (
    ("untrained", "prompt_collaboration", 2),
    ("single", "single_agent", 2),
    ("plain", "plain", 2),
)
"""(label, baseline, team size): the study's untrained team, one agent, and the env's own prompts."""


def measure(env: str, baseline: str, num_agents: int, episodes: int, split: str, tokens: int | None,
            policy: Any) -> dict[str, Any]:
    """Play ``episodes`` untrained episodes and return the shares and means (see the module docstring)."""
    from baselines.collaboration import run_episodes
    from baselines.policies.base import GenerationSettings
    from llm_marl_envs.registry import make_env

    if tokens is None:
        probe = make_env(env, num_agents=1 if baseline == "single_agent" else num_agents, similarity="tfidf")
        tokens = probe.suggested_max_new_tokens()
    settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=tokens, seed=0)
    started = time.perf_counter()
    results = run_episodes(baseline, env, policy, settings, seeds=range(episodes), num_agents=num_agents,
                           split=split, max_turns=2, env_kwargs={"similarity": "tfidf"}, records=False)
    from llm_marl_envs.envs.coding.program import defined_functions
    from llm_marl_envs.envs.coding.roles import HELPER_NAME

    rows = []
    for result in results:
        terms = result.trajectory.final_info.get("quality_terms", {}) if result.trajectory else {}
        drafts = dict(result.trajectory.final_drafts) if result.trajectory else {}
        rows.append({"task": result.task_id, "quality": result.quality, "playable": (
            result.quality > 0 if env == "writing" else bool(terms.get("syntax", 0.0) > 0)),
            "pass_rate": terms.get("pass_rate"),
            "helper_defined": (HELPER_NAME in defined_functions(drafts[HELPER_NAME])
                               if env == "coding" and HELPER_NAME in drafts else None)})
    playable = sum(row["playable"] for row in rows) / len(rows)
    figures = {"env": env, "condition": baseline, "num_agents": num_agents, "episodes": len(rows),
               "max_new_tokens": tokens, "playable_share": playable,
               "mean_quality": sum(r["quality"] for r in rows) / len(rows),
               "wall_s": time.perf_counter() - started, "episodes_detail": rows}
    if env == "coding":
        figures["mean_pass_rate"] = sum(r["pass_rate"] or 0.0 for r in rows) / len(rows)
        helpers = [r["helper_defined"] for r in rows if r["helper_defined"] is not None]
        figures["helper_defined_share"] = sum(helpers) / len(helpers) if helpers else None
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print; ``--json`` writes every figure."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.default_team", description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=24, help="episodes per env and condition (seeds 0..N-1)")
    parser.add_argument("--split", choices=("train", "eval"), default="eval")
    parser.add_argument("--envs", nargs="+", default=list(ENV_NAMES))
    parser.add_argument("--conditions", nargs="+", default=[label for label, _, _ in CONDITIONS])
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: each env's budget for its roles")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    chosen = [c for c in CONDITIONS if c[0] in args.conditions]
    if args.episodes < 1 or not chosen:
        parser.error("expected --episodes >= 1 and at least one known condition")
    from baselines.policies.local import LocalModelPolicy

    print(f"[default_team] {args.episodes} untrained episodes per env x condition on the {args.split} split: "
          f"{len(args.envs) * len(chosen) * args.episodes} episodes", flush=True)
    policy = LocalModelPolicy()
    figures = []
    for env in args.envs:
        for label, baseline, size in chosen:
            row = measure(env, baseline, size, args.episodes, args.split, args.max_new_tokens, policy)
            row["label"] = label
            figures.append(row)
            what = "quality > 0" if env == "writing" else "programs that parse and define the entry point"
            extra = f", mean pass rate {row['mean_pass_rate']:.3f}" if env == "coding" else ""
            if row.get("helper_defined_share") is not None:
                extra += f", helper part defines aux in {row['helper_defined_share']:.0%}"
            print(f"[default_team] {env} {label}: {row['playable_share']:.0%} {what} ({row['episodes']} episodes, "
                  f"{row['max_new_tokens']} tokens), mean quality {row['mean_quality']:.3f}{extra}, "
                  f"{row['wall_s']:.0f} s", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"split": args.split, "figures": figures}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
