"""The ``llm-marl`` front door: the top-level help says what exists, ``bench`` lists and runs the benchmarks, ``train``
writes a team directory that ``demo --adapters`` plays."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_marl_benchmarks import bench, cli
from llm_marl_benchmarks.train import cpu_native_dtype

ROOT = Path(__file__).resolve().parents[1]


def test_top_level_help_names_only_commands_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    commands = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) == {"demo", "sandbox", "bench", "train", "teams", "interop"}
    for command in commands:
        assert f"`{command}`" in text  # the description says what each one does
    assert "`bench study`" in text and "`bench report DIR`" in text


def test_bench_lists_every_benchmark_module(capsys: pytest.CaptureFixture[str]) -> None:
    found = bench.benchmarks()
    expected = {"env_overhead", "policy_throughput", "sandbox_throughput", "sandbox_hostile", "study", "report"}
    assert expected <= set(found) and not {"cli", "bench", "demo", "progress"} & set(found)
    assert all(summary for summary in found.values())
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    text = capsys.readouterr().out
    for name in found:
        assert f"  {name} " in text


def test_bench_runs_a_benchmarks_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "env_overhead", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: llm-marl bench env_overhead") and "--episodes" in text and "--json" in text
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "no_such_benchmark"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no_such_benchmark'" in capsys.readouterr().err


def test_bench_runs_a_benchmark_with_its_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "not-yet" / "hostile.json"  # a folder that does not exist: the shared writer makes it
    status = cli.main(["bench", "sandbox_hostile", "--backends", "local", "--only", "syntax_error", "infinite_loop",
                       "--timeout-s", "0.5", "--json", str(report)])
    assert status == 0
    assert report.read_text(encoding="utf-8").endswith("}\n")  # one trailing newline, like every --json
    rows = {row["program"]: row for row in json.loads(report.read_text())["rows"]}
    assert {name: row["status"] for name, row in rows.items()} == {"infinite_loop": "timeout", "syntax_error": "error"}
    assert all(row["acceptable"] and row["seconds"] > 0 for row in rows.values())
    assert "local    infinite_loop" in capsys.readouterr().out


def test_building_the_cli_imports_no_benchmark_and_no_torch() -> None:
    probe = (
        "import sys\n"
        "from llm_marl_benchmarks import cli\n"
        "cli.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m in ('torch', 'transformers') or m.startswith('benchmarks.')\n"
        "                and m.split('.')[1] in ('env_overhead', 'policy_throughput', 'sandbox_throughput'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _tiny_model_folder(folder: Path) -> Path:
    """The trainer tests' tiny random-weight model (vocabulary 320, 2 layers) saved as a model folder."""
    sys.path.insert(0, str(ROOT / "tests" / "baselines"))
    from baseline_helpers import tiny_model

    loaded = tiny_model(seed=0)
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_train_writes_a_team_that_demo_adapters_plays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model_folder(tmp_path / "tiny")
    config = tmp_path / "cfg.yaml"
    config.write_text("env_kwargs:\n  similarity: tfidf\n  max_turns: 1\nenvs_per_step: 1\n", encoding="utf-8")
    out = tmp_path / "team"
    status = cli.main(["train", "--config", str(config), "--env", "writing_v0", "--model", str(model), "--steps", "2",
                       "--num-generations", "2", "--max-completion-length", "6", "--report-to", "none",
                       "--output", str(out)])
    assert status == 0
    text = capsys.readouterr().out
    # The plan and a measured estimate first (no GPU here: the cpu profile, which keeps what the flags set).
    assert ("[train] one step: 1 tree(s) x 1 turn(s), 2 agent(s), 2 children per node: 3 nodes, 4 completions "
            "(generate calls of 4 rows), at most 24 completion tokens; G = 2 (aligned), 6 new tokens at most, "
            f"{cpu_native_dtype()} base on cpu") in text
    assert re.search(r"\[train\] estimated [\d.]+ s a step \(generation [\d.]+ s, update [\d.]+ s; measured in "
                     r"[\d.]+ s\): 2 step\(s\) take about [\d.]+ s", text)
    # Not a terminal: one plain line per step with the reward, zero-std groups, the step time and the ETA.
    assert "[train] step 1: reward " in text and "[train] step 2: reward " in text and "zero-std groups" in text
    assert "2/2 steps" in text and "ETA" in text
    assert f"play it: llm-marl demo --adapters {out}" in text
    assert not (out / "tensorboard").exists()  # --report-to none
    roles = list(json.loads((out / "team.json").read_text())["roles"])

    report = tmp_path / "demo.json"
    status = cli.main(["demo", "--adapters", str(out), "--episodes", "1", "--max-turns", "1", "--max-new-tokens", "6",
                       "--dtype", "float32", "--json", str(report)])
    assert status == 0
    played = json.loads(report.read_text())
    assert played["policy"] == "adapters"
    (episode,) = played["episodes"]  # the team's env only (not both), with the team's size
    assert episode["env"] == "writing" and episode["agents"] == roles and episode["turns"] == 1
    # A resume may change where the run stops and the micro-batch (memory), nothing that changes the update.
    refused = r"only \['micro_batch_size', 'steps'\] may change \(got \['learning_rate'\]\)"
    with pytest.raises(SystemExit, match=refused):
        cli.main(["train", "--resume", str(out), "--learning-rate", "0.1"])
    assert cli.main(["train", "--resume", str(out), "--steps", "3", "--micro-batch-size", "1", "--no-estimate"]) == 0
    assert json.loads((out / "config.json").read_text())["micro_batch_size"] == 1
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3


def test_demo_adapters_needs_a_team_directory(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"--adapters .*: no team\.json there, so it is not a team directory"):
        cli.main(["demo", "--adapters", str(tmp_path)])
    with pytest.raises(SystemExit, match="no such folder"):
        cli.main(["demo", "--adapters", str(tmp_path / "missing")])


def test_train_progress_shows_reward_zero_std_groups_step_time_and_eta() -> None:
    from llm_marl_benchmarks.train import StepProgress

    stream = io.StringIO()
    row = {"step": 3, "reward": 0.25, "reward_std": 0.1, "frac_reward_zero_std": 0.25, "loss": 0.5,
           "step_time": 1.5, "tokens_per_second": 10.0, "skipped": False}
    with StepProgress(5, initial=2, stream=stream, live=True) as progress:
        progress.on_step(row)
        progress.on_step({**row, "step": 4, "loss": float("nan"), "skipped": True})
    text = stream.getvalue()
    assert "4/5 steps" in text and "step 4" in text and "[train]" not in text  # a live bar, not plain lines
    plain = io.StringIO()
    with StepProgress(5, initial=2, stream=plain) as progress:  # not a terminal: one plain line per step
        progress.on_step(row)
        progress.on_step({**row, "step": 4, "skipped": True})
    first, second = plain.getvalue().splitlines()
    assert first.startswith("[train] step 3: reward 0.250 ± 0.100, zero-std groups 25%, loss 0.5000, 1.5 s · "
                            "3/5 steps, ")
    assert "ETA" in first and "skipped: non-finite loss" in second and "4/5 steps" in second
    # A resumed run's pace counts only the steps this process ran (from step 2 here), not the ones before it.
    from llm_marl_benchmarks.progress import Progress

    now = [0.0]
    resumed = Progress(10, "step", initial=4, stream=io.StringIO(), live=False, clock=lambda: now[0])
    now[0] = 60.0
    resumed.advance(1)
    assert resumed.eta_s() == pytest.approx(60.0 * 5)  # 60 s for its 1 step, 5 steps left




def test_a_missing_module_names_the_extra_that_brings_it_and_nothing_else_hides_a_traceback() -> None:
    # The extras come from the installed metadata (pyproject.toml): train brings model's torch.
    assert {"torch", "peft"} <= cli.extra_modules()["train"] and "rich" in cli.extra_modules()["cli"]
    line = cli.missing_extra_line(ModuleNotFoundError("No module named 'rich'", name="rich"), "demo")
    assert line == "needs the [cli] extra (rich is missing): pip install 'llm-marl-envs[cli]'"
    # A command's own extras where they bring the module; the smallest extra that does otherwise.
    torch = ModuleNotFoundError("No module named 'torch'", name="torch")
    assert "[study,train] extras" in cli.missing_extra_line(torch, "bench study")
    assert "[model] extra" in cli.missing_extra_line(torch, "bench policy_throughput")
    peer = cli.build_parser().parse_args(["interop", "torchrl", "--env", "writing"])
    assert "[torchrl] extra" in cli.missing_extra_line(torch, cli._command_name(peer))
    matplotlib = ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib.pyplot")
    assert "[study] extra" in cli.missing_extra_line(matplotlib, "teams")  # teams' own extra lacks it
    # No extra brings it: a bug, so main() lets the traceback through.
    assert cli.missing_extra_line(ModuleNotFoundError("no", name="no_such_module"), "demo") is None
    assert cli.missing_extra_line(ImportError("cannot import name 'x'"), "demo") is None
