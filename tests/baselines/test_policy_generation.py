"""Generation records: token ids that decode to the texts, log-probabilities a trainer can trust, TRL's dict.

The local and adapter backends run on a tiny random-weight Llama built from a config (no model download, a few
milliseconds a call); the end token gets a logit bias so rows of one batch end at different steps, which exercises
padding after a finished row. Endpoint records are tested against a fake server in ``test_policy_endpoint.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from baseline_helpers import check_replies_cut_at_their_end, tiny_model

from llm_marl_baselines.models import LoadedModel
from llm_marl_baselines.policies import (
    ActionRequest,
    Generation,
    GenerationSettings,
    Policy,
    make_policy,
    rollout_output,
)
from llm_marl_baselines.policies.local import LocalModelPolicy, encode_prompts, render_prompts

REQUESTS = [
    ActionRequest("concise", "Summarize: the cat sat."),
    ActionRequest("detailed", "Hi"),
    ActionRequest("concise", "def add(a, b): write it, then explain it in more words " * 3),
    ActionRequest("detailed", "Write one line of Python."),
]
# top-p < 1 and temperature != 1: log-probabilities of the sampling distribution would differ from the raw ones.
SAMPLED = GenerationSettings(temperature=0.7, top_p=0.8, max_new_tokens=10, seed=3)
EOS_BIAS = 1.5  # with SAMPLED, the four rows end after 9, 5, 10 (no end token) and 1 tokens


def forward_logprobs(loaded: LoadedModel, prompt_ids: tuple[int, ...], completion_ids: tuple[int, ...],
                     temperature: float = 1.0) -> list[float]:
    """What a trainer recomputes: log_softmax(logits / T) of each completion token given prompt + earlier tokens."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.inference_mode():
        logits = loaded.model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[0, len(prompt_ids):, None]).squeeze(-1).tolist()


def check_record(loaded: LoadedModel, request: ActionRequest, record: Generation, max_new_tokens: int) -> None:
    """Every invariant a record of a local backend must hold."""
    tokenizer = loaded.tokenizer
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    assert record.has_token_record
    expected_prompt = encode_prompts(tokenizer, render_prompts(tokenizer, [request]), 10_000)[0]
    assert list(record.prompt_ids) == expected_prompt  # unpadded: exactly what the model saw
    assert pad not in record.prompt_ids
    # The ids decode back to the text; the policy only drops special tokens and strips surrounding whitespace.
    assert tokenizer.decode(record.completion_ids, skip_special_tokens=True).strip() == record.text
    # Nothing after the end token: no padding, no second end.
    assert 1 <= len(record.completion_ids) <= max_new_tokens
    assert eos not in record.completion_ids[:-1]
    if record.finish_reason == "stop":
        assert record.completion_ids[-1] == eos
    else:
        assert record.finish_reason == "length" and len(record.completion_ids) == max_new_tokens
    assert len(record.logprobs) == len(record.completion_ids)
    reference = forward_logprobs(loaded, record.prompt_ids, record.completion_ids)
    assert record.logprobs == pytest.approx(reference, abs=1e-4)


def test_local_records_decode_to_texts_and_carry_raw_logprobs() -> None:
    loaded = tiny_model(eos_bias=EOS_BIAS)
    policy = LocalModelPolicy(loaded=loaded, batch_size=4)
    records = policy.generate(REQUESTS, SAMPLED)
    assert len(records) == len(REQUESTS)
    for request, record in zip(REQUESTS, records, strict=True):
        check_record(loaded, request, record, SAMPLED.max_new_tokens)
    # The batch really mixed early stops with full-length rows, so padding after a finished row was exercised.
    assert {r.finish_reason for r in records} == {"stop", "length"}
    assert len({len(r.completion_ids) for r in records}) > 1
    # Raw (temperature 1) log-probabilities, not those of the tempered distribution that sampled the tokens.
    longest = max(records, key=lambda r: len(r.completion_ids))
    tempered = forward_logprobs(loaded, longest.prompt_ids, longest.completion_ids, temperature=0.7)
    assert longest.logprobs != pytest.approx(tempered, abs=1e-3)
    # act() is generate() without the records: same seed, same texts.
    assert policy.act(REQUESTS, SAMPLED) == [r.text for r in records]


def test_local_greedy_records_do_not_depend_on_batching() -> None:
    loaded = tiny_model()  # no end-token bias: greedy rows then run their full length
    policy = LocalModelPolicy(loaded=loaded, batch_size=4)
    greedy = GenerationSettings(temperature=0.0, max_new_tokens=8)
    batched = policy.generate(REQUESTS, greedy)
    singles = [policy.generate([request], greedy)[0] for request in REQUESTS]
    assert [r.completion_ids for r in batched] == [r.completion_ids for r in singles]
    for one, other in zip(batched, singles, strict=True):
        assert one.logprobs == pytest.approx(other.logprobs, abs=1e-4)
        assert max(one.logprobs) <= 0.0


def _tiny_team(folder: Path, roles: tuple[str, ...]) -> Path:
    """A team directory of random-init LoRA adapters (B != 0, so roles differ) on the tiny model, one per role."""
    import torch
    from peft import LoraConfig, get_peft_model

    from llm_marl_baselines.policies.adapters import save_team

    trained = tiny_model(eos_bias=EOS_BIAS)
    torch.manual_seed(1)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(trained.model, config, adapter_name=roles[0])
    for role in roles[1:]:
        peft_model.add_adapter(role, config)
    save_team(folder, peft_model, env="writing_v0", roles=roles, base_model="tiny-random-llama")
    return folder


def test_adapter_records_use_each_roles_adapter(tmp_path: Path) -> None:
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy

    roles = ("concise", "detailed")
    team = _tiny_team(tmp_path / "team", roles)
    base = tiny_model(eos_bias=EOS_BIAS)  # the same random base weights, fresh: the policy injects the adapters into it
    policy = AdapterTeamPolicy(team, loaded=base)
    records = policy.generate(REQUESTS, SAMPLED)
    for role in roles:
        policy.model.set_adapter(role)
        # forward_logprobs runs loaded.model: the base with LoRA layers injected, now computing this role's policy.
        for request, record in zip(REQUESTS, records, strict=True):
            if request.agent == role:
                check_record(base, request, record, SAMPLED.max_new_tokens)
    assert policy.act(REQUESTS, SAMPLED) == [r.text for r in records]


def test_adapter_team_reply_ends_and_budgets_stop_that_roles_replies_and_leave_the_others(tmp_path: Path) -> None:
    """``AdapterTeamPolicy(reply_ends=..., role_max_new_tokens=...)`` (what ``load_team`` passes on): a role's reply
    stops at the first match of its pattern (recorded as stopped) or at its own budget (cut by length), as the start
    of the reply it writes without (same seed); the other role's replies are unchanged. Bad arguments are refused
    before the team loads."""
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy

    team = _tiny_team(tmp_path / "team", ("concise", "detailed"))
    base = tiny_model(eos_bias=EOS_BIAS)
    free = AdapterTeamPolicy(team, loaded=base).generate(REQUESTS, SAMPLED)
    # Ends a concise reply once it holds four characters; None: no end (as suggested_reply_end says for such a role).
    ends = {"concise": r"(?s)^.{4}", "detailed": None}
    cut = AdapterTeamPolicy(team, loaded=tiny_model(eos_bias=EOS_BIAS), reply_ends=ends).generate(REQUESTS, SAMPLED)
    check_replies_cut_at_their_end(cut, free, REQUESTS, base.tokenizer, "concise", 4)
    for bad, error in (({"concise": 3}, TypeError), ({"concise": "("}, ValueError)):
        with pytest.raises(error, match="reply_ends"):
            AdapterTeamPolicy(tmp_path / "no-such-team", reply_ends=bad)
    # A role's own budget cuts its replies in the same way (recorded as cut by length), and only its own.
    budgeted = AdapterTeamPolicy(team, loaded=tiny_model(eos_bias=EOS_BIAS),
                                 role_max_new_tokens={"detailed": 2}).generate(REQUESTS, SAMPLED)
    for mine, theirs, request in zip(budgeted, free, REQUESTS, strict=True):
        whole = list(theirs.completion_ids or ())
        if request.agent == "concise":
            assert mine.completion_ids == theirs.completion_ids
        else:
            assert list(mine.completion_ids or ()) == whole[:2]
            assert mine.finish_reason == ("length" if len(whole) > 2 else theirs.finish_reason)
    with pytest.raises(ValueError, match="role_max_new_tokens"):
        AdapterTeamPolicy(tmp_path / "no-such-team", role_max_new_tokens={"concise": 0})


def test_rollout_output_is_trl_rollout_func_dict() -> None:
    loaded = tiny_model(eos_bias=EOS_BIAS)
    records = LocalModelPolicy(loaded=loaded).generate(REQUESTS[:2], SAMPLED)
    output = rollout_output(records)
    assert set(output) == {"prompt_ids", "completion_ids", "logprobs"}
    assert output["completion_ids"] == [list(r.completion_ids) for r in records]
    assert all(len(ids) == len(lps) for ids, lps in zip(output["completion_ids"], output["logprobs"], strict=True))
    assert all(isinstance(x, float) for row in output["logprobs"] for x in row)
    scripted = make_policy("scripted").generate(REQUESTS[:1], SAMPLED)
    assert scripted[0].text and scripted[0].completion_ids is None and not scripted[0].has_token_record
    with pytest.raises(ValueError, match=r"generations\[1\]: .*prompt_ids, completion_ids, logprobs is None"):
        rollout_output([records[0], scripted[0]])


def test_generation_record_validation() -> None:
    with pytest.raises(ValueError, match=r"expected one per completion token \(2\), got 1"):
        Generation("x", completion_ids=(1, 2), logprobs=(-0.5,))
    with pytest.raises(TypeError, match="completion_ids: expected a tuple of ints"):
        Generation("x", completion_ids=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="logprobs: expected a tuple of floats"):
        Generation("x", logprobs=(0,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finish_reason: expected one of"):
        Generation("x", finish_reason="eos")
    with pytest.raises(AttributeError):
        Generation("x").text = "y"  # type: ignore[misc]


def test_policy_hooks_and_generate_validation() -> None:
    with pytest.raises(TypeError, match="Policy is abstract"):
        Policy()
    with pytest.raises(TypeError, match="Nothing: a Policy must override _act or _generate"):
        type("Nothing", (Policy,), {})

    class RecordsOnly(Policy):
        def _generate(self, requests, settings):  # type: ignore[no-untyped-def]
            return [Generation(r.observation.upper(), completion_ids=(7,), logprobs=(-1.0,)) for r in requests]

    policy = RecordsOnly()
    assert policy.act([ActionRequest("a", "hi")], SAMPLED) == ["HI"]  # act() falls back to the records' texts
    assert policy.generate([], SAMPLED) == []
    with pytest.raises(TypeError, match="settings: expected GenerationSettings"):
        policy.generate([ActionRequest("a", "hi")], {})  # type: ignore[arg-type]

    class Short(RecordsOnly):
        def _generate(self, requests, settings):  # type: ignore[no-untyped-def]
            return super()._generate(requests, settings)[:1]

    with pytest.raises(RuntimeError, match="returned 1 generations for 2 requests"):
        Short().generate([ActionRequest("a", "x"), ActionRequest("b", "y")], SAMPLED)
