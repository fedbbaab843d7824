"""One list per choice: each option's allowed values are written down in one module and imported everywhere else
(issue 43: ``JOINT_MODES`` had three homes, ``SCALE_REWARDS`` two, and ``LOSSES`` / ``LOSS_TYPES`` two). The scan
reads the source, so a second copy fails here whatever it is called."""

from __future__ import annotations

import ast
from pathlib import Path

import llm_marl_envs.core.magrpo_episode as magrpo_episode
import llm_marl_envs.rollout as rollout
import llm_marl_trainers.config as config
import llm_marl_trainers.losses as losses

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("llm_marl_envs", "trainers", "baselines", "benchmarks")
HOMES = {
    "JOINT_MODES": ("llm_marl_envs/core/magrpo_episode.py", magrpo_episode.JOINT_MODES),
    "SCALE_REWARDS": ("trainers/config.py", config.SCALE_REWARDS),
    "LOSS_TYPES": ("trainers/config.py", config.LOSS_TYPES),
    "BRANCHING": ("trainers/config.py", config.BRANCHING),
    "ADVANTAGES": ("trainers/config.py", config.ADVANTAGES),
}


def _literal_strings(value: ast.expr | None) -> frozenset[str] | None:
    """The strings of a literal tuple, list or set of strings, or the string keys of a dict literal; else None."""
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        items: list[ast.expr | None] = list(value.elts)
    elif isinstance(value, ast.Dict):
        items = list(value.keys)
    else:
        return None
    if not items or not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
        return None
    return frozenset(i.value for i in items)  # type: ignore[union-attr]


def module_level_lists() -> list[tuple[str, str, frozenset[str] | None]]:
    """``(file, name, strings)`` of every module-level assignment in the packages (``strings``: see above)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AnnAssign) else [])
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.append((path.relative_to(ROOT).as_posix(), target.id, _literal_strings(node.value)))
    return found


def test_each_choice_list_is_written_once_and_imported_elsewhere() -> None:
    found = module_level_lists()
    for name, (home, values) in HOMES.items():
        by_name = sorted(file for file, assigned, _ in found if assigned == name)
        by_value = sorted(file for file, _, strings in found if strings == frozenset(values))
        assert by_name == [home], f"{name} is assigned in {by_name}; define it once, in {home}, and import it"
        assert by_value == [home], f"the values of {name} {values} are written out in {by_value}; import {name}"
    # The modules that use them hold the very same objects.
    assert rollout.JOINT_MODES is config.JOINT_MODES is magrpo_episode.JOINT_MODES
    assert tuple(losses.LOSSES) == config.LOSS_TYPES
    assert all(fn.__name__ == f"{name}_loss" for name, fn in losses.LOSSES.items())


def test_the_scan_finds_a_second_copy_under_another_name() -> None:
    planted = ast.parse('LOSSES = {"magrpo": f, "grpo": g, "dr_grpo": h, "dapo": k}\nMODES = ("cross", "aligned")')
    strings = [_literal_strings(node.value) for node in planted.body]  # type: ignore[attr-defined]
    assert strings == [frozenset(config.LOSS_TYPES), frozenset(magrpo_episode.JOINT_MODES)]
