"""``llm-marl bench NAME [ARGS...]``: run the benchmark ``python -m llm_marl_benchmarks.NAME`` with ``ARGS``.

A benchmark is any module ``benchmarks/NAME.py`` with a top-level ``main(argv)``; a new one is listed without
registering it anywhere. Modules are found by reading their source, not importing it, so ``llm-marl bench --help``
stays fast and a benchmark whose extra is missing (torch for ``policy_throughput``) fails only when it runs.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
NOT_BENCHMARKS = frozenset({"cli", "bench"})
"""Modules with a ``main`` that are not benchmarks: the command line itself."""


def benchmarks() -> dict[str, str]:
    """Benchmark name -> the first paragraph of its docstring on one line, sorted by name."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        name = path.stem
        if name.startswith("_") or name in NOT_BENCHMARKS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" and node.args.args for node in tree.body):
            found[name] = _summary(tree)
    # A benchmark too big for one module is a package runnable with -m (a __main__.py) whose __init__ exports main.
    for path in sorted(PACKAGE_DIR.glob("*/__main__.py")):
        init = path.parent / "__init__.py"
        if init.is_file() and not path.parent.name.startswith("_"):
            found[path.parent.name] = _summary(ast.parse(init.read_text(encoding="utf-8")))
    return dict(sorted(found.items()))


def _summary(tree: ast.Module) -> str:
    return " ".join((ast.get_docstring(tree) or "").split("\n\n")[0].split())


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand to the ``llm-marl`` parser."""
    found = benchmarks()
    listing = "\n".join(
        textwrap.fill(summary, width=100, initial_indent=f"  {name:<20} ", subsequent_indent=" " * 23)
        for name, summary in found.items()
    )
    parser = subparsers.add_parser(
        "bench",
        help="run a performance benchmark (python -m llm_marl_benchmarks.NAME)",
        description="Run a benchmark as `python -m llm_marl_benchmarks.NAME ARGS...` would. Every benchmark accepts "
        "--json PATH; `llm-marl bench NAME --help` shows its own options.",
        epilog=f"benchmarks:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=list(found), metavar="NAME", help="the benchmark (listed below)")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the benchmark's own arguments, passed on unchanged")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Import ``llm_marl_benchmarks.NAME`` (only now: it may need an extra) and return its ``main(args)``'s status."""
    module = importlib.import_module(f"llm_marl_benchmarks.{args.name}")
    # The benchmarks' parsers name themselves after sys.argv[0]; without this their usage line would read
    # "usage: llm-marl [-h] ...", a command that does not take those options.
    program, sys.argv[0] = sys.argv[0], f"llm-marl bench {args.name}"
    try:
        status = module.main(list(args.args))
        # main() returns an exit status; a benchmark that returns its figures (a dict) succeeded.
        return status if isinstance(status, int) else 0
    finally:
        sys.argv[0] = program
