"""Local backend: one harness subprocess per run on this machine. Convenient, fast, and NOT isolation.

What it does: ``python -I -S`` (no site-packages, no user environment), an environment stripped to PATH/LANG/HOME
(no secrets inherited), a fresh temporary work dir removed afterwards, its own session (``setsid``) killed as a
group when it overruns, ``RLIMIT_AS``/``RLIMIT_CPU``/``RLIMIT_FSIZE``/``RLIMIT_NPROC``/``RLIMIT_CORE`` on the judge
and program processes, and the same unforgeable-verdict harness as Docker. When the host runs as root, the judge and
program drop to ``nobody`` (uid 65534), which makes ``RLIMIT_NPROC`` effective (fork bombs) and keeps root-only files
and root processes out of reach.

What it does not do (use Docker for untrusted code): no network isolation, no filesystem isolation (world-readable
host files and environment-free but readable ``/proc`` stay visible, ``/tmp`` is writable), no memory cgroup, no
protection of other processes of the same user when not run as root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from llm_marl_envs.sandbox.executor import Executor, elapsed_since
from llm_marl_envs.sandbox.harness import harness_source
from llm_marl_envs.sandbox.protocol import build_report, parse_answer, request_bytes, take_frame
from llm_marl_envs.sandbox.types import SandboxLimits, TestReport

NOBODY = 65534


class LocalExecutor(Executor):
    """Runs each job in a fresh local harness process (see the module docstring for the guarantees)."""

    backend = "local"

    def __init__(self, limits: SandboxLimits | None = None, *, max_workers: int | None = None) -> None:
        self.limits = limits if limits is not None else SandboxLimits()
        self.default_workers = max_workers or max(2, os.cpu_count() or 2)
        self.drop_privileges = os.geteuid() == 0

    def _execute(self, job: dict[str, Any]) -> TestReport:
        start = time.monotonic()
        workdir = tempfile.mkdtemp(prefix="llm-marl-sandbox-")
        config: dict[str, Any] = {"workdir": workdir, "sweep_all": False}
        if self.drop_privileges:
            os.chown(workdir, NOBODY, NOBODY)
            config.update(drop_uid=NOBODY, drop_gid=NOBODY)
        # RLIMIT_NPROC counts every process of the user, so the limit sits above what the user already runs.
        job = {**job, "nproc": process_count(NOBODY if self.drop_privileges else os.getuid()) + int(job["nproc"])}
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
        request, nonce = request_bytes(job)
        budget = float(job["run_budget_s"]) + 5.0
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", harness_source(), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        overran, failure = False, None
        try:
            out, err = proc.communicate(request, timeout=budget)
        except subprocess.TimeoutExpired:
            overran, failure = True, "the harness overran its budget and was killed"
            _kill_group(proc.pid)
            out, err = proc.communicate()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        answer, _ = take_frame(out)
        verdict = parse_answer(answer, nonce)
        if verdict is None and failure is None:
            failure = f"the harness died (exit {proc.returncode}): {err.decode('utf-8', 'replace')[-300:]}".strip()
        report, _ = build_report(
            job["tests"], verdict, duration_s=elapsed_since(start), backend=self.backend,
            failure=failure, timed_out_host=overran,
        )
        return report


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def process_count(uid: int) -> int:
    """How many processes ``uid`` runs now."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                continue
    return count
