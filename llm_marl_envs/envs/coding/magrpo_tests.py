"""MAGRPO's official test harness for HumanEval-style tasks, re-implemented to run on this project's executor.

Source: ``OpenMLRL/LLM_Collab_Code_Generation``, ``rewards/code_rewards.py`` (``execution_reward_aux``, commit
``0b914ca``) and ``rewards/code_utils.py`` (``extract_test_cases``, ``cleanup_code``, ``extract_specific_function``,
``extract_imports_from_prompt``, ``concatenate_functions``; identical at ``c0ec726`` and ``11f24c3``). The code here
is ours; it reproduces the original's behaviour, quirks included, because they decide the pass fraction.

**Tests** (:func:`official_test_cases`): the body of ``def check(candidate):`` (up to the next blank-line-separated
``def`` or the end) is split into lines; every stripped line that starts with ``assert`` followed by whitespace and
mentions ``candidate`` is one test; repeats are dropped (first kept); ``candidate`` is replaced textually by the entry
point. Everything else is lost: the check body's other statements (``for x in ...:`` loops, ``rng = ...``), the
module preamble, and every line of an assert but its first. So an assert inside a loop fails with a ``NameError``,
a multi-line assert fails as a syntax error, and a check with only such asserts has no test at all.

**Program** (:func:`official_program`): not the prompt plus the completions, but the prompt's import lines, then
the ``aux`` function and the entry-point function *extracted* from the two completions by a line scanner that starts
a new function at every ``def`` line, nested ones included. So helpers the prompt defines are missing, and an entry
point with a nested ``def`` keeps only its lines up to that ``def`` plus the nested function's body. The original
runs it with ``math`` already in its namespace; we prepend ``import math`` to the same effect.

**Running** (the original, for reference): ``exec`` of the program, then each test ``exec``-ed in the same namespace
under a 10 s alarm; after 3 timeouts the remaining tests are skipped (they count as not passed); the pass fraction
is passed / number of tests, no tests means no test reward. Our executor runs each test with the program's names as
remote functions, so a test that reads a *module* the original's namespace provides (``math``, or an import line of
the prompt) gets that import prepended (:func:`official_tests`); a test that reads a program global that is not a
function fails here and passed there (none in HumanEval). The original also evaluates a ``assert f(args) ==
expected`` test's call and expected value once before the assert (the call runs twice, within the same 10 s); that
changes no verdict but time, and is not reproduced.

On the 164 HumanEval canonical solutions (program from ``prompt + canonical_solution`` as the main completion, empty
aux) this harness gives a mean pass fraction of 0.8989 (21 tasks below 1); with the official tests but the whole
prompt kept in the program, 0.9708 (9 below 1). See ``tests/test_magrpo_episode.py``.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl_envs.core.magrpo_episode import OFFICIAL_DATA_SLICES, official_split
from llm_marl_envs.core.python_source import parse_python
from llm_marl_envs.sandbox.splitting import split_tests
from llm_marl_envs.sandbox.types import STATUSES

OFFICIAL_TEST_TIMEOUT_S = 10.0
"""The original's per-test alarm (``TEST_TIMEOUT = 10``)."""
OFFICIAL_MAX_TIMEOUTS = 3
"""After this many timed-out tests the original skips the rest (``MAX_TIMEOUTS = 3``)."""
OFFICIAL_PRELUDE = "import math"
"""The original runs the program in a namespace that already holds ``math`` (``exec_globals = {"math": math}``)."""

_CHECK_BODY = re.compile(r"def check\(candidate\):(.*?)(?=\n\ndef|\Z)", re.DOTALL)
_ASSERT_WITH_CANDIDATE = re.compile(r"assert\s+[^\n]*candidate[^\n]*")
_IMPORT_LINES = (re.compile(r"^from\s+[\w\.]+\s+import\s+.*$"), re.compile(r"^import\s+[\w\.,\s]+$"))
_DEF_LINE = re.compile(r"^(\s*)def\s+\w+\s*\(")
_ANY_DEF = re.compile(r"def\s+\w+\s*\(")
_FENCE_OPEN_PYTHON = re.compile(r"```python\s*\n?")
_FENCE_ANY = re.compile(r"```\s*\n?")
_PROSE_LINE = re.compile(r"^[A-Z][a-z].*[.!?:]$")
_CODE_MARKERS = ("def ", "return ", "if ", "for ", "while ", "=", "(", ")", "[", "]")
_DOCSTRING_QUOTES = ('"""', "'''")


# ------------------------------------------------------------------------------------------------------- tests
def official_test_cases(test_code: str, entry_point: str) -> list[str]:
    """The original's test list for a ``check(candidate)`` source (see the module docstring); ``[]`` when none."""
    if not isinstance(test_code, str) or not isinstance(entry_point, str):
        raise TypeError("test_code and entry_point: expected str")
    if not test_code or not entry_point:
        return []
    match = _CHECK_BODY.search(test_code)
    if match is None:
        return []
    found: dict[str, None] = {}
    for raw_line in match.group(1).strip().split("\n"):
        line = raw_line.strip()
        # The original tries three narrower patterns first; all of them imply this catch-all, so it decides alone.
        if line.startswith("assert") and "candidate" in line and _ASSERT_WITH_CANDIDATE.match(line):
            found.setdefault(line, None)
    return [line.replace("candidate", entry_point) for line in found]


def official_imports(prompt: str) -> str:
    """The prompt's import lines as the original collects them (stripped lines matching ``from X import ...`` or
    ``import X, Y``), first occurrences in order, joined by newlines."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt: expected str, got {type(prompt).__name__}")
    found: dict[str, None] = {}
    for raw_line in prompt.split("\n"):
        line = raw_line.strip()
        if any(pattern.match(line) for pattern in _IMPORT_LINES):
            found.setdefault(line, None)
    return "\n".join(found)


def official_tests(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The original's tests of a task, ready for this project's executor (``TestJob(program, tests, entry_point)``).

    ``record``: a HumanEval-schema record or task fields with ``entry_point`` and ``test`` (a ``check(candidate)``
    source; optional ``prompt``, whose import lines the original's namespace holds). A test that reads ``math`` or a
    name one of those import lines binds gets that import prepended, since our executor gives a test only the
    program's functions. A record with ``tests`` (a list of asserts, as MBPP rows here) has no official assembly:
    its asserts are returned as they are (``candidate`` renamed).
    """
    entry_point = record["entry_point"]
    if not isinstance(entry_point, str) or not entry_point.isidentifier():
        raise ValueError(f"entry_point: expected a Python identifier, got {entry_point!r}")
    if "test" not in record:
        if "tests" not in record:
            raise KeyError("record: expected a 'test' (check function) or 'tests' (list of asserts) field")
        return tuple(split_tests(list(record["tests"]), entry_point=entry_point))
    cases = official_test_cases(record["test"], entry_point)
    imports = [OFFICIAL_PRELUDE, *official_imports(str(record.get("prompt") or "")).split("\n")]
    bindings = [(line, _bound_names(line)) for line in dict.fromkeys(i for i in imports if i)]
    return tuple(_with_imports(case, bindings) for case in cases)


def _bound_names(import_line: str) -> set[str]:
    try:
        tree = parse_python(import_line)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _with_imports(case: str, bindings: list[tuple[str, set[str]]]) -> str:
    try:
        tree = parse_python(case)
    except (SyntaxError, ValueError):
        return case  # a multi-line assert's first line: it fails as in the original
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    free = read - set(dir(builtins))
    needed = [line for line, names in bindings if names & free]
    return "\n".join([*needed, case])


# ----------------------------------------------------------------------------------------------------- program
def official_cleanup(code: str) -> str:
    """The original's ``cleanup_code``: the function blocks of ``code`` (fences removed), prose lines dropped.

    A block starts at any ``def`` line (nested ones too) and takes the following lines that are blank, indented past
    the ``def`` (or start with a tab), or open a docstring at the ``def``'s level (through its closing line); any other
    line ends the block. Blocks are joined by blank lines; lines that read like prose (capitalized, ending in
    ``.!?:``, without code characters) are dropped. ``""`` when no ``def`` is left.
    """
    if not isinstance(code, str) or not code:
        return ""
    lines = _FENCE_ANY.sub("", _FENCE_OPEN_PYTHON.sub("", code)).split("\n")
    blocks: list[list[str]] = []
    block: list[str] | None = None
    indent = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if _DEF_LINE.match(line):
            if block:
                blocks.append(block)
            block, indent = [line], len(line) - len(line.lstrip())
        elif block is not None:
            if not stripped or line.startswith(" " * (indent + 1)) or line.startswith("\t"):
                block.append(line)
            elif stripped.startswith(_DOCSTRING_QUOTES):
                quote = stripped[:3]
                block.append(line)
                if not (stripped.endswith(quote) and len(stripped) > 3):
                    index += 1
                    while index < len(lines):
                        block.append(lines[index])
                        if quote in lines[index]:
                            break
                        index += 1
            else:
                blocks.append(block)
                block = None
        index += 1
    if block:
        blocks.append(block)
    joined = "\n\n".join("\n".join(b) for b in blocks)
    kept = [line for line in joined.split("\n") if not _is_prose(line)]
    result = "\n".join(kept).strip()
    return result if _ANY_DEF.search(result) else ""


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return bool(
        stripped
        and not stripped.startswith(("#", *_DOCSTRING_QUOTES))
        and not any(marker in line for marker in _CODE_MARKERS)
        and _PROSE_LINE.match(stripped)
    )


def official_function(code: str, name: str) -> str:
    """The original's ``extract_specific_function``: in :func:`official_cleanup`'s output, the first ``def name(``
    line and the following lines that are blank, indented past it or start with a tab; ``""`` when absent."""
    if not isinstance(code, str) or not isinstance(name, str):
        raise TypeError("code and name: expected str")
    if not code or not name:
        return ""
    header = re.compile(rf"^(\s*)def\s+{re.escape(name)}\s*\(")
    taken: list[str] = []
    inside = False
    indent = 0
    for line in official_cleanup(code).split("\n"):
        if header.match(line):
            taken, inside, indent = [line], True, len(line) - len(line.lstrip())
        elif inside:
            if not line.strip() or line.startswith(" " * (indent + 1)) or line.startswith("\t"):
                taken.append(line)
            else:
                break
    return "\n".join(taken).strip()


def official_program(aux_code: str, main_code: str, prompt: str, entry_point: str, *, aux_name: str = "aux") -> str:
    """The program the original runs: ``import math``, the prompt's import lines, then ``aux`` extracted from
    ``aux_code`` and the entry point extracted from ``main_code`` (each passed through the cleanup again), joined by
    blank lines. A part that is empty is left out."""
    aux = official_cleanup(official_function(aux_code, aux_name))
    main = official_cleanup(official_function(main_code, entry_point))
    parts = [OFFICIAL_PRELUDE, official_imports(prompt), aux, main]
    return "\n\n".join(part for part in parts if part)


# ------------------------------------------------------------------------------------------------ pass fraction
def official_pass_fraction(statuses: Sequence[str]) -> float | None:
    """The original's pass fraction from per-test statuses in test order (``"passed"``, ``"failed"``, ``"error"``,
    ``"timeout"``): tests after the third timeout do not count as passed; ``None`` when there is no test."""
    statuses = list(statuses)
    for status in statuses:
        if status not in STATUSES:
            raise ValueError(f"statuses: expected values among {STATUSES}, got {status!r}")
    if not statuses:
        return None
    passed = timeouts = 0
    for status in statuses:
        if timeouts >= OFFICIAL_MAX_TIMEOUTS:
            break
        passed += status == "passed"
        timeouts += status == "timeout"
    return passed / len(statuses)


# ------------------------------------------------------------------------------------------------------- splits
OFFICIAL_HUMANEVAL_SLICES = OFFICIAL_DATA_SLICES["humaneval"]
"""HumanEval's official slices of the hub ``test`` split: train ``test[33:163]``, eval ``test[:32]``."""


def official_humaneval_split(task_id: str) -> str | None:
    """``"train"``, ``"eval"`` or ``None`` (in neither: HumanEval/32 and /163) for ``"HumanEval/<n>"``."""
    match = re.fullmatch(r"HumanEval/(\d+)", task_id) if isinstance(task_id, str) else None
    if match is None:
        raise ValueError(f"task_id: expected 'HumanEval/<n>', got {task_id!r}")
    return official_split("humaneval", "test", int(match.group(1)))


OFFICIAL_HUMANEVAL_EVAL_IDS: tuple[str, ...] = tuple(f"HumanEval/{i}" for i in range(32))
"""The official HumanEval eval set (``test[:32]``); of it the trainer evaluates the first 4 items each time."""


__all__ = [
    "OFFICIAL_HUMANEVAL_EVAL_IDS",
    "OFFICIAL_HUMANEVAL_SLICES",
    "OFFICIAL_MAX_TIMEOUTS",
    "OFFICIAL_PRELUDE",
    "OFFICIAL_TEST_TIMEOUT_S",
    "official_cleanup",
    "official_function",
    "official_humaneval_split",
    "official_imports",
    "official_pass_fraction",
    "official_program",
    "official_test_cases",
    "official_tests",
]
