"""The 20 cooperative coding tasks kept outside the package (docs/tasks/cooperative_coding_external.jsonl), on which
trained coding teams are judged for the skill rather than the split (issue 22): the coding env loads the file as a
dataset whose every task is in ``eval``, each task shows its helper hint to both roles, and (Docker) every reference
solution passes its own tests and docstring examples while a plausible wrong solution of each task fails one.

The wrong solutions live here, not in the file, so that nothing a policy could be shown carries them.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "sandbox"))

from sandbox_fixtures import need_docker

from llm_marl_envs.envs.coding.tasks import load_coding_tasks
from llm_marl_envs.registry import make_env
from llm_marl_envs.sandbox import SandboxLimits, TestJob, make_executor, split_tests

TASK_FILE = Path(__file__).resolve().parents[1] / "docs" / "tasks" / "cooperative_coding_external.jsonl"
FIELDS = {"task_id", "prompt", "canonical_solution", "test", "entry_point", "helper_hint", "split"}
_EXAMPLE = re.compile(r"^\s*>>> (.+)\n\s*(.+)$", re.MULTILINE)

WRONG_SOLUTIONS: dict[str, str] = {
    # case-sensitive: "Aa" counts as an isogram
    "isogram_words": """
def aux(word):
    letters = [ch for ch in word if ch.isalpha()]
    return len(letters) == len(set(letters))
return [word for word in text.split() if aux(word)]
""",
    # moves only the first consonant ("string" -> "tringsay")
    "pig_latin": """
def aux(word):
    if word[0] in "aeiou":
        return word + "way"
    return word[1:] + word[0] + "ay"
return " ".join(aux(word) for word in sentence.split())
""",
    # no check digit 'X'
    "count_valid_isbn": """
def aux(code):
    chars = code.replace("-", "")
    if len(chars) != 10 or not chars.isdigit():
        return False
    return sum(int(ch) * weight for ch, weight in zip(chars, range(10, 0, -1))) % 11 == 0
return sum(1 for code in codes if aux(code))
""",
    # off by one: a word of exactly `limit` characters is abbreviated too
    "abbreviate_long_words": """
def aux(word):
    return word[0] + str(len(word) - 2) + word[-1]
return " ".join(aux(word) if len(word) >= limit else word for word in text.split(" "))
""",
    # one direction only: different letters may stand for the same word
    "follows_pattern": """
def aux(pattern, words):
    seen = {}
    for letter, word in zip(pattern, words):
        if seen.setdefault(letter, word) != word:
            return False
    return True
words = text.split()
return len(words) == len(pattern) and aux(pattern, words)
""",
    # off by one at the top of the range: 26 decodes to '?'
    "decode_positions": """
def aux(number):
    value = int(number)
    return chr(ord("a") + value - 1) if 0 < value < 26 else "?"
return " ".join("".join(aux(number) for number in word.split("-")) for word in message.split())
""",
    # forgets what is left of the second list
    "merge_sorted_lists": """
def aux(a, b):
    merged, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            merged.append(a[i])
            i += 1
        else:
            merged.append(b[j])
            j += 1
    return merged + a[i:]
result = []
for part in lists:
    result = aux(result, part)
return result
""",
    # looks at the inner elements only: the ends are never peaks
    "peak_indices": """
def aux(nums, i):
    return nums[i] > nums[i - 1] and nums[i] > nums[i + 1]
return [i for i in range(1, len(nums) - 1) if aux(nums, i)]
""",
    # never writes the last run
    "summarize_ranges": """
def aux(start, end):
    return str(start) if start == end else f"{start}-{end}"
parts = []
start = nums[0] if nums else None
for i in range(1, len(nums)):
    if nums[i] != nums[i - 1] + 1:
        parts.append(aux(start, nums[i - 1]))
        start = nums[i]
return ",".join(parts)
""",
    # no ties: a value must be the only maximum of its row
    "saddle_points": """
def aux(matrix, col):
    return [row[col] for row in matrix]
found = []
for r, row in enumerate(matrix):
    for c, value in enumerate(row):
        others = row[:c] + row[c + 1:]
        if all(value > other for other in others) and value == min(aux(matrix, c)):
            found.append((r, c))
return found
""",
    # the column itself is left out of both sides and negative water is not clipped
    "trapped_water": """
def aux(heights, i):
    return min(max(heights[:i] or [0]), max(heights[i + 1:] or [0])) - heights[i]
return sum(aux(heights, i) for i in range(len(heights)))
""",
    # doubles every second digit counting from the left
    "luhn_valid": """
def aux(digit, doubled):
    if not doubled:
        return digit
    value = digit * 2
    return value - 9 if value > 9 else value
digits = number.replace(" ", "")
if len(digits) < 2 or not digits.isdigit():
    return False
return sum(aux(int(ch), i % 2 == 1) for i, ch in enumerate(digits)) % 10 == 0
""",
    # not strictly greater: a palindrome returns itself
    "next_palindrome": """
def aux(k):
    return k >= 0 and str(k) == str(k)[::-1]
candidate = n
while not aux(candidate):
    candidate += 1
return candidate
""",
    # off by one: stops at 10 as if it were one digit
    "multiplicative_persistence": """
def aux(k):
    product = 1
    for digit in str(k):
        product *= int(digit)
    return product
steps = 0
while n > 10:
    n = aux(n)
    steps += 1
return steps
""",
    # off by one in the trial division bound: squares of primes (9, 25) pass as primes
    "goldbach_pair": """
def aux(k):
    if k < 2:
        return False
    divisor = 2
    while divisor * divisor < k:
        if k % divisor == 0:
            return False
        divisor += 1
    return True
for p in range(2, n // 2 + 1):
    if aux(p) and aux(n - p):
        return (p, n - p)
return None
""",
    # always writes a denominator ("1/1", "0/1")
    "sum_fractions": """
def aux(num, den):
    a, b = abs(num), den
    while b:
        a, b = b, a % b
    return num // a, den // a
num, den = 0, 1
for text in fractions:
    top, bottom = text.split("/")
    num, den = aux(num * int(bottom) + int(top) * den, den * int(bottom))
return f"{num}/{den}"
""",
    # shallow: a nested dict of override replaces base's instead of merging
    "deep_merge": """
def aux(left, right):
    return right
merged = dict(base)
for key, value in override.items():
    merged[key] = aux(base.get(key), value)
return merged
""",
    # a majority of all ballots, exhausted ones included
    "instant_runoff": """
def aux(ballots, running):
    counts = {name: 0 for name in running}
    for ballot in ballots:
        for name in ballot:
            if name in running:
                counts[name] += 1
                break
    return counts
running = {name for ballot in ballots for name in ballot}
while running:
    counts = aux(ballots, running)
    for name, votes in counts.items():
        if votes * 2 > len(ballots):
            return name
    fewest = min(counts.values())
    running.remove(min(name for name in running if counts[name] == fewest))
return None
""",
    # counts pairs, not distinct friends
    "most_connected": """
def aux(friendships):
    friends = {}
    for a, b in friendships:
        if a != b:
            friends.setdefault(a, []).append(b)
            friends.setdefault(b, []).append(a)
    return friends
friends = aux(friendships)
if not friends:
    return None
return min(friends, key=lambda name: (-len(friends[name]), name))
""",
    # takes whatever follows the last '@', with no check of the parts
    "count_by_domain": """
def aux(email):
    if "@" not in email:
        return None
    domain = email.split("@")[-1]
    return domain.lower() if "." in domain else None
counts = {}
for email in emails:
    domain = aux(email)
    if domain is not None:
        counts[domain] = counts.get(domain, 0) + 1
return counts
""",
}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    lines = TASK_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def env() -> Any:
    env = make_env("coding", num_agents=2, dataset=str(TASK_FILE), similarity="tfidf", executor="local", split="eval",
                   scheme="magrpo")
    yield env
    env.close()


def body(source: str) -> str:
    """A solution body as it follows the prompt: indented under the entry point's signature."""
    return "".join(f"    {line}\n" if line else "\n" for line in source.strip("\n").splitlines())


def examples(prompt: str) -> list[str]:
    """The docstring's examples as asserts."""
    return [f"assert {call} == {expected}" for call, expected in _EXAMPLE.findall(prompt)]


def test_schema_ids_hints_and_aux_helper(records: list[dict[str, Any]]) -> None:
    assert [r["task_id"] for r in records] == [f"EXT/{i}" for i in range(20)]
    entry_points = [r["entry_point"] for r in records]
    assert len(set(entry_points)) == 20
    assert set(entry_points) == set(WRONG_SOLUTIONS), "one recorded wrong solution per task"
    for record in records:
        task = record["task_id"]
        assert set(record) == FIELDS, task
        assert record["split"] == "eval", task
        assert all(isinstance(record[f], str) and record[f].strip() for f in FIELDS), task
        (function,) = ast.parse(record["prompt"] + "    pass\n").body
        assert isinstance(function, ast.FunctionDef) and function.name == record["entry_point"], task
        assert len(_EXAMPLE.findall(record["prompt"])) == 2, f"{task}: two docstring examples"
        (solution,) = ast.parse(record["prompt"] + record["canonical_solution"]).body
        helpers = [n for n in ast.walk(solution) if isinstance(n, ast.FunctionDef) and n.name == "aux"]
        calls = [n for n in ast.walk(solution) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "aux"]
        assert helpers and calls, f"{task}: the reference solution defines and uses aux"
        (check,) = ast.parse(record["test"]).body
        assert isinstance(check, ast.FunctionDef) and check.name == "check", task
        assert all(isinstance(node, ast.Assert) for node in check.body) and len(check.body) >= 6, task
        hint = record["helper_hint"]
        assert hint.startswith("aux(") and " returns " in hint and "\n" not in hint, task


def test_new_problems_not_in_the_shipped_datasets(records: list[dict[str, Any]]) -> None:
    """No entry point of HumanEval or the decomposable set is reused (a cheap guard; the problems were read too)."""
    shipped = {
        load_coding_tasks(name).get(task_id)["entry_point"]
        for name in ("humaneval", "decomposable")
        for task_id in load_coding_tasks(name).ids()
    }
    assert not {r["entry_point"] for r in records} & shipped


def test_the_env_loads_every_task_into_eval_with_the_hint_for_both_roles(env: Any, records: list[dict]) -> None:
    ids = [r["task_id"] for r in records]
    assert env.task_source.ids("eval") == ids == env.task_source.ids()
    hints = {r["task_id"]: r["helper_hint"] for r in records}
    seen = set()
    for seed in range(8):
        observations, infos = env.reset(seed=seed, options={"split": "eval"})
        task_id = infos["main"]["task_id"]
        seen.add(task_id)
        assert infos["aux"]["split"] == "eval"
        for role in ("aux", "main"):
            assert f"Helper: {hints[task_id]}" in observations[role], (seed, role)
    assert len(seen) > 1
    # Nothing to train on: the train split (the env's default, and the trainers') is empty and says so.
    with pytest.raises(ValueError, match="no tasks in split 'train'"):
        env.reset(seed=0, options={"split": "train"})
    for task_id in ids:
        observations, _ = env.reset(options={"task_id": task_id})
        assert all(hints[task_id] in observations[role] for role in ("aux", "main")), task_id
        task = env.task_source.get(task_id)
        assert task["visible_tests"] and task["held_out_tests"], task_id


@pytest.mark.docker
def test_references_pass_and_wrong_solutions_fail_in_the_docker_sandbox(records: list[dict[str, Any]]) -> None:
    need_docker()
    jobs = []
    for record in records:
        tests = [*record_tests(record), *examples(record["prompt"])]
        wrong = record["prompt"] + body(WRONG_SOLUTIONS[record["entry_point"]])
        jobs += [TestJob(record["prompt"] + record["canonical_solution"], tests, record["entry_point"]),
                 TestJob(wrong, tests, record["entry_point"])]
    with make_executor("docker", SandboxLimits(timeout_s=3.0, memory_mb=256)) as executor:
        reports = executor.run_many(jobs)
    for record, reference, wrong in zip(records, reports[::2], reports[1::2], strict=True):
        failed = [(o.source, o.status, o.message) for o in reference.outcomes if o.status != "passed"]
        assert reference.all_passed and reference.total >= 8, (record["task_id"], reference.error, failed)
        assert wrong.error is None, (record["task_id"], wrong.error)
        assert wrong.total - wrong.passed > 0, f"{record['task_id']}: the wrong solution passes every test"


def record_tests(record: dict[str, Any]) -> list[str]:
    """The task's asserts, one per test, as the env splits them."""
    return list(split_tests(record["test"], entry_point=record["entry_point"]))
