"""The MAGRPO trainer end to end on a tiny random-weight model: samples and advantages from the tree, an update moves
log-probabilities the right way, checkpoints resume exactly, bad configs fail before anything loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline_helpers import tiny_model
from letter_env import LetterEnv

from benchmarks import cli
from llm_marl_envs.rollout import AgentStep, TreeNode
from trainers import checkpoint
from trainers.config import TrainerConfig
from trainers.generation import LoraSettings, TeamModel
from trainers.magrpo import MAGRPOTrainer, tree_samples

AGENTS = ["writer_0", "writer_1"]


def _config(tmp_path: Path, **changes) -> TrainerConfig:
    base = dict(env="writing", num_agents=2, num_generations=4, max_completion_length=10, steps=4, seed=0,
                output_dir=str(tmp_path / "run"), save_steps=2, learning_rate=2e-2, envs_per_step=2)
    return TrainerConfig(**{**base, **changes})


def _trainer(config: TrainerConfig, model_dir: Path | None = None) -> MAGRPOTrainer:
    team = None
    if model_dir is None:
        team = TeamModel(tiny_model(seed=0), AGENTS, lora=LoraSettings(r=4, alpha=8), seed=config.seed)
    return MAGRPOTrainer(config, team=team, env_factory=LetterEnv)


def _step(agent: str, text: str) -> AgentStep:
    return AgentStep(agent, 1, (), text, 0.0, {}, True, False, generation=text)


def test_tree_samples_pair_each_agents_samples_with_their_returns() -> None:
    config = TrainerConfig(env="writing", num_generations=2, joint_mode="cross", scale_rewards="none")
    root = TreeNode(0, 0)
    for i, j, reward in ((0, 0, 1.0), (0, 1, 3.0), (1, 0, 5.0), (1, 1, 7.0)):
        root.children.append(TreeNode(0, 1, (_step("a", f"a{i}"), _step("b", f"b{j}")), reward, True, (i, j)))
    samples, groups = tree_samples(root, ["a", "b"], config)
    by_text = {s.generation: s.advantage for s in samples}
    # a's sample 0 is in joint actions with returns 1 and 3 (mean 2), sample 1 in 5 and 7 (mean 6): A = -2, +2.
    assert by_text == {"a0": -2.0, "a1": 2.0, "b0": -1.0, "b1": 1.0}
    assert [g.tolist() for g in groups] == [[2.0, 6.0], [3.0, 5.0]]


def test_an_update_raises_positive_advantage_completions_against_negative_ones(tmp_path: Path) -> None:
    trainer = _trainer(_config(tmp_path, steps=1, envs_per_step=1, num_generations=8))
    from llm_marl_envs.rollout import rollout_tree

    with torch.no_grad():
        roots = rollout_tree(trainer.envs, trainer.team.as_rollout_policy(trainer.generation), group_size=8, seeds=[0])
    samples, _ = tree_samples(roots[0], trainer.agents, trainer.config)
    advantages = torch.tensor([s.advantage for s in samples])
    assert (advantages > 0).any() and (advantages < 0).any()

    def sequence_logps() -> torch.Tensor:
        with torch.no_grad():
            out = trainer.team.forward_logprobs([s.generation for s in samples], [s.agent for s in samples])
        return (out.per_token_logps * out.completion_mask).sum(1)

    before = sequence_logps()
    assert torch.allclose(before, torch.tensor([sum(s.generation.logprobs) for s in samples]), atol=1e-4)
    trainer.envs = [_FixedTree(roots[0])]  # the step trains on exactly these samples
    trainer.training_step()
    change = sequence_logps() - before
    assert change[advantages > 0].mean() > change[advantages < 0].mean() + 0.05


class _FixedTree:
    """Stands in for an env in one training step: the fixture below makes ``rollout_tree`` return its tree, so the
    step trains on samples the test has already scored."""

    def __init__(self, root: TreeNode) -> None:
        self.root = root


@pytest.fixture(autouse=True)
def _fixed_tree_rollouts(monkeypatch: pytest.MonkeyPatch) -> None:
    import trainers.magrpo as magrpo

    real = magrpo.rollout_tree

    def rollout(envs, *args, **kwargs):
        if envs and isinstance(envs[0], _FixedTree):
            return [env.root for env in envs]
        return real(envs, *args, **kwargs)

    monkeypatch.setattr(magrpo, "rollout_tree", rollout)


def test_resume_repeats_the_uninterrupted_run(tmp_path: Path) -> None:
    model_dir = tmp_path / "tiny"
    loaded = tiny_model(seed=0)
    loaded.model.save_pretrained(model_dir)
    loaded.tokenizer.save_pretrained(model_dir)
    straight = MAGRPOTrainer(_config(tmp_path / "a", model=str(model_dir)), env_factory=LetterEnv)
    straight.train()
    interrupted = MAGRPOTrainer(_config(tmp_path / "b", model=str(model_dir), steps=2), env_factory=LetterEnv)
    interrupted.train()
    resumed = checkpoint.resume(tmp_path / "b" / "run", env_factory=LetterEnv, steps=4)
    assert resumed.step == 2
    resumed.train()

    def rows(run: Path) -> list[tuple]:
        lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        return [(r["step"], r["loss"], r["reward"]) for r in map(json.loads, lines)]

    expected = rows(tmp_path / "a" / "run")
    assert [r[0] for r in expected] == [1, 2, 3, 4] and any(r[1] != 0 for r in expected)
    assert rows(tmp_path / "b" / "run") == expected
    assert sorted(p.name for p in (tmp_path / "a" / "run").glob("checkpoint-*")) == ["checkpoint-000002",
                                                                                     "checkpoint-000004"]
    adapters = tmp_path / "a" / "run" / "adapters"
    assert sorted(p.name for p in adapters.iterdir()) == AGENTS
    assert (adapters / "writer_0" / "adapter_config.json").is_file()


def test_bad_configs_fail_before_anything_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"env: expected one of \('writing', 'coding'\), got 'chess'"):
        TrainerConfig(env="chess")
    with pytest.raises(ValueError, match=r"num_agents: expected 1\.\.4, got 5"):
        TrainerConfig(num_agents=5)
    with pytest.raises(ValueError, match="num_generations: expected >= 2"):
        TrainerConfig(num_generations=1)
    with pytest.raises(ValueError, match="no model folder at"):
        TrainerConfig(model=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"unknown options \['lr'\]"):
        TrainerConfig.from_mapping({"lr": 0.1})
    with pytest.raises(ValueError, match="num_iterations > 1 needs an importance ratio"):
        TrainerConfig(num_iterations=2)
    yaml_file = tmp_path / "cfg.yaml"
    yaml_file.write_text("env: coding_v0\nnum_agents: 2\nlearning_rat: 0.1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"unknown options \['learning_rat'\]"):
        cli.main(["train", "--config", str(yaml_file), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    yaml_file.write_text("env: coding_v0\nnum_agents: 3\nseed: 7\n", encoding="utf-8")
    args = cli.build_parser().parse_args(["train", "--config", str(yaml_file), "--steps", "9"])
    from trainers.cli import build_config

    config = build_config(args)
    assert (config.env, config.num_agents, config.seed, config.steps) == ("coding", 3, 7, 9)
