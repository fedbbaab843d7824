"""Reading agents' code: extracting it from model text, assembling the team's program, checking its structure.

Everything here is static analysis (``ast``); nothing is executed. Running code is the sandbox's job.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
MAX_TESTER_ASSERTS = 10
"""Only the first asserts a tester writes are run, so a tester cannot flood the executor."""


def extract_code(text: str) -> str:
    """The code in ``text``: the contents of its fenced blocks (joined), or the whole text when it has none."""
    blocks = [block.strip("\n") for block in _FENCE.findall(text)]
    code = "\n\n".join(block for block in blocks if block.strip())
    return code if code else text.strip()


def syntax_error(code: str) -> str | None:
    """``None`` when ``code`` parses, else a one-line description of the syntax error."""
    try:
        ast.parse(code)
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return f"unparsable: {type(error).__name__}"
    return None


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def defined_functions(code: str) -> set[str]:
    """Names of the top-level functions ``code`` defines (empty when it does not parse)."""
    tree = _parse(code)
    if tree is None:
        return set()
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def calls_function(code: str, caller: str, callee: str) -> bool:
    """Whether the top-level function ``caller`` in ``code`` calls ``callee`` by name."""
    tree = _parse(code)
    if tree is None:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == caller:
            return any(
                isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == callee
                for sub in ast.walk(node)
            )
    return False


def prompt_preamble(prompt: str, entry_point: str) -> str:
    """What a problem's prompt defines besides the entry point (imports, given helpers), to prepend to programs.

    HumanEval prompts import ``typing`` names and sometimes define functions the entry point must use.
    """
    tree = _parse(prompt + "\n    pass\n") or _parse(prompt)
    if tree is None:
        return ""
    source = prompt + "\n    pass\n"
    kept = [
        ast.get_source_segment(source, node) or ""
        for node in tree.body
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point)
    ]
    return "\n".join(segment for segment in kept if segment.strip())


def extract_asserts(code: str, limit: int = MAX_TESTER_ASSERTS) -> list[str]:
    """The top-level ``assert`` statements of ``code`` (at most ``limit``), each as standalone source."""
    tree = _parse(code)
    if tree is None:
        return []
    asserts = [ast.get_source_segment(code, node) for node in tree.body if isinstance(node, ast.Assert)]
    return [a for a in asserts if a][:limit]


@dataclass(frozen=True)
class ProgramParts:
    """The team's program and where it came from."""

    program: str
    preamble: str
    helper_code: str
    main_code: str


def assemble_program(preamble: str, helper_code: str, main_code: str) -> ProgramParts:
    """The program the tests run: prompt preamble, then the helper author's code, then the main author's."""
    pieces = [piece for piece in (preamble, helper_code, main_code) if piece.strip()]
    return ProgramParts("\n\n".join(pieces) + "\n", preamble, helper_code, main_code)
