"""The project's modules import each other without cycles, and dependencies point one way.

Every ``import`` counts, at module level or inside a function (a lazy import still ties two modules together); only
imports under ``if TYPE_CHECKING:`` are left out (they never run). Relative imports are not used in this project.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Import name -> the repository folder it is mapped from (pyproject's package-dir).
PACKAGES = {"llm_marl_envs": "llm_marl_envs", "llm_marl_trainers": "trainers", "llm_marl_baselines": "baselines",
            "llm_marl_benchmarks": "benchmarks"}


def _module_name(package: str, path: Path) -> str:
    parts = [package, *path.relative_to(ROOT / PACKAGES[package]).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(package, p): p for package in PACKAGES for p in (ROOT / PACKAGES[package]).rglob("*.py")}


class _Imports(ast.NodeVisitor):
    """The project modules one module imports (a name imported from a package counts as its submodule if any)."""

    def __init__(self, module: str) -> None:
        self.module, self.found = module, set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, target: str) -> None:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        # A module importing its own parent package is how Python loads packages, not a dependency between modules.
        if target and target != self.module and not self.module.startswith(target + "."):
            self.found.add(target)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        assert node.level == 0, f"{self.module}: relative import"
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            self._add(full if full in MODULES else str(node.module))


def import_graph() -> dict[str, set[str]]:
    """``{module: the project modules it imports}``."""
    graph = {}
    for module, path in MODULES.items():
        visitor = _Imports(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        graph[module] = visitor.found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (``[a, b, ..., a]``), or None (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert {"llm_marl_trainers.checkpoint", "llm_marl_envs.sandbox.executor"} <= set(graph)
    # The two circles that once were (the trainer and its checkpoints; the executor interface and its backends).
    assert "llm_marl_trainers.magrpo" not in graph["llm_marl_trainers.checkpoint"]
    assert not {"llm_marl_envs.sandbox.docker_backend", "llm_marl_envs.sandbox.local"} & graph[
        "llm_marl_envs.sandbox.executor"]
    assert find_cycle(graph) is None


def test_the_env_package_depends_on_no_other_top_level_folder() -> None:
    """``llm_marl_envs`` imports nothing from ``llm_marl_trainers``, ``llm_marl_baselines`` or
    ``llm_marl_benchmarks``; the trainers use the envs only through their public API and never the CLI layer."""
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("llm_marl_envs"):
            assert all(t.startswith("llm_marl_envs") for t in targets), (module, targets)
        if module.startswith("llm_marl_trainers"):
            assert not any(t.startswith("llm_marl_benchmarks") for t in targets), (module, targets)
