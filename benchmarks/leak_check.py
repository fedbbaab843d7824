"""Long coding runs leave nothing behind: temp dirs, containers, open files, threads and child processes, counted
before and after hundreds of coding episodes.

Each episode is a 2-agent, 2-turn coding episode in the env, stepped through the env package's rollout runner in
lockstep batches (as training and the study run them), with scripted programs that cycle through honest code,
broken code and the sandbox's hostile catalogue (infinite loops, runaway threads and children, floods, escapes,
forgeries; :mod:`llm_marl_envs.sandbox.hostile`), the entry point renamed to each task's. What is counted after a
warm-up of a quarter as many episodes (pools and caches that live as long as the process fill up to their bounds
then; they are not leaks) and again at the end, each after a settle pause: new ``llm-marl*`` entries in the temp
folder, this executor's containers that its warm pool does not hold (Docker backend), this process's open file
descriptors (files and pipes apart from sockets), its threads, and its live child processes. A growth in any of them is
a leak; the exit status is 1.

A warm pool is the one thing whose size moves from moment to moment: a sandbox killed by a hostile program is replaced
when next needed, so two readings may differ by a sandbox or two with nothing leaked. On Docker each pooled container
holds its attach socket and the engine client keeps HTTP connections (seen: -1, 0, +2 sockets over three 24-episode
runs); on bwrap each pooled sandbox is a child process holding three pipes. Such counts are leaks only beyond
:func:`pool_allowance` (two sockets per pooled container; one child and three files per pooled bwrap sandbox; nothing
on the local backend, which pools nothing); a real leak grows with the episodes and passes any bound.

    python -m llm_marl_benchmarks.leak_check [--episodes 300] [--executor docker|bwrap|local] [--timeout-s 1.0]
                                             [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.rollout import ChatRequest, run_episodes
from llm_marl_envs.sandbox import BACKENDS
from llm_marl_envs.sandbox.hostile import HOSTILE

BATCH = 8
_PLACEHOLDER = re.compile(r"\{(host_file|host_public_file|host_dir|port|host_ip|secret_env)\}")
# Programs that attack the caller rather than leak: they would kill or stop this very process on the local backend.
_EXCLUDED = frozenset({"kill_parent", "stop_parent", "kill_supervisor", "kill_everything"})


def programs(backend: str) -> list[tuple[str, str]]:
    """``(name, code defining f)``: honest code, a syntax error, and every hostile program that needs no bait and is
    safe on ``backend``."""
    chosen = [("honest", "def f(x):\n    return x + 1\n"), ("syntax_error", "def f(x) return\n")]
    for hostile in HOSTILE:
        if hostile.name in _EXCLUDED or _PLACEHOLDER.search(hostile.code):
            continue
        if backend == "local" and hostile.isolated_only:
            continue
        chosen.append((hostile.name, hostile.code))
    return chosen


def snapshot(executor: Any = None) -> dict[str, Any]:
    """What this process holds now (see the module docstring)."""
    temp = {entry for entry in os.listdir(tempfile.gettempdir()) if entry.startswith("llm-marl")}
    children = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                children.append(int(pid))
    containers = None
    backend = getattr(executor, "inner", executor)  # the shared executor wraps the backend in a verdict cache
    if getattr(backend, "backend", "") == "docker":
        import docker

        from llm_marl_envs.sandbox.docker_backend import LABEL

        client = docker.from_env()
        try:  # this executor's containers only: other processes on the machine may run sandboxes too
            containers = len(client.api.containers(all=True, filters={"label": f"{LABEL}={backend.instance}"}))
        finally:
            client.close()
    files = sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the one that listed the directory, among others)
            continue
        sockets += target.startswith("socket:")
        files += not target.startswith("socket:")
    return {"temp_entries": sorted(temp), "open_files": files, "open_sockets": sockets,
            "threads": threading.active_count(), "children": len(children), "containers": containers,
            "pooled_sandboxes": backend.live_sandboxes() if hasattr(backend, "live_sandboxes") else None}


def stray_containers(counts: dict[str, Any]) -> int:
    """This executor's containers on the engine that its pool does not hold (left behind), from a snapshot."""
    return counts["containers"] - (counts["pooled_sandboxes"] or 0)


def pool_allowance(executor: Any) -> dict[str, int]:
    """How far each count may move with nothing leaked, by the executor's warm pool (see the module docstring)."""
    backend = getattr(executor, "inner", executor)  # the shared executor wraps the backend in a verdict cache
    name, pool = getattr(backend, "backend", ""), int(getattr(backend, "pool_size", 0))
    if name == "docker":
        return {"open_sockets": 2 * pool}
    if name == "bwrap":
        return {"open_files": 3 * pool, "children": pool}
    return {}


def leaks_in(grew: dict[str, Any], allowed: dict[str, int] | None = None) -> list[str]:
    """The counts that grew (new temp entries, or a positive difference beyond what ``allowed`` grants that count).
    Only growth is a leak: closing the envs at the end releases pooled containers and descriptors, so counts may
    fall."""
    allowed = allowed or {}
    return [key for key, value in grew.items()
            if (value > allowed.get(key, 0) if isinstance(value, int) else bool(value))]


def run(episodes: int, executor_name: str, timeout_s: float, settle_s: float = 3.0) -> dict[str, Any]:
    """Play ``episodes`` coding episodes and return the counts before and after, and what grew.

    The temp folder counted is a private one set for this run (``tempfile.tempdir``), so the work dirs of other
    processes on the machine (another user's local executor, say) are not taken for this run's leaks.
    """
    root = tempfile.mkdtemp(prefix="leak-check-")
    os.chmod(root, 0o755)  # the local backend's judge and program run as nobody when we are root
    previous, tempfile.tempdir = tempfile.tempdir, root
    try:
        return _run(episodes, executor_name, timeout_s, settle_s)
    finally:
        tempfile.tempdir = previous
        shutil.rmtree(root, ignore_errors=True)


def _run(episodes: int, executor_name: str, timeout_s: float, settle_s: float) -> dict[str, Any]:
    from llm_marl_envs.registry import make_env

    envs = [make_env("coding", num_agents=2, max_turns=2, executor=executor_name, timeout_s=timeout_s,
                     similarity="tfidf", dataset="decomposable") for _ in range(BATCH)]
    executor = envs[0].executor
    catalogue = programs(executor.backend)
    counter = [0]

    def policy(requests: Sequence[ChatRequest]) -> list[str]:
        actions = []
        for request in requests:
            observation = next(m["content"] for m in request.messages if m["role"] == "user")  # not the reply's start
            entry = re.search(r"^def (\w+)\(", observation, re.MULTILINE)
            _, code = catalogue[counter[0] % len(catalogue)]
            counter[0] += 1
            code = re.sub(r"\bf\(", f"{entry.group(1) if entry else 'f'}(", code)
            helper = "def aux(x):\n    return x\n"
            actions.append(f"```python\n{helper if request.agent == 'aux' else code}\n```")
        return actions

    started = time.perf_counter()
    # Warm-up, a quarter of the run (at least a batch): pools (containers, engine connections, threads) fill up to
    # their bounds; what still grows after it grows with the episodes, which is what a leak does.
    warm_up = max(BATCH, episodes // 4)
    played, before = 0, None
    while played < warm_up + episodes:
        if before is None and played >= warm_up:
            time.sleep(settle_s)
            before = snapshot(executor)
        count = min(BATCH, warm_up + episodes - played)
        run_episodes(envs[:count], policy, seeds=range(played, played + count))
        played += count
        print(f"[leak_check] {played}/{warm_up + episodes} episodes ({warm_up} of them warm-up; {counter[0]} "
              f"programs), {time.perf_counter() - started:.0f} s", flush=True)
    played -= warm_up
    for env in envs:
        env.close()
    time.sleep(settle_s)
    after = snapshot(executor)
    grew = {
        "temp_entries": sorted(set(after["temp_entries"]) - set(before["temp_entries"])),
        **{key: after[key] - before[key] for key in ("open_files", "open_sockets", "threads", "children")},
        # Containers the executor no longer holds: the pool's own size moves with hostile programs (a killed sandbox
        # is replaced only when next needed), so the raw count can grow by a container with nothing leaked (CI once
        # failed on it); a container left behind is one the engine still lists and the pool has let go of.
        "containers": None if after["containers"] is None else stray_containers(after) - stray_containers(before),
    }
    allowed = pool_allowance(executor)
    leaks = leaks_in(grew, allowed)
    return {"episodes": played, "programs": counter[0], "backend": executor.backend, "before": before,
            "after": after, "grew": grew, "allowed": allowed, "leaks": leaks,
            "wall_s": time.perf_counter() - started}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; exit status 1 when anything leaked."""
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.leak_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--executor", choices=BACKENDS, default="auto")
    parser.add_argument("--timeout-s", type=float, default=1.0, help="per-run limit (hostile loops hit it)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes: expected >= 1")
    print(f"[leak_check] {args.episodes} coding episodes (2 agents, 2 turns) in batches of {BATCH}, executor "
          f"{args.executor}, each program limited to {args.timeout_s:g} s", flush=True)
    result = run(args.episodes, args.executor, args.timeout_s)
    for key in ("temp_entries", "open_files", "open_sockets", "threads", "children", "containers", "pooled_sandboxes"):
        before, after = result["before"][key], result["after"][key]
        shown = (len(before), len(after)) if isinstance(before, list) else (before, after)
        stray = ""
        if key == "containers" and before is not None:  # what the leak is judged on (see _run)
            stray = (f" (not held by the pool: {stray_containers(result['before'])} -> "
                     f"{stray_containers(result['after'])})")
        print(f"  {key}: {shown[0]} -> {shown[1]}{stray}" + ("   LEAK" if key in result["leaks"] else ""))
    if result["allowed"]:
        print(f"  what the warm pool may move with nothing leaked: {result['allowed']}")
    print(f"[leak_check] {result['episodes']} episodes, {result['programs']} programs on {result['backend']} in "
          f"{result['wall_s']:.0f} s: " + (f"leaked {result['leaks']}" if result["leaks"] else "nothing left behind"))
    if args.json:
        write_figures_json(args.json, result)
    return 1 if result["leaks"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
