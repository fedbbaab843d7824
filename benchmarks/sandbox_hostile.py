"""Sandbox hostile programs: the wall-clock time each program of the hostile catalogue holds a call, per backend.

The hostile tests assert verdicts (a runaway program must come back as ``timeout``); how long that takes is a figure
of the machine, so it is measured here instead. Each program runs once per backend against a throw-away bait (a
listening socket, a secret file, a dir) and a row gives its status, whether that status is one the catalogue
accepts, and the seconds from call to verdict next to the bound a call should stay under (the run budget plus 5 s of
host grace and sandbox start-up). ``isolated_only`` programs are not run on the local backend, where they would harm
the host.

    python -m llm_marl_benchmarks.sandbox_hostile [--backends docker,bwrap,local] [--timeout-s 1.5] [--only NAME ...]
                                         [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.sandbox import SandboxLimits, make_executor
from llm_marl_envs.sandbox.hostile import HOSTILE, Hostile

GRACE_S = 5.0
"""What a call may take beyond the run budget: the host's kill grace and, on Docker, a container start."""


@dataclass(frozen=True)
class HostileTiming:
    """One program on one backend."""

    backend: str
    program: str
    status: str
    """The verdict of its one test, or ``skipped`` (a docker-only program on the local backend)."""
    acceptable: bool
    seconds: float | None
    bound_s: float


@contextmanager
def bait() -> Iterator[dict[str, object]]:
    """Template values for the programs: a listening socket, a 0600 secret file, a dir (removed afterwards)."""
    server = socket.create_server(("0.0.0.0", 0), backlog=64)  # the kernel accepts; nobody needs to read
    scratch = Path(tempfile.mkdtemp(prefix="llm-marl-bench-bait-"))
    secret, folder = scratch / "secret.txt", scratch / "dir"
    secret.write_text("host secret")
    secret.chmod(0o600)
    folder.mkdir(mode=0o755)
    secret_env = "LLM_MARL_BENCH_SECRET"
    os.environ[secret_env] = "env secret"
    try:
        yield {"port": server.getsockname()[1], "host_ip": _outside_ip(), "host_file": secret,
               "host_public_file": Path(__file__).resolve(), "host_dir": folder,
               "secret_env": secret_env}
    finally:
        os.environ.pop(secret_env, None)
        server.close()
        for leftover in [*folder.iterdir(), folder, secret]:
            if leftover.is_dir():
                leftover.rmdir()
            else:
                leftover.unlink(missing_ok=True)
        scratch.rmdir()


def _outside_ip() -> str:
    """An address of this host that is not loopback (the route out), for the 'egress' program."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # UDP connect sends nothing; it only picks the route
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


def measure(backend: str, programs: Sequence[Hostile], limits: SandboxLimits) -> list[HostileTiming]:
    """Run each program once on ``backend``, timing call to verdict."""
    bound = limits.run_budget_s + GRACE_S
    rows: list[HostileTiming] = []
    pool = {"pool_size": 1} if backend in ("docker", "bwrap") else {}
    with bait() as params, make_executor(backend, limits, **pool) as ex:
        ex.run("def f(x):\n    return x + 1\n", ["assert f(1) == 2"])  # warm-up: the first container starts here
        for hostile in programs:
            if hostile.isolated_only and backend == "local":
                rows.append(HostileTiming(backend, hostile.name, "skipped", True, None, bound))
                continue
            start = time.perf_counter()
            report = ex.run(hostile.render(**params), [hostile.test])
            seconds = time.perf_counter() - start
            status = report.outcomes[0].status
            rows.append(HostileTiming(backend, hostile.name, status, status in hostile.statuses(backend),
                                      round(seconds, 3), bound))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print one row per program and backend, optionally write JSON; exit 1 if a verdict is unacceptable."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="docker,bwrap,local", help="comma-separated: docker, bwrap, local")
    parser.add_argument("--timeout-s", type=float, default=1.5, help="per-test limit (the hostile tests use 1.5)")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these programs")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    args = parser.parse_args(argv)

    programs = [h for h in HOSTILE if args.only is None or h.name in args.only]
    unknown = sorted(set(args.only or ()) - {h.name for h in HOSTILE})
    if unknown:
        parser.error(f"--only: unknown programs {unknown}; expected names from llm_marl_envs.sandbox.hostile")
    limits = SandboxLimits(timeout_s=args.timeout_s, memory_mb=256)
    rows: list[HostileTiming] = []
    for backend in filter(None, args.backends.split(",")):
        try:
            rows += measure(backend, programs, limits)
        except Exception as error:  # an absent engine is reported, not fatal, for a benchmark
            print(f"skipping {backend}: {error}")

    print(f"{'backend':<8} {'program':<28} {'status':<8} {'ok':<3} {'seconds':>8} {'bound':>6}")
    for r in rows:
        seconds = "-" if r.seconds is None else f"{r.seconds:.3f}"
        print(f"{r.backend:<8} {r.program:<28} {r.status:<8} {'yes' if r.acceptable else 'NO':<3} {seconds:>8} "
              f"{r.bound_s:>6.1f}")
    timed = [r for r in rows if r.seconds is not None]
    for backend in sorted({r.backend for r in timed}):
        slowest = max((r for r in timed if r.backend == backend), key=lambda r: r.seconds or 0.0)
        over = sum(1 for r in timed if r.backend == backend and (r.seconds or 0.0) > r.bound_s)
        print(f"{backend}: slowest {slowest.program} {slowest.seconds:.3f} s; {over} over the bound")
    if args.json:
        payload = {
            "benchmark": "sandbox_hostile",
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            "args": vars(args),
            "rows": [asdict(r) for r in rows],
        }
        write_figures_json(args.json, payload)
    return 0 if all(r.acceptable for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
