"""Env overhead: wall-clock time per agent-step of the envs alone and with the unit-test executor.

Scripted actions (:func:`llm_marl_baselines.policies.scripted.protocol_action`, the env tests' generator) stand in for
the policy (no model runs). For the coding env every executor call is timed by a thin wrapper, so one run reports both
figures side by side: the env alone (step time minus executor time) and the env with the executor. Target: < 1 ms
per agent-step without the executor.

    python -m llm_marl_benchmarks.env_overhead [--episodes 30] [--num-agents 2] [--max-turns 4] [--json PATH]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from llm_marl_baselines.policies.scripted import protocol_action
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs import coding_v0, writing_v0
from llm_marl_envs.sandbox import Executor, TestJob, TestReport, make_executor


class TimedExecutor(Executor):
    """Delegates to a real executor and adds up the wall-clock time spent inside it."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.backend = getattr(inner, "backend", type(inner).__name__)

    def run(self, code: str, tests: Any, *, entry_point: str | None = None) -> TestReport:
        """Run one job on the inner executor, timing it."""
        start = time.perf_counter()
        try:
            return self.inner.run(code, tests, entry_point=entry_point)
        finally:
            self.seconds += time.perf_counter() - start

    def run_many(self, jobs: Sequence[TestJob], max_workers: int | None = None) -> list[TestReport]:
        """Run a batch on the inner executor, timing it."""
        start = time.perf_counter()
        try:
            return list(self.inner.run_many(jobs, max_workers=max_workers))
        finally:
            self.seconds += time.perf_counter() - start

    def close(self) -> None:
        """Close the inner executor."""
        self.inner.close()


def scripted_actions(env: Any, episode: int, turn: int) -> dict[str, str]:
    """Deterministic actions, new at every episode and turn: no cache hides the cost and episodes run to the end."""
    return {agent: protocol_action(env, agent, turn, episode=episode) for agent in env.agents}


@dataclass(frozen=True)
class OverheadResult:
    """Figures of one configuration."""

    config: str
    agent_steps: int
    env_ms_per_agent_step: float
    with_executor_ms_per_agent_step: float | None


def measure(name: str, env: Any, timer: TimedExecutor | None, episodes: int) -> OverheadResult:
    """Run ``episodes`` scripted episodes of ``env`` and time every ``step``."""
    env.reset(seed=0)
    env.step(scripted_actions(env, -1, 1))  # warm caches (imports, first similarity call) outside the timing
    if timer is not None:
        timer.seconds = 0.0
    step_seconds, agent_steps = 0.0, 0
    for episode in range(episodes):
        env.reset(seed=episode)
        turn = 0
        while env.agents:
            turn += 1
            actions = scripted_actions(env, episode, turn)
            start = time.perf_counter()
            env.step(actions)
            step_seconds += time.perf_counter() - start
            agent_steps += len(actions)
    executor_seconds = timer.seconds if timer is not None else 0.0
    env_ms = (step_seconds - executor_seconds) / agent_steps * 1000
    with_executor = step_seconds / agent_steps * 1000 if timer is not None else None
    return OverheadResult(
        name, agent_steps, round(env_ms, 4), None if with_executor is None else round(with_executor, 4)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every configuration, print a table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--num-agents", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--backends", default="local,docker", help="executor backends for the coding env")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args(argv)

    common = {"num_agents": args.num_agents, "max_turns": args.max_turns}
    results = [
        measure("writing/tfidf", writing_v0.parallel_env(similarity="tfidf", **common), None, args.episodes),
        measure("writing/minilm", writing_v0.parallel_env(similarity="minilm", **common), None, args.episodes),
    ]
    for backend in filter(None, args.backends.split(",")):
        try:
            inner = make_executor(backend=backend)
        except Exception as error:  # an absent engine is reported, not fatal, for a benchmark
            print(f"skipping coding/{backend}: {error}")
            continue
        timer = TimedExecutor(inner)
        env = coding_v0.parallel_env(similarity="tfidf", executor=timer, cache_verdicts=False, **common)
        results.append(measure(f"coding/tfidf/{backend}", env, timer, args.episodes))
        timer.close()

    print(f"{'config':<24} {'agent-steps':>11} {'env ms/agent-step':>18} {'+executor ms/agent-step':>24}")
    for r in results:
        executor = "-" if r.with_executor_ms_per_agent_step is None else f"{r.with_executor_ms_per_agent_step:.3f}"
        print(f"{r.config:<24} {r.agent_steps:>11} {r.env_ms_per_agent_step:>18.3f} {executor:>24}")
    if args.json:
        payload = {
            "benchmark": "env_overhead",
            "machine": {"python": platform.python_version(), "processor": platform.processor(), "cpus": _cpus()},
            "args": vars(args),
            "results": [asdict(r) for r in results],
        }
        write_figures_json(args.json, payload)
    return 0


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    raise SystemExit(main())
