"""The MAGRPO trainer end to end on a tiny random-weight model (the advantages' formulas: ``test_advantages.py``): an
update moves log-probabilities the right way, per-agent advantages run on per-agent rewards, a run learns, checkpoints
resume exactly, TensorBoard and W&B receive the metrics, non-finite losses are skipped and stop the run, the output is
a team directory the baselines load, bad configs fail before anything loads."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline_helpers import tiny_model
from letter_env import LetterEnv

from llm_marl_baselines.decoding import token_texts
from llm_marl_benchmarks import cli
from llm_marl_envs.rollout import TreeNode
from llm_marl_trainers.advantages import batch_samples
from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.generation import LoraSettings, TeamModel
from llm_marl_trainers.magrpo import MAGRPOTrainer, NonFiniteLossError

AGENTS = ["writer_0", "writer_1"]
pytestmark = pytest.mark.usefixtures("one_thread")


def _config(tmp_path: Path, **changes) -> TrainerConfig:
    base = dict(env="writing", num_agents=2, num_generations=4, max_completion_length=10, steps=4, seed=0,
                output_dir=str(tmp_path / "run"), save_steps=2, learning_rate=2e-2, envs_per_step=2)
    return TrainerConfig(**{**base, **changes})


def _adapter_state(trainer: MAGRPOTrainer) -> dict[str, list[torch.Tensor]]:
    return {agent: [p.detach().clone() for p in trainer.team.adapter_parameters(agent)] for agent in trainer.agents}


def _same(a: dict[str, list[torch.Tensor]], b: dict[str, list[torch.Tensor]]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(x, y) for k in a for x, y in zip(a[k], b[k], strict=True))


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard's own reader finds in ``folder``: tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def _trainer(config: TrainerConfig, model_dir: Path | None = None) -> MAGRPOTrainer:
    team = None
    if model_dir is None:
        team = TeamModel(tiny_model(seed=0), AGENTS, lora=LoraSettings(r=4, alpha=8), seed=config.seed)
    return MAGRPOTrainer(config, team=team, env_factory=LetterEnv)


def test_an_update_raises_positive_advantage_completions_against_negative_ones(tmp_path: Path) -> None:
    trainer = _trainer(_config(tmp_path, steps=1, envs_per_step=1, num_generations=8))
    from llm_marl_envs.rollout import rollout_tree

    with torch.no_grad():
        roots = rollout_tree(trainer.envs, trainer.team.as_rollout_policy(trainer.generation), group_size=8, seeds=[0])
    samples, _ = batch_samples(roots, trainer.agents, trainer.config)
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
    import llm_marl_trainers.magrpo as magrpo

    real = magrpo.rollout_tree

    def rollout(envs, *args, **kwargs):
        if envs and isinstance(envs[0], _FixedTree):
            return [env.root for env in envs]
        return real(envs, *args, **kwargs)

    monkeypatch.setattr(magrpo, "rollout_tree", rollout)


def test_resume_repeats_the_uninterrupted_run(tmp_path: Path, model_dir: Path) -> None:
    straight = MAGRPOTrainer(_config(tmp_path / "a", model=str(model_dir)), env_factory=LetterEnv)
    straight.train()
    interrupted = MAGRPOTrainer(_config(tmp_path / "b", model=str(model_dir), steps=2), env_factory=LetterEnv)
    interrupted.train()
    shutil.move(tmp_path / "b" / "run", tmp_path / "b" / "moved")  # a run folder goes on where it now lies
    resumed = MAGRPOTrainer.resume(tmp_path / "b" / "moved", env_factory=LetterEnv, steps=4)
    assert resumed.step == 2
    resumed.train()
    assert not (tmp_path / "b" / "run").exists()
    shutil.move(tmp_path / "b" / "moved", tmp_path / "b" / "run")

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
    # TensorBoard got every row under TRL's names (its own reader finds them), the resumed run's included.
    for run in ("a", "b"):
        scalars = _scalars(tmp_path / run / "run" / "tensorboard")
        for name in ("reward", "reward_std", "frac_reward_zero_std", "step_time", "entropy", "loss",
                     "tokens_per_second", "episode/quality"):
            assert [step for step, _ in scalars[f"train/{name}"]] == [1, 2, 3, 4], name
        assert [v for _, v in scalars["train/reward"]] == pytest.approx([r[2] for r in expected])
    # A custom env (not the registry's): no team.json, since no manifest could name the env.
    assert not (tmp_path / "a" / "run" / "team.json").exists()


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
    with pytest.raises(ValueError, match=r"dtype: expected one of \('auto', 'float32', 'bfloat16'\), got 'fp8'"):
        TrainerConfig(dtype="fp8")
    with pytest.raises(ValueError, match="early_termination_threshold: expected None or a finite number"):
        TrainerConfig(early_termination_threshold=float("inf"))
    with pytest.raises(TypeError, match="graph_compile: expected true or false"):
        TrainerConfig(graph_compile="inductor")
    with pytest.raises(ValueError, match="graph_compile: true compiles the graph decoder's step"):
        TrainerConfig(graph_compile=True, graph_decode=False)
    with pytest.raises(TypeError, match="stop_at_reply_end: expected true or false"):
        TrainerConfig(stop_at_reply_end="yes")
    with pytest.raises(ValueError, match="min_completion_length 8 fixes their lengths"):
        TrainerConfig(stop_at_reply_end=True, min_completion_length=8)
    yaml_file = tmp_path / "cfg.yaml"
    yaml_file.write_text("env: coding_v0\nnum_agents: 2\nlearning_rat: 0.1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"unknown options \['learning_rat'\]"):
        cli.main(["train", "--config", str(yaml_file), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    yaml_file.write_text("env: coding_v0\nnum_agents: 3\nseed: 7\n", encoding="utf-8")
    args = cli.build_parser().parse_args(["train", "--config", str(yaml_file), "--steps", "9"])
    from llm_marl_benchmarks.train import build_config, cpu_native_dtype

    config = build_config(args)
    assert (config.env, config.num_agents, config.seed, config.steps) == ("coding", 3, 7, 9)
    # The cpu profile fills only what neither the YAML nor the flags set; --profile full keeps the defaults.
    yaml_file.write_text("env: coding_v0\nnum_generations: 5\nenv_kwargs: {max_turns: 3}\n", encoding="utf-8")
    cpu = build_config(cli.build_parser().parse_args(["train", "--config", str(yaml_file), "--profile", "cpu"]))
    assert (cpu.num_generations, cpu.env_kwargs["max_turns"]) == (5, 3)
    # The base in what this CPU computes natively (bf16 emulated is ~50x slower than float32), the coding roles' budget.
    assert (cpu.dtype, cpu.max_completion_length) == (cpu_native_dtype(), 160)
    assert cpu_native_dtype() in ("bfloat16", "float32")
    full = build_config(cli.build_parser().parse_args(["train", "--config", str(yaml_file), "--profile", "full"]))
    assert (full.dtype, full.max_completion_length, full.env_kwargs) == ("auto", 128, {"max_turns": 3})


def test_per_agent_runs_on_per_agent_rewards_and_refuses_a_joint_reward(tmp_path: Path) -> None:
    import functools

    config = _config(tmp_path, steps=1, envs_per_step=1, advantage="per_agent", report_to="none")
    team = TeamModel(tiny_model(seed=0), AGENTS, lora=LoraSettings(r=4, alpha=8), seed=0)
    trainer = MAGRPOTrainer(config, team=team, env_factory=functools.partial(LetterEnv, per_agent=True))
    before = _adapter_state(trainer)
    (row,) = trainer.train()
    assert not row["skipped"] and row["frac_reward_zero_std"] < 1
    assert not _same(before, _adapter_state(trainer))
    joint = MAGRPOTrainer(config.replace(output_dir=str(tmp_path / "joint")), team=team, env_factory=LetterEnv)
    with pytest.raises(ValueError, match=r"paid every agent the same reward .* Use advantage='joint'"):
        joint.training_step()
    with pytest.raises(ValueError, match="per_agent' compares an agent with its teammates; it needs num_agents >= 2"):
        TrainerConfig(env="writing", num_agents=1, advantage="per_agent")


def test_grpo_with_a_kl_reference_and_two_passes(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=1, envs_per_step=1, loss_type="grpo", beta=0.04, num_iterations=2,
                     report_to="none")
    trainer = _trainer(config)
    before = _adapter_state(trainer)
    (row,) = trainer.train()
    # The second pass runs after one update: the adapters differ from the base, which is the KL reference.
    assert not row["skipped"] and row["kl"] > 0 and math.isfinite(row["loss"])
    assert 0 <= row["clip_ratio/region_mean"] <= 1 and row["entropy"] > 0
    assert not _same(before, _adapter_state(trainer))


def test_non_finite_losses_are_skipped_then_stop_the_run_with_a_resumable_checkpoint(
    tmp_path: Path, model_dir: Path
) -> None:
    import functools

    # Episodes reset with seed >= 2 pay NaN: steps 3, 4, 5 (seeds 2, 3, 4 with envs_per_step=1) get a NaN loss.
    broken = functools.partial(LetterEnv, nonfinite_from_seed=2)
    config = _config(tmp_path, model=str(model_dir), steps=10, envs_per_step=1, save_steps=2, max_bad_steps=3)
    trainer = MAGRPOTrainer(config, env_factory=broken)
    states = {0: _adapter_state(trainer)}
    with pytest.raises(NonFiniteLossError, match=r"3 steps in a row had a non-finite loss.*checkpoint-000004"):
        trainer.train(on_step=lambda row: states.__setitem__(row["step"], _adapter_state(trainer)))
    run = tmp_path / "run"
    rows = _rows(run)
    assert [(r["step"], r["skipped"]) for r in rows] == [(1, False), (2, False), (3, True), (4, True), (5, True)]
    assert all(math.isnan(r["loss"]) for r in rows[2:]) and not math.isnan(rows[1]["loss"])
    assert not _same(states[1], states[2])  # good steps update the adapters ...
    assert _same(states[2], states[3]) and _same(states[2], states[5])  # ... skipped ones leave them as they were
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-000002", "checkpoint-000004"]
    # The last checkpoint loads (adapters as after step 2) and, with the reward fixed, the run goes on.
    resumed = MAGRPOTrainer.resume(run, env_factory=LetterEnv, steps=6)
    assert (resumed.step, resumed.bad_steps) == (4, 2) and _same(_adapter_state(resumed), states[2])
    more = resumed.train()
    assert [(r["step"], r["skipped"]) for r in more] == [(5, False), (6, False)]
    assert [r["step"] for r in _rows(run)] == [1, 2, 3, 4, 5, 6]
    # TensorBoard shows step 5 once, as the resumed run logged it (the stopped run's events after the checkpoint
    # are purged), and the skipped steps as 1.
    skipped = _scalars(run / "tensorboard")["train/skipped"]
    assert skipped == [(1, 0.0), (2, 0.0), (3, 1.0), (4, 1.0), (5, 0.0), (6, 0.0)]


@pytest.mark.slow
def test_a_run_learns_to_raise_its_reward(tmp_path: Path) -> None:
    """A tiny random model paid for vowels: the last steps' mean reward beats the first steps' by more than three
    standard errors of the difference (from the run's own step-to-step spread), within a few dozen seeded steps."""
    import functools

    config = _config(tmp_path, steps=60, envs_per_step=2, num_generations=8, max_completion_length=16,
                     learning_rate=5e-2, save_steps=60, report_to="none")
    team = TeamModel(tiny_model(seed=0), AGENTS, lora=LoraSettings(r=4, alpha=8), seed=0)
    trainer = MAGRPOTrainer(config, team=team, env_factory=functools.partial(LetterEnv, letters="aeiou"))
    rewards = [row["reward"] for row in trainer.train()]
    first, last = rewards[:10], rewards[-10:]
    gain = statistics.mean(last) - statistics.mean(first)
    standard_error = math.sqrt(statistics.variance(first) / 10 + statistics.variance(last) / 10)
    assert gain > 3 * standard_error, (gain, standard_error, rewards)


def test_wandb_offline_receives_the_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = _config(tmp_path, steps=1, envs_per_step=1, report_to=["wandb"], run_name="letters")
    _trainer(config).train()
    run = tmp_path / "run"
    run_id = (run / "wandb-run-id").read_text().strip()
    (record,) = run.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb")
    data = record.read_bytes()
    assert b"train/reward" in data and b"train/frac_reward_zero_std" in data and b"letters" in data
    assert not (run / "tensorboard").exists()  # report_to named W&B only


def test_the_output_folder_is_a_team_directory_the_baselines_play(tmp_path: Path, model_dir: Path) -> None:
    from peft import get_peft_model_state_dict

    from llm_marl_baselines.policies import GenerationSettings
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy, load_team_manifest
    from llm_marl_envs.registry import make_env
    from llm_marl_envs.rollout import run_episodes

    env_kwargs = {"similarity": "tfidf", "max_turns": 1}
    config = _config(tmp_path, model=str(model_dir), env_kwargs=env_kwargs, steps=2, envs_per_step=1,
                     num_generations=2, max_completion_length=6, save_steps=1, report_to="none")
    trainer = MAGRPOTrainer(config)
    trainer.train()
    run = tmp_path / "run"
    manifest = load_team_manifest(run)
    assert (manifest.env, manifest.env_name, manifest.num_agents) == ("writing_v0", "writing", 2)
    assert manifest.base_model == str(model_dir.resolve()) and manifest.env_kwargs == env_kwargs
    assert manifest.roles == {agent: f"adapters/{agent}" for agent in trainer.agents}
    assert manifest.generation == GenerationSettings(temperature=1.0, top_p=1.0, max_new_tokens=6, seed=0)
    assert load_team_manifest(run / "checkpoint-000002").roles == manifest.roles  # a checkpoint is a team too
    policy = AdapterTeamPolicy(run, dtype="float32", device="cpu")
    for agent in trainer.agents:  # each role's adapter is the trained one, to the bit
        loaded = get_peft_model_state_dict(policy.model, adapter_name=agent)
        trained = get_peft_model_state_dict(trainer.team.model_of(agent), adapter_name=agent)
        assert loaded.keys() == trained.keys() and all(torch.equal(loaded[k], trained[k]) for k in loaded)
    # The team plays its env: each agent acts on its own observation (the env's chat for that agent).
    env = make_env(manifest.env_name, num_agents=manifest.num_agents, **manifest.env_kwargs)
    (episode,) = run_episodes([env], policy.as_rollout_policy(GenerationSettings(max_new_tokens=4)), seeds=[3])
    fresh = make_env(manifest.env_name, num_agents=manifest.num_agents, **manifest.env_kwargs)
    fresh.reset(seed=3)
    assert sorted(step.agent for step in episode.steps) == sorted(trainer.agents)
    for step in episode.steps:
        assert [dict(m) for m in step.messages] == fresh.chat_messages(step.agent)


@pytest.mark.parametrize("loss_type", ["magrpo", "grpo", "dr_grpo", "dapo"])
def test_micro_batches_give_the_whole_batchs_update(tmp_path: Path, loss_type: str) -> None:
    """One step with one completion per forward/backward equals the step with all 16 at once (same samples), for
    every loss: the micro-batch losses are weighted so their gradients add up to the whole batch's."""
    extra = {"beta": 0.1} if loss_type != "magrpo" else {}
    results = []
    for size in (1, 16):
        config = _config(tmp_path / str(size), steps=1, envs_per_step=1, num_generations=8, loss_type=loss_type,
                         micro_batch_size=size, report_to="none", **extra)
        trainer = _trainer(config)
        from llm_marl_envs.rollout import rollout_tree

        with torch.no_grad():
            roots = rollout_tree(trainer.envs, trainer.team.as_rollout_policy(trainer.generation), group_size=8,
                                 seeds=[3])
        trainer.envs = [_FixedTree(roots[0])]
        before = _adapter_state(trainer)
        row = trainer.training_step()
        results.append((row, before, _adapter_state(trainer)))
    (row_1, before_1, after_1), (row_16, before_16, after_16) = results
    assert _same(before_1, before_16)  # same start, and the same sampled completions (same seed, same model)
    assert row_1["completions"] == row_16["completions"] == 16
    # Batches of 1 and of 16 padded rows run the model's products in other blockings, so each log-probability differs
    # by float32 rounding; the loss sums them with advantages of both signs, and the cancellation leaves that rounding
    # larger relative to the result (seen in CI: 0.1421752 vs 0.1421766, 1.0e-5 relative). A wrong micro-batch
    # weighting moves the loss by a factor, far outside 1e-5.
    assert row_1["loss"] == pytest.approx(row_16["loss"], rel=1e-5, abs=1e-5)
    moved = [not torch.equal(x, y) for k in after_16 for x, y in zip(after_16[k], before_16[k], strict=True)]
    assert any(moved)
    # AdamW's first step moves each weight by about lr · g / (|g| + eps), which magnifies float rounding in the summed
    # gradient where |g| is near eps (seen: 1.8e-5 on one weight of a step of 2e-2), hence 1e-4; the loss above is
    # what checks the micro-batch weighting.
    for agent in after_1:
        for x, y in zip(after_1[agent], after_16[agent], strict=True):
            assert torch.allclose(x, y, atol=1e-4, rtol=0)


def test_gradient_checkpointing_changes_memory_not_the_update(tmp_path: Path) -> None:
    """Recomputing activations in the backward pass gives the same step as keeping them."""
    after = []
    for checkpointing in (False, True):
        # Both read every row whole: checkpointing turns the shared-prefix update off (one routing per recompute),
        # and this compares checkpointing alone (the shared path's equivalence has its own test).
        config = _config(tmp_path / str(checkpointing), steps=1, envs_per_step=1, num_generations=4,
                         gradient_checkpointing=checkpointing, micro_batch_size=2, report_to="none",
                         share_prefix=False)
        trainer = _trainer(config)
        assert trainer.team._groups[0].model.is_gradient_checkpointing is checkpointing
        before = _adapter_state(trainer)
        trainer.training_step()
        after.append(_adapter_state(trainer))
        assert not _same(before, after[-1])
    for agent in after[0]:
        for x, y in zip(after[0][agent], after[1][agent], strict=True):
            assert torch.allclose(x, y, atol=1e-6, rtol=1e-4)


def test_reading_each_prompt_once_gives_the_same_step(tmp_path: Path) -> None:
    """``share_prefix`` on and off: the same samples (same seed), rewards, loss and adapters after the step, and the
    row says how many prompt tokens were read per completion and per distinct prompt."""
    results = []
    for shared in (True, False):
        config = _config(tmp_path / str(shared), steps=1, envs_per_step=2, num_generations=4, micro_batch_size=4,
                         share_prefix=shared, report_to="none")
        trainer = _trainer(config)
        assert trainer.team.share_prefix is shared
        before = _adapter_state(trainer)
        row = trainer.training_step()
        results.append((row, before, _adapter_state(trainer)))
    (shared_row, shared_before, shared_after), (row, before, after) = results
    assert _same(shared_before, before)
    for key in ("reward", "completion_tokens", "prompt_tokens", "distinct_prompt_tokens"):
        assert shared_row[key] == row[key]
    assert shared_row["loss"] == pytest.approx(row["loss"], rel=1e-5, abs=1e-7)
    # Each prompt is sampled G = 4 times at its node (and identical prompts of sibling nodes count once).
    assert shared_row["prompt_tokens"] >= 4 * shared_row["distinct_prompt_tokens"] > 0
    assert not _same(before, after)
    # The gradients agree to float rounding (tests/trainers/test_generation.py); AdamW's first step moves each weight
    # by about lr · g / (|g| + eps), which magnifies rounding where |g| is near eps, hence 1e-4 here (lr is 2e-2).
    for agent in after:
        for x, y in zip(shared_after[agent], after[agent], strict=True):
            assert torch.allclose(x, y, atol=1e-4, rtol=0)


class _EndingLetterEnv(LetterEnv):
    """LetterEnv whose first writer's reply ends after six characters (as a coder's ends where its code block closes);
    the second writer's reply has no end (as a writer's draft)."""

    def suggested_reply_end(self, agent: str) -> str | None:
        return r"(?s)^.{6}" if agent == AGENTS[0] else None


def test_stop_at_reply_end_trains_on_the_replies_cut_where_their_env_ends_them(tmp_path: Path) -> None:
    """``stop_at_reply_end``: the role with an end is sampled up to its first match and trained on that much (the
    same tokens as without the option, cut; recorded as stopped); the role without one exactly as without it."""
    samples, rows = {}, {}
    for stop in (False, True):
        config = _config(tmp_path / str(stop), steps=1, envs_per_step=1, max_completion_length=16,
                         stop_at_reply_end=stop, report_to="none")
        team = TeamModel(tiny_model(seed=0), AGENTS, lora=LoraSettings(r=4, alpha=8), seed=config.seed)
        trainer = MAGRPOTrainer(config, team=team, env_factory=_EndingLetterEnv)
        assert trainer.reply_ends == ({AGENTS[0]: r"(?s)^.{6}"} if stop else None)
        samples[stop], _ = batch_samples(trainer._grow_trees(0), trainer.agents, config)
        rows[stop] = trainer.training_step()  # the same trees again (step 0's seeds), now trained on
    texts = token_texts(tiny_model(seed=0).tokenizer)
    cut = 0
    for free, mine in zip(samples[False], samples[True], strict=True):
        assert free.agent == mine.agent
        ids, full = mine.generation.completion_ids, free.generation.completion_ids
        if mine.agent == AGENTS[1]:
            assert (ids, mine.generation.finish_reason) == (full, free.generation.finish_reason)
            continue
        assert ids == full[:len(ids)]
        if len(ids) < len(full):
            cut += 1
            written = "".join(texts(t) for t in ids)
            assert mine.generation.finish_reason == "stop"
            assert len(written) >= 6 > len(written) - len(texts(ids[-1]))
    assert cut, "no reply ran past its end"
    assert rows[True]["completion_tokens"] < rows[False]["completion_tokens"]
    assert rows[True]["completions"] == rows[False]["completions"]


def test_the_graph_decoder_gives_the_eager_steps(tmp_path: Path) -> None:
    """``graph_decode`` on (uncaptured on a CPU) and off: two steps give the same samples, rewards and loss, so the
    decoder sees the adapters the first step updated."""
    rows = []
    for graphs in (True, False):
        config = _config(tmp_path / str(graphs), steps=2, envs_per_step=2, num_generations=4, micro_batch_size=4,
                         graph_decode=graphs, report_to="none")
        trainer = _trainer(config)
        rows.append([trainer.training_step() for _ in range(2)])
    for graph_row, eager_row in zip(*rows, strict=True):
        for key in ("reward", "completion_tokens", "prompt_tokens"):
            assert graph_row[key] == eager_row[key]
        assert graph_row["loss"] == pytest.approx(eager_row["loss"], rel=1e-4, abs=1e-6)
    assert rows[0][0]["reward"] != rows[0][1]["reward"] or rows[0][0]["loss"] != rows[0][1]["loss"]


def test_one_turn_branching_trains_only_the_branching_turns_samples(tmp_path: Path) -> None:
    """``branching: one_turn`` on the 3-turn writing env: tree i branches at turn 1 + i, so the step trains on
    trees × agents × G samples (the single rollouts around the branches are not trained on) and its row's episodes
    are the G branches' ends."""
    config = TrainerConfig(env="writing", num_agents=2, env_kwargs={"max_turns": 3, "similarity": "tfidf"},
                           num_generations=3, envs_per_step=3, max_completion_length=8, steps=1, seed=0,
                           branching="one_turn", output_dir=str(tmp_path / "run"), report_to="none")
    team = TeamModel(tiny_model(seed=0), ["concise", "detailed"], lora=LoraSettings(r=4, alpha=8), seed=0)
    trainer = MAGRPOTrainer(config, team=team)
    roots = trainer._grow_trees(0)
    for i, root in enumerate(roots):
        widths = [len(node.children) for node in root.nodes() if node.children]
        branching_turns = {node.depth + 1 for node in root.nodes() if len(node.children) == 3}
        assert branching_turns <= {1 + i} and (widths[0] == 3) is (i == 0)
    samples, _ = batch_samples(roots, trainer.agents, config)
    branched = sum(1 for root in roots for node in root.nodes() if len(node.children) == 3)
    assert len(samples) == branched * 2 * 3 > 0
    row = trainer.training_step()
    assert row["completions"] == len(samples)
    with pytest.raises(ValueError, match="branching"):
        TrainerConfig(env="writing", branching="some")


def test_a_bfloat16_base_trains_float32_adapters(tmp_path: Path, model_dir: Path) -> None:
    """``dtype: bfloat16`` (``auto`` on a GPU): the base loads in bf16, the adapters and their updates stay fp32."""
    from llm_marl_trainers.magrpo import base_dtype

    assert base_dtype("auto", "cpu") == "float32" and base_dtype("bfloat16", "cpu") == "bfloat16"
    trainer = MAGRPOTrainer(_config(tmp_path, model=str(model_dir), dtype="bfloat16", steps=2), env_factory=LetterEnv)
    assert trainer.team.model_of(AGENTS[0]).dtype == torch.bfloat16
    before = _adapter_state(trainer)
    rows = trainer.train()
    assert all(math.isfinite(r["loss"]) and not r["skipped"] for r in rows)
    after = _adapter_state(trainer)
    for agent in AGENTS:
        assert {p.dtype for p in after[agent]} == {torch.float32}
        assert any(not torch.equal(a, b) for a, b in zip(before[agent], after[agent], strict=True))


def test_a_heterogeneous_team_trains_one_base_per_agent_from_the_config(
    tmp_path: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``model: {agent: folder}``: each agent on its own base (agents naming one model share it); no team.json, since
    a team directory names one base; the run resumes with the same bases; a mapping of other agents is refused."""
    other = tmp_path_factory.mktemp("tiny-other")
    loaded = tiny_model(seed=1)
    loaded.model.save_pretrained(other)
    loaded.tokenizer.save_pretrained(other)
    models = {AGENTS[0]: str(model_dir), AGENTS[1]: str(other)}
    trainer = MAGRPOTrainer(_config(tmp_path, model=models, steps=2, save_steps=1), env_factory=LetterEnv)
    assert trainer.team.heterogeneous and trainer.team.model_of(AGENTS[0]) is not trainer.team.model_of(AGENTS[1])
    first, second = (trainer.team.model_of(a).get_base_model() for a in AGENTS)
    assert not torch.equal(first.model.embed_tokens.weight, second.model.embed_tokens.weight)
    rows = trainer.train()
    assert [r["step"] for r in rows] == [1, 2] and not (tmp_path / "run" / "team.json").exists()
    resumed = MAGRPOTrainer.resume(tmp_path / "run", env_factory=LetterEnv, steps=3)
    assert resumed.team.heterogeneous and resumed.step == 2
    assert [r["step"] for r in resumed.train()] == [3]

    shared = MAGRPOTrainer(_config(tmp_path / "shared", model={a: str(model_dir) for a in AGENTS}, steps=1),
                           env_factory=LetterEnv)
    assert not shared.team.heterogeneous and shared.base_model == str(model_dir.resolve())
    with pytest.raises(ValueError, match=r"the mapping names agents \['someone'\] but the env's agents are"):
        MAGRPOTrainer(_config(tmp_path / "bad", model={"someone": str(model_dir)}), env_factory=LetterEnv)
    with pytest.raises(ValueError, match=r"model\['writer_1'\]: no model folder at"):
        TrainerConfig(model={AGENTS[0]: "default", AGENTS[1]: str(tmp_path / "missing")})


def test_a_warm_start_begins_from_the_named_roles_and_the_rest_fresh(tmp_path: Path, model_dir: Path) -> None:
    """``init_team``: an agent whose name is a role of the given team starts from that role's adapter, to the bit;
    the others start as a fresh run's do; a resume reads the checkpoint, not the team; a team that names no agent,
    has another base or another LoRA shape is refused before training."""
    from llm_marl_baselines.policies.adapters import adapters_digest, save_team
    from llm_marl_trainers.magrpo import warm_start_adapters

    first = MAGRPOTrainer(_config(tmp_path / "first", model=str(model_dir), steps=2), env_factory=LetterEnv)
    first.train()
    team_dir = tmp_path / "team"  # a one-role team: writer_0 of the first run
    save_team(team_dir, first.team.model_of(AGENTS[0]), env="writing_v0", roles=[AGENTS[0]],
              base_model=str(model_dir.resolve()))
    trained = _adapter_state(first)

    config = _config(tmp_path / "warm", model=str(model_dir), steps=1, seed=1, init_team=str(team_dir))
    warm = MAGRPOTrainer(config, env_factory=LetterEnv)
    fresh = MAGRPOTrainer(config.replace(init_team=None, output_dir=str(tmp_path / "fresh")), env_factory=LetterEnv)
    assert warm.warm_started == {AGENTS[0]: team_dir / "adapters" / AGENTS[0]} and fresh.warm_started == {}
    start, fresh_start = _adapter_state(warm), _adapter_state(fresh)
    assert all(torch.equal(a, b) for a, b in zip(start[AGENTS[0]], trained[AGENTS[0]], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(start[AGENTS[0]], fresh_start[AGENTS[0]], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(start[AGENTS[1]], fresh_start[AGENTS[1]], strict=True))
    warm.train()
    # The run records what it began from: the team as named, where that resolved, and its weights' digest.
    record = json.loads((tmp_path / "warm" / "run" / "warm_start.json").read_text(encoding="utf-8"))
    assert record == {"init_team": str(team_dir), "team_dir": str(team_dir.resolve()),
                      "adapters_sha256": adapters_digest(team_dir),
                      "warm": {AGENTS[0]: str((team_dir / "adapters" / AGENTS[0]).resolve())}, "fresh": [AGENTS[1]]}
    assert fresh.warm_start_record is None  # a fresh run records no warm start, so writes no file
    resumed = MAGRPOTrainer.resume(tmp_path / "warm" / "run", env_factory=LetterEnv, steps=2)
    assert resumed.warm_started == {} and _same(_adapter_state(resumed), _adapter_state(warm))
    resumed.train()  # a resume keeps the first start's record
    assert json.loads((tmp_path / "warm" / "run" / "warm_start.json").read_text(encoding="utf-8")) == record

    nobody = tmp_path / "nobody"
    save_team(nobody, first.team.model_of(AGENTS[0]), env="writing_v0", roles=["critic"],
              adapter_names={"critic": AGENTS[0]}, base_model=str(model_dir.resolve()))
    with pytest.raises(ValueError, match=r"roles \['critic'\] and this run's agents are .* no agent would start"):
        MAGRPOTrainer(config.replace(init_team=str(nobody)), env_factory=LetterEnv)
    with pytest.raises(ValueError, match="a warm start needs the same base model"):
        MAGRPOTrainer(config.replace(model="default"), env_factory=LetterEnv)
    with pytest.raises(ValueError, match=r"r is 8, but 'writer_0'.s adapter has 4: a warm start needs the same LoRA"):
        MAGRPOTrainer(config.replace(lora_r=4), env_factory=LetterEnv)
    with pytest.raises(ValueError, match="no team directory at"):
        MAGRPOTrainer(config.replace(init_team=str(tmp_path / "missing")), env_factory=LetterEnv)
    with pytest.raises(ValueError, match=r"init_team 'builtin:coding-5': no shipped team for coding with 5 agents; "
                                         r"shipped: .*coding with 2"):
        warm_start_adapters(config.replace(init_team="builtin:coding-5"), AGENTS)
    with pytest.raises(ValueError, match=r"init_team 'builtin:coding': expected a shipped team's name, "
                                         r"'<env>-<size>' \(e\.g\. 'coding-2'\), got 'coding'"):
        warm_start_adapters(config.replace(init_team="builtin:coding"), AGENTS)
    with pytest.raises(TypeError, match="init_team: expected null, a team directory"):
        TrainerConfig(init_team=7)
    # The shipped coding-2's coders warm-start a team of 3; its tester starts fresh.
    shipped = TrainerConfig(env="coding", num_agents=3, init_team="builtin:coding-2")
    assert sorted(warm_start_adapters(shipped, ["coder_1", "coder_2", "tester"])) == ["coder_1", "coder_2"]
