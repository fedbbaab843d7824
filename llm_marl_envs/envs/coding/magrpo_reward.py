"""MAGRPO's level-gated aux/main code reward, re-implemented so results compare with that paper's.

Source of the formula: Liu et al. 2025, "LLM Collaboration with Multi-Agent Reinforcement Learning" (MAGRPO);
repository ``OpenMLRL/LLM_Collab_Code_Generation``, ``rewards/code_rewards.py`` (``execution_reward_aux``) with its
checks in ``rewards/code_utils.py``; unchanged from the first commit (Aug 2025) to the current one. The code here is
ours and purely static (``ast``, never ``exec``): the env runs the unit tests and passes their pass fraction in.

Levels (maximum 4.0):

1. *definitions*: +0.4 when the aux author's code defines ``aux`` with a ``return`` (not a gate); +0.6 when the main
   author's code defines the entry point with a ``return``, else scoring stops.
2. *syntax*: +0.5 when the program (aux's code then main's) parses, else scoring stops.
3. *tests*: + the fraction of unit-test asserts that pass (0..1); no test result (the program did not load, or there
   were no tests) gives 0 and no bonus. When at least one test passes and ``aux`` is defined:
   +0.5 when the entry point calls ``aux``; then +1.0 more when it is not a mere wrapper (its body, docstring aside,
   is not just ``return <expr using aux>`` nor ``v = aux(...)`` followed by ``return v``), and -0.5 when it calls
   ``aux`` as a bare statement, throwing the result away.

Deliberate differences from the original, all documented here:

* The original checks the syntax of the two *extracted functions* plus the prompt's imports; we parse the program
  the env actually runs (aux's code then main's code), so the syntax gate agrees with the test results passed in.
* The original's checks are regular expressions over lines; ours walk the ``ast`` (statements, not lines), except
  for the level-1 definition check on code that does not parse, which falls back to the text, as the original does.
* The original's ignored-result check (``check_aux_call_without_assignment``) uses patterns that need exactly one
  whitespace character between ``aux`` and ``(`` and exactly one character inside the parentheses, so in practice it
  almost never fired; we implement what its docstring states (a bare ``aux(...)`` statement).
"""

from __future__ import annotations

import ast
import re
import textwrap

from llm_marl_envs.core.python_source import try_parse_module
from llm_marl_envs.core.rewards import MagrpoReward

CODE_MAXIMUM = 4.0
AUX_NAME = "aux"
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*\Z")
_FENCE_LINE = re.compile(r"^\s*```.*$", re.MULTILINE)


def function_block(code: str, name: str) -> str:
    """The text of the first ``def name(`` in ``code`` (at any indentation) through its indented body, or ``""``.

    Purely textual, like the original's extractor, so it also works on code that does not parse.
    """
    lines = code.split("\n")
    header = re.compile(rf"^(\s*)(?:async\s+)?def\s+{re.escape(name)}\s*\(")
    for start, line in enumerate(lines):
        match = header.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        block = [line]
        for follower in lines[start + 1 :]:
            if follower.strip() and len(follower) - len(follower.lstrip()) <= indent:
                break
            block.append(follower)
        return "\n".join(block).strip("\n")
    return ""


def defines_with_return(code: str, name: str) -> bool:
    """Whether ``code`` defines function ``name`` containing a ``return`` statement (level 1's check)."""
    block = function_block(code, name)
    if not block:
        return False
    tree = try_parse_module(textwrap.dedent(block))
    if tree is None:  # the original checks the text; so do we when the block does not parse
        return re.search(r"\breturn\b", block) is not None
    return any(isinstance(node, ast.Return) for node in ast.walk(tree))


def _last_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = None
    for node in tree.body:  # the last top-level definition is the one that runs
        if isinstance(node, functions) and node.name == name:
            found = node
    if found is None:  # the original's text search also finds nested definitions
        found = next((node for node in ast.walk(tree) if isinstance(node, functions) and node.name == name), None)
    return found


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _body_without_docstring(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(function.body)
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    return body


def is_wrapper(function: ast.FunctionDef | ast.AsyncFunctionDef, aux_name: str = AUX_NAME) -> bool:
    """Whether ``function`` merely wraps ``aux_name`` (the original's ``is_wrapper_function``, over statements).

    A wrapper's body (docstring aside) is empty, or one ``return`` whose expression mentions ``aux_name``, or
    ``v = aux(...)...`` followed by ``return v``.
    """
    body = _body_without_docstring(function)
    if not body:
        return True
    if len(body) == 1:
        only = body[0]
        return isinstance(only, ast.Return) and any(
            isinstance(node, ast.Name) and node.id == aux_name for node in ast.walk(only)
        )
    if len(body) == 2:
        first, second = body
        if (
            isinstance(first, ast.Assign)
            and isinstance(first.targets[-1], ast.Name)
            and ast.unparse(first.value).startswith(f"{aux_name}(")
        ):
            variable = first.targets[-1].id
            return isinstance(second, ast.Return) and isinstance(second.value, ast.Name) and second.value.id == variable
    return False


def ignores_aux_result(function: ast.FunctionDef | ast.AsyncFunctionDef, aux_name: str = AUX_NAME) -> bool:
    """Whether ``function`` calls ``aux_name`` as a bare expression statement, discarding what it returns."""
    return any(isinstance(node, ast.Expr) and _is_call_to(node.value, aux_name) for node in ast.walk(function))


def _check_inputs(aux_code: object, main_code: object, entry_point: object, fraction: object) -> None:
    for name, value in (("aux_code", aux_code), ("main_code", main_code), ("entry_point", entry_point)):
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected str, got {type(value).__name__}")
    if not _IDENTIFIER.match(entry_point):  # type: ignore[arg-type]
        raise ValueError(f"entry_point: expected a Python identifier, got {entry_point!r}")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise TypeError(f"test_pass_fraction: expected float in [0, 1] or None, got {type(fraction).__name__}")
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"test_pass_fraction: expected float in [0, 1] or None, got {fraction!r}")


def magrpo_code_reward(
    aux_code: str,
    main_code: str,
    entry_point: str,
    test_pass_fraction: float | None,
    *,
    aux_name: str = AUX_NAME,
) -> MagrpoReward:
    """MAGRPO's aux/main code reward (see the module docstring for the levels).

    Args:
        aux_code: the aux author's code (Markdown fence lines are ignored).
        main_code: the main author's code, which should define ``entry_point``.
        entry_point: the function the unit tests call.
        test_pass_fraction: passed asserts / all asserts, from the env's run of the program; ``None`` when no test
            ran (the program did not load, or the task has no tests).
        aux_name: the helper's name (``aux`` in MAGRPO).

    Returns:
        The total (0..4) with ``levels``: ``aux_defined``, ``main_defined``, ``syntax``, ``tests``, ``aux_usage``,
        ``anti_wrapper``, ``ignored_aux_result`` (0 or -0.5).
    """
    _check_inputs(aux_code, main_code, entry_point, test_pass_fraction)
    aux_code, main_code = _FENCE_LINE.sub("", aux_code), _FENCE_LINE.sub("", main_code)
    levels = dict.fromkeys(
        ("aux_defined", "main_defined", "syntax", "tests", "aux_usage", "anti_wrapper", "ignored_aux_result"), 0.0
    )

    def done(passed: int) -> MagrpoReward:
        return MagrpoReward(sum(levels.values()), dict(levels), CODE_MAXIMUM, passed)

    if defines_with_return(aux_code, aux_name):
        levels["aux_defined"] = 0.4
    if not defines_with_return(main_code, entry_point):
        return done(0)
    levels["main_defined"] = 0.6

    program = "\n\n".join(part for part in (aux_code.strip("\n"), main_code.strip("\n")) if part.strip())
    tree = try_parse_module(program)
    if tree is None:
        return done(1)
    levels["syntax"] = 0.5

    if test_pass_fraction is None:
        return done(2)
    levels["tests"] = float(test_pass_fraction)
    main_function = _last_function(tree, entry_point)
    if test_pass_fraction <= 0 or not function_block(aux_code, aux_name) or main_function is None:
        return done(3)
    if any(_is_call_to(node, aux_name) for node in ast.walk(main_function)):
        levels["aux_usage"] = 0.5
        if not is_wrapper(main_function, aux_name):
            levels["anti_wrapper"] = 1.0
        if ignores_aux_result(main_function, aux_name):
            levels["ignored_aux_result"] = -0.5
    return done(3)
