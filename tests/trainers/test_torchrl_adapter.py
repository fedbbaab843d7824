"""The suite's envs as TorchRL LLM envs (llm_marl_trainers.torchrl_adapter): the env passes TorchRL's check_env_specs,
each role's step observes exactly its own chat, the joint reward is paid once per joint turn so a trajectory sums to the
env's team return, copies of a task share one GRPO group, per-role policies get their own rows, and TorchRL's own
LLMCollector + TransformersWrapper + MCAdvantage + GRPOLoss run optimisation steps (two on writing with a tiny model,
one with the default model on coding in the Docker sandbox), collecting the rewards the env pays."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))  # the shared tiny tokenizer

from baseline_helpers import tiny_tokenizer

from llm_marl_envs.core.termination import END_REASONS
from llm_marl_envs.registry import make_env
from llm_marl_trainers.torchrl_adapter import (
    END_REASONS_TERMINATED,
    RolePolicies,
    TeamChatEnv,
    import_torchrl,
    policy_pair,
    train_grpo,
)


def _answer(td: Any, texts: list[str]) -> Any:
    """The tensordict a history-mode policy returns: each row's prompt plus an assistant turn with ``texts[b]``."""
    from torchrl.data.llm.history import History
    from torchrl.modules.llm.policies.common import ChatHistory

    prompts = td.get(("history", "prompt"))
    chats = [[{"role": str(r), "content": str(c)} for r, c in zip(prompts[b].role, prompts[b].content, strict=True)]
             + [{"role": "assistant", "content": text}] for b, text in enumerate(texts)]
    full = History.from_chats(chats)
    td.set("history", ChatHistory(prompt=prompts, full=full, batch_size=td.batch_size))
    return td


def _strings(td: Any, key: str) -> list[str]:
    value = td.get(key)
    return [str(getattr(item, "data", item)) for item in (value.tolist() if hasattr(value, "tolist") else value)]


def _chat(td: Any, b: int) -> list[dict[str, str]]:
    prompt = td.get(("history", "prompt"))[b]
    return [{"role": str(r), "content": str(c)} for r, c in zip(prompt.role, prompt.content, strict=True)]


# --------------------------------------------------------------------------------------------------- fast tests
def test_the_env_passes_torchrls_check_env_specs_on_both_envs(short_tasks: str) -> None:
    import_torchrl()
    from torchrl.envs.utils import check_env_specs

    writing = TeamChatEnv("writing_v0", 2, seeds=2, group_size=2, similarity="tfidf", dataset=short_tasks)
    check_env_specs(writing)
    coding = TeamChatEnv("coding", 2, seeds=[0], group_size=1, num_groups=2, similarity="tfidf", executor="local",
                         dataset="decomposable", max_turns=1)
    check_env_specs(coding)
    assert writing.batch_size == coding.batch_size == (2,)
    # The check's random actions are empty turns: the one-turn coding episodes ended and were paid as real ones.
    assert coding.episodes and all(e.team_return == pytest.approx(coding.replay(e)) for e in coding.episodes)


def test_each_role_observes_its_own_chat_and_a_trajectory_sums_to_the_envs_team_return(short_tasks: str) -> None:
    """Four copies (two tasks × two) for two turns of two roles, stepped the way TorchRL's collectors step
    (``step_and_maybe_reset``); copy 1's roles say ``<done/>`` in turn 1, so only it is reset, mid-way."""
    import_torchrl()
    env = TeamChatEnv("writing", 2, seeds=[5, 6], group_size=2, num_groups=2, similarity="tfidf",
                      dataset=short_tasks, max_turns=2)
    twin = make_env("writing", num_agents=2, similarity="tfidf", dataset=short_tasks, max_turns=2)
    td = env.reset()
    first_groups = _strings(td, "group")
    assert first_groups[0] == first_groups[1] != first_groups[2] == first_groups[3]  # a slot's copies: one group
    assert [int(s) for s in td.get("seed").reshape(-1)] == [5, 5, 6, 6]
    texts = ["The council closed the bridge for repairs while a ferry runs.",
             "Engineers found cracks in two steel supports, so the bridge shuts for six months.",
             "A free ferry carries walkers meanwhile.", "Repairs take six months."]
    rewards: list[list[float]] = [[] for _ in range(4)]
    ends: list[tuple[int, bool, bool]] = []
    for step in range(4):
        roles = _strings(td, "agent")
        assert roles == [env.agents[step % 2]] * 4
        for b in range(4):
            # Exactly what the Dec-POMDP shows that role now: a twin env replayed to this point.
            twin.reset(seed=int(td.get("seed")[b]))
            for turn in env.turns_so_far(b):
                twin.step(dict(turn))
            assert _chat(td, b) == twin.chat_messages(roles[b])
        actions = [texts[(step + b) % 4] + (" <done/>" if b == 1 and step < 2 else "") for b in range(4)]
        out, td = env.step_and_maybe_reset(_answer(td, actions))
        flags = [out.get(("next", key)).reshape(-1).tolist() for key in ("done", "terminated", "truncated")]
        for b, value in enumerate(out.get(("next", "reward")).reshape(-1).tolist()):
            rewards[b].append(value)
            if flags[0][b]:
                ends.append((b, flags[1][b], flags[2][b]))
    # Copy 1 finished after its first joint turn (all done: terminated) and was reset alone onto the schedule's
    # next task; the others ran both turns (truncated at max_turns).
    assert ends == [(1, True, False), (0, False, True), (2, False, True), (3, False, True)]
    assert _strings(td, "group")[1] not in first_groups and int(td.get("seed")[1]) == 5
    # A role's step pays 0 unless it completes the joint turn; a trajectory's rewards sum to the env's team return.
    assert all(r == 0.0 for b in (0, 2, 3) for r in rewards[b][0::2]) and rewards[1][0] == 0.0
    assert [record.group for record in env.episodes] == [first_groups[b] for b in (1, 0, 2, 3)]
    spans = {0: rewards[0], 1: rewards[1][:2], 2: rewards[2], 3: rewards[3]}
    for record, b in zip(env.episodes, [1, 0, 2, 3], strict=True):
        assert math.isclose(sum(spans[b]), record.team_return, abs_tol=1e-6)
        assert record.team_return == pytest.approx(env.replay(record))  # a fresh env pays the same


def test_bad_settings_fail_with_one_clear_error(monkeypatch: pytest.MonkeyPatch, short_tasks: str) -> None:
    import_torchrl()
    from tensordict import TensorDict

    with pytest.raises(ValueError, match="expected one of"):
        TeamChatEnv("chess", 2)
    with pytest.raises(ValueError, match=r"num_agents: expected 1\.\.4, got 7"):
        TeamChatEnv("writing", 7, similarity="tfidf")
    with pytest.raises(ValueError, match="group_size: expected an int >= 1"):
        TeamChatEnv("writing", 2, group_size=0, similarity="tfidf")
    env = TeamChatEnv("writing", 2, seeds=1, similarity="tfidf", dataset=short_tasks)
    env.reset()
    with pytest.raises(KeyError, match=r"\('history', 'full'\)"):
        env.step(TensorDict(batch_size=env.batch_size))
    with pytest.raises(ValueError, match="GRPO needs >= 2 trajectories per group"):
        train_grpo(env, 1)
    monkeypatch.setitem(sys.modules, "torchrl.envs.llm", None)  # as if torchrl were not installed
    with pytest.raises(ImportError, match=r"pip install 'llm-marl-envs\[torchrl\]'"):
        import_torchrl()


def test_the_interop_command_refuses_bad_settings_before_loading_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_marl_benchmarks.cli import main

    for argv, message in ((["--env", "chess"], "env: expected one of ('writing', 'coding'), got 'chess'"),
                          (["--env", "writing_v0", "--num-agents", "6"], "num_agents: expected 1..4, got 6"),
                          (["--env", "writing", "--steps", "0"], "--steps: expected an int >= 1, got 0")):
        with pytest.raises(SystemExit, match=re.escape(message)):
            main(["interop", "torchrl", *argv])
    monkeypatch.setitem(sys.modules, "torchrl.envs.llm", None)  # as if torchrl were not installed
    with pytest.raises(SystemExit, match=re.escape("pip install 'llm-marl-envs[torchrl]'")):
        main(["interop", "torchrl", "--env", "writing"])


def _tiny_lm(seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


@pytest.mark.usefixtures("one_thread")
def test_per_role_policies_sample_each_roles_rows_with_its_own_model(short_tasks: str) -> None:
    """Two different tiny models behind RolePolicies in TorchRL's LLMCollector: each collected row's sampling
    log-probabilities are those of its role's model, not the other's."""
    import torch
    from torchrl.collectors.llm import LLMCollector
    from torchrl.envs import InitTracker, TransformedEnv

    tokenizer = tiny_tokenizer()
    env = TeamChatEnv("writing", 2, seeds=2, group_size=2, similarity="tfidf", dataset=short_tasks, max_turns=1)
    pairs = {role: policy_pair(_tiny_lm(seed), tokenizer, max_new_tokens=4) for seed, role in enumerate(env.agents)}
    collector = LLMCollector(TransformedEnv(env, InitTracker()),
                             policy=RolePolicies({role: pair[0] for role, pair in pairs.items()}),
                             dialog_turns_per_batch=4, yield_completed_trajectories=True)
    try:
        data = next(iter(collector)).reshape(-1)
    finally:
        collector.shutdown()
    assert sorted(_strings(data, "agent")) == ["concise", "concise", "detailed", "detailed"]
    for row in data.unbind(0):
        role = _strings(row.unsqueeze(0), "agent")[0]
        sampled = row.get(("log_probs", "response"))
        scores = {}
        for name, (_, scorer) in pairs.items():
            with torch.no_grad():
                full = scorer(row.unsqueeze(0).copy()).get(("log_probs", "full"), as_list=True)[0]
            scores[name] = full[-len(sampled):]
        # The first response position is the generate path's own (see trainers/torchrl_adapter); compare the rest.
        assert torch.allclose(scores[role][1:], sampled[1:], atol=1e-4)
        other = next(name for name in pairs if name != role)
        assert not torch.allclose(scores[other][1:], sampled[1:], atol=1e-4)


# ------------------------------------------------------------------------------------------ TorchRL's GRPO pieces
@pytest.mark.usefixtures("one_thread")
def test_two_grpo_steps_on_writing_keep_the_base_weights_and_pay_the_envs_rewards(short_tasks: str) -> None:
    """Two steps with a tiny random-weight model (the plumbing: step records, rewards as the env pays them, replay,
    peft leaving the base weights alone). The default model trains through the same code in the coding test below
    and in docs/interop.md's TorchRL snippet (tests/test_readme_snippets.py), which runs writing."""
    torch_seed()
    model = _tiny_lm(0)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    env = TeamChatEnv("writing", 2, seeds=[0, 1], group_size=2, similarity="tfidf", dataset=short_tasks, max_turns=1)
    records = train_grpo(env, 2, model=model, tokenizer=tiny_tokenizer(), max_new_tokens=8, learning_rate=1e-3)
    _check_base_weights_kept(model, before)
    _check_records(env, records, 2)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.usefixtures("one_thread")
def test_a_grpo_step_with_the_default_model_on_coding_in_the_docker_sandbox() -> None:
    """One step with the default model: coding's prompts and rewards, judged in the Docker sandbox, through
    TorchRL's pieces, moving the adapter and nothing else. (A second step took another minute of one core and
    checked nothing new; a default-model writing test ran the same code as the docs' snippet and was dropped.)"""
    from llm_marl_baselines.models import load_model

    torch_seed()
    loaded = load_model(None, dtype="float32", device="cpu")
    before = {name: p.detach().clone() for name, p in loaded.model.named_parameters()}
    env = TeamChatEnv("coding_v0", 2, seeds=[1], group_size=2, similarity="tfidf", executor="docker",
                      dataset="decomposable", max_turns=1, scheme="magrpo")  # the aux/main pair the seed was chosen on
    try:
        records = train_grpo(env, 1, model=loaded, max_new_tokens=24, learning_rate=1e-3)
        _check_records(env, records, 1)
        _check_base_weights_kept(loaded.model, before)
        # The group's two episodes earned different returns, so the step has an advantage to follow (task seed 0
        # left the adapter at zero after one step).
        assert len({e.team_return for e in env.episodes}) > 1
        lora = {name: p for name, p in loaded.model.named_parameters() if "lora_B" in name}
        assert lora and any(p.abs().sum() > 0 for p in lora.values())  # B starts at 0
    finally:
        env.close()


def _check_base_weights_kept(model: Any, before: dict[str, Any]) -> None:
    """peft wrapped the model in place: each base weight keeps its value under base_model.model...base_layer."""
    wrapped = {name.replace("base_model.model.", "").replace(".base_layer", ""): p
               for name, p in model.named_parameters()}
    assert set(before) <= set(wrapped)
    assert all(torch_equal(value, wrapped[name]) for name, value in before.items())
    assert any("lora_" in name for name in wrapped)


def torch_seed() -> None:
    """TransformersWrapper samples from torch's global RNG: fixed, so a run repeats."""
    import torch

    torch.manual_seed(0)


def torch_equal(a: Any, b: Any) -> bool:
    import torch

    return torch.equal(a, b)


def _check_records(env: Any, records: list[Any], steps: int) -> None:
    assert [r.step for r in records] == list(range(1, steps + 1))
    for record in records:
        assert record.trajectories == env.group_size * env.num_groups and len(record.groups) == env.num_groups
        assert math.isfinite(record.loss) and math.isfinite(record.torchrl_reward)
        assert record.torchrl_reward == pytest.approx(record.env_reward, abs=1e-5)  # what TorchRL saw = the env's
    assert all(e.team_return == pytest.approx(env.replay(e)) for e in env.episodes)


def test_every_ending_but_the_budget_is_a_termination() -> None:
    # A solved task and a quorum's ending are terminations: TorchRL must not bootstrap past them.
    assert {*END_REASONS, "magrpo_threshold"} - {"max_turns"} == END_REASONS_TERMINATED
    assert {"solved", "quorum_done"} <= END_REASONS_TERMINATED
