"""The study command end to end: the smoke preset, resume after SIGKILL, bad options, Ray scale-out."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from llm_marl_benchmarks.study.cli import build_parser, design_from_args, main

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ["--policy", "scripted", "--similarity", "tfidf", "--executor", "local"]


def logged(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def planned_keys(argv: list[str]) -> set[str]:
    design, _ = design_from_args(build_parser().parse_args(argv))
    return {episode.key for episode in design.plan()}


def test_smoke_preset_with_the_scripted_policy_runs_every_condition_and_reports(tmp_path, capsys):
    argv = ["--preset", "smoke", *SCRIPTED, "--out", str(tmp_path)]
    assert main([*argv, "--json", str(tmp_path / "run.json")]) == 0
    rows = logged(tmp_path)
    # A scripted policy has no weights: its rows, the run's JSON and the headline say no precision was recorded,
    # and, since it decodes nothing, that no stop applied (the default stop plays it as it is, unrefused).
    assert {(r["dtype"], r["device"], r["stop_at_reply_end"], r["role_budgets"]) for r in rows} == {
        (None, None, None, None)}
    figures = json.loads((tmp_path / "run.json").read_text())
    assert [(p["dtype"], p["device"], p["episodes"]) for p in figures["precision"]] == [(None, None, len(rows))]
    assert [(d["stop_at_reply_end"], d["episodes"]) for d in figures["decoding"]] == [(None, len(rows))]
    assert {r["key"] for r in rows} == planned_keys(argv)
    assert {r["condition"] for r in rows} == {"trained", "single", "untrained"}
    assert {r["env"] for r in rows} == {"writing", "coding"}
    single = [r for r in rows if r["condition"] == "single"]
    assert all(r["num_agents"] == 1 and r["consistency_similarity"] is None for r in single)
    teams = [r for r in rows if r["condition"] != "single"]
    assert all(r["consistency_similarity"] is not None and r["duplication"] is not None for r in teams)
    assert all(r["pass_rate"] is not None for r in rows if r["env"] == "coding")
    record = json.loads((tmp_path / "study.json").read_text())
    assert record["config_hash"] == rows[0]["config_hash"] and record["packages"]["llm-marl-envs"]
    assert (tmp_path / "report.md").is_file()
    out = capsys.readouterr().out
    assert "episodes/min" in out
    # One progress line per turn of every batch (2 turns of the smoke preset), not one per batch.
    turn_lines = [line for line in out.splitlines() if re.match(r"\[study\] (writing|coding): .* turn \d", line)]
    batches = {line.split(" turn ")[0] for line in turn_lines}
    assert len(turn_lines) == 2 * len(batches) and "ETA" in turn_lines[-1] and "turns played" in turn_lines[-1]
    assert "writing, team size 2" in out and "Against the seeds' figures" in out
    assert "Policies ran in: not recorded" in out and "Replies: stops not recorded" in out
    # Running the same command again finds everything done and runs nothing.
    assert main(argv) == 0
    assert len(logged(tmp_path)) == len(rows)
    assert "0 to run" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--conditions", "trained", "telepathy"], "condition"),
        (["--sizes", "2", "5"], "team size"),
        (["--adapters", "/nonexistent/team"], "team.json"),
        (["--episodes", "0"], "episodes"),
        (["--policy", "endpoint"], "base-url"),
        (["--train", "--adapters", "/x"], "not both"),
        (["--pairs", "2=x"], "--pairs: expected N or SIZE=N"),
        (["--sizes", "2", "3", "--pairs", "2=4", "3"], "SIZE=N for each size"),
        (["--sizes", "2", "--pairs", "3=4"], "cell_episodes: expected a count for each team size"),
        (["--batch-size", "0"], "--batch-size"),
    ],
)
def test_bad_options_are_one_clear_error_before_any_episode(tmp_path, capsys, argv, message):
    assert main([*argv, "--similarity", "tfidf", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_the_trained_condition_needs_teams_or_training(tmp_path, capsys):
    assert main(["--similarity", "tfidf", "--out", str(tmp_path)]) == 2
    assert "--adapters" in capsys.readouterr().err


def test_pairs_set_episodes_per_cell_by_team_size():
    design, _ = design_from_args(build_parser().parse_args(["--sizes", "2", "3", "--pairs", "2=5", "3=2"]))
    assert design.cell_episodes == {2: 5, 3: 2} and design.episodes == 2 * 3 * (5 + 2)
    design, _ = design_from_args(build_parser().parse_args(["--preset", "results", "--pairs", "3"]))
    assert design.cell_episodes == {2: 3, 3: 3, 4: 3}
    design, _ = design_from_args(build_parser().parse_args(["--preset", "results", "--episodes", "60"]))
    assert design.cell_episodes is None and design.episodes == 60
    # A preset's pairs per size, kept for the sizes asked; a size it sets none for asks for --pairs.
    design, _ = design_from_args(build_parser().parse_args(["--preset", "results", "--sizes", "2", "4"]))
    assert design.cell_episodes == {2: 40, 4: 24}
    with pytest.raises(ValueError, match=r"the main preset sets pairs for sizes \[2\], not \[3\]; give --pairs"):
        design_from_args(build_parser().parse_args(["--preset", "main", "--sizes", "3"]))


def test_decoding_switches_default_and_flags_each_change_the_config():
    """``--role-budgets`` is off unless asked; ``--stop-at-reply-end`` is on by default wherever replies are decoded
    here (None), asked for outright with the flag (True) and off with ``--no-stop-at-reply-end`` (False, as every
    run from before the default played; such a design hashes as those runs' did, without the key)."""
    from llm_marl_benchmarks.study.design import config_hash

    def parsed(*flags: str):
        return design_from_args(build_parser().parse_args(["--preset", "results", *flags]))[0]

    default, budgets = parsed(), parsed("--role-budgets")
    asked, off = parsed("--stop-at-reply-end"), parsed("--no-stop-at-reply-end")
    assert (default.role_budgets, budgets.role_budgets) == (False, True)
    assert (default.stop_at_reply_end, asked.stop_at_reply_end, off.stop_at_reply_end) == (None, True, False)
    assert "role_budgets" not in default.to_dict() and budgets.to_dict()["role_budgets"] is True
    assert default.to_dict()["stop_at_reply_end"] is None and "stop_at_reply_end" not in off.to_dict()
    assert len({config_hash(d.to_dict()) for d in (default, budgets, asked, off)}) == 4
    with pytest.raises(TypeError, match="role_budgets: expected True or False"):
        dataclasses.replace(default, role_budgets="yes")
    with pytest.raises(TypeError, match="stop_at_reply_end: expected True, False or None"):
        dataclasses.replace(default, stop_at_reply_end="yes")


def test_single_best_of_n_runs_from_the_command_line_in_coding_only(tmp_path, capsys):
    argv = ["--conditions", "single", "single_best_of_n", "--sizes", "2", "--pairs", "1", "--tasks", "1",
            "--max-turns", "1", *SCRIPTED, "--out", str(tmp_path)]
    assert main(argv) == 0
    rows = logged(tmp_path)
    assert sorted((r["env"], r["condition"]) for r in rows) == [
        ("coding", "single"), ("coding", "single_best_of_n"), ("writing", "single")]
    best = next(r for r in rows if r["condition"] == "single_best_of_n")
    assert best["candidates_per_turn"] == 2 and len(best["selections"]) == 1
    out = capsys.readouterr().out
    assert "note: single_best_of_n plays only ['coding']: its writing cells are left out" in out
    assert "| metric | single | single_best_of_n | single − single_best_of_n |" in out


def test_the_end_quorum_reaches_every_env_and_condition(tmp_path):
    design, _ = design_from_args(build_parser().parse_args(["--preset", "smoke", "--end-quorum", "half"]))
    assert all(design.env_kwargs_for(env, condition, 2)["end_quorum"] == "half"
               for env in design.envs for condition in design.conditions)
    default, _ = design_from_args(build_parser().parse_args(["--preset", "smoke"]))
    assert all("end_quorum" not in default.env_kwargs_for(env, "untrained", 2) for env in default.envs)
    # The setting is part of the recorded design (and so of the config hash that keys the logged episodes).
    argv = ["--preset", "smoke", *SCRIPTED, "--conditions", "untrained", "--envs", "writing", "--end-quorum", "any",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    record = json.loads((tmp_path / "study.json").read_text())
    assert record["design"]["env_kwargs"]["writing"]["end_quorum"] == "any"
    assert {r["condition"] for r in logged(tmp_path)} == {"untrained"}


def test_each_envs_own_ending_is_recorded_and_keys_the_log(tmp_path):
    """Left to the envs, each plays its own ending, and the record says which: a log played under another default
    ending (an older version's) is refused, not resumed."""
    from llm_marl_benchmarks.study.cli import env_endings

    default, _ = design_from_args(build_parser().parse_args(["--preset", "smoke"]))
    assert env_endings(default) == {"writing": "half", "coding": "half"}
    argv = ["--preset", "smoke", *SCRIPTED, "--conditions", "untrained", "--envs", "writing", "--out", str(tmp_path)]
    assert main(argv) == 0
    record = json.loads((tmp_path / "study.json").read_text())
    assert record["endings"] == {"writing": "half"} and "end_quorum" not in record["design"]["env_kwargs"].get(
        "writing", {})
    log = tmp_path / "episodes.jsonl"
    rows = log.read_text().splitlines()
    log.write_text("\n".join(line.replace(record["config_hash"], "0" * 16) for line in rows) + "\n")  # another ending
    assert main(argv) == 2


def test_a_log_played_under_other_words_is_refused_and_the_refusal_names_them(tmp_path, monkeypatch, capsys):
    """The texts the models read key the log: a study resumed after the baselines' rule words (or an env's prompts)
    changed is refused, and the refusal says which words changed, not only that a hash did."""
    from llm_marl_benchmarks.study.cli import prompt_digests
    from llm_marl_envs.core import prompts
    from llm_marl_envs.envs.coding.env import CodingEnv

    argv = ["--preset", "smoke", *SCRIPTED, "--conditions", "untrained", "--envs", "coding", "--out", str(tmp_path)]
    design, _ = design_from_args(build_parser().parse_args(argv))
    before = prompt_digests(design)
    assert set(before) == {"rules", "coding"} and before == prompt_digests(design)  # stable
    assert main(argv) == 0
    assert json.loads((tmp_path / "study.json").read_text())["prompts"] == before
    assert main(argv) == 0  # the same words resume (nothing left to run)
    capsys.readouterr()

    truer = {**prompts.SIGHTED_RULES, "prompt_collaboration": "Team rules (fixed): other words. {whose}{unseen}"}
    monkeypatch.setattr(prompts, "SIGHTED_RULES", truer)
    assert prompt_digests(design)["coding"] == before["coding"] and prompt_digests(design)["rules"] != before["rules"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "changed since" in err and "prompts.rules" in err and "prompts.coding" not in err

    monkeypatch.undo()
    monkeypatch.setattr(CodingEnv, "SYSTEM_PROMPT", "You write Python, in other words.")
    assert prompt_digests(design)["coding"] != before["coding"]  # an env's own prompt is read at reset
    assert main(argv) == 2
    assert "prompts.coding" in capsys.readouterr().err


def test_the_words_are_read_from_the_designs_split_of_a_dataset_that_has_no_other():
    """A task file may hold the eval split only (docs/tasks' external tasks): the words are rendered on its tasks."""
    from llm_marl_benchmarks.study.cli import prompt_digests

    external = ROOT / "docs" / "tasks" / "cooperative_coding_external.jsonl"
    argv = ["--preset", "results", "--envs", "coding", "--sizes", "2", "--dataset", f"coding={external}"]
    on_external = prompt_digests(design_from_args(build_parser().parse_args(argv))[0])
    on_humaneval = prompt_digests(design_from_args(build_parser().parse_args(argv[:-2]))[0])
    assert on_external["rules"] == on_humaneval["rules"] and on_external["coding"] != on_humaneval["coding"]


def test_a_size_with_no_shipped_team_plays_without_the_trained_condition(tmp_path, monkeypatch, capsys):
    """The shipped teams cover size 2 only: sizes 3 and 4 play every other condition, with a note, not a crash. (The
    scripted policy stands in for the model; the teams are resolved as for a real run.)"""
    import llm_marl_baselines.teams
    from llm_marl_benchmarks.study import cli

    two = {cell: folder for cell, folder in llm_marl_baselines.teams.builtin_teams().items() if cell[1] == 2}
    assert set(two) == {("writing", 2), ("coding", 2)}
    monkeypatch.setattr(llm_marl_baselines.teams, "builtin_teams", lambda: dict(two))  # as if only size 2 shipped
    shipped = sorted(two)
    monkeypatch.setattr(cli, "_team_fingerprint", lambda directory: {"dir": str(directory)})
    argv = ["--preset", "results", "--pairs", "1", "--tasks", "1", *SCRIPTED, "--no-report", "--out", str(tmp_path),
            "--env-option", f"coding.scheme={shipped_coding_scheme()}"]
    args = build_parser().parse_args(argv)
    design, training = design_from_args(args)
    teams, design = cli._team_sources(args, design, training, cli.PolicySpec(kind="local"), tmp_path)
    assert design.missing_teams == tuple(sorted((env, size) for env in ("writing", "coding") for size in (3, 4)))
    assert set(teams.given) == {("writing", 2), ("coding", 2)}
    plan = design.plan()
    assert not [e for e in plan if e.condition == "trained" and e.team_size > 2]
    assert {e.condition for e in plan if e.team_size == 4} == {"untrained", "single", "base", "single_oneshot",
                                                                "single_best_of_n"}
    # The whole command says so before it runs anything.
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "note: no trained team for coding with 3 agents, coding with 4 agents, writing with 3 agents" in out
    # Teams given by folder must cover every cell: a missing one is still an error.
    assert main(["--adapters", str(two[shipped[0]]), "--sizes", "2", "3",
                 "--similarity", "tfidf", "--out", str(tmp_path / "x")]) == 2
    assert "--adapters: no team for" in capsys.readouterr().err


def shipped_coding_scheme() -> str:
    """The scheme the shipped 2-agent coding team was trained under (its manifest's env arguments)."""
    from llm_marl_baselines.policies.adapters import load_team_manifest
    from llm_marl_baselines.teams import builtin_team_dir

    return load_team_manifest(builtin_team_dir("coding", 2)).env_kwargs["scheme"]


def test_a_team_trained_under_another_scheme_is_left_out_or_refused(tmp_path, capsys):
    """A coding team's roles are its scheme's: played in an env of another scheme it would fail mid-run, so the
    shipped one is left out of the trained condition with a note, and one given by folder is refused up front."""
    from llm_marl_baselines.teams import builtin_team_dir

    other = "magrpo" if shipped_coding_scheme() != "magrpo" else "propose_verify"
    argv = ["--preset", "main", "--envs", "coding", "--pairs", "1", "--tasks", "1", *SCRIPTED, "--no-report",
            "--env-option", f"coding.scheme={other}", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"note: the shipped team in {builtin_team_dir('coding', 2)} plays roles" in out
    assert f"--env-option coding.scheme={shipped_coding_scheme()}" in out
    assert "trained" not in {r["condition"] for r in logged(tmp_path)}
    local = [a for a in argv[:-1] if a not in ("--policy", "scripted")]  # refused before any model loads
    assert main([*local, str(tmp_path / "x"), "--adapters", str(builtin_team_dir("coding", 2))]) == 2
    assert "--adapters: team in" in capsys.readouterr().err


def _study_process(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llm_marl_benchmarks.study", *argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigkill_at_several_points_then_resume_runs_exactly_the_plan(tmp_path):
    argv = ["--preset", "smoke", *SCRIPTED, "--episodes", "48", "--tasks", "4", "--batch-size", "1",
            "--no-report", "--out", str(tmp_path)]
    plan = planned_keys(argv)
    kills = 0
    for threshold in (1, 9, 25):
        process = _study_process(argv)
        while len(logged(tmp_path)) < threshold and process.poll() is None:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += process.returncode == -signal.SIGKILL
        assert len(logged(tmp_path)) < len(plan), "the run finished before it could be killed"
    assert kills == 3
    # A kill can also land mid-write: leave a torn row behind as well.
    with (tmp_path / "episodes.jsonl").open("a") as handle:
        handle.write('{"key": "torn')
    process = _study_process(argv)
    assert process.wait(timeout=300) == 0, process.stderr.read()
    keys = Counter(row["key"] for row in logged(tmp_path))
    assert set(keys) == plan and set(keys.values()) == {1}
    assert all(line.endswith("}") for line in (tmp_path / "episodes.jsonl").read_text().splitlines())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_ray_scale_out_against_a_local_ray_instance_logs_and_resumes_the_same_way(tmp_path):
    pytest.importorskip("ray")
    ray = str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    # A home of its own: Ray keeps state under ~/.ray, and a token left there by an earlier Ray session on this
    # machine made the driver's connection to this keyless cluster fail (InvalidAuthToken).
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HOME": str(home)}
    started = subprocess.run([ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                              "--disable-usage-stats"], capture_output=True, text=True, env=env, timeout=180)
    assert started.returncode == 0, started.stderr
    try:
        argv = ["--preset", "smoke", *SCRIPTED, "--episodes", "24", "--tasks", "4", "--batch-size", "2",
                "--no-report", "--out", str(tmp_path)]
        # Half the plan locally, killed; the rest on the cluster: one log, nothing twice.
        process = _study_process(argv)
        while len(logged(tmp_path)) < 6 and process.poll() is None:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait()
        local = {row["key"] for row in logged(tmp_path)}
        command = [sys.executable, "-m", "llm_marl_benchmarks.study", *argv, "--ray-address", f"127.0.0.1:{port}"]
        done = subprocess.run(command,
                              cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        rows = logged(tmp_path)
        keys = Counter(row["key"] for row in rows)
        assert set(keys) == planned_keys(argv) and set(keys.values()) == {1}
        ray_rows = [row for row in rows if row["key"] not in local]
        assert ray_rows, "the cluster ran nothing"
        # Ray ran them in its worker processes, not in the driver.
        driver_pids = {row["worker"] for row in rows if row["key"] in local}
        assert not {row["worker"] for row in ray_rows} & driver_pids
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env, timeout=120)


@pytest.mark.model
@pytest.mark.slow
# Writing only, so no sandbox and no Docker: it runs next to the serial phase, on the core that phase leaves idle
# (about 90 s there, which the 2-core parallel phase no longer carries).
@pytest.mark.beside_serial
@pytest.mark.timeout(1800)  # ~1.5 min on 2 idle cores; a shared machine can take several times that
def test_smoke_preset_with_the_default_model_trains_evaluates_and_reports(tmp_path, capsys):
    """The smoke preset's path with the default model: train a 2-agent team briefly, evaluate the three conditions,
    report. On writing only: the study trains and plays every env through the same code, the scripted smoke test above
    runs both envs through it, and the main-preset test below plays coding with the default model in the sandbox
    (both envs here took 5 to 6 min of one core, the suite's longest test). One pair a condition: the preset's 12
    episodes took 100 of this test's 170 s (prefilling the writing tasks' long prompts) and ran no other code. 12 new
    tokens a reply instead of the preset's 32 (the training step keeps its 24), and one turn (training's trees too):
    multi-turn play runs in the main-preset test below, multi-turn trees in the trainer's tests."""
    argv = ["--preset", "smoke", "--envs", "writing", "--pairs", "1", "--tasks", "1", "--max-new-tokens", "12",
            "--max-turns", "1", "--similarity", "tfidf", "--out", str(tmp_path)]
    assert main(argv) == 0
    rows = logged(tmp_path)
    assert {r["key"] for r in rows} == planned_keys(argv) and {r["env"] for r in rows} == {"writing"}
    team = tmp_path / "teams" / "writing-2"
    assert (team / "team.json").is_file() and len(list((team / "adapters").iterdir())) == 2
    assert len((team / "metrics.jsonl").read_text().splitlines()) == 1  # the preset's one training step
    trained = [r for r in rows if r["condition"] == "trained"]
    assert trained and all(r["texts"] and r["num_agents"] == 2 for r in trained)
    assert all(any(text.strip() for text in r["texts"].values()) for r in rows)  # the model wrote something
    out = capsys.readouterr().out
    # The headline: trained vs untrained vs single, each pair a difference with its CI and p.
    assert "writing, team size 2" in out and (tmp_path / "report.md").is_file()
    assert "| metric | trained | untrained | single | trained − untrained | trained − single |" in out


@pytest.mark.model
@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_main_preset_plays_the_shipped_teams_against_every_condition(tmp_path, capsys):
    """The main job's path, shortened: the shipped teams (``--adapters builtin`` by default) against the untrained
    team, one agent and the adapters-off team, paired, with a numeric headline (no ``n/a`` cells). 12 new tokens a
    reply: the path, not the replies, is under test (53 s alone on 2 cores against 65 s with 24)."""
    from llm_marl_baselines.teams import builtin_team_dir

    argv = ["--preset", "main", "--conditions", "trained", "untrained", "single", "base", "--pairs", "1", "--tasks",
            "1", "--max-new-tokens", "12", "--max-turns", "2", "--similarity", "tfidf", "--out", str(tmp_path),
            "--env-option", f"coding.scheme={shipped_coding_scheme()}"]
    assert main(argv) == 0
    rows = logged(tmp_path)
    assert {r["key"] for r in rows} == planned_keys(argv)
    assert {r["condition"] for r in rows} == {"trained", "untrained", "single", "base"}
    # The model's replies carry token ids: every episode has its latency in tokens.
    assert all(0 < r["critical_path_tokens"] <= r["completion_tokens"] <= 12 * 2 * r["turns"] for r in rows)
    record = json.loads((tmp_path / "study.json").read_text())
    for env in ("writing", "coding"):
        team = record["teams"][f"{env}-2"]
        shipped = json.loads((builtin_team_dir(env, 2) / "team.json").read_text())
        assert team["manifest"] == shipped and len(team["adapters_sha256"]) == 16
    trained = {r["env"]: r for r in rows if r["condition"] == "trained"}
    base = {r["env"]: r for r in rows if r["condition"] == "base"}
    assert set(trained) == set(base) == {"writing", "coding"}
    for env in trained:  # the same task and seed, and the same roles writing
        assert (trained[env]["task"], trained[env]["seed"]) == (base[env]["task"], base[env]["seed"])
        assert set(trained[env]["texts"]) == set(base[env]["texts"]) and trained[env]["num_agents"] == 2
    out = capsys.readouterr().out
    assert "writing, team size 2 (episodes: trained 1, untrained 1, single 1):" in out
    team_return = [line for line in out.splitlines() if line.startswith("| team return |")]
    assert len(team_return) == 2 and not any("n/a" in line for line in team_return)
    # Each batch keeps its prompts: a second turn reads only what its observations added to the first's.
    prompts = re.search(r"\[study\] prompts: ([\d,]+) tokens, ([\d,]+) of them read by the model", out)
    assert prompts is not None and 0 < int(prompts[2].replace(",", "")) < int(prompts[1].replace(",", ""))


def test_training_reuses_a_shipped_recipe_only_for_the_roles_it_trained(tmp_path):
    """``--train`` starts from the shipped team's recipe, but a coding recipe of another scheme than the study's
    would train roles the study cannot play: then the plan's own settings train the team."""
    from llm_marl_baselines.teams import builtin_team_dir
    from llm_marl_benchmarks.study import cli

    shipped = shipped_coding_scheme()
    other = "magrpo" if shipped != "magrpo" else "propose_verify"
    configs = {}
    for scheme in (shipped, other):
        args = build_parser().parse_args(["--preset", "full", "--envs", "coding", "--sizes", "2", "--train",
                                          "--similarity", "tfidf", "--env-option", f"coding.scheme={scheme}"])
        design, training = design_from_args(args)
        configs[scheme] = cli.training_config(("coding", 2), design, training, cli.PolicySpec(kind="local"), tmp_path)
        assert configs[scheme].env_kwargs["scheme"] == scheme
    from llm_marl_trainers.config import TrainerConfig

    recipe = TrainerConfig.yaml_values(builtin_team_dir("coding", 2) / "recipe.yaml")
    assert (configs[shipped].steps, configs[shipped].envs_per_step) == (recipe["steps"], recipe["envs_per_step"])
    assert (configs[other].steps, configs[other].envs_per_step) == (training.steps, training.envs_per_step)
    assert (recipe["steps"], recipe["envs_per_step"]) != (training.steps, training.envs_per_step)  # tells them apart
