"""Reward integrity: every degenerate strategy an optimiser could find must score below honest teamwork.

For each env, team size and similarity backend, every strategy of the library (``benchmarks/integrity/``) plays the
same tasks; the table gives each strategy's mean joint return (the env's ``team_return``: quality and consistency
paid once, minus turn, message and invalid-action costs) and its rank. Honest references come first in the
library; a degenerate strategy that ties or beats the honest one is an exploit the reward pays for.

    python -m llm_marl_benchmarks.reward_integrity [--env writing|coding|both] [--sizes 1 2 3 4]
                                                   [--backends minilm tfidf] [--tasks N] [--executor auto|docker|local]
                                                   [--end-quorum all|half|any] [--scheme NAME] [--json PATH]
                                                   [--reward-weight NAME=VALUE ...] [--tie-order fixed|shuffled]

``--end-quorum`` plays the envs with that many finished agents ending an episode (their ``end_quorum`` setting;
default: each env's own, writing ``"half"``, coding ``"half"`` under ``propose_verify`` and ``"all"`` under the other
schemes): no ending, sooner or later, may open an exploit.
``--reward-weight`` plays them under a recipe's reward weights (``reply_token=0.002 discarded_token=0.005``: what a
recipe that prices replies trains on), which must open none either.
``--tie-order shuffled`` plays the coding candidate schemes with the tie-break order drawn per episode: each task is
played at the first seeds whose orders, between them, are every order of the candidates (so each coder's candidate is
the one sent at a tie on some episode), and no order may open an exploit.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.integrity import Strategy
from llm_marl_envs.core.rewards import RewardWeights
from llm_marl_envs.core.termination import END_QUORUMS
from llm_marl_envs.envs.coding.roles import DEFAULT_SCHEME, SCHEMES, TIE_ORDERS
from llm_marl_envs.registry import ENV_NAMES
from llm_marl_envs.registry import make_env as make_registered_env

HONEST_REFERENCE = "honest"
MARGIN = 0.025
"""How much less than the honest reference every degenerate strategy must earn: half the cost of one turn."""
"""The strategy every degenerate one is measured against (the library's other honest strategies are reported too)."""


@dataclass(frozen=True)
class Row:
    """One strategy's result in one setting."""

    env: str
    num_agents: int
    similarity: str
    strategy: str
    honest: bool
    mean_return: float
    returns: tuple[float, ...]
    rank: int = 0
    gap_to_honest: float = 0.0
    """``mean_return - honest mean_return`` (negative for a strategy that loses to honest work)."""


def play(env: Any, strategy: Strategy, task_id: str, seed: int = 0) -> tuple[float, tuple]:
    """One episode of ``strategy`` on ``task_id`` reset with ``seed``: the team's return and what the episode came to
    (the final drafts, the turns taken and the return): a strategy that comes to exactly the honest episode's outcome
    played it (e.g. padding turns after a program the env already ended as solved) and is not compared."""
    env.reset(seed=seed, options={"task_id": task_id})
    task = env.task
    turn = 0
    while env.agents:
        turn += 1
        actions = strategy.act(task, tuple(env.agents), turn)
        if actions is None:
            actions = {agent: "<done/>" for agent in env.agents}
        env.step(actions)
    state = env.state()
    outcome = (tuple(sorted(state["drafts"].items())), state["turn"], round(float(state["team_return"]), 9))
    return float(state["team_return"]), outcome


def seeds_covering_tie_orders(env: Any, task_id: str, max_seed: int = 64) -> tuple[int, ...]:
    """The first reset seeds (from 0) whose episodes on ``task_id`` between them break ties in every order the env
    draws (``state()["tie_order"]``); ``(0,)`` where the env draws none (``tie_order="fixed"``, or no candidates)."""
    env.reset(seed=0, options={"task_id": task_id})
    first = env.state().get("tie_order")  # only the coding env draws one
    if first is None:
        return (0,)
    wanted = math.factorial(len(first))
    seen: dict[tuple[str, ...], int] = {}
    for seed in range(max_seed):
        env.reset(seed=seed, options={"task_id": task_id})
        seen.setdefault(tuple(env.state()["tie_order"]), seed)
        if len(seen) == wanted:
            return tuple(sorted(seen.values()))
    raise RuntimeError(f"{task_id}: seeds 0..{max_seed - 1} gave {len(seen)} of {wanted} tie orders")


def _library(env_name: str, scheme: str | None = None) -> tuple[tuple[Strategy, ...], Callable[[], list[str]]]:
    if env_name == "writing":
        from llm_marl_benchmarks.integrity.writing_strategies import HONEST_TASK_IDS, WRITING_STRATEGIES

        return WRITING_STRATEGIES, lambda: list(HONEST_TASK_IDS("tldr"))
    from llm_marl_benchmarks.integrity.coding_strategies import HONEST_TASK_IDS, SCHEME_STRATEGIES

    return SCHEME_STRATEGIES[scheme or DEFAULT_SCHEME], lambda: list(HONEST_TASK_IDS())


def make_env(env_name: str, num_agents: int, similarity: str, executor: str, end_quorum: str | None = None,
             scheme: str | None = None, reward_weights: Mapping[str, float] | None = None,
             tie_order: str | None = None) -> Any:
    """The env under its default settings, but for team size, similarity backend, (coding) executor, ``end_quorum``
    (``None``: the env's own), the coding ``scheme`` (``None``: the env's default), ``reward_weights`` (overrides
    of the defaults) and the coding ``tie_order`` (``None``: the env's default); the coding strategies play the
    decomposable set (their honest references are its aux/main splits)."""
    overrides: dict[str, Any] = {} if end_quorum is None else {"end_quorum": end_quorum}
    if reward_weights:
        overrides["reward_weights"] = dict(reward_weights)
    if tie_order is not None:
        if env_name != "coding":
            raise ValueError(f"tie_order is a coding env option; {env_name!r} has no candidates to order")
        overrides["tie_order"] = tie_order
    if env_name == "coding":
        return make_registered_env(env_name, num_agents=num_agents, dataset="decomposable", similarity=similarity,
                                   executor=executor, scheme=scheme or DEFAULT_SCHEME, **overrides)
    return make_registered_env(env_name, num_agents=num_agents, similarity=similarity, **overrides)


def evaluate(
    env_name: str,
    sizes: Sequence[int],
    backends: Sequence[str],
    tasks: int,
    executor: str = "auto",
    strategies: Sequence[str] | None = None,
    end_quorum: str | None = None,
    scheme: str | None = None,
    reward_weights: Mapping[str, float] | None = None,
    tie_order: str | None = None,
) -> list[Row]:
    """Play every strategy on the first ``tasks`` tasks with honest references, per size and backend (the coding
    env under ``scheme``, with that scheme's library; ``reward_weights``: overrides of the default weights;
    ``tie_order``: the coding env's, each task played at :func:`seeds_covering_tie_orders` under ``"shuffled"``)."""
    library, task_ids = _library(env_name, scheme)
    chosen = task_ids()[:tasks]
    rows: list[Row] = []
    for similarity in backends:
        for size in sizes:
            env = make_env(env_name, size, similarity, executor, end_quorum, scheme, reward_weights, tie_order)
            episodes = [(task_id, seed) for task_id in chosen for seed in seeds_covering_tie_orders(env, task_id)]
            setting = []
            honest_outcomes: dict[tuple[str, int], tuple] = {}
            for strategy in library:
                if size not in strategy.team_sizes or (strategies and strategy.name not in strategies):
                    continue
                returns = []
                for task_id, seed in episodes:
                    episode_return, outcome = play(env, strategy, task_id, seed)
                    if strategy.name == HONEST_REFERENCE:
                        honest_outcomes[task_id, seed] = outcome
                    elif outcome == honest_outcomes.get((task_id, seed)):
                        continue  # on this task the strategy comes to exactly the honest episode: nothing to compare
                    returns.append(episode_return)
                if returns:
                    mean = statistics.fmean(returns)
                    setting.append(
                        Row(env_name, size, similarity, strategy.name, strategy.honest, mean, tuple(returns))
                    )
            rows.extend(_ranked(setting))
    return rows


def _ranked(rows: list[Row]) -> list[Row]:
    honest = next((r.mean_return for r in rows if r.strategy == HONEST_REFERENCE), None)
    order = sorted(rows, key=lambda r: -r.mean_return)
    return [
        Row(**{**asdict(r), "rank": order.index(r) + 1, "gap_to_honest": r.mean_return - honest if honest else 0.0})
        for r in rows
    ]


def table(rows: Sequence[Row]) -> str:
    """A Markdown table: one line per setting and strategy, best first."""
    lines = ["| env | agents | similarity | strategy | honest | mean return | rank | vs honest |", "|" + "---|" * 8]
    for r in sorted(rows, key=lambda r: (r.env, r.num_agents, r.similarity, r.rank)):
        lines.append(
            f"| {r.env} | {r.num_agents} | {r.similarity} | {r.strategy} | {'yes' if r.honest else ''} | "
            f"{r.mean_return:.3f} | {r.rank} | {r.gap_to_honest:+.3f} |"
        )
    return "\n".join(lines)


def pivot(rows: Sequence[Row], env_name: str, similarity: str) -> str:
    """One env and backend as strategy × team size (mean returns, honest strategies first), for the env cards."""
    chosen = [r for r in rows if r.env == env_name and r.similarity == similarity]
    sizes = sorted({r.num_agents for r in chosen})
    names = list(dict.fromkeys(r.strategy for r in sorted(chosen, key=lambda r: (not r.honest, -r.mean_return))))
    cell = {(r.strategy, r.num_agents): r.mean_return for r in chosen}
    lines = ["| strategy | honest | " + " | ".join(f"n={n}" for n in sizes) + " |", "|---|---|" + "---:|" * len(sizes)]
    for name in names:
        honest = next(r.honest for r in chosen if r.strategy == name)
        values = [f"{cell[(name, n)]:.2f}" if (name, n) in cell else "" for n in sizes]
        lines.append(f"| {name} | {'yes' if honest else ''} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def violations(rows: Sequence[Row], margin: float) -> list[Row]:
    """Degenerate strategies that do not lose to honest work by at least ``margin`` in their setting."""
    return [r for r in rows if not r.honest and r.gap_to_honest > -margin]


def _weight(text: str) -> tuple[str, float]:
    """``NAME=VALUE`` of ``--reward-weight``, checked against :class:`RewardWeights` (unknown names, non-numbers and
    negative values are refused with the weights' own message)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    try:
        weight = float(value)
        RewardWeights.from_value({name: weight})
    except (TypeError, ValueError) as error:
        reason = error if sep else "expected NAME=VALUE"
        raise argparse.ArgumentTypeError(f"--reward-weight {text!r}: {reason}") from None
    return name, weight


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite and print the table (and write JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", choices=(*ENV_NAMES, "both"), default="both", help="which env")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3, 4], help="team sizes")
    parser.add_argument("--backends", nargs="+", default=["minilm", "tfidf"], help="similarity backends")
    parser.add_argument("--tasks", type=int, default=8, help="tasks per strategy (the first with honest references)")
    parser.add_argument("--executor", default="auto", help="coding env executor: auto, docker or local")
    parser.add_argument("--margin", type=float, default=MARGIN, help="required loss of every degenerate strategy")
    parser.add_argument("--scheme", choices=SCHEMES, default=None,
                        help="the coding env's role scheme, played with its own strategy library (default: the env's, "
                             f"{DEFAULT_SCHEME})")
    parser.add_argument("--end-quorum", choices=END_QUORUMS, default=None,
                        help="how many finished agents end an episode (the envs' end_quorum; default: each env's own)")
    parser.add_argument("--reward-weight", action="append", default=[], metavar="NAME=VALUE", type=_weight,
                        help="play under this reward weight instead of the default (repeatable; e.g. "
                             "discarded_token=0.005)")
    parser.add_argument("--tie-order", choices=TIE_ORDERS, default=None,
                        help="the coding env's tie-break order (default: the env's, fixed); under shuffled each task "
                             "is played at seeds that give every order")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--pivot", action="store_true", help="print strategy x team size tables (the env cards')")
    args = parser.parse_args(argv)
    if args.tie_order is not None and args.env == "writing":
        parser.error("--tie-order orders the coding env's candidates; writing has none")

    started = time.monotonic()
    rows: list[Row] = []
    for env_name in ENV_NAMES if args.env == "both" else (args.env,):
        rows += evaluate(env_name, args.sizes, args.backends, args.tasks, args.executor, end_quorum=args.end_quorum,
                         scheme=args.scheme, reward_weights=dict(args.reward_weight),
                         tie_order=args.tie_order if env_name == "coding" else None)
    print(table(rows))
    if args.pivot:
        for env_name, similarity in dict.fromkeys((r.env, r.similarity) for r in rows):
            print(f"\n{env_name}, similarity={similarity}, mean joint return over {args.tasks} tasks:\n")
            print(pivot(rows, env_name, similarity))
    failing = violations(rows, args.margin)
    print(
        f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s; degenerate strategies within {args.margin} of "
        f"honest or above: {len(failing)}"
    )
    for r in failing:
        print(f"  {r.env} n={r.num_agents} {r.similarity}: {r.strategy} {r.gap_to_honest:+.3f}")
    if args.json:
        write_figures_json(args.json, [asdict(r) for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
