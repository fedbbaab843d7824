"""Trained teams as users get them: a run's learning curve (with the untrained team's reference line), shipping the
team into the package (float16 adapters, metrics, curve, recipe), and the shipped teams loading by name."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_marl_baselines.policies.adapters import AdapterTeamPolicy, load_team_manifest
from llm_marl_baselines.teams import BUILTIN, builtin_team_dir, builtin_teams, ship_team
from llm_marl_benchmarks import cli
from llm_marl_benchmarks.teams import curve_figures, running_mean
from llm_marl_envs.registry import make_env
from llm_marl_trainers.config import TrainerConfig

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """A real 3-step MAGRPO run of the tiny model on the writing env (a team directory with metrics)."""
    out = tmp_path_factory.mktemp("teams") / "run"
    status = cli.main(["train", "--env", "writing", "--num-agents", "2", "--model", str(model_dir), "--steps", "3",
                       "--num-generations", "2", "--max-completion-length", "6", "--report-to", "none",
                       "--no-estimate", "--output", str(out), "--config", str(_yaml(out.parent))])
    assert status == 0
    return out


def _yaml(folder: Path) -> Path:
    path = folder / "cfg.yaml"
    path.write_text("env_kwargs: {similarity: tfidf, max_turns: 1, split: train}\ndtype: float32\n", encoding="utf-8")
    return path


def test_the_curve_reads_metrics_and_the_untrained_reference(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["teams", "untrained", str(run_dir), "--steps", "2"]) == 0
    untrained = [json.loads(line) for line in (run_dir / "untrained.jsonl").read_text().splitlines()]
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in untrained] == [1, 2]
    # Step 1 of the run sampled from the untrained team too, on the same task with the same sampling stream.
    assert untrained[0]["reward"] == pytest.approx(trained[0]["reward"])
    assert cli.main(["teams", "curve", str(run_dir), "--window", "2"]) == 0
    out = capsys.readouterr().out
    figures = curve_figures(run_dir, window=2)
    assert figures["steps"] == [1, 2, 3] and figures["untrained"]["steps"] == 2
    assert figures["untrained"]["mean"] == pytest.approx(sum(r["reward"] for r in untrained) / 2)
    assert figures["running_mean"][-1] == pytest.approx((trained[1]["reward"] + trained[2]["reward"]) / 2)
    assert f"vs the untrained team's {figures['untrained']['mean']:.3f}" in out
    png = run_dir / "curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_running_mean_by_hand() -> None:
    assert running_mean([1.0, 3.0, math.nan, 5.0], window=2) == [1.0, 2.0, 3.0, 5.0]


def test_a_curve_without_steps_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(SystemExit, match="no steps logged yet"):
        cli.main(["teams", "curve", str(tmp_path)])
    with pytest.raises(SystemExit, match="no such file"):
        cli.main(["teams", "curve", str(tmp_path / "missing")])


def test_shipping_writes_a_float16_team_that_loads_and_plays(run_dir: Path, tmp_path: Path) -> None:
    recipe = ROOT / "recipes" / "writing-2.yaml"
    target = ship_team(run_dir, tmp_path / "writing-2", recipe)
    manifest = load_team_manifest(target)
    assert manifest.env_name == "writing" and load_team_manifest(run_dir).env_kwargs["max_turns"] == 1
    assert manifest.env_kwargs == {"similarity": "tfidf"}  # where and how many turns to play: the caller's choice
    assert (target / "recipe.yaml").read_text() == recipe.read_text()
    assert (target / "metrics.jsonl").read_text() == (run_dir / "metrics.jsonl").read_text()
    for role, folder in manifest.roles.items():
        shipped = load_file(str(target / folder / "adapter_model.safetensors"))
        original = load_file(str(run_dir / folder / "adapter_model.safetensors"))
        assert shipped.keys() == original.keys() and all(t.dtype == torch.float16 for t in shipped.values())
        assert all(torch.allclose(shipped[k].float(), original[k], atol=1e-3, rtol=1e-3) for k in original), role
    policy = AdapterTeamPolicy(target, dtype="float32")
    assert policy.roles == list(make_env("writing", num_agents=2, similarity="tfidf").possible_agents)
    assert not (target / "warm_start.json").exists()  # this run started fresh
    # A warm-started run's record of what it began from travels with the team.
    warm_run = tmp_path / "warm-run"
    shutil.copytree(run_dir, warm_run)
    (warm_run / "warm_start.json").write_text('{"init_team": "builtin:writing-2"}', encoding="utf-8")
    assert json.loads((ship_team(warm_run, tmp_path / "warm-team") / "warm_start.json").read_text()) == {
        "init_team": "builtin:writing-2"}
    with pytest.raises(SystemExit, match=r"expected a team\.json manifest"):
        cli.main(["teams", "ship", str(tmp_path / "nothing"), "--to", str(tmp_path / "x")])


def test_the_shipped_teams_are_complete() -> None:
    teams = builtin_teams()
    assert {("writing", 2), ("coding", 2)} <= set(teams)
    for (env, size), folder in teams.items():
        manifest = load_team_manifest(folder)
        extra = {"executor": "local"} if env == "coding" else {}
        # A team plays the env it was trained for: its manifest's env arguments (a coding team's scheme among them).
        options = {**manifest.env_kwargs, "similarity": "tfidf", **extra}
        agents = make_env(env, num_agents=size, **options).possible_agents
        assert list(manifest.roles) == list(agents) and manifest.base_model == "SmolLM2-135M-Instruct"
        for name in ("metrics.jsonl", "untrained.jsonl", "curve.png", "recipe.yaml"):
            assert (folder / name).is_file(), f"{folder.name} lacks {name}"
        # A warm-started team says which team, and which weights, it began from.
        init_team = TrainerConfig.yaml_values(folder / "recipe.yaml").get("init_team")
        if init_team is not None:
            record = json.loads((folder / "warm_start.json").read_text(encoding="utf-8"))
            assert record["init_team"] == init_team and re.fullmatch(r"[0-9a-f]{16}", record["adapters_sha256"])
            assert set(record["warm"]) | set(record["fresh"]) == set(manifest.roles)
        for adapter in manifest.roles.values():
            weights = folder / adapter / "adapter_model.safetensors"
            assert all(t.dtype == torch.float16 for t in load_file(str(weights)).values())
            assert weights.stat().st_size < 2_000_000
        assert builtin_team_dir(f"{env}_v0", size) == folder
    with pytest.raises(ValueError, match=r"no shipped team for coding with 1 agents; shipped: .*coding with 2 agents"):
        builtin_team_dir("coding", 1)  # one agent is the single-agent baseline: no team ships for it
    with pytest.raises(ValueError, match="env: expected one of"):
        builtin_team_dir("chess", 2)
    assert BUILTIN == "builtin"


def test_teams_list_names_each_shipped_team_and_a_coding_teams_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["teams", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(builtin_teams())
    scheme = load_team_manifest(builtin_team_dir("coding", 2)).env_kwargs["scheme"]
    (coding,) = [line for line in lines if line.startswith("coding-2:")]
    assert f"(scheme {scheme})" in coding and str(builtin_team_dir("coding", 2)) in coding


@pytest.mark.parametrize("recipe", sorted((ROOT / "recipes").glob("*.yaml")), ids=lambda path: path.stem)
def test_every_recipe_is_a_valid_config_named_after_its_team(recipe: Path) -> None:
    """``recipes/<env>-<size>.yaml`` trains that team: the file validates as a trainer config (every option known, every
    value in range) and names the env and the team size of its file name; it trains at the study's sampling, either on
    the study's 4 turns (trees branching at one turn) or on the first turn alone (the coding recipes: one-turn trees,
    every completion a first reply). A recipe that warm-starts (``init_team``) names a shipped team whose roles
    include some of its agents (``warm_start_adapters`` raises otherwise)."""
    from llm_marl_envs.registry import make_env
    from llm_marl_trainers.config import TrainerConfig
    from llm_marl_trainers.magrpo import warm_start_adapters

    config = TrainerConfig.from_yaml(recipe)
    env, size = recipe.stem.rsplit("-", 1)
    assert (config.env, config.num_agents) == (env, int(size))
    assert (config.temperature, config.top_p) == (0.7, 0.95)
    assert (config.branching, config.env_kwargs["max_turns"]) in {("one_turn", 4), ("full", 1)}
    if config.init_team is not None:
        assert config.init_team.startswith("builtin:")
        agents = make_env(env, num_agents=int(size), **{**config.env_kwargs, "similarity": "tfidf"}).possible_agents
        warm = warm_start_adapters(config, agents)
        assert warm and all(folder.is_dir() for folder in warm.values())


@pytest.mark.model
@pytest.mark.slow
def test_load_team_gives_the_shipped_trained_team_ready_to_play() -> None:
    """``load_team(env, size)``: the shipped adapters on the default model, each role acting from its own
    observation; the adapters are trained (not their zero initialisation) and change what the model writes."""
    from peft.utils import get_peft_model_state_dict

    from llm_marl_baselines.policies import ActionRequest, GenerationSettings
    from llm_marl_baselines.teams import load_team

    policy = load_team("writing_v0", 2, dtype="float32", device="cpu")
    assert isinstance(policy, AdapterTeamPolicy) and policy.team_dir == builtin_team_dir("writing", 2)
    assert policy.roles == ["concise", "detailed"]
    for role in policy.roles:
        shipped = load_file(str(policy.team_dir / "adapters" / role / "adapter_model.safetensors"))
        loaded = get_peft_model_state_dict(policy.model, adapter_name=role)
        assert len(loaded) == len(shipped) == 2 * 2 * 30  # lora A and B on q_proj and v_proj of 30 layers
        for name, tensor in loaded.items():
            assert torch.equal(tensor.float(), shipped[name.replace(f".{role}.", ".")].float()), name
        assert any(float(t.abs().max()) > 0 for k, t in loaded.items() if "lora_B" in k)  # B starts at 0
    env = make_env("writing", num_agents=2, similarity="tfidf", max_turns=1)
    env.reset(seed=0, options={"split": "eval"})
    requests = [ActionRequest.from_messages(agent, env.chat_messages(agent)) for agent in env.agents]
    greedy = GenerationSettings(temperature=0.0, max_new_tokens=12)
    texts = policy.act(requests, greedy)
    assert len(texts) == 2 and all(text.strip() for text in texts)
    with policy.model.disable_adapter():
        untrained = policy.act(requests, greedy)
    assert texts != untrained
    env.step(dict(zip(env.agents, texts, strict=True)))
    assert env.state()["turn"] == 1


def test_the_untrained_team_on_every_step_pairs_the_last_window(run_dir: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With the untrained team replayed on all of the run's steps, the curve compares the last window with it step by
    step (the same tasks), not with the first steps' mean; with it on the first step only, it says how to get that."""
    assert cli.main(["teams", "untrained", str(run_dir), "--steps", "3"]) == 0
    untrained = [json.loads(line) for line in (run_dir / "untrained.jsonl").read_text().splitlines()]
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    paired = curve_figures(run_dir, window=2)["last_window_vs_untrained"]
    differences = [trained[i]["reward"] - untrained[i]["reward"] for i in (1, 2)]
    assert paired["steps"] == [2, 3] and paired["diff"] == pytest.approx(sum(differences) / 2)
    assert paired["ci"][0] <= paired["diff"] <= paired["ci"][1]
    assert cli.main(["teams", "curve", str(run_dir), "--window", "2"]) == 0
    assert f"on the same 2 steps, trained − untrained {paired['diff']:+.3f}" in capsys.readouterr().out
    assert cli.main(["teams", "untrained", str(run_dir), "--steps", "1"]) == 0
    assert curve_figures(run_dir, window=2)["last_window_vs_untrained"] is None
    assert cli.main(["teams", "curve", str(run_dir), "--window", "2"]) == 0
    assert f"`llm-marl teams untrained {run_dir} --steps 3` pairs them" in capsys.readouterr().out
