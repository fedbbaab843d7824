"""Does a team role's prompt cost its first draft? Each code author's turn-1 candidate against one agent's, on the
train split.

In the candidate schemes (``propose_verify``, ``author_fixer``) every code author writes the whole entry point, as one
agent does, so at turn 1 the only difference between a coder's request and ``solo``'s is the prompt: the team header
(teammates, the ``<message>`` protocol line) and the role's instruction. If a coder's first candidate passes less than
one agent's, the untrained team pays for its prompt before any coordination starts; a team of two such coders then
trails one agent's best of two (issue 42: over 80 held-out pairs the untrained pair passed 0.145 against best of
two's 0.245). This measures that cost where prompts may be chosen: the **train** split only.

For each of ``--tasks`` train tasks (distinct, in the split's order) and each prompt (``solo``'s, then every code
author's in a team of ``--team-size``), the default model samples ``--samples`` replies to the turn-1 chat exactly as
the env gives it (:meth:`chat_messages`, the reply started as the env starts it), with the study's sampling
(temperature 0.7, top-p 0.95, each prompt's sampling seeded by the task's index, so prompts differ only by their
text). Each reply is read as the env reads a draft and its program runs the task's visible tests in the sandbox
(:func:`~llm_marl_benchmarks.study.best_of_n.candidate_program`, the best-of-n control's own reading). Per prompt:
the share of samples that pass every visible test, and the mean share of visible tests passed (denser: most samples
of a 135M model pass none); per role, the paired difference from ``solo`` over tasks with its 95 % CI and p
(paired t-test, scipy).

With 2 or more samples it also asks the best-of-2 question of the first two code authors: per task, the share of
pairs of candidates in which either passes every visible test, ``solo``'s two samples against one of each author's
(:func:`pair_any_passes`), paired by task. Two samples of one prompt fail together more than two candidates of two
different briefs would (``--env-option coding.coder_briefs=distinct``), if those briefs make a difference.

    python -m llm_marl_benchmarks.role_prompts [--scheme propose_verify] [--team-size 2] [--tasks 40]
                                               [--samples 6] [--executor auto] [--env-option coding.KEY=VALUE ...]
                                               [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json

CANDIDATE_SCHEMES: tuple[str, ...] = ("propose_verify", "author_fixer")
"""Schemes whose code authors each write the whole entry point (the only ones a turn-1 candidate can be run for)."""
NOT_AUTHORS: frozenset[str] = frozenset({"tester", "verifier"})
"""Team roles that write no candidate."""
SAMPLING: dict[str, float] = {"temperature": 0.7, "top_p": 0.95}
"""The study's sampling, which every prompt is sampled with."""


def paired_difference(role: Sequence[float], solo: Sequence[float]) -> dict[str, float | None]:
    """Mean of ``role - solo`` over tasks, its 95 % CI and the paired t-test's p: the study's test
    (:func:`~llm_marl_benchmarks.study.stats.compare`), with None for the CI and p when every difference is the same
    (no spread, no test) so the JSON holds no NaN."""
    from llm_marl_benchmarks.study.stats import compare

    test = compare(role, solo, paired=True)
    if math.isnan(test.p):
        return {"mean": test.diff, "ci_low": None, "ci_high": None, "p": None}
    return {"mean": test.diff, "ci_low": test.diff_ci_low, "ci_high": test.diff_ci_high, "p": test.p}


def pair_any_passes(first: Sequence[int], second: Sequence[int] | None = None) -> float:
    """The share of pairs of samples in which at least one passes (1/0 per sample): two samples of one prompt
    (``second`` None), or one of each of two prompts. Only samples drawn with different random numbers are paired:
    every prompt's ``i``-th sample shares its seed with the others' ``i``-th, so two prompts' ``i``-th samples (and a
    sample with itself) are left out. The best-of-2 question: would either of two candidates pass?"""
    n = len(first)
    if n < 2 or (second is not None and len(second) != n):
        shown = None if second is None else len(second)
        raise ValueError(f"expected samples of one length >= 2, got {n} and {shown}")
    other = first if second is None else second
    both_fail = sum(1 for i in range(n) for j in range(n) if i != j and not first[i] and not other[j])
    return 1.0 - both_fail / (n * (n - 1))


def run(*, scheme: str, team_size: int, tasks: int, samples: int, executor: str = "auto", max_new_tokens: int | None
        = None, policy: Any = None, team_options: Mapping[str, Any] | None = None, stop_at_reply_end: bool = True
        ) -> dict[str, Any]:
    """Sample and score every prompt (see the module docstring); returns per-task figures and the summary.
    ``team_options``: further keywords of the team's env (e.g. ``{"coder_briefs": "distinct"}``);
    ``stop_at_reply_end``: the default policy's replies stop where the env stops reading them (the study's default)."""
    from llm_marl_baselines.policies import env_reply_ends, make_policy
    from llm_marl_baselines.policies.base import ActionRequest, GenerationSettings
    from llm_marl_benchmarks.progress import Progress
    from llm_marl_benchmarks.study.best_of_n import candidate_program
    from llm_marl_benchmarks.study.execution import NO_PRECISION, model_precision
    from llm_marl_envs import coding_v0
    from llm_marl_envs.envs.coding.selection import visible_test_runner

    if scheme not in CANDIDATE_SCHEMES:
        raise ValueError(f"scheme: expected one of {CANDIDATE_SCHEMES} (their authors write the whole entry point), "
                         f"got {scheme!r}")
    common = {"dataset": "humaneval", "split": "train", "executor": executor, "similarity": "tfidf"}
    solo = coding_v0.parallel_env(num_agents=1, **common)
    team = coding_v0.parallel_env(num_agents=team_size, scheme=scheme, **common, **dict(team_options or {}))
    authors = [agent for agent in team.possible_agents if agent not in NOT_AUTHORS]
    team_pair = f"{authors[0]}+{authors[1]}"
    task_ids = solo.task_source.ids("train")[:tasks]
    if len(task_ids) < tasks:
        raise ValueError(f"tasks: the train split has {len(task_ids)} tasks, asked for {tasks}")
    if policy is None:
        # As the study decodes since 2026-12-06: a code reply stops where its block closes (the env reads no further).
        reply_ends = env_reply_ends([solo, team]) if stop_at_reply_end else None
        policy = make_policy("local", reuse_prompts=False, reply_ends=reply_ends)
    new_tokens = max_new_tokens or max(solo.suggested_max_new_tokens(), team.suggested_max_new_tokens(authors))
    prompts = [("solo", solo, "solo")] + [(agent, team, agent) for agent in authors]
    print(f"[role_prompts] {len(task_ids)} train tasks x {len(prompts)} prompts ({', '.join(p[0] for p in prompts)}; "
          f"scheme {scheme}, team of {team_size}) x {samples} samples, {new_tokens} new tokens, executor "
          f"{solo.executor.backend}", flush=True)
    per_task: list[dict[str, Any]] = []
    progress = Progress(len(task_ids), "task", tag="role_prompts")
    for index, task_id in enumerate(task_ids):
        row: dict[str, Any] = {"task": task_id}
        for name, env, agent in prompts:
            env.reset(seed=index, options={"task_id": task_id})
            request = ActionRequest.from_messages(agent, env.chat_messages(agent))
            settings = GenerationSettings(**SAMPLING, max_new_tokens=new_tokens, seed=index)
            replies = policy.act([request] * samples, settings)
            visible = list(env.task["visible_tests"])
            passed = visible_test_runner(env.executor, visible)([candidate_program(env, agent, r) for r in replies])
            total = len(visible)
            all_passed = [int(total > 0 and p == total) for p in passed]
            row[name] = {"all_visible": statistics.fmean(all_passed),
                         "visible_share": statistics.fmean(p / total if total else 0.0 for p in passed),
                         "all_visible_samples": all_passed}
        if samples > 1:
            row["pairs"] = {"solo+solo": pair_any_passes(row["solo"]["all_visible_samples"]),
                            team_pair: pair_any_passes(row[authors[0]]["all_visible_samples"],
                                                       row[authors[1]]["all_visible_samples"])}
        per_task.append(row)
        shown = ", ".join(f"{name} {statistics.fmean(r[name]['all_visible'] for r in per_task):.3f}"
                          for name, _, _ in prompts)
        progress.advance(event=task_id, detail=f": all visible passed so far {shown}")
    progress.close()
    loaded = getattr(policy, "loaded", None)
    precision = model_precision([loaded.model]) if loaded is not None else dict(NO_PRECISION)
    pairs: dict[str, Any] | None = None
    if samples > 1:
        solo_pairs = [row["pairs"]["solo+solo"] for row in per_task]
        team_pairs = [row["pairs"][team_pair] for row in per_task]
        pairs = {"solo+solo": statistics.fmean(solo_pairs), team_pair: statistics.fmean(team_pairs),
                 "team_minus_solo": paired_difference(team_pairs, solo_pairs)}
    summary: dict[str, Any] = {}
    for name, _, _ in prompts:
        figures: dict[str, Any] = {}
        for metric in ("all_visible", "visible_share"):
            values = [row[name][metric] for row in per_task]
            figures[metric] = statistics.fmean(values)
            if name != "solo":
                figures[f"{metric}_minus_solo"] = paired_difference(values, [row["solo"][metric] for row in per_task])
        summary[name] = figures
    return {"scheme": scheme, "team_size": team_size, "tasks": len(per_task), "samples": samples,
            "max_new_tokens": new_tokens, "split": "train", "executor": solo.executor.backend,
            "sampling": SAMPLING, "team_options": dict(team_options or {}), "stop_at_reply_end": stop_at_reply_end,
            "precision": precision, "summary": summary, "pairs": pairs, "per_task": per_task,
            "wall_s": progress.clock() - progress.start}


def _shown(difference: dict[str, float | None]) -> str:
    if difference["p"] is None:
        return f"{difference['mean']:+.3f} (no spread)"
    return (f"{difference['mean']:+.3f} [{difference['ci_low']:+.3f}, {difference['ci_high']:+.3f}], "
            f"p = {difference['p']:.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print it (and write ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.role_prompts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheme", choices=CANDIDATE_SCHEMES, default="propose_verify")
    parser.add_argument("--team-size", type=int, choices=(2, 3, 4), default=2)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the env's budget for the roles")
    parser.add_argument("--executor", default="auto", help="the sandbox backend (auto, docker, bwrap, local)")
    parser.add_argument("--stop-at-reply-end", action=argparse.BooleanOptionalAction, default=True,
                        help="replies stop where the env stops reading them, as in the study (default: on; the "
                             "figures committed before 2026-12-07 ran without it)")
    parser.add_argument("--env-option", nargs="+", default=[], metavar="coding.KEY=VALUE",
                        help="a further keyword of the team's env, as the study takes it (e.g. "
                             "coding.coder_briefs=distinct)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    for name in ("tasks", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected >= 1")
    from llm_marl_benchmarks.study.cli import parse_env_options

    try:
        options = parse_env_options(args.env_option)
    except ValueError as error:
        parser.error(str(error))
    if any(env != "coding" for env, _, _ in options):
        parser.error(f"--env-option: this probe builds coding envs only, got {args.env_option}")
    result = run(scheme=args.scheme, team_size=args.team_size, tasks=args.tasks, samples=args.samples,
                 executor=args.executor, max_new_tokens=args.max_new_tokens,
                 team_options={key: value for _, key, value in options}, stop_at_reply_end=args.stop_at_reply_end)
    for name, figures in result["summary"].items():
        line = (f"  {name}: all visible passed {figures['all_visible']:.3f}, "
                f"visible share {figures['visible_share']:.3f}")
        if name != "solo":
            line += (f"; minus solo: {_shown(figures['all_visible_minus_solo'])} (all visible), "
                     f"{_shown(figures['visible_share_minus_solo'])} (share)")
        print(line)
    if result["pairs"] is not None:
        team_pair = next(key for key in result["pairs"] if key not in ("solo+solo", "team_minus_solo"))
        print(f"  either of two passes every visible test: solo+solo {result['pairs']['solo+solo']:.3f}, {team_pair} "
              f"{result['pairs'][team_pair]:.3f}; minus solo+solo: {_shown(result['pairs']['team_minus_solo'])}")
    print(f"[role_prompts] {result['tasks']} tasks, {result['wall_s']:.0f} s")
    if args.json:
        write_figures_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
