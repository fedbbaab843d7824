"""Team generation (``trainers/generation.py``): per-agent LoRA on one base, one ``generate`` for all rows.

Everything runs on the tiny random-weight Llama of the baseline tests (built from a config, a few milliseconds a
call) with random LoRA ``B`` matrices, so each agent's adapter is a different policy. The reference for "row i runs
under agent a's adapter" is peft's own single-adapter forward after ``set_adapter(a)``, one unpadded row at a time.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))  # the shared tiny model and tokenizer
from baseline_helpers import ENV_KWARGS, tiny_model, tiny_tokenizer

from llm_marl_baselines.decoding import token_texts
from llm_marl_baselines.policies.base import ActionRequest, Generation, GenerationSettings
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import ChatRequest, rollout_tree, run_episodes
from llm_marl_trainers.generation import SCHEMES, LoraSettings, TeamModel, special_token_ids

AGENTS = ("concise", "detailed")
LORA = LoraSettings(r=4, alpha=8, init_lora_weights=False)  # random B: adapters differ from the base and each other
SAMPLED = GenerationSettings(temperature=0.7, top_p=0.8, max_new_tokens=10, seed=3)
EOS_BIAS = 1.5  # rows of one batch end at different steps, so padding after a finished row is exercised


def chat(text: str) -> tuple[dict[str, str], ...]:
    return ({"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": text})


REQUESTS = [
    ChatRequest(0, "concise", 1, chat("Summarize: the cat sat.")),
    ChatRequest(0, "detailed", 1, chat("Hi")),
    ChatRequest(1, "concise", 1, chat("def add(a, b): write it, then explain it in more words " * 3)),
    ChatRequest(1, "detailed", 1, chat("Write one line of Python.")),
]


def make_team(scheme: str = "stacked", agents: tuple[str, ...] = AGENTS, lora: LoraSettings = LORA,
              **kwargs: Any) -> TeamModel:
    return TeamModel(tiny_model(eos_bias=EOS_BIAS), list(agents), lora=lora, scheme=scheme, **kwargs)


def single_adapter_logprobs(team: TeamModel, agent: str, prompt: tuple[int, ...] | list[int],
                            completion: tuple[int, ...] | list[int]) -> torch.Tensor:
    """The reference: peft's plain forward with only ``agent``'s adapter active, on the unpadded row."""
    model = team.model_of(agent)
    model.set_adapter(agent)
    ids = torch.tensor([[*prompt, *completion]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[0, len(prompt):, None]).squeeze(-1)


def flat(records: list[list[Generation]]) -> list[Generation]:
    return [record for samples in records for record in samples]


def count_generate_calls(team: TeamModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap the sampling calls (the shared-prefix sampler, and each base model's ``generate`` for the reference path);
    the list collects the number of rows of every call."""
    import llm_marl_trainers.generation

    rows: list[int] = []
    sampler = llm_marl_trainers.generation.sample_rows

    def counted_sampler(*args: Any, **kwargs: Any) -> Any:
        rows.append(len(args[2]))  # row_prompt: one entry per sampled row
        return sampler(*args, **kwargs)

    monkeypatch.setattr(llm_marl_trainers.generation, "sample_rows", counted_sampler)
    for model in {id(team.model_of(a)): team.model_of(a) for a in team.agents}.values():
        original = model.generate

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            rows.append(int(kwargs["input_ids"].shape[0]))
            return _original(*args, **kwargs)

        monkeypatch.setattr(model, "generate", counted)
    return rows


@pytest.mark.parametrize("scheme", SCHEMES)
def test_mixed_batch_logprobs_equal_per_adapter_runs(scheme: str) -> None:
    team = make_team(scheme)
    records = flat(team.generate(REQUESTS, SAMPLED))
    agents = [request.agent for request in REQUESTS]
    with torch.no_grad():
        mixed = team.forward_logprobs(records, agents)
    for record, agent, row in zip(records, agents, mixed.rows(), strict=True):
        reference = single_adapter_logprobs(team, agent, record.prompt_ids, record.completion_ids)
        torch.testing.assert_close(row, reference, atol=1e-5, rtol=0)
        # What generate recorded (raw logits, KV cache, left padding) is the same policy's log-probability.
        assert record.logprobs == pytest.approx(reference.tolist(), abs=1e-5)


def test_a_prompt_store_gives_each_agent_the_samples_of_the_whole_prefill() -> None:
    """Two turns of two agents whose prompts open with one task text: with a store each agent's second turn reads
    only what follows its first turn's prompt, under its own adapter (the agents' keys and values of the same text
    differ), and samples what it samples without a store."""
    from llm_marl_baselines.prompt_store import PromptStore

    team = make_team()
    store = PromptStore(min_tokens=4)
    task = "Source text: the council met on Tuesday and voted to repair the old bridge before the winter. " * 2
    turns = [[ChatRequest(0, "concise", 1, chat(task + "Write a headline.")),
              ChatRequest(0, "detailed", 1, chat(task + "Write a summary."))],
             [ChatRequest(0, "concise", 2, chat(task + "Write a headline. Your draft: Bridge vote.")),
              ChatRequest(0, "detailed", 2, chat(task + "Write a summary. Your draft: The council met."))]]
    for requests in turns:
        reused = flat(team.generate(requests, SAMPLED, prompt_store=store))
        whole = flat(team.generate(requests, SAMPLED))
        assert [r.completion_ids for r in reused] == [r.completion_ids for r in whole]
        for a, b in zip(reused, whole, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert store.prefilled_tokens < 0.7 * store.prompt_tokens
    headline = team.prompt_ids([turns[1][0]])[0]
    model = team.model_of("concise")
    # Under its own agent the headline prompt finds its first turn (through "headline."); under the other agent only
    # the task text they share; under no agent of the team nothing.
    own, other = (store.longest_prefix(model, agent, headline)[1] for agent in ("concise", "detailed"))
    assert len(headline) > own > other > len(headline) // 2
    assert store.longest_prefix(model, "nobody", headline) == (None, 0)


def test_routed_logits_equal_peft_mixed_batch_and_set_adapter() -> None:
    team = make_team()
    tokenizer = team.tokenizer_of("concise")
    prompt = tokenizer("The cat sat on the mat.", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt] * 4)
    agent_of_row = ["detailed", "concise", "concise", "detailed"]
    model = team.model_of("concise")
    with torch.no_grad():
        with team.route(agent_of_row) as routed:
            stacked = routed(input_ids=ids).logits
        peft_mixed = model(input_ids=ids, adapter_names=agent_of_row).logits
        singles = []
        for row, agent in enumerate(agent_of_row):
            model.set_adapter(agent)
            singles.append(model(input_ids=ids[row:row + 1]).logits[0])
    torch.testing.assert_close(stacked, torch.stack(singles), atol=1e-5, rtol=0)
    torch.testing.assert_close(peft_mixed, torch.stack(singles), atol=1e-5, rtol=0)


def test_different_adapters_give_different_outputs_for_the_same_prompt() -> None:
    team = TeamModel(tiny_model(), list(AGENTS), lora=LORA)  # no end-token bias: greedy rows run their full length
    same = [ChatRequest(0, agent, 1, chat("Summarize: the cat sat.")) for agent in AGENTS]
    greedy = GenerationSettings(temperature=0.0, max_new_tokens=8)
    first, second = flat(team.generate(same, greedy))
    assert first.prompt_ids == second.prompt_ids
    assert first.completion_ids != second.completion_ids
    with torch.no_grad():
        scored = team.forward_logprobs([first, first], list(AGENTS))
    assert (scored.per_token_logps[0] - scored.per_token_logps[1]).abs().max() > 1e-3


def test_one_generate_call_for_all_agents_samples_and_envs(monkeypatch: pytest.MonkeyPatch) -> None:
    agents = ("a1", "a2", "a3")
    team = make_team(agents=agents)
    calls = count_generate_calls(team, monkeypatch)
    requests = [ChatRequest(env, agent, 1, chat(f"Env {env} asks {agent}.")) for env in range(2) for agent in agents]
    records = team.generate(requests, SAMPLED, samples_per_request=4)
    assert calls == [3 * 4 * 2]  # N agents × G × envs rows, one call
    assert [len(samples) for samples in records] == [4] * len(requests)
    tokenizer = team.tokenizer_of("a1")
    for request, samples in zip(requests, records, strict=True):
        expected = tokenizer.apply_chat_template([dict(m) for m in request.messages], tokenize=False,
                                                 add_generation_prompt=True)
        for record in samples:
            assert record.prompt_ids == tuple(tokenizer(expected, add_special_tokens=False)["input_ids"])
            # Token ids decode back to the text; nothing after the first stop token, no padding.
            assert tokenizer.decode(record.completion_ids, skip_special_tokens=True).strip() == record.text
            assert len(record.logprobs) == len(record.completion_ids) <= SAMPLED.max_new_tokens
            # (A random-weight model may sample the pad id as an ordinary token: only stop tokens end a row.)
            stop = tokenizer.eos_token_id
            assert stop not in record.completion_ids[:-1] and tokenizer.pad_token_id not in record.prompt_ids
            assert (record.finish_reason == "stop") == (record.completion_ids[-1] == stop)


def test_max_batch_rows_splits_the_rows_and_keeps_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    team = make_team(max_batch_rows=3)
    calls = count_generate_calls(team, monkeypatch)
    records = team.generate(REQUESTS, SAMPLED, samples_per_request=2)
    assert calls == [3, 3, 2]
    agents = [r.agent for r in REQUESTS for _ in range(2)]
    for record, agent, request in zip(flat(records), agents, [r for r in REQUESTS for _ in range(2)], strict=True):
        assert record.prompt_ids == team.generate([request], SAMPLED)[0][0].prompt_ids
        reference = single_adapter_logprobs(team, agent, record.prompt_ids, record.completion_ids)
        assert record.logprobs == pytest.approx(reference.tolist(), abs=1e-5)


def test_rollout_tree_asks_the_team_once_per_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    envs = [make_env("writing", num_agents=2, max_turns=2, **ENV_KWARGS["writing"]) for _ in range(2)]
    team = make_team(agents=tuple(envs[0].possible_agents))
    calls = count_generate_calls(team, monkeypatch)
    policy = team.as_rollout_policy(GenerationSettings(temperature=0.7, max_new_tokens=6, seed=0))
    roots = rollout_tree(envs, policy, group_size=3, max_depth=1, seeds=[0, 1])
    assert calls == [2 * 2 * 3]  # both envs' agents, G = 3 each, in one call
    steps = [step for root in roots for child in root.children for step in child.steps]
    assert len(steps) == 2 * 3 * 2
    assert all(isinstance(step.generation, Generation) and step.generation.logprobs for step in steps)
    episodes = run_episodes([envs[0]], policy, seeds=[0])
    assert episodes[0].steps and all(isinstance(step.generation, Generation) for step in episodes[0].steps)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_forward_logprobs_gradients_reach_every_adapter_and_not_the_base(scheme: str) -> None:
    team = make_team(scheme, lora=LoraSettings(r=4, alpha=8, dropout=0.1, init_lora_weights=False))
    records = flat(team.generate(REQUESTS, SAMPLED))
    team.train()
    scored = team.forward_logprobs(records, [r.agent for r in REQUESTS], entropies=True)
    assert scored.entropies is not None and bool((scored.entropies[scored.completion_mask == 0] == 0).all())
    (scored.per_token_logps.sum() + scored.entropies.sum()).backward()
    for agent in AGENTS:
        parameters = team.adapter_parameters(agent)
        assert parameters and all(p.requires_grad for p in parameters)
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in parameters)
    adapters = {id(p) for agent in AGENTS for p in team.adapter_parameters(agent)}
    base = [p for p in team.model_of("concise").parameters() if id(p) not in adapters]
    assert base and all(not p.requires_grad and p.grad is None for p in base)


def test_each_agents_gradient_is_its_own_rows_only() -> None:
    team = make_team()
    records = flat(team.generate(REQUESTS, SAMPLED))
    agents = [r.agent for r in REQUESTS]
    scored = team.forward_logprobs(records, agents)
    concise_rows = torch.tensor([agent == "concise" for agent in agents])
    scored.per_token_logps[concise_rows].sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in team.adapter_parameters("concise"))
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in team.adapter_parameters("detailed"))


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    gradients = []
    for checkpointing in (False, True):
        team = make_team()
        if checkpointing:
            team.gradient_checkpointing_enable()
        records = flat(team.generate(REQUESTS, SAMPLED))
        team.train()
        team.forward_logprobs(records, [r.agent for r in REQUESTS]).per_token_logps.sum().backward()
        gradients.append(torch.cat([p.grad.flatten() for a in AGENTS for p in team.adapter_parameters(a)]))
    torch.testing.assert_close(gradients[0], gradients[1], atol=1e-6, rtol=1e-5)


def _scored(team: TeamModel, records: list[Generation], agents: list[str], **kwargs: Any) -> tuple[torch.Tensor, ...]:
    """Log-probabilities, entropies and every adapter's gradient of one forward/backward (fresh gradients)."""
    for agent in team.agents:
        for parameter in team.adapter_parameters(agent):
            parameter.grad = None
    team.train()
    scored = team.forward_logprobs(records, agents, entropies=True, **kwargs)
    assert scored.entropies is not None
    (scored.per_token_logps.sum() + 0.1 * scored.entropies.sum()).backward()
    gradients = torch.cat([p.grad.flatten() for a in team.agents for p in team.adapter_parameters(a)])
    return scored.per_token_logps.detach(), scored.entropies.detach(), gradients


@pytest.mark.parametrize("scheme", SCHEMES)
def test_shared_prefix_update_equals_the_repeated_path(scheme: str) -> None:
    """Each (agent, prompt) read once, its completions on top of its cache: the log-probabilities, entropies and
    adapter gradients of reading every row whole (fp32)."""
    team = make_team(scheme)
    records = flat(team.generate(REQUESTS, SAMPLED, samples_per_request=3))  # groups: 3 rows per prompt
    agents = [r.agent for r in REQUESTS for _ in range(3)]
    results = {}
    for shared in (True, False):
        team.share_prefix = shared
        results[shared] = _scored(team, records, agents, temperature=0.9)
    for mine, theirs in zip(results[True], results[False], strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
    assert results[True][2].abs().sum() > 0
    with torch.no_grad():
        team.share_prefix = True
        shared_reference = team.forward_logprobs(records, agents, reference=True).per_token_logps
        team.share_prefix = False
        repeated_reference = team.forward_logprobs(records, agents, reference=True).per_token_logps
    torch.testing.assert_close(shared_reference, repeated_reference, atol=1e-5, rtol=0)


def test_shared_prefix_sampling_gives_generates_samples() -> None:
    """With the same seed and rows, one prefill per (agent, prompt) + the static-cache decode draws the tokens the
    reference path's ``generate`` draws, each row under its own agent's adapter."""
    team = make_team()
    outputs = {}
    for shared in (True, False):
        team.share_prefix = shared
        outputs[shared] = flat(team.generate(REQUESTS, SAMPLED, samples_per_request=4))
    assert [r.completion_ids for r in outputs[True]] == [r.completion_ids for r in outputs[False]]
    assert [r.text for r in outputs[True]] == [r.text for r in outputs[False]]
    for mine, theirs in zip(outputs[True], outputs[False], strict=True):
        assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
        assert mine.finish_reason == theirs.finish_reason


@pytest.mark.parametrize("shared", [True, False])
def test_a_role_budget_stops_that_roles_replies_and_leaves_the_others(shared: bool) -> None:
    """``role_max_new_tokens`` (roles with different budgets in one call, e.g. a verifier's 48 beside coders' 160):
    that role's replies are the first tokens of what it writes without one, cut by the budget; the other role's
    replies are exactly what they are without it; on both sampling paths, and through the rollout policy."""
    team = make_team()
    team.share_prefix = shared
    free = flat(team.generate(REQUESTS, SAMPLED, samples_per_request=3))
    cut = flat(team.generate(REQUESTS, SAMPLED, samples_per_request=3, role_max_new_tokens={"concise": 2}))
    agents = [r.agent for r in REQUESTS for _ in range(3)]
    assert any(len(r.completion_ids) > 2 for r, a in zip(free, agents, strict=True) if a == "concise")
    for mine, theirs, agent in zip(cut, free, agents, strict=True):
        if agent == "detailed":  # the same tokens; log-probabilities up to rounding (the batch shrinks sooner)
            assert (mine.completion_ids, mine.text, mine.finish_reason) == (theirs.completion_ids, theirs.text,
                                                                            theirs.finish_reason)
            assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
        else:
            assert mine.completion_ids == theirs.completion_ids[:2]
            assert mine.logprobs == pytest.approx(theirs.logprobs[:2], abs=1e-5)
            assert mine.finish_reason == ("stop" if theirs.finish_reason == "stop"
                                          and len(theirs.completion_ids) <= 2 else "length")
    # A budget above the call's is the call's; the rollout policy passes the budgets on.
    assert [r.completion_ids for r in flat(team.generate(REQUESTS, SAMPLED, role_max_new_tokens={"concise": 99}))] \
        == [r.completion_ids for r in flat(team.generate(REQUESTS, SAMPLED))]
    policy = team.as_rollout_policy(SAMPLED, role_max_new_tokens={"detailed": 1})
    assert all(len(r.completion_ids) <= 1 for r, q in zip(policy(REQUESTS), REQUESTS, strict=True)
               if q.agent == "detailed")
    for bad, error in (({"concise": 0}, ValueError), ({"concise": True}, ValueError), ([("concise", 2)], TypeError)):
        with pytest.raises(error, match="role_max_new_tokens"):
            team.generate(REQUESTS, SAMPLED, role_max_new_tokens=bad)


@pytest.mark.parametrize("shared", [True, False])
def test_a_reply_end_stops_that_roles_replies_and_leaves_the_others(shared: bool) -> None:
    """``role_reply_ends`` (a coder's "the code block has closed"): that role's replies stop at the first match of its
    pattern in the reply so far, the given start included, with the first tokens of what it writes without (recorded
    as stopped); the other role's replies are exactly what they are without it; on both sampling paths, and through
    the rollout policy."""
    team = make_team()
    team.share_prefix = shared
    prefix = "```python\n"
    requests = [ChatRequest(r.env_index, r.agent, r.turn, (*r.messages, {"role": "assistant", "content": prefix}))
                if r.agent == "concise" else r for r in REQUESTS]
    ends = {"concise": r"(?s)^```python\n.{5}"}  # matches only with the given start
    free = flat(team.generate(requests, SAMPLED, samples_per_request=3))
    cut = flat(team.generate(requests, SAMPLED, samples_per_request=3, role_reply_ends=ends))
    agents = [r.agent for r in requests for _ in range(3)]
    texts = token_texts(team.tokenizer_of("concise"))
    shorter = 0
    for mine, theirs, agent in zip(cut, free, agents, strict=True):
        if agent == "detailed":
            assert (mine.completion_ids, mine.text, mine.finish_reason) == (theirs.completion_ids, theirs.text,
                                                                            theirs.finish_reason)
            assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
            continue
        n = len(mine.completion_ids)
        assert mine.completion_ids == theirs.completion_ids[:n]
        assert mine.logprobs == pytest.approx(theirs.logprobs[:n], abs=1e-5)
        if n < len(theirs.completion_ids):
            shorter += 1
            written = "".join(texts(t) for t in mine.completion_ids)
            assert mine.finish_reason == "stop" and len(written) >= 5
            assert len(written) - len(texts(mine.completion_ids[-1])) < 5
    assert shorter, "no reply ran past its end"
    policy = team.as_rollout_policy(SAMPLED, role_reply_ends=ends)
    assert [r.completion_ids for r in policy(requests)] == [r.completion_ids for r in
                                                            flat(team.generate(requests, SAMPLED,
                                                                               role_reply_ends=ends))]
    with pytest.raises(ValueError, match="reply_ends"):
        team.as_rollout_policy(SAMPLED, role_reply_ends={"concise": "("})


def test_a_reply_prefix_is_continued_and_starts_the_text() -> None:
    team = make_team()
    prefix = "```python\ndef aux("
    request = ChatRequest(0, "concise", 1, (*chat("Write aux."), {"role": "assistant", "content": prefix}))
    for record in team.generate([request], SAMPLED, samples_per_request=2)[0]:
        decoded = team.tokenizer_of("concise").decode(list(record.completion_ids), skip_special_tokens=True)
        assert record.text == (prefix + decoded).strip()
    (prompt,) = team.prompt_ids([request])
    assert team.tokenizer_of("concise").decode(prompt).endswith(prefix)


def test_samples_differ_under_sampling_and_reproduce_with_the_same_seed() -> None:
    team = make_team()
    request = [REQUESTS[0]]
    rng_before = torch.get_rng_state()
    samples = team.generate(request, SAMPLED, samples_per_request=6)[0]
    assert torch.equal(torch.get_rng_state(), rng_before)  # a seeded call leaves the caller's RNG alone
    assert len({record.completion_ids for record in samples}) > 1
    again = team.generate(request, SAMPLED, samples_per_request=6)[0]
    assert [r.completion_ids for r in again] == [r.completion_ids for r in samples]
    other = team.generate(request, GenerationSettings(**{**SAMPLED.to_dict(), "seed": 4}), samples_per_request=6)[0]
    assert [r.completion_ids for r in other] != [r.completion_ids for r in samples]
    # seed=None draws from the global RNG: seeding torch reproduces it (what a training loop checkpoints).
    unseeded = GenerationSettings(**{**SAMPLED.to_dict(), "seed": None})
    torch.manual_seed(7)
    first = team.generate(request, unseeded, samples_per_request=3)[0]
    torch.manual_seed(7)
    assert [r.completion_ids for r in team.generate(request, unseeded, samples_per_request=3)[0]] == [
        r.completion_ids for r in first]


def test_a_rollout_policy_draws_fresh_numbers_each_call_and_replays_per_policy() -> None:
    team = make_team()
    requests = [REQUESTS[0]] * 4
    policy = team.as_rollout_policy(SAMPLED, logprobs=False)
    first, second = policy(requests), policy(requests)
    direct = [samples[0].completion_ids for samples in team.generate(requests, SAMPLED, logprobs=False)]
    assert [r.completion_ids for r in first] == direct  # the first call samples under the settings' own seed
    # The same prompts asked again (a turn whose observation did not change) are not answered with the same draws.
    assert [r.completion_ids for r in second] != [r.completion_ids for r in first]
    again = team.as_rollout_policy(SAMPLED, logprobs=False)
    assert [r.completion_ids for r in again(requests)] == [r.completion_ids for r in first]
    assert [r.completion_ids for r in again(requests)] == [r.completion_ids for r in second]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_reference_logprobs_are_the_base_models(scheme: str) -> None:
    team = make_team(scheme)
    records = flat(team.generate(REQUESTS, SAMPLED))
    with torch.no_grad():
        reference = team.forward_logprobs(records, [r.agent for r in REQUESTS], reference=True)
    base = tiny_model(eos_bias=EOS_BIAS)  # the same random base weights, no adapters
    for record, row in zip(records, reference.rows(), strict=True):
        ids = torch.tensor([[*record.prompt_ids, *record.completion_ids]])
        with torch.no_grad():
            logits = base.model(input_ids=ids).logits[0, len(record.prompt_ids) - 1:-1]
        expected = torch.log_softmax(logits, -1).gather(-1, ids[0, len(record.prompt_ids):, None]).squeeze(-1)
        torch.testing.assert_close(row, expected, atol=1e-5, rtol=0)


def test_heterogeneous_team_keeps_the_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    bases = {"concise": tiny_model(seed=0, eos_bias=EOS_BIAS), "detailed": tiny_model(seed=1, eos_bias=EOS_BIAS)}
    team = TeamModel(bases, list(AGENTS), lora=LORA)
    assert team.heterogeneous and team.model_of("concise") is not team.model_of("detailed")
    calls = count_generate_calls(team, monkeypatch)
    records = flat(team.generate(REQUESTS, SAMPLED, samples_per_request=2))
    assert sorted(calls) == [4, 4]  # one call per base model
    agents = [r.agent for r in REQUESTS for _ in range(2)]
    scored = team.forward_logprobs(records, agents)
    for record, agent, row in zip(records, agents, scored.rows(), strict=True):
        torch.testing.assert_close(row.detach(), single_adapter_logprobs(team, agent, record.prompt_ids,
                                                                         record.completion_ids), atol=1e-5, rtol=0)
    team.forward_logprobs(records, agents).per_token_logps.sum().backward()
    assert all(p.grad is not None for agent in AGENTS for p in team.adapter_parameters(agent))


def test_load_builds_a_heterogeneous_team_from_model_folders(tmp_path: Path) -> None:
    folders = {}
    for seed in (0, 1):
        loaded = tiny_model(seed=seed)
        loaded.model.save_pretrained(tmp_path / f"base{seed}")
        loaded.tokenizer.save_pretrained(tmp_path / f"base{seed}")
        folders[seed] = tmp_path / f"base{seed}"
    team = TeamModel.load(["a1", "a2", "a3"], {"a1": folders[0], "a2": folders[1], "a3": folders[0]},
                          dtype="float32", device="cpu", lora=LORA)
    assert team.model_of("a1") is team.model_of("a3") and team.model_of("a1") is not team.model_of("a2")
    records = team.generate([ChatRequest(0, agent, 1, chat("Hi")) for agent in team.agents], SAMPLED)
    assert all(len(samples) == 1 and samples[0].completion_ids for samples in records)
    with pytest.raises(ValueError, match="model: no base model for agent 'a2'"):
        TeamModel.load(["a1", "a2"], {"a1": folders[0]}, dtype="float32", device="cpu")


def test_saved_adapters_load_back_into_a_fresh_base(tmp_path: Path) -> None:
    team = make_team()
    records = flat(team.generate(REQUESTS, SAMPLED))
    agents = [r.agent for r in REQUESTS]
    folders = team.save_adapters(tmp_path / "adapters")
    assert {agent: (folder / "adapter_config.json").is_file() for agent, folder in folders.items()} == {
        agent: True for agent in AGENTS}
    loaded = TeamModel(tiny_model(eos_bias=EOS_BIAS), list(AGENTS), adapters=folders)
    assert loaded.lora is None
    with torch.no_grad():
        torch.testing.assert_close(loaded.forward_logprobs(records, agents).per_token_logps,
                                   team.forward_logprobs(records, agents).per_token_logps, atol=1e-6, rtol=0)
    assert all(p.requires_grad for agent in AGENTS for p in loaded.adapter_parameters(agent))


def test_a_saved_team_directory_plays_in_the_baselines_adapter_policy(tmp_path: Path) -> None:
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy, save_team

    team = make_team()
    save_team(tmp_path / "team", team.model_of("concise"), env="writing_v0", roles=AGENTS,
              base_model="tiny-random-llama")
    policy = AdapterTeamPolicy(tmp_path / "team", loaded=tiny_model(eos_bias=EOS_BIAS))
    requests = [ActionRequest.from_messages(r.agent, r.messages) for r in REQUESTS]
    played = policy.generate(requests, SAMPLED)
    agents = [r.agent for r in REQUESTS]
    with torch.no_grad():
        scored = team.forward_logprobs(played, agents)
    for record, row in zip(played, scored.rows(), strict=True):
        assert record.logprobs == pytest.approx(row.tolist(), abs=1e-5)


def test_fresh_adapters_start_as_the_base_model() -> None:
    team = TeamModel(tiny_model(eos_bias=EOS_BIAS), list(AGENTS))  # peft's default init: B = 0
    records = flat(team.generate(REQUESTS, SAMPLED))
    agents = [r.agent for r in REQUESTS]
    with torch.no_grad():
        torch.testing.assert_close(team.forward_logprobs(records, agents).per_token_logps,
                                   team.forward_logprobs(records, agents, reference=True).per_token_logps)


def test_smollm2_style_tokenizer_gets_chatml_stop_and_a_distinct_pad() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_model().model
    assert special_token_ids(tokenizer, model) == (0, frozenset({2}))

    class GgufLike:  # SmolLM2's GGUF: eos <|im_start|> (1), no pad token
        eos_token_id, pad_token_id = 1, None

        def get_vocab(self) -> dict[str, int]:
            return tokenizer.get_vocab()

    model.generation_config.eos_token_id = 1
    pad, stop = special_token_ids(GgufLike(), model)
    assert pad == 0 and 2 in stop and pad not in stop


def test_bad_arguments_are_refused_with_clear_messages() -> None:
    base = tiny_model()
    with pytest.raises(ValueError, match=r"scheme: expected one of \('stacked', 'peft'\), got 'fast'"):
        TeamModel(base, ["a1"], scheme="fast")
    with pytest.raises(ValueError, match="agents: expected distinct names"):
        TeamModel(base, ["a1", "a1"])
    with pytest.raises(ValueError, match=r"without '\.'"):
        TeamModel(base, ["a.b"])
    with pytest.raises(ValueError, match="lora and adapters: expected one of them"):
        TeamModel(base, ["a1"], lora=LORA, adapters={"a1": "x"})
    with pytest.raises(ValueError, match="r: expected an int >= 1"):
        LoraSettings(r=0)
    team = make_team()
    with pytest.raises(ValueError, match=r"requests\[0\]: no adapter for agent 'ghost'"):
        team.generate([ChatRequest(0, "ghost", 1, chat("hi"))], SAMPLED)
    with pytest.raises(ValueError, match="samples_per_request: expected an int >= 1, got 0"):
        team.generate(REQUESTS, SAMPLED, samples_per_request=0)
    with pytest.raises(ValueError, match=r"agent_of_row: expected one agent per row \(1\), got 2"):
        team.forward_logprobs([((1, 2), (3,))], ["concise", "detailed"])
    assert team.generate([], SAMPLED) == []


def test_adapter_generation_benchmark_runs_and_its_schemes_agree(tmp_path: Path) -> None:
    from llm_marl_benchmarks.adapter_generation import SCHEMES as BENCHMARK_SCHEMES
    from llm_marl_benchmarks.adapter_generation import main

    report = main(["--repeats", "1", "--new-tokens", "4", "--rows-per-agent", "2", "--json", str(tmp_path / "a.json")])
    assert set(report["results"]) == set(BENCHMARK_SCHEMES)
    calls = {name: row["generate_calls"] for name, row in report["results"].items()}
    assert calls == {"base": 1, "stacked": 1, "peft_mixed": 1, "set_adapter": 2, "merged": 2, "team_generate": 1}
    assert all(row["max_abs_logit_diff"] is None or row["max_abs_logit_diff"] < 1e-5
               for row in report["results"].values())
    assert (tmp_path / "a.json").is_file()
