"""How long is a prompt? Tokens per agent turn, chat-templated as a policy reads it, per env x team size x turn.

Every turn a policy reads one prompt per live agent: the env's chat (:meth:`chat_messages`: system, user and, where
the env starts the reply, the assistant's opening) through the default model's chat template (SmolLM2's ChatML)
with the assistant turn opened. Prefill and the trainer's update pass both read that prompt once per sample, so its
length is a cost paid G times a group (issue 24).

The episodes are held-out tasks (``--split eval``, seeds ``0..tasks-1``). Turn 1 is the observation after
``reset``; turn 2 the observation after one step with a fixed, realistic draft per role (:func:`turn_one_actions`:
a two-sentence writing part, a short function for each code role (a whole entry point for a candidate scheme's
coders), asserts for the tester, a review or a verifier's choice), so turn 2 carries the agent's own draft, its
feedback and messages as a trained team's would. Coding runs the env's default scheme. The figures are medians of the
token counts of every live agent's prompt.

    python -m llm_marl_benchmarks.prompt_tokens [--tasks 20] [--split eval] [--sizes 2 3 4] [--envs writing coding]
                                       [--json PATH]

The code reads only the env's public API (``make_env``, ``reset``, ``step``, ``chat_messages``), so the same file
measures an older checkout too (``PYTHONPATH=CHECKOUT python CHECKOUT/benchmarks/prompt_tokens.py``).
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.registry import ENV_NAMES

WRITING_DRAFT = (
    "The council voted to close the bridge after engineers found cracks in two of its supports. Repairs will take "
    "six months and cost the city four million dollars, officials said on Monday."
)
"""A 32-word part: about what an honest concise summary is, and a short detailed one."""
HELPER_DRAFT = (
    '```python\ndef aux(x):\n    """Return the items of x."""\n    result = []\n    for item in x:\n'
    "        result.append(item)\n    return result\n```"
)
_SIGNATURE = re.compile(r"^def\s+(\w+)\s*\((.*?)\)\s*(?:->[^:]*)?:", re.MULTILINE | re.DOTALL)


def turn_one_actions(env: Any) -> dict[str, str]:
    """A fixed, realistic first action per live agent of ``env`` (see the module docstring)."""
    if "entry_point" not in env.task.fields:
        return {agent: WRITING_DRAFT for agent in env.agents}
    entry_point = env.task["entry_point"]
    match = next((m for m in _SIGNATURE.finditer(env.task["prompt"]) if m.group(1) == entry_point), None)
    params = " ".join(match.group(2).split()) if match else "*args"

    def entry_draft(element: str) -> str:
        return (f"```python\ndef {entry_point}({params}):\n    result = []\n    for item in range(3):\n"
                f"        result.append({element})\n    return result\n```")

    main = entry_draft("aux(item)")
    # A candidate (propose_verify's coders, author_fixer's author and fixer) is a whole entry point, with no aux.
    candidate = entry_draft("item")
    visible = list(env.task["visible_tests"])[:2] or [f"assert {entry_point} is not None"]
    actions = {"aux": HELPER_DRAFT, "main": main, "solo": main,
               **dict.fromkeys(("coder_1", "coder_2", "author", "fixer"), candidate),
               "verifier": "Choice: coder_1. Its loop covers the examples.",
               "tester": "```python\n" + "\n".join(visible) + f"\nassert {entry_point} is not None\n```",
               "reviewer": "<message>Check the empty input and the last example.</message>The program looks close."}
    return {agent: actions[agent] for agent in env.agents}


def count_tokens(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> int:
    """Tokens of ``messages`` through the chat template, with the assistant turn opened (or, when the chat ends with
    the assistant's opening words, continued from them): what a policy feeds the model."""
    messages = [dict(m) for m in messages]
    if messages and messages[-1]["role"] == "assistant":
        text = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    else:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def measure(env_name: str, size: int, tasks: int, split: str, tokenizer: Any) -> dict[str, Any]:
    """Token counts of every live agent's prompt at turns 1 and 2 over ``tasks`` episodes of one env and size."""
    from llm_marl_envs.registry import make_env

    kwargs: dict[str, Any] = {"num_agents": size, "similarity": "tfidf", "max_turns": 4}
    if env_name == "coding":
        kwargs["executor"] = "local"  # fixed drafts only; nothing model-written runs
    env = make_env(env_name, **kwargs)
    counts: dict[int, list[int]] = {1: [], 2: []}
    for seed in range(tasks):
        env.reset(seed=seed, options={"split": split})
        counts[1] += [count_tokens(tokenizer, env.chat_messages(agent)) for agent in env.agents]
        env.step(turn_one_actions(env))
        counts[2] += [count_tokens(tokenizer, env.chat_messages(agent)) for agent in env.agents]
    env.close()
    return {
        "env": env_name,
        "num_agents": size,
        "prompts": {str(turn): len(values) for turn, values in counts.items()},
        "median_by_turn": {str(turn): statistics.median(values) for turn, values in counts.items() if values},
        "median": statistics.median(counts[1] + counts[2]),
        "max": max(counts[1] + counts[2]),
        "counts": {str(turn): values for turn, values in counts.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the medians; ``--json`` writes every count."""
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.prompt_tokens",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20, help="episodes per env and size (seeds 0..N-1)")
    parser.add_argument("--split", choices=("train", "eval"), default="eval")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--envs", nargs="+", default=list(ENV_NAMES))
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    if args.tasks < 1:
        parser.error(f"--tasks: expected >= 1, got {args.tasks}")
    logging.disable(logging.WARNING)
    from llm_marl_baselines.models import load_tokenizer, resolve_model_source

    tokenizer = load_tokenizer(resolve_model_source(None))
    started = time.perf_counter()
    rows = [measure(env, size, args.tasks, args.split, tokenizer) for env in args.envs for size in args.sizes]
    print("| env | agents | turn 1 | turn 2 | all turns | longest |\n|---|---:|---:|---:|---:|---:|")
    for row in rows:
        by_turn = row["median_by_turn"]
        print(f"| {row['env']} | {row['num_agents']} | {by_turn['1']:.0f} | {by_turn['2']:.0f} | {row['median']:.0f} "
              f"| {row['max']} |")
    per_env = {}
    for env in args.envs:
        values = [v for row in rows if row["env"] == env for turn in ("1", "2") for v in row["counts"][turn]]
        per_env[env] = statistics.median(values)
        print(f"[prompt_tokens] {env}: median {per_env[env]:.0f} tokens a prompt over sizes {args.sizes}, turns 1-2")
    print(f"[prompt_tokens] {args.tasks} {args.split} tasks per cell, {time.perf_counter() - started:.0f} s")
    if args.json:
        payload = {"split": args.split, "tasks": args.tasks, "sizes": args.sizes, "median_per_env": per_env,
                   "rows": rows}
        write_figures_json(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
