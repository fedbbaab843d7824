"""Where the coders' first replies go, on train-split tasks (the probe behind recipe.yaml's w_d; never the eval split).

``python probe.py [--json probe.json]`` plays turn 1 of 12 train-split HumanEval tasks (seeds 100-111) for the shipped
coding-2 (``trained``), its untrained coders (``untrained``) and one agent (``single``), bf16, the study's sampling
(temperature 0.7, top-p 0.95, 160 new tokens), and prints per condition: replies, replies that ran to the 160-token
cap, replies that say ``<done/>``, mean completion tokens, and the whitespace tokens the env discarded (text that is
neither the stored draft, a message nor a marker: ``reward_components["step_discarded_tokens"]``).
"""

import argparse
import json

from llm_marl_baselines.policies import make_policy
from llm_marl_baselines.policies.base import GenerationSettings
from llm_marl_baselines.teams import load_team
from llm_marl_envs import coding_v0
from llm_marl_envs.rollout import ChatEnv, run_episodes

CAP = 160
SEEDS = list(range(100, 112))


def probe(condition: str) -> dict:
    num_agents = 1 if condition == "single" else 2
    policy = load_team("coding_v0", 2, dtype="bfloat16") if condition == "trained" else make_policy(
        "local", dtype="bfloat16")
    rollout = policy.as_rollout_policy(GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=CAP, seed=11))
    envs = [ChatEnv(coding_v0.parallel_env(num_agents=num_agents, split="train", max_turns=1,
                                           scheme="propose_verify")) for _ in SEEDS]
    trajectories = run_episodes(envs, rollout, seeds=SEEDS)
    steps = [step for trajectory in trajectories for step in trajectory.steps]
    tokens = [len(step.generation.completion_ids) for step in steps]
    discarded = [t.steps[0].reward_components["step_discarded_tokens"] for t in trajectories]
    return {"condition": condition, "replies": len(steps), "at_cap": sum(n >= CAP for n in tokens),
            "said_done": sum("<done/>" in step.action for step in steps),
            "mean_completion_tokens": sum(tokens) / len(tokens),
            "mean_discarded_words_a_reply": sum(discarded) / len(steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    figures = [probe(condition) for condition in ("trained", "untrained", "single")]
    for row in figures:
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"tasks": "humaneval train split", "seeds": SEEDS, "dtype": "bfloat16", "device": "cpu",
                       "conditions": figures}, handle, indent=2)


if __name__ == "__main__":
    main()
