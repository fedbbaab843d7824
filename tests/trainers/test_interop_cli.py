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
    # CoMLRL reaches its final 0.30 at 180 s; ours passes 0.30 at its second evaluation, 40 s of training.
    results = {"comlrl": _result(_points(0.10, 0.20, 0.25, 0.30), step_s=60.0),
               "ours": _result(_points(0.10, 0.28, 0.31, 0.40, every=20.0), step_s=20.0)}
    figures = time_to_reward.compare(results)
    assert figures["level"] == 0.30 and figures["comlrl_wall_to_level_s"] == 180.0
    assert figures["ours_wall_to_level_s"] == 40.0 and figures["ours_step_at_level"] == 10
    assert figures["ratio"] == pytest.approx(40 / 180) and figures["meets_target"]
    assert figures["equal_wall_s"] == 60.0  # the shorter run's last evaluation
    assert figures["ours_at_equal_wall"] == 0.40 and figures["comlrl_at_equal_wall"] == 0.20
    assert figures["untrained"] == {"ours": 0.10, "comlrl": 0.10}
    assert figures["time"]["ours"]["generation_s"] == 30.0 and figures["time"]["ours"]["update_s"] == 30.0
    # A peer that never beat its untrained team gives no time to reach its level, hence no ratio.
    flat = {"comlrl": _result(_points(0.2, 0.1, 0.2), step_s=60.0), "ours": _result(_points(0.2, 0.3), step_s=20.0)}
    figures = time_to_reward.compare(flat)
    assert figures["comlrl_wall_to_level_s"] == 0.0 and figures["ratio"] is None and not figures["meets_target"]
    assert "no ratio" in figures["note"]


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
    comparisons = [time_to_reward.compare(fast), time_to_reward.compare(slow)]
    summary = time_to_reward.summarize(comparisons)
    assert summary["ratios"] == [c["ratio"] for c in comparisons]
    assert summary["ratio_min"] == min(summary["ratios"]) and summary["ratio_max"] == max(summary["ratios"])
    assert summary["ratio_mean"] == pytest.approx(sum(summary["ratios"]) / 2)
    assert summary["seeds_meeting_target"] == sum(r <= 0.5 for r in summary["ratios"])
    assert summary["step_time_ratio"] == pytest.approx([20 / 60, 30 / 60])
    assert summary["equal_wall_gap"] == [c["ours_at_equal_wall"] - c["comlrl_at_equal_wall"] for c in comparisons]
