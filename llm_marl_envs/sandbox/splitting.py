"""Split test sources into standalone tests, one per assert, as MAGRPO scores code.

A HumanEval-style source (``def check(candidate): ...`` plus module-level helpers) becomes one test per statement of
``check`` that contains an ``assert``. Each test is standalone: it carries the module-level statements (imports,
helper functions; HumanEval's unused ``METADATA`` is dropped) and the non-assert statements of ``check`` that come
before it (``import math``, ``rng = random.Random(42)``), so loops with asserts inside (HumanEval/32, /38) stay one
test. ``candidate`` is renamed to the entry point. Asserts of a literal (HumanEval's ``assert True, "debugging"``
markers) are dropped: they test nothing. A plain string of asserts is split the same way at module level.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Sequence

from llm_marl_envs.core.python_source import PARSE_LOCK, parse_python


class _RenameCandidate(ast.NodeTransformer):
    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == "candidate":
            return ast.copy_location(ast.Name(id=self.entry_point, ctx=node.ctx), node)
        return node


def _has_assert(node: ast.stmt) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _trivial_assert(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assert) and isinstance(node.test, ast.Constant) and bool(node.test.value)


def _is_metadata(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "METADATA" for t in node.targets)


def _render(statements: list[ast.stmt], entry_point: str | None) -> str:
    module = ast.Module(body=statements, type_ignores=[])
    if entry_point:
        module = _RenameCandidate(entry_point).visit(module)
    return ast.unparse(ast.fix_missing_locations(module))


def _split_statements(body: list[ast.stmt], preamble: list[ast.stmt], entry_point: str | None) -> list[str]:
    tests, context = [], list(preamble)
    for statement in body:
        if _has_assert(statement):
            if not _trivial_assert(statement):
                tests.append(_render([*context, statement], entry_point))
        else:
            context.append(statement)
    return tests


def split_tests(tests: str | Sequence[str], entry_point: str | None = None) -> list[str]:
    """One standalone test source per assert (see the module docstring).

    A sequence is taken as already split: each item is one test (``candidate`` renamed when ``entry_point`` is given
    and the item parses; an item that does not parse is kept and reported as an ``error`` when run). A string with a
    ``check`` function needs ``entry_point``.
    """
    # One split at a time, under the package's parse lock: run_many splits on worker threads (see python_source).
    with PARSE_LOCK:
        return _split(tests, entry_point)


def _split(tests: str | Sequence[str], entry_point: str | None) -> list[str]:
    if isinstance(tests, str):
        try:
            module = parse_python(tests)
        except SyntaxError as exc:
            detail = f"{exc.msg} (line {exc.lineno})"
            raise ValueError(f"tests: expected Python source, got a syntax error: {detail}") from None
        check = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
        if check is None:
            return _split_statements(module.body, [], entry_point)
        if not entry_point:
            raise ValueError("tests: a check(candidate) source needs entry_point (the function `candidate` stands for)")
        preamble = [n for n in module.body if n is not check and not _is_metadata(n) and not _has_assert(n)]
        return _split_statements(check.body, preamble, entry_point)
    if not isinstance(tests, Sequence) or isinstance(tests, bytes):
        raise TypeError(f"tests: expected a str or a sequence of str, got {type(tests).__name__}")
    result = []
    for i, item in enumerate(tests):
        if not isinstance(item, str):
            raise TypeError(f"tests[{i}]: expected str, got {type(item).__name__}")
        if entry_point and "candidate" in item:
            with contextlib.suppress(SyntaxError, ValueError, RecursionError):
                item = _render(parse_python(item).body, entry_point)
        result.append(item)
    return result
