"""benchmarks/trainer_step.py end to end on a tiny random-weight model: every case runs in its own interpreter with the
real trainers (ours, CoMLRL's, TRL's and the floor), and the JSON's ratios are the ratios of the medians it reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llm_marl_benchmarks import trainer_step

NEW_TOKENS = 4
GROUP = 2
CASES = {
    f"ours_n2_g{GROUP}": (2, 1), f"ours_n2_repeated_g{GROUP}": (2, 1), f"comlrl_n2_g{GROUP}": (2, 1),
    f"ours_n1x2_g{GROUP}": (1, 2),
    f"trl_n1x2_g{GROUP}": (1, 2), f"floor_g{GROUP}": (1, 2), f"ours_n1_g{GROUP}": (1, 1), f"ours_n4_g{GROUP}": (4, 1),
}
"""Every case of one G: (agents, prompts per agent per step)."""


@pytest.mark.slow
@pytest.mark.beside_serial  # CPU-bound, the writing env's prompts only: no sandbox in any case
def test_a_tiny_run_reports_every_case_its_ratios_and_its_settings(tmp_path: Path) -> None:
    """One run of the bench, checked three ways. One test, not three sharing a module fixture: pytest-xdist may deal
    such tests to both workers, and then each runs the 90-second bench for itself (seen in a parallel run)."""
    path = tmp_path / "trainer_step.json"
    status = trainer_step.main(["--tiny", "--steps", "1", "--warmup", "0", "--new-tokens", str(NEW_TOKENS),
                                "--groups", str(GROUP), "--json", str(path)])
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    errors = {row["name"]: row["error"] for row in report["cases"] if "error" in row}
    assert status == 0 and not errors, errors
    _every_case_ran_with_fixed_length_completions_and_positive_finite_figures(report)
    _ratios_are_the_ratios_of_the_reported_medians(report)
    _the_report_describes_the_run(report)


def _every_case_ran_with_fixed_length_completions_and_positive_finite_figures(report: dict) -> None:
    rows = {row["name"]: row for row in report["cases"]}
    assert sorted(rows) == sorted(CASES)
    for name, (agents, prompts) in CASES.items():
        row = rows[name]
        assert (row["agents"], row["group"]) == (agents, GROUP)
        assert row["completions_per_step"] == agents * prompts * GROUP
        assert len(row["step_s"]) == 1  # --steps 1 --warmup 0
        for key in ("median_step_s", "median_generation_s", "peak_memory_gib"):
            assert math.isfinite(row[key]) and row[key] > 0, (name, key, row[key])
        assert row["median_generation_s"] < row["median_step_s"], name
        # min = max new tokens: every trainer sampled exactly NEW_TOKENS tokens per completion and trains on all of
        # them; CoMLRL alone cuts a completion at its first pad token, which a random model may sample.
        full = row["completions_per_step"] * NEW_TOKENS
        if row["framework"] == "comlrl":
            assert 0 < row["completion_tokens"][0] <= full, name
        else:
            assert row["completion_tokens"] == [full], name
        if row["framework"] == "ours":  # prompt tokens read per completion, and per distinct (agent, prompt)
            assert row["prompt_tokens"][0] == GROUP * row["distinct_prompt_tokens"][0] > 0, name
            assert row["share_prefix"] is (not name.startswith("ours_n2_repeated")), name


def _ratios_are_the_ratios_of_the_reported_medians(report: dict) -> None:
    step = {row["name"]: row["median_step_s"] for row in report["cases"]}
    memory = {row["name"]: row["peak_memory_gib"] for row in report["cases"]}
    expected = {
        "ratio_shared_vs_repeated": step[f"ours_n2_g{GROUP}"] / step[f"ours_n2_repeated_g{GROUP}"],
        "ratio_vs_comlrl": step[f"ours_n2_g{GROUP}"] / step[f"comlrl_n2_g{GROUP}"],
        "ratio_vs_trl": step[f"ours_n1x2_g{GROUP}"] / step[f"trl_n1x2_g{GROUP}"],
        "ratio_vs_floor": step[f"ours_n2_g{GROUP}"] / step[f"floor_g{GROUP}"],
        "memory_ratio_n4_n1": memory[f"ours_n4_g{GROUP}"] / memory[f"ours_n1_g{GROUP}"],
    }
    assert set(trainer_step.TARGETS) == set(expected)
    for name, value in expected.items():
        assert report[name] == pytest.approx(value, rel=1e-12), name
        assert report["passed"][name] == (value <= report["targets"][name])
    assert report["by_group"][str(GROUP)] == {k: report[k] for k in ("ratio_shared_vs_repeated", "ratio_vs_comlrl",
                                                                     "ratio_vs_trl", "ratio_vs_floor")}
    assert report["targets"] == trainer_step.TARGETS


def _the_report_describes_the_run(report: dict) -> None:
    assert report["benchmark"] == "trainer_step"
    assert (report["steps"], report["warmup"], report["new_tokens"], report["groups"]) == (1, 0, NEW_TOKENS, [GROUP])
    assert report["device"] == "cpu" and report["dtype"] == "float32"
    assert report["peer_finetuning"] == "full"
    assert all(row["memory_source"] == "ru_maxrss" for row in report["cases"])


def test_plan_cases_follows_only_and_measures_team_size_at_the_first_group_only() -> None:
    names = [case.name for case in trainer_step.plan_cases([4, 8], ["ours", "floor"])]
    assert names == ["ours_n2_g4", "ours_n2_repeated_g4", "ours_n1x2_g4", "floor_g4", "ours_n1_g4", "ours_n4_g4",
                     "ours_n2_g8", "ours_n2_repeated_g8", "ours_n1x2_g8", "floor_g8"]


def test_recipe_cases_time_the_recipes_trainer_with_and_without_sharing(tmp_path: Path) -> None:
    recipe = tmp_path / "writing-3.yaml"
    recipe.write_text("env: writing\nnum_agents: 3\nnum_generations: 4\nenvs_per_step: 2\n", encoding="utf-8")
    cases = trainer_step.plan_recipe_cases([recipe])
    assert [(c.name, c.agents, c.group, c.envs_per_step, c.share_prefix) for c in cases] == [
        ("recipe_writing-3_shared", 3, 4, 2, True), ("recipe_writing-3_repeated", 3, 4, 2, False)]
    assert all(c.recipe == str(recipe.resolve()) for c in cases)
    report = trainer_step.compare({
        "recipe_writing-3_shared": {"median_step_s": 3.0, "median_generation_s": 2.0},
        "recipe_writing-3_repeated": {"median_step_s": 6.0, "median_generation_s": 2.5}}, [4])
    assert report["by_recipe"] == {"writing-3": {"ratio_shared_vs_repeated": 0.5,
                                                 "ratio_generation_shared_vs_repeated": 0.8}}


def test_recipe_cases_compare_the_graph_decoder_with_the_eager_decode(tmp_path: Path) -> None:
    recipe = tmp_path / "coding-2.yaml"
    recipe.write_text("env: coding\nnum_agents: 2\nnum_generations: 4\nenvs_per_step: 2\n", encoding="utf-8")
    cases = trainer_step.plan_recipe_cases([recipe], "graphs")
    assert [(c.name, c.share_prefix, c.graph_decode) for c in cases] == [
        ("recipe_coding-2_graphs", True, True), ("recipe_coding-2_eager", True, False)]
    with pytest.raises(ValueError, match="compare"):
        trainer_step.plan_recipe_cases([recipe], "vllm")
    decode = {"used": True, "captures": 3}
    report = trainer_step.compare({
        "recipe_coding-2_graphs": {"median_step_s": 2.0, "median_generation_s": 1.0, "median_completion_tokens": 640,
                                   "graph_decode": decode},
        "recipe_coding-2_eager": {"median_step_s": 8.0, "median_generation_s": 6.4, "median_completion_tokens": 640}},
        [4])
    row = report["by_recipe"]["coding-2"]
    assert (row["step_s"], row["eager_step_s"], row["ratio_graphs_vs_eager"]) == (2.0, 8.0, 0.25)
    assert (row["generated_tokens_per_s"], row["eager_generated_tokens_per_s"]) == (640.0, 100.0)
    assert row["graph_decode"] == decode and row["eager_error"] is None


def test_recipe_cases_compare_the_compiled_step_with_the_graphs_and_the_eager_decode(tmp_path: Path) -> None:
    recipe = tmp_path / "writing-2.yaml"
    recipe.write_text("env: writing\nnum_agents: 2\nnum_generations: 4\nenvs_per_step: 2\n", encoding="utf-8")
    cases = trainer_step.plan_recipe_cases([recipe], "compiled")
    assert [(c.name, c.graph_decode, c.graph_compile) for c in cases] == [
        ("recipe_writing-2_compiled", True, True), ("recipe_writing-2_graphs", True, False),
        ("recipe_writing-2_eager", False, False)]
    report = trainer_step.compare({
        "recipe_writing-2_compiled": {"median_step_s": 3.0, "median_generation_s": 1.5,
                                      "median_completion_tokens": 1536,
                                      "graph_decode": {"used": True, "compiled": True}},
        "recipe_writing-2_graphs": {"median_step_s": 4.0, "median_generation_s": 2.5,
                                    "median_completion_tokens": 1536},
        "recipe_writing-2_eager": {"median_step_s": 16.0, "median_generation_s": 14.0,
                                   "median_completion_tokens": 1536}}, [4])
    row = report["by_recipe"]["writing-2"]
    assert (row["compiled_step_s"], row["step_s"], row["eager_step_s"]) == (3.0, 4.0, 16.0)
    assert (row["ratio_compiled_vs_graphs"], row["ratio_compiled_vs_eager"]) == (0.75, 0.1875)
    assert row["compiled_graph_decode"] == {"used": True, "compiled": True} and row["compiled_error"] is None


def test_recipe_cases_compare_replies_stopped_at_their_end_with_replies_that_run_on(tmp_path: Path) -> None:
    recipe = tmp_path / "coding-2.yaml"
    recipe.write_text("env: coding\nnum_agents: 2\nnum_generations: 4\nenvs_per_step: 4\n", encoding="utf-8")
    cases = trainer_step.plan_recipe_cases([recipe], "stops")
    assert [(c.name, c.envs_per_step, c.share_prefix, c.stop_at_reply_end) for c in cases] == [
        ("recipe_coding-2_stopped", 4, True, True), ("recipe_coding-2_unstopped", 4, True, False)]
    report = trainer_step.compare({
        "recipe_coding-2_stopped": {"median_step_s": 60.0, "median_generation_s": 30.0,
                                    "median_completion_tokens": 2000},
        "recipe_coding-2_unstopped": {"median_step_s": 100.0, "median_generation_s": 60.0,
                                      "median_completion_tokens": 4400}}, [4])
    assert report["by_recipe"]["coding-2"] == {
        "step_s": 60.0, "unstopped_step_s": 100.0, "ratio_stopped_vs_unstopped": 0.6,
        "ratio_generation_stopped_vs_unstopped": 0.5, "completion_tokens_per_step": 2000,
        "unstopped_completion_tokens_per_step": 4400}
