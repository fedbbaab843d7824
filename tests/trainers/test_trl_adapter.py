"""TRL's GRPOTrainer on the suite's envs (llm_marl_trainers.trl_adapter): the prompt dataset replays each row's episode,
the rollout trains on exactly what the env was stepped with and pays the env's return, teams share one model with each
role on its own observation, multi-turn chats mask the env's tokens, and bad input fails with one clear error."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))  # the shared tiny tokenizer
from baseline_helpers import tiny_tokenizer

from llm_marl_envs.registry import make_env
from llm_marl_trainers.trl_adapter import (
    SEED_COLUMN,
    EnvRollout,
    RolloutBatch,
    build_dataset,
    check_dataset,
    env_reward,
    grpo_trainer,
)


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """``(value, start, end)`` of each run of equal values in ``mask``."""
    runs, start = [], 0
    for index in range(1, len(mask) + 1):
        if index == len(mask) or mask[index] != mask[start]:
            runs.append((mask[start], start, index))
            start = index
    return runs


def _logged(trainer: Any, key: str) -> list[float]:
    return [entry[key] for entry in trainer.state.log_history if key in entry and "train_runtime" not in entry]


# ------------------------------------------------------------------------------------------------ dataset (fast)
def test_each_row_is_its_agents_own_chat_after_reset_with_its_seed(short_tasks: str) -> None:
    kwargs = dict(similarity="tfidf", dataset=short_tasks)
    dataset = build_dataset("writing", seeds=[3, 8, 11], num_agents=2, **kwargs)
    assert dataset.column_names == ["prompt", "seed", "agent", "task_id"]
    assert dataset[SEED_COLUMN] == [3, 3, 8, 8, 11, 11]
    env = make_env("writing", num_agents=2, **kwargs)
    assert dataset["agent"] == env.possible_agents * 3
    for row in dataset:
        env.reset(seed=row["seed"])
        assert row["prompt"] == env.chat_messages(row["agent"])
        assert row["task_id"] == env.state()["task"]["task_id"]
    # Each role sees its own observation: the two roles' prompts of one seed differ, each names its own role.
    concise, detailed = dataset[0]["prompt"], dataset[1]["prompt"]
    assert concise != detailed
    assert "You are concise" in concise[-1]["content"] and "You are concise" not in detailed[-1]["content"]


def test_a_count_of_seeds_means_seeds_zero_to_n_on_the_default_writing_and_coding_envs() -> None:
    writing = build_dataset("writing", 3, similarity="tfidf")
    coding = build_dataset("coding", 2, similarity="tfidf", executor="local")
    assert writing["seed"] == [0, 1, 2] and writing["agent"] == ["solo"] * 3
    assert coding["seed"] == [0, 1] and all(task.startswith("HumanEval/") for task in coding["task_id"])
    env = make_env("coding", num_agents=1, similarity="tfidf", executor="local")
    env.reset(seed=1)
    assert coding[1]["prompt"] == env.chat_messages("solo")


def test_bad_input_fails_with_one_clear_error(tmp_path: Path, short_tasks: str) -> None:
    from datasets import Dataset
    from trl import GRPOConfig

    with pytest.raises(ValueError, match="expected one of"):
        build_dataset("chess", 2)
    with pytest.raises(ValueError, match=r"num_agents: expected 1\.\.4, got 5"):
        EnvRollout("writing", num_agents=5, similarity="tfidf")
    with pytest.raises(ValueError, match="num_agents"):
        build_dataset("writing", 2, num_agents=0, similarity="tfidf")
    with pytest.raises(ValueError, match="similarity"):
        EnvRollout("writing", similarity="cosine-of-vibes")
    for seeds, message in ((0, "positive count"), ([1, 1], "distinct"), ([2, -1], "non-negative"), ([], "non-empty")):
        with pytest.raises(ValueError, match=message):
            build_dataset("writing", seeds, similarity="tfidf")
    with pytest.raises(TypeError, match="bool"):
        build_dataset("writing", True, similarity="tfidf")
    no_seed = Dataset.from_dict({"prompt": [[{"role": "user", "content": "hi"}]]})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['seed'\]"):
        check_dataset(no_seed)
    with pytest.raises(TypeError, match=r"map-style datasets\.Dataset"):
        check_dataset([{"prompt": "hi", "seed": 0}])
    with pytest.raises(ValueError, match="no 'env_reward' field"):
        env_reward(prompts=["p"], completions=["c"])
    # grpo_trainer checks the dataset before it loads any model.
    with pytest.raises(ValueError, match=r"missing column\(s\) \['seed'\]"):
        grpo_trainer("writing", train_dataset=no_seed, similarity="tfidf", dataset=short_tasks)
    with pytest.raises(ValueError, match="not both"):
        grpo_trainer("writing", train_dataset=no_seed, seeds=3, similarity="tfidf")
    vllm = GRPOConfig(output_dir=str(tmp_path / "vllm"), use_vllm=True, bf16=False, use_cpu=True, report_to=[])
    with pytest.raises(ValueError, match="use_vllm=False"):
        grpo_trainer("writing", args=vllm, seeds=2, similarity="tfidf", dataset=short_tasks)


# ------------------------------------------------------------------------- a real TRL trainer, tiny random model
def _tiny_model() -> Any:
    """A random 2-layer Llama with the tiny ChatML tokenizer (fp32, CPU); room for the env's long prompts."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_marl_baselines.models import LoadedModel

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return LoadedModel(model=model, tokenizer=tokenizer, source="tiny", dtype="float32", device="cpu")


def _tiny_args(tmp_path: Path, **changes: Any) -> Any:
    from trl import GRPOConfig

    values = dict(output_dir=str(tmp_path / "tiny"), bf16=False, use_cpu=True, max_steps=2,
                  per_device_train_batch_size=4, num_generations=2, max_completion_length=8, report_to=[],
                  logging_steps=1, save_strategy="no", gradient_checkpointing=False, learning_rate=1e-2, seed=0)
    return GRPOConfig(**{**values, **changes})


def test_a_team_shares_one_model_and_multi_turn_samples_mask_the_envs_tokens(tmp_path: Path, short_tasks: str,
                                                                              one_thread: None) -> None:
    batches: list[RolloutBatch] = []
    trainer = grpo_trainer("writing", 2, model=_tiny_model(), args=_tiny_args(tmp_path), seeds=4,
                           on_rollout=batches.append, similarity="tfidf", dataset=short_tasks, max_turns=2)
    rows: dict[str, set[tuple[int, str]]] = {}  # two tasks for four seeds: seeds that drew one task share a prompt
    for row in trainer.train_dataset:
        rows.setdefault(json.dumps(row["prompt"]), set()).add((row["seed"], row["agent"]))
    tokenizer = trainer.processing_class
    trainer.train()

    assert len(batches) == 2
    for batch in batches:
        out = batch.output
        for i, (prompt, agent, trajectory) in enumerate(
                zip(batch.prompts, batch.agents, batch.trajectories, strict=True)):
            # The sample is the row's role, in an episode replayed from a seed of the row's prompt, credited with the
            # team return.
            assert (batch.seeds[i], agent) in rows[json.dumps(prompt)]
            assert (batch.seeds[i], agent) == (trajectory.seed, out["env_agent"][i])
            assert out["env_reward"][i] == trajectory.team_return
            steps = trajectory.agent_steps(agent)
            assert len(steps) == 2 and list(steps[0].messages) == prompt  # its own turn-1 chat, nothing else
            ids, mask, logprobs = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
            assert len(ids) == len(mask) == len(logprobs)
            runs = _runs(mask)
            assert [value for value, _, _ in runs] == [1, 0, 1]  # turn 1, the env's observation, turn 2
            model_runs = [ids[start:end] for value, start, end in runs if value == 1]
            assert [tokenizer.decode(run, skip_special_tokens=True).strip() for run in model_runs] == \
                [step.action for step in steps] == out["env_actions"][i]
            _, start, end = runs[1]
            observation = tokenizer.decode(ids[start:end])
            assert steps[1].messages[-1]["content"] in observation and observation.rstrip().endswith("assistant")
            assert all(lp == 0.0 for lp in logprobs[start:end])
            assert all(lp < 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 1)
    # TRL's logged reward is the mean of the returns the episodes paid.
    assert _logged(trainer, "reward") == pytest.approx(
        [sum(b.output["env_reward"]) / len(b.output["env_reward"]) for b in batches], rel=1e-5, abs=1e-6)


def test_the_rollout_refuses_prompts_it_cannot_replay(tmp_path: Path, short_tasks: str, one_thread: None) -> None:
    kwargs = dict(similarity="tfidf", dataset=short_tasks, max_turns=1)
    solo = build_dataset("writing", 2, **kwargs)
    trainer = grpo_trainer("writing", 2, model=_tiny_model(), args=_tiny_args(tmp_path), train_dataset=solo, **kwargs)
    with pytest.raises(ValueError, match="other env settings"):
        trainer.rollout_func(solo["prompt"][:1], trainer)  # a solo prompt is no role's prompt in a team of 2
    stranger = [[{"role": "user", "content": "Write a poem."}]]
    with pytest.raises(ValueError, match="not a prompt of the trainer's train/eval dataset"):
        trainer.rollout_func(stranger, trainer)


def test_coding_episodes_through_the_rollout_pay_the_envs_return(tmp_path: Path, one_thread: None) -> None:
    trainer = grpo_trainer("coding", model=_tiny_model(), args=_tiny_args(tmp_path), seeds=2, similarity="tfidf",
                           executor="local", max_turns=1)
    prompts = trainer.train_dataset["prompt"]
    out = trainer.rollout_func([prompts[0], prompts[0], prompts[1], prompts[1]], trainer)
    batch = trainer.rollout_func.last
    assert batch.seeds == [0, 0, 1, 1] and out["env_task_id"] == trainer.train_dataset["task_id"][:1] * 2 + \
        trainer.train_dataset["task_id"][1:2] * 2
    tokenizer = trainer.processing_class
    for ids, reward, trajectory in zip(out["completion_ids"], out["env_reward"], batch.trajectories, strict=True):
        assert reward == trajectory.team_return and math.isfinite(reward)
        assert tokenizer.decode(ids, skip_special_tokens=True).strip() == trajectory.agent_steps("solo")[0].action
    assert env_reward(prompts=batch.prompts, completions=out["completion_ids"], **out) == out["env_reward"]


# ------------------------------------------------------------------------------ two real steps, default model
@pytest.mark.model
@pytest.mark.slow
def test_two_trl_steps_with_the_default_model_train_on_the_envs_episodes(tmp_path: Path, short_tasks: str,
                                                                          one_thread: None) -> None:
    import torch
    from trl import GRPOConfig

    temperature = 0.7
    batches: list[RolloutBatch] = []
    drift: list[tuple[float, float]] = []
    trained_on: list[list[tuple[int, ...]]] = []
    holder: dict[str, Any] = {}

    def record(batch: RolloutBatch) -> None:
        # Right after sampling (same weights): TRL's recomputation, log_softmax(logits / T), against our records.
        model = holder["trainer"].model
        for prompt, completion, logprobs in zip(batch.output["prompt_ids"], batch.output["completion_ids"],
                                                batch.output["logprobs"], strict=True):
            ids = torch.tensor([prompt + completion])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
            token = torch.tensor(completion).unsqueeze(1)
            tempered = torch.log_softmax(logits / temperature, -1).gather(1, token).squeeze(1)
            raw = torch.log_softmax(logits, -1).gather(1, token).squeeze(1)
            ours = torch.tensor(logprobs)
            drift.append(((tempered - ours).abs().max().item(), (raw - ours).abs().max().item()))
        batches.append(batch)

    args = GRPOConfig(output_dir=str(tmp_path / "run"), bf16=False, use_cpu=True, max_steps=2,
                      per_device_train_batch_size=2, num_generations=2, max_completion_length=16,
                      temperature=temperature, learning_rate=1e-4, report_to=[], logging_steps=1, save_strategy="no",
                      gradient_checkpointing=False, seed=0)
    trainer = grpo_trainer("writing", args=args, seeds=2, on_rollout=record, similarity="tfidf", dataset=short_tasks,
                           max_turns=1)
    holder["trainer"] = trainer
    compute_loss = trainer.compute_loss

    def observed_loss(model: Any, inputs: dict[str, Any], *rest: Any, **kwargs: Any) -> Any:
        rows = [tuple(ids[mask.bool()].tolist()) for ids, mask in zip(inputs["completion_ids"],
                                                                     inputs["completion_mask"], strict=True)]
        trained_on.append(rows)
        return compute_loss(model, inputs, *rest, **kwargs)

    trainer.compute_loss = observed_loss  # observe the batches TRL's loss sees; the loss itself is TRL's
    trainable = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    frozen = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if not p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    trainer.train()

    assert len(batches) == len(trained_on) == 2
    # 1. The logged reward is the mean of the env returns each step's episodes produced.
    rewards = [b.output["env_reward"] for b in batches]
    assert _logged(trainer, "reward") == pytest.approx([sum(r) / len(r) for r in rewards], rel=1e-5, abs=1e-6)
    assert all(math.isfinite(r) for step in rewards for r in step)
    # 2. The completions TRL's loss trained on are the ones the env was stepped with.
    tokenizer = trainer.processing_class
    for batch, rows in zip(batches, trained_on, strict=True):
        assert Counter(rows) == Counter(tuple(ids) for ids in batch.output["completion_ids"])
        for ids, trajectory, agent in zip(batch.output["completion_ids"], batch.trajectories, batch.agents,
                                          strict=True):
            assert tokenizer.decode(ids, skip_special_tokens=True).strip() == trajectory.agent_steps(agent)[0].action
    # 3. The LoRA adapter moved (the groups had a reward spread to learn from); the base model did not.
    assert _logged(trainer, "frac_reward_zero_std") != [1.0, 1.0], "every group tied: nothing to learn from"
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before, after[name]) for name, before in trainable.items())
    assert all(torch.equal(before, after[name]) for name, before in frozen.items())
    # 4. Our log-probabilities are TRL's recomputation at the sampling temperature (not the raw logits').
    assert max(t for t, _ in drift) < 2e-3
    assert max(r for _, r in drift) > 0.05
