"""Parse Python source from any thread: every ``ast.parse`` of the package goes through one process-wide lock.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion counter per interpreter, not per thread. When a
thread switch lands inside a parse (a garbage collection can run ``__del__`` code there) and another thread parses
meanwhile, the first fails with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905). The
sandbox splits tests on its worker threads while the coding env parses drafts on the caller's thread, so both take
:data:`PARSE_LOCK`, and so does any library call that parses inside (radon's metrics in ``envs/coding/quality.py``).
"""

from __future__ import annotations

import ast
import threading
from typing import Literal

PARSE_LOCK = threading.RLock()
"""Held around every parse; re-entrant, so a caller may hold it across several parses and AST rewrites."""

UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
"""What parsing untrusted text can raise: a syntax error, null bytes, absurd nesting, absurd size."""


def parse_python(source: str, mode: Literal["exec", "eval"] = "exec") -> ast.Module | ast.Expression:
    """``ast.parse(source, mode=mode)`` under :data:`PARSE_LOCK` (raises what ``ast.parse`` raises)."""
    with PARSE_LOCK:
        return ast.parse(source, mode=mode)


def try_parse_module(source: str) -> ast.Module | None:
    """``source`` parsed as a module, or ``None`` when it does not parse (any of :data:`UNPARSABLE`)."""
    try:
        tree = parse_python(source)
    except UNPARSABLE:
        return None
    assert isinstance(tree, ast.Module)
    return tree
