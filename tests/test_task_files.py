"""Users' own task files (``dataset=PATH.jsonl``, ``--dataset``): good files load, and a bad line is one clear error
that names the file, the line and the field — before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_marl_envs.registry import make_env

CODING = {"task_id": "mine/0", "prompt": "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n", "entry_point": "add",
          "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
                  "    assert candidate(-1, 1) == 0\n", "canonical_solution": "    return a + b\n"}
WRITING = {"source": "The council approved a new bridge on Monday. It will open in 2027 and cost 40 million.",
           "title": "Bridge"}


def _write(path: Path, records: list[object], extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_good_files_load_and_play(tmp_path: Path) -> None:
    coding = _write(tmp_path / "code.jsonl", [CODING, {**CODING, "task_id": "mine/1", "split": "eval",
                                                        "tests": ["assert add(2, 2) == 4", "assert add(1, 1) == 2"]}])
    env = make_env("coding", num_agents=1, dataset=str(coding), executor="local", similarity="tfidf")
    env.reset(seed=0, options={"task_id": "mine/0"})
    *_, infos = env.step({"solo": "```python\ndef add(a, b):\n    return a + b\n```"})
    assert infos["solo"]["quality_terms"]["pass_rate"] == 1.0
    assert env.task_source.ids("eval") == ["mine/1"]
    writing = _write(tmp_path / "text.jsonl", [WRITING, {"text": "Another article about a school.", "split": "test"}])
    env = make_env("writing", num_agents=2, dataset=str(writing), similarity="tfidf")
    observations, _ = env.reset(seed=0, options={"task_id": "text/0"})
    assert "Title: Bridge" in observations["concise"] and "new bridge" in observations["detailed"]


@pytest.mark.parametrize(("records", "extra", "message"), [
    ([{**CODING, "task_id": "a"}], ("{not json",), r"code\.jsonl:2: invalid JSON"),
    ([{k: v for k, v in CODING.items() if k != "prompt"}], (), r"code\.jsonl:1: missing field 'prompt'"),
    ([{**CODING, "prompt": 7}], (), r"code\.jsonl:1: field 'prompt': expected a non-empty string, got int 7"),
    ([{**CODING, "entry_point": "sum_two"}], (), r"code\.jsonl:1: field 'prompt': expected it to define "
                                                  r"`def sum_two\(\.\.\.\)`"),
    ([{**CODING, "entry_point": "add two"}], (), r"field 'entry_point': expected a function name"),
    ([CODING, CODING], (), r"code\.jsonl:2: field 'task_id': 'mine/0' is already the task of .*code\.jsonl:1"),
    ([{**{k: v for k, v in CODING.items() if k != "test"}, "tests": "assert add(1, 2) == 3"}], (),
     r"code\.jsonl:1: field 'tests': expected a non-empty list of assert strings"),
    ([{k: v for k, v in CODING.items() if k != "test"}], (), r"code\.jsonl:1: missing field 'test'"),
    ([{**CODING, "split": "dev"}], (), r"code\.jsonl:1: field 'split': expected one of \['eval', 'test', 'train', "
                                       r"'validation'\], got str 'dev'"),
    ([["a", "list"]], (), r"code\.jsonl:1: expected a JSON object, got list"),
    ([], (), r"code\.jsonl: no records"),
])
def test_a_bad_coding_line_is_named(tmp_path: Path, records: list[object], extra: tuple[str, ...],
                                    message: str) -> None:
    path = _write(tmp_path / "code.jsonl", records, extra)
    with pytest.raises(ValueError, match=message):
        make_env("coding", num_agents=2, dataset=str(path), executor="local", similarity="tfidf")


@pytest.mark.parametrize(("records", "message"), [
    ([WRITING, {"title": "no text"}], r"text\.jsonl:2: missing field 'source'"),
    ([{"source": ["a", "list"]}], r"text\.jsonl:1: field 'source': expected a non-empty string, got list"),
    ([{"source": "   "}], r"text\.jsonl:1: field 'source': expected a non-empty string"),
    ([{**WRITING, "title": 3}], r"text\.jsonl:1: field 'title': expected a non-empty string, got int 3"),
    ([{**WRITING, "split": 1}], r"text\.jsonl:1: field 'split'"),
])
def test_a_bad_writing_line_is_named(tmp_path: Path, records: list[object], message: str) -> None:
    path = _write(tmp_path / "text.jsonl", records)
    with pytest.raises(ValueError, match=message):
        make_env("writing", num_agents=2, dataset=str(path), similarity="tfidf")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"dataset file not found: .*nope\.jsonl"):
        make_env("writing", num_agents=2, dataset=str(tmp_path / "nope.jsonl"), similarity="tfidf")
