"""The peers' trainers from the command line, as a user runs them from a fresh clone: ``llm-marl interop comlrl`` and
``llm-marl interop torchrl`` train for real with the default model and write per-step records in which the peer's
reward is the env's; and the race against CoMLRL (``benchmarks/time_to_reward.py``): its comparison by hand, and one
tiny race end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_marl_benchmarks import time_to_reward
from llm_marl_benchmarks.cli import main


def _records(path: Path) -> dict:
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["steps"], report
    return report


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_interop_comlrl_trains_a_team_and_reports_the_envs_reward(tmp_path: Path, short_tasks: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "comlrl.json"
    assert main(["interop", "comlrl", "--env", "writing_v0", "--num-agents", "2", "--steps", "1", "--group-size", "2",
                 "--max-new-tokens", "8", "--dataset", short_tasks, "--json", str(out)]) == 0
    report = _records(out)
    (step,) = report["steps"]
    assert step["step"] == 1 and step["step_time"] > 0 and step["wall_time"] >= step["step_time"] * 0.5
    assert step["peer_reward"] == pytest.approx(step["env_reward"], abs=1e-9)  # CoMLRL was paid the env's reward
    assert "step 1" in capsys.readouterr().out


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_interop_torchrl_trains_on_the_writing_env_and_reports_the_envs_reward(tmp_path: Path,
                                                                             short_tasks: str) -> None:
    out = tmp_path / "torchrl.json"
    assert main(["interop", "torchrl", "--env", "writing_v0", "--steps", "1", "--group-size", "2",
                 "--max-new-tokens", "8", "--dataset", short_tasks, "--json", str(out)]) == 0
    (step,) = _records(out)["steps"]
    assert step["step"] == 1 and step["peer_reward"] == pytest.approx(step["env_reward"], abs=1e-6)


def _points(*returns: float, every: float = 60.0) -> list[dict]:
    return [{"step": 5 * i, "wall_time": every * i, "eval_return": r} for i, r in enumerate(returns)]


def _result(points: list[dict], step_s: float) -> dict:
    steps = [{"step": i + 1, "wall_time": step_s * (i + 1), "step_time": step_s, "generation_time": step_s / 2}
             for i in range(3)]
    return {"setup_s": 5.0, "points": points, "steps": steps, "eval_s": 10.0}


def test_the_race_comparison_by_hand() -> None:
    # Untrained 0.10; finals: CoMLRL 0.30, ours 0.40 -> L = 0.10 + 0.30 / 2 = 0.25. CoMLRL reaches 0.25 at 180 s, ours
    # at its second evaluation, 40 s of training.
    results = {"comlrl": _result(_points(0.10, 0.20, 0.25, 0.30), step_s=60.0),
               "ours": _result(_points(0.10, 0.28, 0.31, 0.40, every=20.0), step_s=20.0)}
    figures = time_to_reward.compare(results)
    assert figures["level"] == pytest.approx(0.25) and figures["comlrl_wall_to_level_s"] == 120.0
    assert figures["ours_wall_to_level_s"] == 20.0 and figures["ours_step_at_level"] == 5
    assert figures["ratio"] == pytest.approx(20 / 120) and figures["ratio_bound"] is None and figures["meets_target"]
    assert figures["equal_wall_s"] == 60.0  # the shorter run's last evaluation
    assert figures["ours_at_equal_wall"] == 0.40 and figures["comlrl_at_equal_wall"] == 0.20
    assert figures["untrained"] == {"ours": 0.10, "comlrl": 0.10}
    assert figures["final"] == {"ours": 0.40, "comlrl": 0.30}
    assert figures["time"]["ours"]["generation_s"] == 30.0 and figures["time"]["ours"]["update_s"] == 30.0
    json.dumps(figures, allow_nan=False)  # the JSON report takes it as it is


def test_the_race_has_a_level_and_a_ratio_where_comlrl_ends_below_its_untrained_team() -> None:
    """Issue 44's seed 0: ours 0.630 -> 0.806 in 2.7 min, CoMLRL 0.630 -> 0.577 in 7.5 min. The old level (CoMLRL's
    final return) gave no ratio; L = 0.630 + (0.806 - 0.630) / 2 = 0.718, which ours passes and CoMLRL never does: the
    ratio is ours' time over CoMLRL's whole run, an upper bound."""
    ours = _points(0.630, 0.700, 0.760, 0.806, every=54.0)
    peer = _points(0.630, 0.600, 0.590, 0.577, every=150.0)
    level = time_to_reward.race_level(ours, peer)
    assert level == pytest.approx(0.718)
    race = time_to_reward.race_ratio(ours, peer, level)
    assert race["ours_wall_to_level_s"] == 108.0 and race["comlrl_wall_to_level_s"] is None
    assert race["ratio"] == pytest.approx(108.0 / 450.0) and race["ratio_bound"] == "upper"
    assert "CoMLRL never reached the level in its 7.5 min" in race["note"]
    figures = time_to_reward.compare({"ours": _result(ours, 54.0), "comlrl": _result(peer, 150.0)})
    assert figures["meets_target"] and figures["level"] == pytest.approx(0.718)
    assert time_to_reward.format_ratio(figures["ratio"], figures["ratio_bound"]) == "<0.24"


def test_the_race_ratio_when_ours_never_reaches_the_level_is_a_lower_bound_and_misses_the_target() -> None:
    # CoMLRL gains 0.4 (L = 0.3) and passes it at 120 s; ours ends at 0.25 after 60 s: ratio > 60 / 120.
    ours = _points(0.10, 0.20, 0.25, every=30.0)
    peer = _points(0.10, 0.20, 0.40, 0.50, every=60.0)
    level = time_to_reward.race_level(ours, peer)
    race = time_to_reward.race_ratio(ours, peer, level)
    assert level == pytest.approx(0.30) and race["ours_wall_to_level_s"] is None
    assert race["ratio"] == pytest.approx(0.5) and race["ratio_bound"] == "lower"
    assert not time_to_reward.meets_target(race["ratio"], race["ratio_bound"])  # 0.5 but only a lower bound
    assert time_to_reward.format_ratio(race["ratio"], race["ratio_bound"]) == ">0.50"


def test_the_level_is_never_reached_by_the_untrained_evaluation() -> None:
    # A tiny gain puts L just above the untrained return: the step-0 point must not count as reaching it.
    ours, peer = _points(0.5, 0.5, 0.5 + 1e-9), _points(0.5, 0.5, 0.5)
    level = time_to_reward.race_level(ours, peer)
    race = time_to_reward.race_ratio(ours, peer, level)
    assert race["ours_wall_to_level_s"] == 120.0 and race["ratio_bound"] == "upper"


def test_no_race_when_neither_trainer_beats_the_untrained_team() -> None:
    ours, peer = _points(0.2, 0.1, 0.2), _points(0.2, 0.3, 0.15)
    level = time_to_reward.race_level(ours, peer)
    race = time_to_reward.race_ratio(ours, peer, level)
    assert level == pytest.approx(0.2) and race["ratio"] is None and "nothing to race to" in race["note"]
    assert time_to_reward.format_ratio(None, None) == "n/a"


def test_the_race_refuses_bad_settings_before_loading_anything() -> None:
    for argv, message in ((["--steps", "0"], "--steps: expected an int >= 1"),
                          (["--group-size", "1"], "--group-size: expected >= 2"),
                          (["--eval-tasks", "100000"], "held-out tasks"),
                          (["--env", "chess"], "time_to_reward:")):
        with pytest.raises(SystemExit, match=message):
            time_to_reward.main(argv)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.beside_serial  # CPU-bound, on the writing env (the race's default): no sandbox
@pytest.mark.timeout(1200)
def test_a_tiny_race_runs_both_trainers_and_writes_its_figures_and_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "race.json", tmp_path / "race.png"
    status = time_to_reward.main(["--steps", "1", "--eval-every", "1", "--eval-tasks", "1", "--group-size", "2",
                                  "--max-new-tokens", "8", "--json", str(out), "--plot", str(png)])
    assert status == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    for name in ("ours", "comlrl"):
        result = report["results"][name]
        assert [p["step"] for p in result["points"]] == [0, 1] and len(result["steps"]) == 1
        assert result["steps"][0]["step_time"] > 0
    # The same untrained team plays the same held-out task greedily on both sides before training.
    assert report["results"]["ours"]["points"][0]["eval_return"] == pytest.approx(
        report["results"]["comlrl"]["points"][0]["eval_return"], abs=1e-6)
    assert {"level", "ratio", "time", "final"} <= set(report["comparison"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_race_summary_over_seeds() -> None:
    fast = {"comlrl": _result(_points(0.10, 0.20, 0.30), step_s=60.0),
            "ours": _result(_points(0.10, 0.35, 0.40), step_s=20.0)}
    slow = {"comlrl": _result(_points(0.10, 0.30, 0.30), step_s=60.0),
            "ours": _result(_points(0.10, 0.20, 0.30), step_s=30.0)}
    flat_peer = {"comlrl": _result(_points(0.630, 0.600, 0.577), step_s=60.0),
                 "ours": _result(_points(0.630, 0.700, 0.806, every=20.0), step_s=20.0)}
    comparisons = [time_to_reward.compare(run) for run in (fast, slow, flat_peer)]
    summary = time_to_reward.summarize(comparisons)
    assert summary["ratios"] == [c["ratio"] for c in comparisons] and None not in summary["ratios"]
    assert summary["ratio_bounds"] == [None, None, "upper"]
    assert summary["ratio_bounds_count"] == {"upper": 1, "lower": 0}
    assert summary["levels"] == pytest.approx([0.25, 0.20, 0.718])
    assert summary["ratio_min"] == min(summary["ratios"]) and summary["ratio_max"] == max(summary["ratios"])
    assert summary["ratio_mean"] == pytest.approx(sum(summary["ratios"]) / 3)
    assert summary["seeds_meeting_target"] == sum(c["meets_target"] for c in comparisons)
    assert summary["step_time_ratio"] == pytest.approx([20 / 60, 30 / 60, 20 / 60])
    assert summary["ours_at_equal_wall"] == [c["ours_at_equal_wall"] for c in comparisons]
    assert summary["comlrl_at_equal_wall"] == [c["comlrl_at_equal_wall"] for c in comparisons]
    assert summary["equal_wall_gap"] == [c["ours_at_equal_wall"] - c["comlrl_at_equal_wall"] for c in comparisons]
