"""The optional centralized critic (``baseline: critic``): value targets and critic advantages against hand-computed
values, the state text, the frozen-base features, and a run on the writing env with the tiny model — the critic's
error falls, the runner records the privileged state for it, the checkpoint carries it and a resumed run repeats the
uninterrupted one; the critic never enters the saved team."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))

from baseline_helpers import tiny_model

from llm_marl_envs.rollout import AgentStep, TreeNode
from llm_marl_trainers.advantages import batch_samples, value_targets
from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.critic import state_text
from llm_marl_trainers.generation import LoraSettings, TeamModel
from llm_marl_trainers.magrpo import MAGRPOTrainer

pytestmark = pytest.mark.usefixtures("one_thread")


def _step(agent: str, text: str) -> AgentStep:
    return AgentStep(agent, 1, (), text, 0.0, {}, True, False, generation=text)


def test_value_targets_are_the_mean_return_of_each_expanded_nodes_children() -> None:
    # root → {a (r=1) → {a1 (r=2), a2 (r=4)}, b (r=0, leaf)}
    a1, a2 = TreeNode(0, 2, reward=2.0), TreeNode(0, 2, reward=4.0)
    a = TreeNode(0, 1, reward=1.0, children=[a1, a2])
    b = TreeNode(0, 1, reward=0.0)
    root = TreeNode(0, 0, children=[a, b])
    # γ = 0.5: R(a1) = 2, R(a2) = 4, R(a) = 1 + 0.5·3 = 2.5, R(b) = 0 → V*(a) = 3, V*(root) = (2.5 + 0)/2 = 1.25
    targets = value_targets(root, 0.5)
    assert [(node is root, node is a) for node, _ in targets] == [(True, False), (False, True)]
    assert [t for _, t in targets] == pytest.approx([1.25, 3.0])


def test_the_critic_baseline_replaces_the_group_mean() -> None:
    config = TrainerConfig(env="writing", num_generations=2, scale_rewards="none", baseline="critic")
    root = TreeNode(0, 0)
    for k, reward in ((0, 1.0), (1, 3.0)):
        root.children.append(TreeNode(0, 1, (_step("a", f"a{k}"), _step("b", f"b{k}")), reward, True, (k, k)))
    samples, groups = batch_samples([root], ["a", "b"], config, values={id(root): 2.5})
    # A = R − V(root) = 1 − 2.5, 3 − 2.5 for each agent's two samples (the group mean, 2, is not used).
    assert {s.generation: s.advantage for s in samples} == pytest.approx({"a0": -1.5, "a1": 0.5, "b0": -1.5,
                                                                          "b1": 0.5})
    assert [g.tolist() for g in groups] == [[1.0, 3.0], [1.0, 3.0]]
    grouped, _ = batch_samples([root], ["a", "b"], config.replace(baseline="group"))
    assert {s.generation: s.advantage for s in grouped} == {"a0": -1.0, "a1": 1.0, "b0": -1.0, "b1": 1.0}


def test_critic_configs_that_would_blow_up_or_mean_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match="baseline: 'critic' needs scale_rewards 'none'"):
        TrainerConfig(baseline="critic")  # scale_rewards defaults to group
    with pytest.raises(ValueError, match="use it with advantage 'joint'"):
        TrainerConfig(baseline="critic", advantage="per_agent", scale_rewards="none")
    with pytest.raises(ValueError, match=r"baseline: expected one of \('group', 'critic'\)"):
        TrainerConfig(baseline="value")


def test_state_text_is_deterministic_json() -> None:
    state = {"turn": 2, "drafts": {"b": "y", "a": "x"}, "array": np.arange(3), "score": np.float32(0.5)}
    text = state_text(state)
    assert text == state_text(dict(reversed(list(state.items()))))
    assert json.loads(text) == {"array": [0, 1, 2], "drafts": {"a": "x", "b": "y"}, "score": 0.5, "turn": 2}


@pytest.mark.parametrize("scheme", ["stacked", "peft"])
def test_state_features_come_from_the_frozen_base_with_adapters_off(scheme: str) -> None:
    team = TeamModel(tiny_model(seed=0), ["a", "b"], lora=LoraSettings(r=4, alpha=8), seed=0, scheme=scheme)
    with torch.no_grad():
        for agent in team.agents:
            for p in team.adapter_parameters(agent):
                p.add_(0.5)  # adapters that would change the output if they were on
    texts = ["short", "a much longer state text with many more words in it"]
    batched = team.state_features(texts, max_tokens=64)
    assert batched.shape == (2, 32) and batched.dtype == torch.float32 and not batched.requires_grad
    peft_model = team.model_of("a")
    tokenizer = team.tokenizer_of("a")
    with torch.no_grad(), peft_model.disable_adapter():
        for row, text in enumerate(texts):
            ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")
            alone = peft_model.get_base_model().model(**ids).last_hidden_state[0, -1]
            torch.testing.assert_close(batched[row], alone, rtol=1e-4, atol=1e-5)


def _config(tmp_path: Path, model_dir: Path, **changes) -> TrainerConfig:
    base = dict(env="writing", num_agents=2, model=str(model_dir), num_generations=2, max_completion_length=8,
                env_kwargs={"similarity": "tfidf", "max_turns": 2}, envs_per_step=2, steps=4, save_steps=2,
                seed=0, baseline="critic", scale_rewards="none", report_to="none",
                output_dir=str(tmp_path / "run"))
    return TrainerConfig(**{**base, **changes})


def test_a_run_with_a_critic_fits_it_checkpoints_it_and_resumes_exactly(tmp_path: Path, model_dir: Path) -> None:
    straight = MAGRPOTrainer(_config(tmp_path / "a", model_dir))
    head_before = [p.detach().clone() for p in straight.critic.head.parameters()]
    rows = straight.train()
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    losses = [r["critic/loss"] for r in rows]
    assert losses[-1] < losses[0]  # the head learns the positions' returns
    assert any(not torch.equal(a, b) for a, b in zip(head_before, straight.critic.head.parameters(), strict=True))
    run = tmp_path / "a" / "run"
    assert (run / "checkpoint-000004" / "critic.pt").is_file()
    assert not list((run / "adapters").rglob("critic*")) and (run / "team.json").is_file()

    interrupted = MAGRPOTrainer(_config(tmp_path / "b", model_dir, steps=2))
    interrupted.train()
    resumed = MAGRPOTrainer.resume(tmp_path / "b" / "run", steps=4)
    resumed.train()

    def record(folder: Path) -> list[tuple]:
        lines = (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        return [(r["step"], r["loss"], r["reward"], r["critic/loss"], r["critic/value_mean"])
                for r in map(json.loads, lines)]

    assert record(tmp_path / "b" / "run") == record(run)


def test_the_runner_records_the_privileged_state_only_for_the_critic(tmp_path: Path, model_dir: Path) -> None:
    import llm_marl_trainers.magrpo as magrpo

    seen: list[list[TreeNode]] = []
    real = magrpo.rollout_tree

    def recording(*args, **kwargs):
        roots = real(*args, **kwargs)
        seen.append(roots)
        return roots

    magrpo.rollout_tree = recording
    try:
        MAGRPOTrainer(_config(tmp_path / "c", model_dir, steps=1)).train()
        MAGRPOTrainer(_config(tmp_path / "g", model_dir, steps=1, baseline="group")).train()
    finally:
        magrpo.rollout_tree = real
    critic_nodes = [node for root in seen[0] for node in root.nodes()]
    group_nodes = [node for root in seen[1] for node in root.nodes()]
    assert all(isinstance(node.state, dict) and "drafts" in node.state for node in critic_nodes)
    # A child's state is its position after the step: the drafts the joint action wrote.
    child = seen[0][0].children[0]
    assert {step.agent: step.action for step in child.steps}.items() <= child.state["drafts"].items()
    assert all(node.state is None for node in group_nodes)
