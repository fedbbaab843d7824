"""docs/results/coding-propose-verify/paired.py, the script behind the coding tables' paired figures: pooling two
folders never overwrites another pooling's committed ``pooled.json``, and the committed poolings its README names are
recognised as its own."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "results" / "coding-propose-verify"


@pytest.fixture(scope="module")
def paired() -> ModuleType:
    spec = importlib.util.spec_from_file_location("paired_script", FOLDER / "paired.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIGURES = {"conditions": {"trained": {"episodes": 2, "pass_rate": 0.5}},
           "comparisons": {"trained - single: pass_rate": {"n_a": 2, "diff": 0.25, "ci": (0.1, 0.4)}}}


def test_a_pooled_file_is_this_poolings_only_when_it_names_the_same_folders(paired: ModuleType, tmp_path: Path) -> None:
    target = tmp_path / "pooled.json"
    assert paired.pooled_file_holds(target, FIGURES, ["a", "b"]) == "nothing"
    target.write_text(json.dumps({"folders": ["b", "a"], **FIGURES}))
    assert paired.pooled_file_holds(target, FIGURES, ["a", "b"]) == "this"  # order does not matter
    assert paired.pooled_file_holds(target, FIGURES, ["a", "c"]) == "another"


def test_an_unnamed_pooled_file_is_this_poolings_only_when_every_figure_in_it_is_computed_now(
        paired: ModuleType, tmp_path: Path) -> None:
    target = tmp_path / "pooled.json"
    older = {"conditions": {"trained": {"pass_rate": 0.5}},  # an older script wrote fewer fields
             "comparisons": {"trained - single: pass_rate": {"n_a": 2, "diff": 0.25, "ci": [0.1, 0.4]}}}
    target.write_text(json.dumps(older))
    assert paired.pooled_file_holds(target, FIGURES, ["a", "b"]) == "this, unnamed"
    older["comparisons"]["trained - single: pass_rate"]["diff"] = 0.3  # another pooling's figure
    target.write_text(json.dumps(older))
    assert paired.pooled_file_holds(target, FIGURES, ["a", "b"]) == "another"
    target.write_text(json.dumps({**FIGURES, "extra": 1}))  # a field computed now does not hold
    assert paired.pooled_file_holds(target, FIGURES, ["a", "b"]) == "another"


def test_pooling_onto_another_poolings_file_writes_nothing_and_says_so(
        paired: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two folders whose common folder holds the 2-40 pooling's file (here: copies of two committed study folders
    under it, which another pooling's file sits beside): refused, the file untouched; ``--out`` writes the figures
    elsewhere, naming the folders."""
    shutil.copytree(FOLDER / "2-turn1" / "study", tmp_path / "x")
    shutil.copytree(FOLDER / "2-turn1" / "study-seed6", tmp_path / "y")
    shutil.copy(FOLDER / "pooled.json", tmp_path / "pooled.json")  # the 2-40 pooling's figures
    monkeypatch.setattr(paired, "ROOT", tmp_path)
    assert paired.main(["x", "y"]) == 2
    assert (tmp_path / "pooled.json").read_bytes() == (FOLDER / "pooled.json").read_bytes()
    assert "holds another pooling's figures; nothing written" in capsys.readouterr().err
    out = tmp_path / "xy.json"
    assert paired.main(["x", "y", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    committed = json.loads((FOLDER / "2-turn1" / "pooled.json").read_text())  # the same pooling, committed
    assert written["folders"] == ["x", "y"]
    assert written["conditions"]["trained"]["episodes"] == committed["conditions"]["trained"]["episodes"] == 80
    assert paired._within(committed, written)
    assert paired.main(["y", "x", "--out", str(out)]) == 0  # its own file, rewritten


@pytest.mark.parametrize("folders, target", [
    (["2-40", "2-40-seed2"], "pooled.json"),
    (["2-turn1/study", "2-turn1/study-seed6"], "2-turn1/pooled.json"),
])
def test_the_committed_poolings_are_recognised_as_their_own(
        paired: ModuleType, folders: list[str], target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """On copies of the committed logs and files: the files the README's commands wrote are left byte for byte."""
    for folder in folders:
        shutil.copytree(FOLDER / folder, tmp_path / folder)
    shutil.copy(FOLDER / target, tmp_path / target)
    monkeypatch.setattr(paired, "ROOT", tmp_path)
    assert paired.main(folders) == 0
    assert "left as it is" in capsys.readouterr().out
    assert (tmp_path / target).read_bytes() == (FOLDER / target).read_bytes()


def test_a_training_runs_steps_are_summed_up_from_its_metrics(paired: ModuleType, tmp_path: Path) -> None:
    """``training_steps``, which the results' compare scripts use for each run's cost a step."""
    steps = [{"completion_tokens": 100 * (i + 1), "completions": 32, "step_time": 10.0 + i,
              "generation_time": 4.0, "reward": float(i)} for i in range(12)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in steps) + "\n\n")
    summary = paired.training_steps(path)
    assert summary["steps"] == 12
    assert summary["completion_tokens_per_step"] == pytest.approx(650.0)
    assert summary["seconds_per_step"] == pytest.approx(15.5)
    assert summary["median_seconds_per_step"] == pytest.approx(15.5)
    steps[0]["step_time"] = 1000.0  # one step slowed by other work: the mean jumps, the median moves one rank
    path.write_text("\n".join(json.dumps(s) for s in steps) + "\n")
    slowed = paired.training_steps(path)
    assert slowed["seconds_per_step"] > 90 and slowed["median_seconds_per_step"] == pytest.approx(16.5)
    assert summary["train_reward_first_10"] == pytest.approx(4.5)  # steps 0-9
    assert summary["train_reward_last_10"] == pytest.approx(6.5)  # steps 2-11


def test_a_teams_credit_shares_and_any_pass_share_go_into_the_figures(paired: ModuleType) -> None:
    played = [{"pass_rate": 0.5, "contributions": {"coder_1": 0.5, "coder_2": 0.0}},
              {"pass_rate": 0.0, "contributions": {"coder_1": 0.0, "coder_2": 0.0}},
              {"pass_rate": 1.0, "contributions": {"coder_1": 1.0, "coder_2": 1.0}},
              {"pass_rate": 0.0, "contributions": {"coder_1": 0.0, "coder_2": None}}]
    figures: dict = {}
    paired.team_credit("team", played, figures)
    assert figures == {"team, credit > 0": {"coder_1": 0.5, "coder_2": 0.25}, "team, passes any held-out test": 0.5}


def test_training_figures_sum_up_each_run_that_exists_under_its_name(paired: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"completion_tokens": 10, "completions": 4, "step_time": 2.0, "generation_time": 1.0,
                                "reward": 0.5}) + "\n")
    figures: dict = {}
    paired.training_figures({"run": path, "gone": tmp_path / "missing.jsonl"}, figures, prefix="4. training: ")
    assert list(figures) == ["4. training: run"] and figures["4. training: run"]["seconds_per_step"] == 2.0


def test_phi_and_its_paired_interval(paired: ModuleType) -> None:
    """phi is Pearson's r of two yes/no series; the interval holds it, narrows with more pairs, and the four-series
    form compares two conditions on the same pairs (a condition against itself: exactly 0)."""
    first = [True, True, False, False, True, False, False, False] * 8
    second = [True, False, False, False, True, False, True, False] * 8
    value, low, high = paired.phi_interval(first, second)
    assert value == pytest.approx(paired.phi(first, second)) == pytest.approx(7 / 15)  # (ad - bc) / sqrt(...)
    assert low < value < high
    _, wide_low, wide_high = paired.phi_interval(first[:16], second[:16])
    assert wide_high - wide_low > high - low
    assert paired.phi_interval(first, second, first, second) == (0.0, 0.0, 0.0)
    assert paired.phi(first, [False] * len(first)) != paired.phi(first, [False] * len(first))  # nan: never varies
    with pytest.raises(ValueError, match="two series"):
        paired.phi_interval(first, second, first)
