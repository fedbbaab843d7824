"""The coding env: tasks, program assembly, and rewards on hand-made code run by the real executor."""

from __future__ import annotations

import pytest
from envs_helpers import coding_env

from llm_marl_envs.envs.coding.env import VISIBLE_TESTS_LABEL
from llm_marl_envs.envs.coding.program import (
    assemble_program,
    calls_function,
    extract_asserts,
    extract_code,
    prompt_preamble,
    role_function,
    split_prompt,
)
from llm_marl_envs.envs.coding.roles import HELPER_HINT_LABEL
from llm_marl_envs.envs.coding.tasks import load_coding_tasks

TASK = "HumanEval/0"  # has_close_elements(numbers, threshold)
AUX = """```python
def aux(a, b):
    return abs(a - b)
```"""
MAIN_CORRECT = """```python
def has_close_elements(numbers, threshold):
    for i in range(len(numbers)):
        for j in range(i + 1, len(numbers)):
            if aux(numbers[i], numbers[j]) < threshold:
                return True
    return False
```"""
MAIN_WRONG = """```python
def has_close_elements(numbers, threshold):
    return False
```"""


def test_humaneval_loads_164_problems_with_split_tests() -> None:
    source = load_coding_tasks("humaneval")
    assert len(source) == 164
    assert len(source.ids("eval")) + len(source.ids("train")) == 164
    task = source.get(TASK)
    assert len(task["tests"]) >= 5
    assert all(test.lstrip().startswith("assert") or "assert" in test for test in task["tests"])
    assert "candidate" not in " ".join(task["tests"])
    visible, held_out = task["visible_tests"], task["held_out_tests"]
    assert 1 <= len(visible) < len(task["tests"]) and visible + held_out == task["tests"]
    for record in source.ids():
        tests = source.get(record)
        assert tests["held_out_tests"] and not set(tests["visible_tests"]) & set(tests["held_out_tests"])


def _step(env, actions: dict[str, str]) -> dict:
    env.reset(seed=0, options={"task_id": TASK})
    _, _, _, _, infos = env.step(actions)
    return infos


def test_correct_team_program_scores_higher_than_wrong() -> None:
    env = coding_env(num_agents=2)
    good = _step(env, {"aux": AUX, "main": MAIN_CORRECT})["main"]
    bad = _step(env, {"aux": AUX, "main": MAIN_WRONG})["main"]
    assert good["quality_terms"]["pass_rate"] == 1.0
    contributions = good["reward_components"]["contributions"]
    # Both parts are load-bearing; the one-line helper holds 16% of the code (under the 25% that earns full credit).
    assert contributions["main"] == 1.0 and contributions["aux"] == pytest.approx(0.16 / 0.25, abs=0.02)
    assert 0.0 < bad["quality_terms"]["pass_rate"] < 1.0
    # main never calls aux: the helper is not load-bearing, whatever the texts look like
    assert bad["reward_components"]["contributions"]["aux"] == 0.0
    assert good["reward_components"]["quality"] == pytest.approx(1.0)
    assert good["reward_components"]["quality"] > bad["reward_components"]["quality"] + 0.2
    tests = good["details"]["tests"]
    assert tests["held_out_passed"] == tests["held_out_total"] >= 1
    assert tests["visible_passed"] == tests["visible_total"] >= 1
    assert good["details"]["code_metrics"]["max_complexity"] >= 3


def test_syntax_errors_and_missing_functions_are_scored_and_explained() -> None:
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    obs, _, _, _, infos = env.step({"aux": "def aux(:\n  pass", "main": "print('no function here')"})
    terms = infos["main"]["quality_terms"]
    assert {k: terms[k] for k in ("pass_rate", "syntax", "structure")} == {
        "pass_rate": 0.0,
        "syntax": 0.0,
        "structure": 0.0,
    }
    assert infos["main"]["reward_components"]["quality"] == 0.0
    assert "Syntax error in your code: line 1" in obs["aux"]
    assert "Your code must define `has_close_elements`" in obs["main"]


def test_visible_test_feedback_reaches_the_authors() -> None:
    env = coding_env(num_agents=4)
    env.reset(seed=0, options={"task_id": TASK})
    tester = (
        "```python\nassert has_close_elements([1.0, 2.0], 0.5) is False\nassert has_close_elements([1.0], 1.0)\n```"
    )
    obs, _, _, _, infos = env.step({"aux": AUX, "main": MAIN_WRONG, "tester": tester, "reviewer": "Check pairs."})
    assert VISIBLE_TESTS_LABEL in obs["main"] and ": failed" in obs["reviewer"]
    assert "2 asserts found; 1 pass on the team's program." in obs["tester"]
    # the reference solution passes the first assert and fails the second: half the tester's asserts are valid
    assert infos["tester"]["quality_terms"]["tester_validity"] == 0.5


def test_hostile_program_is_contained_and_scored_zero() -> None:
    env = coding_env(num_agents=1, timeout_s=2.0)
    env.reset(seed=0, options={"task_id": TASK})
    _, _, _, _, infos = env.step({"solo": "def has_close_elements(n, t):\n    while True:\n        pass"})
    assert infos["solo"]["quality_terms"]["pass_rate"] == 0.0
    assert infos["solo"]["details"]["tests"]["timed_out"]


def test_decomposable_set_has_helper_hints() -> None:
    source = load_coding_tasks("decomposable")
    assert len(source) >= 60
    task = source.get(source.ids()[0])
    assert task["helper_hint"] and task["reference_solution"]
    env = coding_env(num_agents=2, dataset="decomposable")
    obs, _ = env.reset(seed=0, options={"task_id": task.task_id})
    # The helper's contract is task text: both authors read it (main learns aux's signature from the task, never
    # from aux's draft).
    assert all(f"{HELPER_HINT_LABEL} {task['helper_hint']}" in obs[agent] for agent in ("aux", "main"))


def test_code_is_read_from_a_reply_as_a_reviewer_would() -> None:
    good, broken = "def f(x):\n    return x + 1", "def g(x) return x"
    # A block that parses next to a broken sketch: the good one is the code.
    assert extract_code(f"Try:\n```python\n{broken}\n```\nBetter:\n```python\n{good}\n```") == good
    # The token budget cut the last block inside a function: its complete statements stay.
    cut = "```python\ndef f(x):\n    y = x + 1\n    return [y,"
    assert extract_code(cut) == "def f(x):\n    y = x + 1"
    # A reply that forgot its opening fence: the code before the closing one counts.
    assert extract_code(f"{good}\n```\n\nThis function adds one.") == good
    # Prose alone is no code (the env keeps the previous draft); code-like text without fences stays code.
    assert extract_code("Your draft is good and well written.") == ""
    assert extract_code("return x +") == "return x +"
    assert extract_code("```python\n```") == ""
    # Fences that do not start a line (seen in a training run, where it crashed the reader): still read, never raised.
    assert extract_code("Here: ```python\ndef g(x) return\n``` and ```python\ndef f(x):\n    return x + 1```") == good
    assert extract_code("x = 1 ```python\nbroken(") == "broken("  # cut off with nothing complete: kept as written
    # A closed block that does not parse is kept as written: its syntax error is the author's feedback.
    assert extract_code(f"```python\n{broken}\n```") == broken


def test_reading_code_never_raises_on_model_text() -> None:
    import random

    pieces = ["```", "```python", "\n", "def f(x):", "    return x", " ", "prose", "(", ")", "```py\n", "`", "\x00"]
    rng = random.Random(0)
    for _ in range(5000):
        code = extract_code("".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))))
        assert isinstance(code, str)


def test_prose_where_code_was_asked_keeps_the_draft_and_costs_an_invalid_action() -> None:
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    env.step({"aux": AUX, "main": MAIN_WRONG})  # not solved: the episode goes on
    before = env.state()["drafts"]["main"]
    _, _, _, _, infos = env.step({"aux": AUX, "main": "I think the function is correct as it is."})
    assert env.state()["drafts"]["main"] == before
    assert "no_usable_draft" in infos["main"]["action"]["problems"]
    assert infos["main"]["reward_components"]["step_invalid_actions"] == 1


def test_a_part_that_does_not_parse_is_left_out_of_the_program() -> None:
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    # main does not call aux here, so the team's program runs without the broken helper and passes.
    own = MAIN_CORRECT.replace("aux(numbers[i], numbers[j])", "abs(numbers[i] - numbers[j])")
    _, _, _, _, infos = env.step({"aux": "```python\ndef aux(a, b) return a\n```", "main": own})
    terms = infos["main"]["quality_terms"]
    assert terms["pass_rate"] == 1.0 and terms["syntax"] == 1.0 and terms["structure"] == 0.5
    assert infos["main"]["reward_components"]["contributions"]["aux"] == 0.0
    assert "aux" not in env.state()["assessment"]["program"].split("def has_close_elements")[0].split("import")[-1]


def test_an_authors_part_is_its_function_and_what_the_function_uses() -> None:
    """What SmolLM2-135M writes after ``def aux(``: the helper, then the entry point redefined, ``def main()``, calls
    and prints at top level. The helper's part is ``aux`` with the imports, constants and helpers it uses; the first
    ``aux`` counts (the one its reply was started on), and a teammate's function is never taken from it."""
    reply = (
        "import re\nVOWELS = set('aeiou')\nUNUSED = 3\n"
        "def aux(word):\n    return first(word) in VOWELS\n\n"
        "def first(w):\n    return re.sub('[^a-z]', '', w.lower())[:1]\n\n"
        "def count_vowel_words(s):\n    return 0\n\n"
        "def aux(word):\n    return True\n"
        "def main():\n    print(main())\n\naux('x')\nprint(aux('y'))\n"
    )
    part = role_function(reply, "aux", others=("count_vowel_words",))
    assert part == ("import re\n\nVOWELS = set('aeiou')\n\ndef aux(word):\n    return first(word) in VOWELS\n\n"
                    "def first(w):\n    return re.sub('[^a-z]', '', w.lower())[:1]")
    # main may not supply aux: its own aux is left out, so its entry point calls the helper's author's aux.
    main = "def f(x):\n    return aux(x) + 1\n\ndef aux(x):\n    return 41\n\ndef f(x):\n    return f(x)\n"
    assert role_function(main, "f", others=("aux",)) == "def f(x):\n    return aux(x) + 1"
    # Decorators stay with their function; a part without the function, or that does not parse, is left as written.
    assert role_function("import functools\n@functools.cache\ndef f(n):\n    return n\n", "f") == (
        "import functools\n\n@functools.cache\ndef f(n):\n    return n")
    assert role_function("def g():\n    return 1\n", "f") == "def g():\n    return 1\n"
    assert role_function("def f(:\n", "f") == "def f(:\n"


def test_what_follows_an_authors_function_does_not_overwrite_it() -> None:
    """The team's program runs each author's function as started: a trailing redefinition of the entry point in the
    helper's reply, or of the entry point by main itself, no longer replaces it (Python runs the last definition)."""
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    redefined = "def has_close_elements(numbers, threshold):\n    return None\nprint(1)\n"
    aux = AUX.removesuffix("```") + redefined + "```"
    main = MAIN_CORRECT.removesuffix("```") + redefined + "```"
    _, _, _, _, infos = env.step({"aux": aux, "main": main})
    assert infos["main"]["quality_terms"]["pass_rate"] == 1.0
    drafts = env.state()["drafts"]
    assert drafts["aux"] == "def aux(a, b):\n    return abs(a - b)"
    assert drafts["main"].count("def has_close_elements") == 1 and "print" not in drafts["main"]


def test_a_humaneval_prompt_splits_into_its_docstring_and_its_code() -> None:
    prompt = load_coding_tasks("humaneval").get(TASK)["prompt"]
    description, code = split_prompt(prompt, "has_close_elements")
    assert description.startswith("Check if in given list of numbers") and ">>> has_close_elements" in description
    assert code.startswith("from typing import List") and code.rstrip().endswith("threshold: float) -> bool:")
    assert '"""' not in code
    assert split_prompt("def f(x):\n    return x\n", "f") == ("", "def f(x):\n    return x\n")  # no docstring
    assert split_prompt("def f(x:\n", "f") == ("", "def f(x:\n")  # does not parse


def test_program_helpers() -> None:
    assert extract_code("text\n```python\nx = 1\n```\nmore\n```\ny = 2\n```") == "x = 1\n\ny = 2"
    assert extract_code("x = 1") == "x = 1"
    assert extract_code("```python\ndef f():\n    return 1") == "def f():\n    return 1"  # unclosed fence
    assert calls_function("def aux(): pass\ndef f():\n    return aux()", "f", "aux")
    assert not calls_function("def f(:", "f", "aux")
    assert extract_asserts("assert f(1) == 2\nx = 3\nassert f(2)") == ["assert f(1) == 2", "assert f(2)"]
    assert prompt_preamble("from typing import List\n\ndef f(x: List[int]) -> int:\n    '''doc'''\n", "f") == (
        "from typing import List"
    )
    parts = assemble_program("import math", "def aux(): pass", "def f(): return aux()")
    assert parts.program == "import math\n\ndef aux(): pass\n\ndef f(): return aux()\n"


def test_jsonl_dataset_in_humaneval_schema(tmp_path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"task_id": "t/0", "prompt": "def inc(x):\\n", "entry_point": "inc", '
        '"tests": ["assert inc(1) == 2", "assert inc(-1) == 0"], "canonical_solution": "    return x + 1\\n"}\n',
        encoding="utf-8",
    )
    env = coding_env(num_agents=1, dataset=str(path))
    env.reset(seed=0)
    _, _, _, _, infos = env.step({"solo": "def inc(x):\n    return x + 1"})
    assert infos["solo"]["quality_terms"]["pass_rate"] == 1.0
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"task_id": "t/0", "prompt": "def inc(x):\\n"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl:1: missing field 'entry_point'"):
        coding_env(dataset=str(broken))


def test_failing_visible_test_feedback_matches_the_card() -> None:
    """The card's feedback sample: a failing visible test as its call, expected and got; passing ones on a line."""
    import llm_marl_envs.envs.coding.env as coding_module

    env = coding_env(num_agents=2, dataset="decomposable")
    env.reset(seed=0, options={"task_id": "LME/0"})
    aux = "def aux(word):\n    w = word.strip('.,!?')\n    return len(w) > 1 and w[0] in 'aeiou' and w[-1] in 'aeiou'\n"
    main = (
        "def count_vowel_words(sentence: str) -> int:\n    result = aux\n"
        "    return sum(1 for w in sentence.split() if result(w))\n"
    )
    observations, *_ = env.step({"aux": aux, "main": main})
    sample = coding_module.__doc__.split("ignore case")[1].split("```\n")[1].rstrip("\n")
    assert sample.startswith(VISIBLE_TESTS_LABEL) and sample in observations["main"]


def test_describe_tests_is_bounded_and_explains_only_single_call_failures() -> None:
    """Each line is cut to about 170 characters; the first three failing single-call tests get their three lines;
    passing tests and tests whose form no single call decides stay one line."""
    from llm_marl_envs.envs.coding.quality import MAX_SHOWN_CHARS, describe_tests
    from llm_marl_envs.sandbox import TestOutcome

    long_arg = "x" * 500
    tests = [f"assert f('{long_arg}') == '{long_arg}'", "assert f(1) == 2", "assert [f(1)] == [2]",
             "assert not f(2)", "assert f(3)", "assert f(4) == 4", "assert f(5) == 5"]
    statuses = ["failed", "passed", "failed", "failed", "error (ValueError)", "failed", "failed"]
    outcomes = [TestOutcome(0, tests[0], "failed", got="'" + "y" * 198 + "'"), TestOutcome(1, tests[1], "passed"),
                TestOutcome(2, tests[2], "failed"), TestOutcome(3, tests[3], "failed", got="3"),
                TestOutcome(4, tests[4], "error", raised="ValueError: math domain error"),
                TestOutcome(5, tests[5], "failed", got="5"), TestOutcome(6, tests[6], "failed", got="6")]
    text = describe_tests(tests, statuses, outcomes, entry_point="f", known=None)
    lines = text.splitlines()
    assert all(len(line) <= MAX_SHOWN_CHARS + 30 for line in lines), max(map(len, lines))
    assert lines[1:] == [
        "  expected: '" + "x" * (MAX_SHOWN_CHARS - 7) + " [cut]",
        "  got: '" + "y" * (MAX_SHOWN_CHARS - 7) + " [cut]",
        "- assert f(1) == 2: passed",
        "- assert [f(1)] == [2]: failed",
        "- f(2): failed",
        "  expected: a false value",
        "  got: 3",
        "- f(3): error (ValueError)",
        "  expected: a true value",
        "  raised: ValueError: math domain error",
        "- assert f(4) == 4: failed",  # past the first three explained, past the limit of six
    ]
