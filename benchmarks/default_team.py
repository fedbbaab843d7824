"""Can the untrained default team play? The share of untrained episodes that produce something the reward can see,
how soon they end, and (coding) whether the helper is a helper.

Before training means anything, the untrained model must be able to do the task, end an episode on its own and
give its teammate something to use. This plays the untrained default model (SmolLM2-135M-Instruct) on held-out tasks
under the study's untrained condition (``prompt_collaboration``: the team sees the drafts the env shows it), as one
agent with the team's budget and endings (``single``, where the code has that baseline), and under the env's own
prompts (``plain``: what a trained team plays), and reports per env and condition:

- writing: the share of episodes with quality > 0 (a part echoing the prompt's scaffolding, a copied lead or a
  repeated sentence scores 0), and the mean quality;
- coding: the share of final programs that parse and define the entry point (the env's ``syntax`` term), the mean
  held-out pass rate, and for teams the share of episodes whose helper agent's part defines ``aux`` and whose main
  agent's entry point calls ``aux`` — the helper can only count for the team (be load-bearing) when both hold — and
  the share where the helper is load-bearing (its counterfactual contribution is above 0) — so the coding env plays
  ``scheme="magrpo"`` here, the scheme with a helper;
- both: the distribution of turns taken, the share of episodes that end before the budget (``early_end_share``) and
  why episodes end; and of the replies from turn 2 on (where an agent can end), the share that carry a done tag
  (``done_tag_share``), that echo the offer to end instead of taking it (``offer_echo_share``: the offer's first line
  copied into the reply), and that nearly copy the agent's previous reply (``near_copy_share``: 90 % of its words
  shared), which shows why a team does or does not end.

Sampling as in the study (temperature 0.7, top-p 0.95, seeded); new tokens: each env's budget for its roles unless
``--max-new-tokens`` says otherwise; turn budget ``--max-turns`` (4, the study's). ``--done-offer TEXT`` plays the
envs with another offer to end (their ``done_offer`` setting): choose a wording on ``--split train``, and measure the
chosen one on fresh seeds (``--first-seed``) and then once on the held-out tasks. ``--end-quorum all|half|any``
plays them with that many finished agents ending an episode (their ``end_quorum`` setting). The code reads only
APIs an older checkout has too, so the same file measures it
(``PYTHONPATH=CHECKOUT python -m llm_marl_benchmarks.default_team`` from a copy in that checkout): that is how the
before/after figures of docs/results.md ("Can the untrained team play the final envs?") were made.

    python -m llm_marl_benchmarks.default_team [--episodes 24] [--split eval] [--max-turns 4] [--conditions ...]
                                      [--max-new-tokens N] [--done-offer TEXT] [--first-seed N]
                                      [--end-quorum all|half|any]
                                      [--json PATH]
"""

from __future__ import annotations

import argparse
import collections
import inspect
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.progress import EpisodeProgress
from llm_marl_envs.registry import ENV_NAMES

CONDITIONS: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("untrained", ("prompt_collaboration",), 2),
    ("single", ("single_agent_multiturn", "single_agent"), 2),
    ("plain", ("plain",), 2),
)
"""(label, baselines to try in order — the first this checkout has —, team size): the study's untrained team, one
agent (with the team's budget and endings where the code has it), and the env's own prompts."""


def _baseline(names: Sequence[str]) -> str:
    from llm_marl_baselines.collaboration import get_baseline

    for name in names:
        try:
            get_baseline(name)
        except ValueError:
            continue
        return name
    raise ValueError(f"none of the baselines {list(names)} exists in this checkout")


NEAR_COPY = 0.9
"""Word overlap (multiset, over the longer reply) from which a reply counts as a near-copy of the agent's last one."""


def _words(text: str) -> collections.Counter[str]:
    return collections.Counter(re.findall(r"[a-z0-9]+", text.lower()))


def reply_endings(steps: Sequence[Any], done_offer: str | None = None) -> dict[str, int]:
    """Counts over one episode's agent steps from turn 2 on: ``replies``, and those with a done tag (``done_tag``),
    echoing the first line of the offer to end (``offer_echo``; ``done_offer``, default the env's) or sharing
    :data:`NEAR_COPY` of their words with the agent's previous reply (``near_copy``). Where this checkout has no done
    tag or offer, those counts stay 0."""
    try:
        from llm_marl_envs.core.observation import DONE_OFFER
        from llm_marl_envs.core.protocol import DONE_TAG
    except ImportError:  # an older checkout (see the module docstring)
        DONE_OFFER, DONE_TAG = None, None
    done_offer = DONE_OFFER if done_offer is None else done_offer
    offer = done_offer.splitlines()[0].rstrip(":").lower() if done_offer else None
    counts = {"replies": 0, "done_tag": 0, "offer_echo": 0, "near_copy": 0}
    previous: dict[str, collections.Counter[str]] = {}
    for step in steps:
        words = _words(step.action)
        if step.turn >= 2:
            counts["replies"] += 1
            counts["done_tag"] += bool(DONE_TAG is not None and DONE_TAG.search(step.action))
            counts["offer_echo"] += bool(offer is not None and offer in step.action.lower())
            last = previous.get(step.agent)
            if last and words:
                shared = sum((words & last).values()) / max(sum(words.values()), sum(last.values()))
                counts["near_copy"] += shared >= NEAR_COPY
        previous[step.agent] = words
    return counts


def measure(env: str, baseline: str, num_agents: int, episodes: int, split: str, tokens: int | None,
            policy: Any, max_turns: int, done_offer: str | None = None, first_seed: int = 0,
            end_quorum: str | None = None, progress: EpisodeProgress | None = None,
            scheme: str | None = "magrpo") -> dict[str, Any]:
    """Play ``episodes`` untrained episodes (seeds ``first_seed`` on) and return the shares and means (see the module
    docstring); ``done_offer`` and ``end_quorum``: the env's settings of those names (``None``: its defaults; the
    figures record the quorum played); ``scheme``: the coding env's (``"magrpo"``, whose helper the figures follow;
    ``None``: the env's default). ``progress`` hears every turn and episode."""
    from llm_marl_baselines.collaboration import get_baseline, run_episodes
    from llm_marl_baselines.policies.base import GenerationSettings
    from llm_marl_envs.envs.coding.program import calls_function, defined_functions
    from llm_marl_envs.envs.coding.roles import HELPER_NAME
    from llm_marl_envs.registry import make_env

    spec = get_baseline(baseline)
    single = getattr(spec, "single_agent", False)
    env_kwargs = {"similarity": "tfidf", **({} if done_offer is None else {"done_offer": done_offer}),
                  **({} if end_quorum is None else {"end_quorum": end_quorum}),
                  **({"scheme": scheme} if env == "coding" and scheme is not None else {})}
    if tokens is None:
        probe = make_env(env, num_agents=1 if single else num_agents, **env_kwargs)
        tokens = probe.suggested_max_new_tokens()
    budget = spec.env_kwargs(num_agents, max_turns)["max_turns"]
    settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=tokens, seed=0)
    started = time.perf_counter()
    seeds = range(first_seed, first_seed + episodes)
    callbacks: dict[str, Any] = {}
    if progress is not None and "on_episode" in inspect.signature(run_episodes).parameters:  # older checkouts: none
        progress.begin(f"{env} {baseline}")
        callbacks = {"on_turn": progress.on_turn, "on_episode": progress.on_episode}
    results = run_episodes(baseline, env, policy, settings, seeds=seeds, num_agents=num_agents, split=split,
                           max_turns=max_turns, env_kwargs=env_kwargs, records=False, **callbacks)
    played = make_env(env, num_agents=1, **env_kwargs)
    tasks = played.task_source
    rows = []
    for result in results:
        terms = result.trajectory.final_info.get("quality_terms", {}) if result.trajectory else {}
        drafts = dict(result.drafts)
        row = {"task": result.task_id, "quality": result.quality, "turns": result.turns,
               "end_reason": result.end_reason, "early_end": result.turns < budget,
               "playable": result.quality > 0 if env == "writing" else bool(terms.get("syntax", 0.0) > 0),
               "pass_rate": terms.get("pass_rate"),
               **reply_endings(result.trajectory.steps if result.trajectory else (), done_offer)}
        if env == "coding" and HELPER_NAME in drafts:
            entry_point = tasks.get(result.task_id)["entry_point"]
            contributions = result.reward_components.get("contributions") or {}
            row.update({"helper_defined": HELPER_NAME in defined_functions(drafts[HELPER_NAME]),
                        "main_calls_helper": calls_function(drafts.get("main", ""), entry_point, HELPER_NAME),
                        "helper_load_bearing": bool((contributions.get(HELPER_NAME) or 0.0) > 0)})
        rows.append(row)
    turns = collections.Counter(row["turns"] for row in rows)
    figures = {"env": env, "condition": baseline, "num_agents": 1 if single else num_agents, "episodes": len(rows),
               "max_new_tokens": tokens, "max_turns": budget, "done_offer": done_offer, "first_seed": first_seed,
               "end_quorum": getattr(played, "end_quorum", end_quorum),  # older checkouts: the setting
               "playable_share": _share(rows, "playable"), "mean_quality": _mean(rows, "quality"),
               "turns_distribution": {str(t): turns.get(t, 0) for t in range(1, budget + 1)},
               "mean_turns": _mean(rows, "turns"), "early_end_share": _share(rows, "early_end"),
               "end_reasons": dict(collections.Counter(str(row["end_reason"]) for row in rows)),
               "later_replies": sum(row["replies"] for row in rows),
               **{f"{name}_share": sum(row[name] for row in rows) / max(1, sum(row["replies"] for row in rows))
                  for name in ("done_tag", "offer_echo", "near_copy")},
               "wall_s": time.perf_counter() - started, "episodes_detail": rows}
    if env == "coding":
        figures["mean_pass_rate"] = sum(r["pass_rate"] or 0.0 for r in rows) / len(rows)
        for name in ("helper_defined", "main_calls_helper", "helper_load_bearing"):
            figures[f"{name}_share"] = _share([r for r in rows if name in r], name)
    return figures


def _share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return sum(bool(row[key]) for row in rows) / len(rows) if rows else None


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return sum(row[key] for row in rows) / len(rows)


def _line(row: dict[str, Any]) -> str:
    what = "quality > 0" if row["env"] == "writing" else "programs that parse and define the entry point"
    text = (f"[default_team] {row['env']} {row['label']} ({row['condition']}, {row['episodes']} episodes, "
            f"{row['max_new_tokens']} tokens, budget {row['max_turns']}): {row['playable_share']:.0%} {what}, mean "
            f"quality {row['mean_quality']:.3f}; turns {row['turns_distribution']} (mean {row['mean_turns']:.2f}), "
            f"ended early {row['early_end_share']:.0%}, ends {row['end_reasons']}; of {row['later_replies']} replies "
            f"from turn 2: done tag {row['done_tag_share']:.0%}, offer echoed {row['offer_echo_share']:.0%}, "
            f"near-copies {row['near_copy_share']:.0%}")
    if row["env"] == "coding":
        text += f"; mean pass rate {row['mean_pass_rate']:.3f}"
        if row.get("helper_defined_share") is not None:
            text += (f"; aux defines aux {row['helper_defined_share']:.0%}, main calls aux "
                     f"{row['main_calls_helper_share']:.0%}, helper load-bearing "
                     f"{row['helper_load_bearing_share']:.0%}")
    return f"{text}; {row['wall_s']:.0f} s"


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print; ``--json`` writes every figure."""
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.default_team",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=24, help="episodes per env and condition")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="episode seeds FIRST..FIRST+N-1 (a fresh set of tasks to confirm a choice on)")
    parser.add_argument("--split", choices=("train", "eval"), default="eval")
    parser.add_argument("--envs", nargs="+", default=list(ENV_NAMES))
    parser.add_argument("--conditions", nargs="+", default=[label for label, _, _ in CONDITIONS])
    parser.add_argument("--max-turns", type=int, default=4, help="turn budget of the multi-turn conditions")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: each env's budget for its roles")
    parser.add_argument("--done-offer", default=None, metavar="TEXT",
                        help="the env's offer to end (done_offer; '\\n' starts a new line); default: the env's own")
    parser.add_argument("--end-quorum", choices=("all", "half", "any"), default=None,
                        help="how many finished agents end an episode (the env's end_quorum); default: the env's own")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    chosen = [c for c in CONDITIONS if c[0] in args.conditions]
    if args.episodes < 1 or args.max_turns < 1 or args.first_seed < 0 or not chosen:
        parser.error("expected --episodes >= 1, --max-turns >= 1, --first-seed >= 0 and at least one known condition")
    done_offer = None if args.done_offer is None else args.done_offer.replace("\\n", "\n")
    if done_offer is not None:
        from llm_marl_envs.core.config import ObservationConfig

        try:
            ObservationConfig(done_offer=done_offer)
        except ValueError as error:
            parser.error(str(error))
    from llm_marl_baselines.policies.local import LocalModelPolicy

    print(f"[default_team] {args.episodes} untrained episodes per env x condition on the {args.split} split, budget "
          f"{args.max_turns} turns: {len(args.envs) * len(chosen) * args.episodes} episodes", flush=True)
    policy = LocalModelPolicy()
    figures = []
    with EpisodeProgress(len(args.envs) * len(chosen) * args.episodes, args.max_turns, tag="default_team") as progress:
        for env in args.envs:
            for label, baselines, size in chosen:
                row = measure(env, _baseline(baselines), size, args.episodes, args.split, args.max_new_tokens,
                              policy, args.max_turns, done_offer, args.first_seed, args.end_quorum, progress)
                row["label"] = label
                figures.append(row)
                progress.write(_line(row))
    if args.json:
        payload = {"split": args.split, "max_turns": args.max_turns, "figures": figures}
        write_figures_json(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
