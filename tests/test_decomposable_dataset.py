"""The project's own decomposable coding problems (package data): schema, and every reference solution is right.

All solutions run in one child process (each problem in its own namespace, with a per-problem alarm), so a broken
or hanging problem fails the test instead of hanging the suite.
"""

from __future__ import annotations

import ast
import importlib.resources
import json
import re
import subprocess
import sys
from typing import Any

import pytest

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point", "helper_hint")
_EXAMPLE = re.compile(r"^\s*>>> (.+)\n\s*(.+)$", re.MULTILINE)

# Runs in a child process: reads the records as JSON on stdin, prints one JSON verdict per record.
_RUNNER = r"""
import json, signal, sys

def on_alarm(signum, frame):
    raise TimeoutError("problem took over 5 s")

signal.signal(signal.SIGALRM, on_alarm)
records = json.load(sys.stdin)
verdicts = []
for record in records:
    verdict = {"task_id": record["task_id"]}
    for label, body in (("reference", record["canonical_solution"]), ("return_none", "    return None\n")):
        program = record["prompt"] + body + "\n" + record["test"] + "\ncheck(" + record["entry_point"] + ")\n"
        signal.alarm(5)
        try:
            namespace = {}
            exec(compile(program, record["task_id"], "exec"), namespace)
            if label == "reference":
                for call, expected in record["examples"]:
                    got = eval(call, namespace)
                    if got != eval(expected, {}):
                        raise AssertionError(f"docstring example {call} gives {got!r}, not {expected}")
            verdict[label] = "passed"
        except BaseException as error:
            verdict[label] = f"failed: {type(error).__name__}: {error}"
        finally:
            signal.alarm(0)
    verdicts.append(verdict)
print(json.dumps(verdicts))
"""


def load_records() -> list[dict[str, Any]]:
    resource = importlib.resources.files("llm_marl_envs.envs.coding").joinpath("data", "decomposable.jsonl")
    text = resource.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return load_records()


def test_schema_ids_and_size(records: list[dict[str, Any]]) -> None:
    assert len(records) >= 60
    ids = [record["task_id"] for record in records]
    assert len(set(ids)) == len(ids)
    entry_points = [record["entry_point"] for record in records]
    assert len(set(entry_points)) == len(entry_points), "each problem has its own entry point"
    for record in records:
        assert set(record) == set(FIELDS), record["task_id"]
        assert all(isinstance(record[field], str) and record[field].strip() for field in FIELDS), record["task_id"]
        assert re.fullmatch(r"LME/\d+", record["task_id"])


def test_prompts_tests_and_solutions_are_well_formed(records: list[dict[str, Any]]) -> None:
    for record in records:
        task, entry_point = record["task_id"], record["entry_point"]
        prompt_tree = ast.parse(record["prompt"] + "    pass\n")
        assert [node.name for node in prompt_tree.body if isinstance(node, ast.FunctionDef)] == [entry_point], task
        assert _EXAMPLE.search(record["prompt"]), f"{task}: the docstring needs an example"
        assert record["prompt"].endswith('"""\n'), task

        program = ast.parse(record["prompt"] + record["canonical_solution"])
        (function,) = program.body
        helpers = [node for node in ast.walk(function) if isinstance(node, ast.FunctionDef) and node is not function]
        assert helpers, f"{task}: the reference solution should show the helper/main split"
        imports = [node for node in ast.walk(program) if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert not imports, f"{task}: problems use no imports"

        test_tree = ast.parse(record["test"])
        (check,) = test_tree.body
        assert isinstance(check, ast.FunctionDef) and check.name == "check", task
        asserts = [node for node in check.body if isinstance(node, ast.Assert)]
        assert len(asserts) == len(check.body) and 5 <= len(asserts) <= 8, f"{task}: {len(asserts)} asserts"
        assert record["helper_hint"].startswith("aux("), f"{task}: the hint names the helper aux(...)"


def test_every_reference_solution_passes_and_return_none_fails(records: list[dict[str, Any]]) -> None:
    payload = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "canonical_solution": r["canonical_solution"],
            "test": r["test"],
            "entry_point": r["entry_point"],
            "examples": _EXAMPLE.findall(r["prompt"]),
        }
        for r in records
    ]
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout)
    assert len(verdicts) == len(records)
    failing = [v for v in verdicts if v["reference"] != "passed"]
    assert not failing, failing
    too_easy = [v["task_id"] for v in verdicts if v["return_none"] == "passed"]
    assert not too_easy, f"`return None` passes {too_easy}"
    assert all("AssertionError" in v["return_none"] for v in verdicts), [v["return_none"] for v in verdicts]
