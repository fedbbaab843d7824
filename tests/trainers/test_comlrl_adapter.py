"""CoMLRL's own MAGRPOTrainer on the suite's envs (llm_marl_trainers.comlrl_adapter): each agent's prompt is its own
observation, the reward CoMLRL sees for a joint completion is what a fresh env pays for the same joint action after the
same history (single and multi-turn, aligned and cross trees), turn-2 prompts carry the env's feedback, the bridge's
records replay to the rewards paid, the default model trains two coding steps in the Docker sandbox (its two-turn
writing run is the docs' CoMLRL snippet, tests/test_readme_snippets.py), and bad settings fail with one clear error."""

from __future__ import annotations

import functools
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))  # the shared tiny tokenizer

from baseline_helpers import tiny_tokenizer

from llm_marl_envs.core.observation import OWN_DRAFT_LABEL
from llm_marl_envs.registry import make_env
from llm_marl_trainers.comlrl_adapter import CoMLRLBridge, import_comlrl, magrpo_trainer


def _rendered(tokenizer: Any, env: Any, agent: str) -> str:
    return tokenizer.apply_chat_template(env.chat_messages(agent), tokenize=False, add_generation_prompt=True)


class _Tape:
    """What CoMLRL did, in call order: each generation (agent, prompt text, completions) and each reward call
    (joint completion, reward). Read from the trainer's own methods, wrapped on the instance."""

    def __init__(self, trainer: Any) -> None:
        self.events: list[tuple[str, Any]] = []
        generate, reward = trainer._generate_completions, trainer.reward_func

        def record_generation(agent: Any, batch_items: Any, agent_idx: int = 0, **kwargs: Any) -> Any:
            out = generate(agent, batch_items, agent_idx=agent_idx, **kwargs)
            self.events.append(("gen", (agent_idx, out["prompts"][0], list(out["completions"][0]))))
            return out

        @functools.wraps(reward)  # CoMLRL reads the signature (inspect follows __wrapped__)
        def record_reward(*completions: Any, **kwargs: Any) -> Any:
            values = reward(*completions, **kwargs)
            self.events.append(("reward", (tuple(c[0] for c in completions), values[0])))
            return values

        trainer._generate_completions, trainer.reward_func = record_generation, record_reward

    def trees(self, num_agents: int, group: int, joint_mode: str, num_turns: int) -> list[dict[str, Any]]:
        """Rebuild each step's tree from CoMLRL's depth-first order: a node's N generations, its joint actions'
        rewards (G aligned, G^N cross), then each joint action's child subtree in turn."""
        events = iter(self.events)

        def node(turn: int) -> dict[str, Any]:
            gens = [next(events) for _ in range(num_agents)]
            assert [kind for kind, _ in gens] == ["gen"] * num_agents
            completions = [payload[2] for _, payload in gens]
            combos = (list(itertools.product(range(group), repeat=num_agents)) if joint_mode == "cross"
                      else [(k,) * num_agents for k in range(group)])
            rewards = [next(events) for _ in combos]
            assert [kind for kind, _ in rewards] == ["reward"] * len(combos)
            joints = [tuple(completions[a][k[a]] for a in range(num_agents)) for k in combos]
            assert [payload[0] for _, payload in rewards] == joints  # the reward was asked for these joint actions
            children = [node(turn + 1) for _ in combos] if turn < num_turns - 1 else []
            return {"prompts": [payload[1] for _, payload in gens], "joints": joints,
                    "rewards": [payload[1] for _, payload in rewards], "children": children}

        roots = []
        while True:
            try:
                roots.append(node(0))
            except StopIteration:
                return roots


def _check_tree_against_env(tree: dict[str, Any], env: Any, tokenizer: Any, seed: int,
                            history: tuple[tuple[str, ...], ...] = ()) -> list[float]:
    """Replay every branch in a fresh env: each node's prompts are its agents' rendered observations, each reward the
    env's reward for that joint action after the branch's history. Returns the rewards seen."""
    agents = env.possible_agents
    env.reset(seed=seed)
    for joint in history:
        env.step(dict(zip(agents, joint, strict=True)))
    assert tree["prompts"] == [_rendered(tokenizer, env, agent) for agent in agents]
    seen = []
    for index, joint in enumerate(tree["joints"]):
        env.reset(seed=seed)
        for earlier in history:
            env.step(dict(zip(agents, earlier, strict=True)))
        _, rewards, _, _, _ = env.step(dict(zip(agents, joint, strict=True)))
        assert tree["rewards"][index] == pytest.approx(rewards[agents[0]], abs=1e-12)
        seen.append(tree["rewards"][index])
        if tree["children"]:
            seen += _check_tree_against_env(tree["children"][index], env, tokenizer, seed, (*history, joint))
    return seen


def _tiny_agents(count: int) -> list[Any]:
    """Random 2-layer Llamas with the tiny ChatML tokenizer and room for the env's long prompts."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    agents = []
    for seed in range(count):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        agents.append(model)
    return agents


# --------------------------------------------------------------------------------------------------- fast tests
def test_rows_are_the_tasks_our_trainer_draws_and_each_formatter_gives_its_agent_its_own_chat() -> None:
    tokenizer = tiny_tokenizer()
    bridge = CoMLRLBridge("writing_v0", 2, tokenizer=tokenizer, similarity="tfidf")
    dataset = bridge.dataset([3, 8])
    assert dataset.column_names == ["prompt", "task_id", "seed", "split"] and dataset["seed"] == [3, 8]
    env = make_env("writing", num_agents=2, similarity="tfidf", max_turns=1)
    for row in dataset:
        env.reset(seed=row["seed"])  # what llm_marl_trainers.magrpo.MAGRPOTrainer's reset with that seed draws
        assert row["task_id"] == env.task.task_id and row["split"] == "train"
        prompts = [bridge.formatter(i)(row) for i in range(2)]
        assert prompts == [_rendered(tokenizer, env, agent) for agent in env.possible_agents]
        assert prompts[0] != prompts[1] and "You are concise" in prompts[0] and "You are concise" not in prompts[1]
    assert bridge.formatter("detailed")(dataset[0]) == bridge.formatters[1](dataset[0])


def test_bad_settings_fail_with_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = tiny_tokenizer()
    with pytest.raises(ValueError, match="expected one of"):
        CoMLRLBridge("chess", 2, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"num_agents: expected 1\.\.4, got 5"):
        CoMLRLBridge("coding", 5, tokenizer=tokenizer, similarity="tfidf", executor="local")
    with pytest.raises(ValueError, match="max_turns=3 disagrees with num_turns=2"):
        CoMLRLBridge("writing", 2, tokenizer=tokenizer, num_turns=2, max_turns=3, similarity="tfidf")
    with pytest.raises(ValueError, match="num_turns: expected an int >= 1"):
        CoMLRLBridge("writing", 2, tokenizer=tokenizer, num_turns=0, similarity="tfidf")
    padless = type("Tok", (), {"apply_chat_template": lambda *a, **k: "", "chat_template": "x", "pad_token_id": 2,
                               "eos_token_id": 2, "pad_token": "<|im_end|>", "eos_token": "<|im_end|>"})()
    with pytest.raises(ValueError, match="pad token distinct from eos"):
        CoMLRLBridge("writing", 2, tokenizer=padless, similarity="tfidf")
    bridge = CoMLRLBridge("writing", 2, tokenizer=tokenizer, similarity="tfidf")
    row = bridge.dataset(1)[0]
    with pytest.raises(ValueError, match="one completion list per agent"):
        bridge.reward_func(["only one"], batch_items=[row])
    with pytest.raises(ValueError, match="one-element list of str"):
        bridge.reward_func(["a", "b"], ["c"], batch_items=[row])
    with pytest.raises(ValueError, match="is not a row of this bridge's dataset"):
        bridge.external_transition("no such row", ["a", "b"], 2, [[], []], [["a"], ["b"]])
    with pytest.raises(ValueError, match="seeds: expected non-negative ints"):
        bridge.dataset([-1])
    monkeypatch.setitem(sys.modules, "comlrl.trainers.reinforce.magrpo", None)  # as if comlrl were not installed
    with pytest.raises(ImportError, match=r"pip install 'llm-marl-envs\[comlrl\]'"):
        import_comlrl()


def test_the_interop_command_refuses_bad_settings_before_loading_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_marl_benchmarks.cli import main

    for argv, message in (
        (["--env", "chess"], "env: expected one of ('writing', 'coding'), got 'chess'"),
        (["--env", "coding_v0", "--num-agents", "5"], "num_agents: expected 1..4, got 5"),
        (["--env", "writing", "--group-size", "1"], "--group-size: expected >= 2"),
    ):
        with pytest.raises(SystemExit, match=re.escape(message)):
            main(["interop", "comlrl", *argv])
    monkeypatch.setitem(sys.modules, "comlrl.trainers.reinforce.magrpo", None)  # as if comlrl were not installed
    with pytest.raises(SystemExit, match=re.escape("pip install 'llm-marl-envs[comlrl]'")):
        main(["interop", "comlrl", "--env", "writing"])


@pytest.mark.usefixtures("one_thread")
def test_a_cross_tree_of_two_turns_pays_the_envs_rewards_and_shows_the_envs_feedback(short_tasks: str) -> None:
    """CoMLRL's real trainer with tiny random models: every turn-2 prompt is the agent's env observation after its
    branch's joint action, and every reward is the fresh env's, across the G^N cross combinations."""
    MAGRPOConfig, MAGRPOTrainer = import_comlrl()
    tokenizer = tiny_tokenizer()
    bridge = CoMLRLBridge("writing", 2, tokenizer=tokenizer, num_turns=2, similarity="tfidf", dataset=short_tasks,
                          keep_records=True)
    args = MAGRPOConfig(num_agents=2, num_turns=2, num_generations=2, joint_mode="cross", max_new_tokens=6,
                        num_train_epochs=1, eval_interval=0, early_termination_threshold=None, rollout_buffer_size=1,
                        temperature=1.0, top_p=1.0, top_k=None)
    trainer = MAGRPOTrainer(agents=_tiny_agents(2), tokenizer=tokenizer, train_dataset=bridge.dataset([0, 1]),
                            args=args, **bridge.trainer_kwargs())
    trainer.verbose = False
    tape = _Tape(trainer)
    trainer.train()
    trees = tape.trees(num_agents=2, group=2, joint_mode="cross", num_turns=2)
    assert len(trees) == 2  # one tree per row: two steps
    env = make_env("writing", num_agents=2, similarity="tfidf", dataset=short_tasks, max_turns=2)
    rewards = []
    for tree, seed in zip(trees, [0, 1], strict=True):
        rewards += _check_tree_against_env(tree, env, tokenizer, seed)
    assert len(rewards) == 2 * (4 + 4 * 4)
    assert len(set(rewards)) > 1, "all rewards tied: the check could not tell branches"
    assert all(OWN_DRAFT_LABEL in prompt for tree in trees for child in tree["children"] for prompt in child["prompts"])
    # The bridge's records are what CoMLRL was paid, turn-2 ones included, and each replays to its reward.
    assert sorted(r.reward for r in bridge.records) == sorted(rewards)
    assert all(bridge.replay(r) == pytest.approx(r.reward) for r in bridge.records)


# ------------------------------------------------------------------------------- CoMLRL's trainer, default model
def _default_args(**changes: Any) -> Any:
    import torch

    torch.manual_seed(0)  # CoMLRL samples from torch's global RNG: fixed, so a run repeats
    MAGRPOConfig, _ = import_comlrl()
    values = dict(num_agents=2, num_turns=1, num_generations=2, max_new_tokens=16, num_train_epochs=1,
                  eval_interval=0, early_termination_threshold=None, rollout_buffer_size=1, temperature=1.0,
                  top_p=1.0, top_k=None, agent_learning_rate=1e-3)
    return MAGRPOConfig(**{**values, **changes})


def _lora_snapshot(trainer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    trainable, frozen = {}, {}
    for index, agent in enumerate(trainer.agents):
        for name, parameter in agent.named_parameters():
            (trainable if parameter.requires_grad else frozen)[f"{index}.{name}"] = parameter.detach().clone()
    return trainable, frozen


def _assert_lora_moved(trainer: Any, before: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Every agent's LoRA learned from a gradient (its B matrices start at 0, which AdamW's weight decay alone keeps
    at 0); no base weight changed."""
    import torch

    trainable, frozen = before
    after = {f"{i}.{n}": p for i, agent in enumerate(trainer.agents) for n, p in agent.named_parameters()}
    assert trainable and all("lora_" in name for name in trainable)
    for index in range(len(trainer.agents)):
        lora_b = [after[n] for n in trainable if n.startswith(f"{index}.") and "lora_B" in n]
        assert lora_b and any(p.abs().sum() > 0 for p in lora_b), f"agent {index}: no gradient reached its adapter"
    assert all(torch.equal(p, after[n]) for n, p in frozen.items())


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.usefixtures("one_thread")
def test_two_steps_with_the_default_model_on_coding_in_the_docker_sandbox() -> None:
    kwargs = dict(similarity="tfidf", executor="docker", dataset="decomposable", scheme="magrpo")
    trainer = magrpo_trainer("coding_v0", 2, args=_default_args(max_new_tokens=24), seeds=[0, 1], **kwargs,
                             bridge_kwargs={"keep_records": True})
    trainer.verbose = False
    tape = _Tape(trainer)
    before = _lora_snapshot(trainer)
    trainer.train()
    trees = tape.trees(num_agents=2, group=2, joint_mode="aligned", num_turns=1)
    assert len(trees) == 2
    env = make_env("coding", num_agents=2, max_turns=1, **kwargs)
    try:
        for tree, seed in zip(trees, [0, 1], strict=True):
            _check_tree_against_env(tree, env, trainer.tokenizer, seed)
            assert "You are aux" in tree["prompts"][0] and "You are main" in tree["prompts"][1]
        assert [r.reward for r in trainer.bridge.records] == [r for t in trees for r in t["rewards"]]
        assert all(trainer.bridge.replay(r) == pytest.approx(r.reward) for r in trainer.bridge.records)
    finally:
        env.close()
        trainer.bridge.close()
    _assert_lora_moved(trainer, before)
