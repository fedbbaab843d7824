"""The shared-prefix sampler (``baselines/decoding.py``) against transformers' ``generate`` and against itself.

On the tiny random-weight Llama of the baseline tests (fp32, CPU): with the same seed and the same rows, the sampler
must draw exactly the tokens ``generate`` draws when ``generate`` samples through our sampler (sampled, greedy, with a
minimum length), record the raw-logit log-probabilities ``generate``'s logits give, and give the same samples whether
each prompt is prefilled once or once per row, with a static or a dynamic cache. The sampler's distribution is
``generate``'s own: the probabilities it draws from equal those of transformers' warpers over the whole vocabulary
(``full_vocabulary_probs``, the sampling bench's reference), and its draws follow them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import torch
from baseline_helpers import check_replies_cut_at_their_end, tiny_model
from torch import Tensor
from transformers import LogitsProcessorList

from llm_marl_baselines.decoding import (
    RowTextStops,
    TopKSampler,
    cache_keyword,
    left_pad,
    new_cache,
    sample_rows,
    token_texts,
)
from llm_marl_baselines.models import LoadedModel
from llm_marl_baselines.policies.base import ActionRequest, GenerationSettings
from llm_marl_baselines.policies.local import LocalModelPolicy, completion_text, render_chat, reply_prefix
from llm_marl_benchmarks.sampling import full_vocabulary_probs

STOP, PAD = [2], 0


def prompts_of(loaded: LoadedModel) -> list[list[int]]:
    tokenizer = loaded.tokenizer
    chats = [[{"role": "user", "content": "Summarize the text."}],
             [{"role": "user", "content": "def add(a, b): write it, then explain it in more words " * 2}],
             [{"role": "user", "content": "Hi"}]]
    return [tokenizer(render_chat(tokenizer, chat), add_special_tokens=False)["input_ids"] for chat in chats]


def generate_reference(loaded: LoadedModel, prompts: list[list[int]], rows: list[int], *, temperature: float,
                       top_p: float, new: int, min_new: int = 0) -> tuple[list[list[int]], list[list[float]]]:
    """``model.generate`` over every row (left-padded), cut after the first stop token, with raw-logit logprobs."""
    ids, mask = left_pad([prompts[i] for i in rows], PAD)
    sampling: dict[str, Any] = {"do_sample": False}
    if temperature:  # generate samples through our sampler (it leaves only the drawn token finite)
        sampling["logits_processor"] = LogitsProcessorList([TopKSampler(temperature, top_p).as_logits_processor()])
    with torch.inference_mode():
        out = loaded.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=min_new,
                                    pad_token_id=PAD, eos_token_id=STOP, return_dict_in_generate=True,
                                    output_logits=True, **sampling)
    new_tokens = out.sequences[:, ids.shape[1]:]
    logps = torch.stack([torch.log_softmax(step.float(), -1).gather(1, new_tokens[:, t:t + 1]).squeeze(1)
                         for t, step in enumerate(out.logits)], dim=1)
    tokens, kept = [], []
    for r, row in enumerate(new_tokens.tolist()):
        length = row.index(STOP[0]) + 1 if STOP[0] in row else len(row)
        tokens.append(row[:length])
        kept.append(logps[r, :length].tolist())
    return tokens, kept


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    return tiny_model(eos_bias=1.5)  # rows end at different steps


@pytest.mark.parametrize(("temperature", "top_p", "min_new"), [(0.7, 0.8, 0), (1.0, 1.0, 6), (0.0, 1.0, 0)])
def test_samples_equal_generate_for_the_same_seed_and_rows(loaded: LoadedModel, temperature: float, top_p: float,
                                                           min_new: int) -> None:
    prompts = prompts_of(loaded)
    rows = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    torch.manual_seed(11)
    ours = sample_rows(loaded.model, prompts, rows, temperature=temperature, top_p=top_p, max_new_tokens=12,
                       min_new_tokens=min_new, stop_ids=STOP, pad_id=PAD)
    torch.manual_seed(11)
    tokens, logprobs = generate_reference(loaded, prompts, rows, temperature=temperature, top_p=top_p, new=12,
                                          min_new=min_new)
    assert ours.tokens == tokens
    assert ours.stopped == [row[-1] == STOP[0] for row in tokens]
    assert ours.logprobs is not None
    for mine, theirs in zip(ours.logprobs, logprobs, strict=True):
        assert mine == pytest.approx(theirs, abs=1e-5)
    assert all(len(row) >= min_new for row in ours.tokens)
    if temperature:  # sampling does vary between the samples of one prompt
        assert len({tuple(t) for t in ours.tokens[:3]}) > 1


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), [(0.7, 0.95, 50), (1.0, 1.0, 50), (1.3, 0.5, 8),
                                                             (0.7, 0.95, 5000)])
def test_the_samplers_distribution_is_generates(temperature: float, top_p: float, top_k: int) -> None:
    """Top-k candidates first, then transformers' temperature and top-p on them: the same probabilities as the
    warpers over the whole vocabulary (rows with a -inf stop token, as under a minimum length, included)."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 3000, generator=generator) * 3
    scores[2, :100] = float("-inf")
    expected = full_vocabulary_probs(scores.clone(), temperature, top_p, top_k)
    probs, token_ids = TopKSampler(temperature, top_p, top_k).candidates(scores.clone())
    assert probs.shape[1] == min(top_k, 3000)
    ours = torch.zeros_like(expected).scatter_(1, token_ids, probs)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=0)
    assert int((expected > 0).sum()) < expected.numel()  # the warpers did cut something


def test_the_samplers_draws_follow_its_distribution() -> None:
    """20,000 draws from one row: each candidate's frequency within 5 standard errors of its probability, and no
    token outside the top-p set drawn; a sampler that skipped top-p or the temperature would fail both."""
    from scipy import stats

    generator = torch.Generator().manual_seed(1)
    row = torch.randn(1, 500, generator=generator) * 2
    sampler = TopKSampler(0.7, 0.9)
    expected = full_vocabulary_probs(row.clone(), 0.7, 0.9, 50)[0]
    torch.manual_seed(2)
    draws = sampler(row.expand(20_000, -1).clone())
    counts = torch.bincount(draws, minlength=500).double()
    assert counts[expected == 0].sum() == 0
    support = expected > 0
    observed, probabilities = counts[support], expected[support].double()
    standard_errors = (probabilities * (1 - probabilities) / 20_000).sqrt()
    assert ((observed / 20_000 - probabilities).abs() <= 5 * standard_errors + 1e-9).all()
    assert stats.chisquare(observed.numpy(), (probabilities / probabilities.sum() * 20_000).numpy()).pvalue > 1e-3


def test_a_given_sampler_draws_every_token(loaded: LoadedModel) -> None:
    """``sample_rows(sampler=...)`` draws with the caller's sampler (the sampling bench times generate's draw so)."""
    seen: list[tuple[int, int]] = []

    def always_seven(scores: Tensor) -> Tensor:
        seen.append(tuple(scores.shape))
        return torch.full((scores.shape[0],), 7, dtype=torch.long)

    sampled = sample_rows(loaded.model, prompts_of(loaded), [0, 1, 1], temperature=0.7, top_p=0.9, max_new_tokens=4,
                          stop_ids=STOP, pad_id=PAD, sampler=always_seven)
    assert sampled.tokens == [[7] * 4] * 3 and len(seen) == 4 and seen[0][0] == 3


def test_the_sampler_refuses_bad_settings() -> None:
    for bad in ((-0.1, 0.9, 50), (0.7, 0.0, 50), (0.7, 1.5, 50), (0.7, 0.9, -1)):
        with pytest.raises(ValueError, match="temperature"):
            TopKSampler(*bad)
    greedy = TopKSampler(0.0, 1.0)
    assert greedy(torch.tensor([[0.1, 2.0, -1.0]])).tolist() == [1]


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_shared_prefill_gives_the_repeated_paths_samples(loaded: LoadedModel, cache: str) -> None:
    prompts = prompts_of(loaded)
    rows = [2, 0, 1, 0, 2, 1, 1]  # any order, any multiplicity
    results = []
    for share in (True, False):
        torch.manual_seed(5)
        results.append(sample_rows(loaded.model, prompts, rows, temperature=0.9, top_p=0.95, max_new_tokens=10,
                                   stop_ids=STOP, pad_id=PAD, share_prefix=share, cache=cache))
    assert results[0].tokens == results[1].tokens
    for a, b in zip(results[0].logprobs or [], results[1].logprobs or [], strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_next_token_logits_of_a_copied_cache_equal_the_full_forward(loaded: LoadedModel) -> None:
    """The quantity sharing changes: logits after a prompt's cache copied to G rows vs each row's own forward."""
    from transformers import DynamicCache

    model = loaded.model
    prompts = prompts_of(loaded)
    rows = torch.tensor([0, 0, 1, 1, 2])
    ids, mask = left_pad(prompts, PAD)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        full = model(input_ids=ids[rows], attention_mask=mask[rows], position_ids=positions[rows]).logits[:, -1]
        cache = DynamicCache(config=model.config)
        keyword = cache_keyword(model)
        model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1], **{keyword: cache})
        for layer in cache.layers:
            layer.keys, layer.values = layer.keys[rows], layer.values[rows]
        step = model(input_ids=ids[rows, -1:], attention_mask=mask[rows], position_ids=positions[rows, -1:],
                     **{keyword: cache}).logits[:, -1]
    torch.testing.assert_close(step, full, atol=1e-4, rtol=0)


def test_the_cache_goes_in_by_the_keyword_the_installed_model_fills(loaded: LoadedModel) -> None:
    """transformers renamed forward's ``past_key_values`` to ``cache``; a cache passed by the other name falls into
    ``**kwargs`` on the versions that do not know it, and the model then runs without it (seen on transformers
    5.17 on a GPU machine: the prefilled cache stayed empty). The keyword we pick must be the one that fills it, for
    a plain model and for a PEFT-wrapped one."""
    from peft import LoraConfig, get_peft_model

    ids = torch.tensor([prompts_of(loaded)[0]])
    wrapped = get_peft_model(tiny_model().model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    for model in (loaded.model, wrapped):
        cache = new_cache(model)  # the empty cache the sampler and the trainer's log-prob pass start from
        with torch.no_grad():
            model(input_ids=ids, **{cache_keyword(model): cache})
        assert cache.get_seq_length() == ids.shape[1]


def test_new_cache_kinds(loaded: LoadedModel) -> None:
    from transformers import DynamicCache, StaticCache

    assert isinstance(new_cache(loaded.model), DynamicCache)
    static = new_cache(loaded.model, "static", 12)
    assert isinstance(static, StaticCache) and not isinstance(static, DynamicCache)
    with pytest.raises(ValueError, match="kind"):
        new_cache(loaded.model, "paged")


def test_the_cache_keyword_follows_the_forward_signature() -> None:
    class OlderModel(torch.nn.Module):
        def forward(self, input_ids: Tensor, past_key_values: Any = None, **kwargs: Any) -> None: ...

    class NewerModel(torch.nn.Module):
        def forward(self, input_ids: Tensor, cache: Any = None, **kwargs: Any) -> None: ...

    class NoCache(torch.nn.Module):
        def forward(self, input_ids: Tensor, **kwargs: Any) -> None: ...

    assert cache_keyword(OlderModel()) == "past_key_values"
    assert cache_keyword(NewerModel()) == "cache"
    with pytest.raises(TypeError, match="neither 'cache' nor 'past_key_values'"):
        cache_keyword(NoCache())


def test_bad_arguments_are_refused(loaded: LoadedModel) -> None:
    prompts = prompts_of(loaded)
    common: dict[str, Any] = {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 4, "stop_ids": STOP, "pad_id": PAD}
    with pytest.raises(ValueError, match="row_prompt"):
        sample_rows(loaded.model, prompts, [0, 3], **common)
    with pytest.raises(ValueError, match="prompts"):
        sample_rows(loaded.model, [[]], [0], **common)
    with pytest.raises(ValueError, match="cache"):
        sample_rows(loaded.model, prompts, [0], cache="paged", **common)


def test_a_final_assistant_message_is_continued_and_starts_the_text(loaded: LoadedModel) -> None:
    prefix = "```python\ndef aux("
    chat = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Write aux."},
            {"role": "assistant", "content": prefix}]
    tokenizer = loaded.tokenizer
    rendered = render_chat(tokenizer, chat)
    assert rendered.endswith(prefix)  # the model continues the reply, no new assistant header after it
    assert rendered.count("<|im_start|>assistant") == 1
    assert reply_prefix(chat) == prefix and reply_prefix(chat[:2]) == ""
    assert completion_text(prefix, "x):\n    return x\n") == "```python\ndef aux(x):\n    return x"
    assert completion_text("", "  plain  ") == "plain"
    policy = LocalModelPolicy(loaded=loaded)
    settings = GenerationSettings(temperature=0.7, max_new_tokens=6, seed=0)
    for record in policy.generate([ActionRequest.from_messages("aux", chat)], settings):
        assert record.text.startswith(prefix.strip())
        decoded = tokenizer.decode(list(record.completion_ids or ()), skip_special_tokens=True)
        assert record.text == completion_text(prefix, decoded)


def test_local_policy_shares_repeated_prompts_without_changing_samples(loaded: LoadedModel) -> None:
    chats = [[{"role": "user", "content": "Summarize the text."}], [{"role": "user", "content": "Hi"}]]
    requests = [ActionRequest.from_messages("a", chats[i % 2]) for i in range(6)]
    settings = GenerationSettings(temperature=0.8, top_p=0.9, max_new_tokens=8, seed=3)
    shared = LocalModelPolicy(loaded=loaded).generate(requests, settings)
    repeated = LocalModelPolicy(loaded=loaded, share_prefix=False).generate(requests, settings)
    assert [r.completion_ids for r in shared] == [r.completion_ids for r in repeated]
    assert [r.text for r in shared] == [r.text for r in repeated]


@pytest.mark.parametrize("bias", [False, True])
def test_weight_first_linears_compute_the_same_product(bias: bool) -> None:
    """Within the row range the product is ``(W @ x.T).T`` (so it is the weight-first path that ran) and equals
    ``F.linear`` up to rounding, for 2-D and 3-D inputs; outside it (one row, too many rows, gradients on) it is
    ``F.linear`` exactly; on leaving, every layer has its own forward back."""
    from llm_marl_baselines.decoding import weight_first_linears

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 40, bias=bias), torch.nn.Linear(40, 8, bias=bias))
    inner = model[0]
    with torch.inference_mode(), weight_first_linears(model, max_rows=6) as changed:
        assert changed == 2
        for shape in [(3, 24), (2, 3, 24), (6, 24), (6, 1, 24)]:
            x = torch.randn(*shape)
            expected = torch.nn.functional.linear(x, inner.weight, inner.bias)
            got = inner(x)
            assert got.shape == expected.shape and got.is_contiguous()
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            flat = x.reshape(-1, 24)
            weight_first = torch.mm(inner.weight, flat.t()).t() + (inner.bias if bias else 0)
            assert torch.equal(got.reshape(-1, 40), weight_first)
        for shape in [(1, 24), (7, 24), (1, 7, 24)]:  # one row and too many rows: F.linear itself
            x = torch.randn(*shape)
            assert torch.equal(inner(x), torch.nn.functional.linear(x, inner.weight, inner.bias))
    with weight_first_linears(model, max_rows=6):  # gradients on: F.linear, and they flow
        x = torch.randn(3, 24)
        out = model(x)
        assert torch.equal(out, model[1](torch.nn.functional.linear(x, inner.weight, inner.bias)))
        out.sum().backward()
    assert inner.weight.grad is not None
    assert all("forward" not in layer.__dict__ for layer in model)


def test_weight_first_linears_leave_other_layers_alone_and_restore_on_error() -> None:
    from llm_marl_baselines.decoding import weight_first_linears

    class QuantizedLike(torch.nn.Linear):  # a subclass computes its own way
        pass

    hooked = torch.nn.Linear(4, 4)
    own_forward = hooked.forward
    hooked.forward = own_forward  # a forward already set on the instance (as accelerate's hooks do)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), QuantizedLike(4, 4), hooked)
    with pytest.raises(RuntimeError, match="boom"), weight_first_linears(model) as changed:
        assert changed == 1
        assert "forward" in model[0].__dict__ and "forward" not in model[1].__dict__
        assert model[2].forward is own_forward
        raise RuntimeError("boom")
    assert "forward" not in model[0].__dict__ and model[2].forward is own_forward


def test_weight_first_decoding_gives_the_same_samples(loaded: LoadedModel) -> None:
    """``sample_rows`` decodes weight-first by default; its samples and log-probabilities are those of ``F.linear``
    decoding for the same seed (the logits differ by rounding only)."""
    prompts = prompts_of(loaded)
    rows = [0, 1, 2, 1, 0]
    results = []
    for weight_first in (True, False):
        torch.manual_seed(11)
        results.append(sample_rows(loaded.model, prompts, rows, temperature=0.8, top_p=0.95, max_new_tokens=12,
                                   stop_ids=STOP, pad_id=PAD, weight_first=weight_first))
    assert results[0].tokens == results[1].tokens
    assert sum(len(tokens) for tokens in results[0].tokens) > len(rows)  # decode steps ran, not only the prefill
    for a, b in zip(results[0].logprobs or [], results[1].logprobs or [], strict=True):
        assert a == pytest.approx(b, abs=1e-5)


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_dropping_finished_rows_keeps_the_samples(loaded: LoadedModel, cache: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows end at different steps (the tiny model's end token is favoured); dropping the finished ones from the
    batch must leave every row's tokens and log-probabilities as they are when all rows run to the last step, and
    the rows' routing must follow them (here: which prompt each row continues, checked by the forward's batch)."""
    import llm_marl_baselines.decoding as decoding

    copies: list[int] = []  # rows of each cache copy: the prefill's, then one per drop
    copy_rows = decoding._copy_rows

    def counted(source: Any, target: Any, rows_: Tensor, width: int) -> None:
        copies.append(len(rows_))
        copy_rows(source, target, rows_, width)

    monkeypatch.setattr(decoding, "_copy_rows", counted)
    routed: list[list[int]] = []

    @contextlib.contextmanager
    def record_routing(rows: Sequence[int]) -> Iterator[dict[str, Any]]:
        routed.append(list(rows))
        yield {}

    prompts = prompts_of(loaded)
    rows = [0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 0, 2]
    results = []
    for compact in (True, False):
        torch.manual_seed(3)
        results.append(sample_rows(loaded.model, prompts, rows, temperature=1.0, top_p=1.0, max_new_tokens=16,
                                   stop_ids=STOP, pad_id=PAD, cache=cache, compact=compact,
                                   rows_context=record_routing))
        if compact:
            compactions = copies[1:]
    assert copies[0] == copies[-1] == len(rows)  # each call's prefill copy; no drop without compact
    assert len(copies) == 1 + len(compactions) + 1
    assert compactions, "no row was dropped: the test would not test compaction"
    lengths = [len(tokens) for tokens in results[0].tokens]
    assert min(lengths) < max(lengths)
    assert results[0].tokens == results[1].tokens and results[0].stopped == results[1].stopped
    for a, b in zip(results[0].logprobs or [], results[1].logprobs or [], strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    # routing: the prefill's prompts, the decode's rows, then after each drop the prompts of the rows still running
    assert routed[1] == rows and len(routed) == 2 + len(compactions) + 2
    for kept, after in zip(compactions, routed[2:2 + len(compactions)], strict=True):
        assert len(after) == kept


def _six_free_rows(loaded: LoadedModel, share: bool) -> tuple[list[list[int]], list[int], dict[str, Any], Any]:
    """Two rows of each test prompt sampled with nothing cutting them (seed 7), and the arguments that sampled them:
    what a cut run (same seed) is compared with."""
    prompts = prompts_of(loaded)
    rows = [0, 1, 2, 0, 1, 2]
    common: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "stop_ids": STOP,
                              "pad_id": PAD, "share_prefix": share}
    torch.manual_seed(7)
    return prompts, rows, common, sample_rows(loaded.model, prompts, rows, **common)


@pytest.mark.parametrize("share", [True, False])
def test_a_row_budget_cuts_that_row_to_the_start_of_its_reply_and_leaves_the_others(loaded: LoadedModel,
                                                                                   share: bool) -> None:
    """Per-row budgets (a batch of roles with different ones): a row stops at its own budget with the first tokens of
    what it writes without one, recorded as cut by the budget; every other row samples exactly what it would."""
    prompts, rows, common, free = _six_free_rows(loaded, share)
    budgets = [3, 16, 1, 16, 5, 16]
    torch.manual_seed(7)
    cut = sample_rows(loaded.model, prompts, rows, row_max_new_tokens=budgets, **common)
    assert any(len(tokens) > budget for tokens, budget in zip(free.tokens, budgets, strict=True)), "nothing to cut"
    for r, budget in enumerate(budgets):
        assert cut.tokens[r] == free.tokens[r][:budget]
        assert cut.logprobs is not None and free.logprobs is not None
        assert cut.logprobs[r] == pytest.approx(free.logprobs[r][:budget], abs=1e-5)
        stopped_in_budget = free.stopped[r] and len(free.tokens[r]) <= budget
        assert cut.stopped[r] == stopped_in_budget


def test_row_budgets_are_checked(loaded: LoadedModel) -> None:
    prompts = prompts_of(loaded)
    common: dict[str, Any] = {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 4, "stop_ids": STOP, "pad_id": PAD}
    with pytest.raises(ValueError, match="one per row"):
        sample_rows(loaded.model, prompts, [0, 1], row_max_new_tokens=[4], **common)
    for bad in ([0, 4], [4, 5], [4, 2.0], [True, 4]):
        with pytest.raises(ValueError, match="row_max_new_tokens"):
            sample_rows(loaded.model, prompts, [0, 1], row_max_new_tokens=bad, **common)


@pytest.mark.parametrize("share", [True, False])
def test_a_stop_test_ends_its_row_with_the_start_of_its_reply_and_leaves_the_others(loaded: LoadedModel,
                                                                                   share: bool) -> None:
    """Per-row stop tests on the text written so far (a coder's "the code block has closed"): a tested row ends with
    the first token after which its test holds, holding the first tokens of what it writes without one (recorded as
    stopped); the other rows sample exactly what they would; cutting whole samples afterwards
    (``RowTextStops.lengths``, what the ``generate`` paths do) gives the same rows."""
    prompts, rows, common, free = _six_free_rows(loaded, share)

    def longer_than(n: int) -> Any:
        return lambda text: len(text) > n

    stops = RowTextStops((longer_than(4), None, longer_than(12), None, longer_than(1), longer_than(10_000)),
                         token_texts(loaded.tokenizer))
    lengths = stops.lengths(free.tokens)
    assert lengths[1] is None and lengths[3] is None and lengths[5] is None
    assert any(n is not None and n < len(tokens) for n, tokens in zip(lengths, free.tokens, strict=True)), \
        "no test ends a row early"
    torch.manual_seed(7)
    cut = sample_rows(loaded.model, prompts, rows, row_stops=stops, **common)
    for r, n in enumerate(lengths):
        assert cut.tokens[r] == free.tokens[r][:n]
        assert cut.logprobs is not None and free.logprobs is not None
        assert cut.logprobs[r] == pytest.approx(free.logprobs[r][:n], abs=1e-5)
        assert cut.stopped[r] == (free.stopped[r] or n is not None)
        if n is not None:  # the test holds at the last token and not before it
            text = "".join(stops.token_text(t) for t in cut.tokens[r])
            assert stops.tests[r](text) and not stops.tests[r](text[:-len(stops.token_text(cut.tokens[r][-1]))])
    with pytest.raises(ValueError, match="a test \\(or None\\) per row"):
        sample_rows(loaded.model, prompts, rows[:2], row_stops=stops, **common)
    with pytest.raises(TypeError, match="RowTextStops"):
        sample_rows(loaded.model, prompts, rows, row_stops=[None] * 6, **common)
    with pytest.raises(TypeError, match="callable"):
        RowTextStops(("not a test",), stops.token_text)


@pytest.mark.parametrize("share", [True, False])
def test_reply_ends_stop_an_agents_replies_where_its_pattern_first_matches(loaded: LoadedModel, share: bool) -> None:
    """``reply_ends`` (an env's ``suggested_reply_end`` per agent): an agent's reply stops at the first match of its
    pattern in the reply so far, the reply's given start included; it is the start of the reply it writes without
    (same seed), recorded as stopped. Another agent's replies are unchanged. Both sampling paths agree."""
    prefix = "<<"
    user = [{"role": "user", "content": "Write aux."}]
    requests = [ActionRequest.from_messages("coder", [*user, {"role": "assistant", "content": prefix}]),
                ActionRequest.from_messages("writer", user)] * 3
    settings = GenerationSettings(temperature=1.0, max_new_tokens=24, seed=3)
    ends = {"coder": r"(?s)^<<.{6}"}  # only a text that starts with the given start can match
    free = LocalModelPolicy(loaded=loaded, share_prefix=share, reuse_prompts=False).generate(requests, settings)
    cut = LocalModelPolicy(loaded=loaded, share_prefix=share, reuse_prompts=False,
                           reply_ends=ends).generate(requests, settings)
    check_replies_cut_at_their_end(cut, free, requests, loaded.tokenizer, "coder", 6)
    reference = LocalModelPolicy(loaded=loaded, share_prefix=not share, reuse_prompts=False, reply_ends=ends)
    assert [r.completion_ids for r in reference.generate(requests, settings)] == [r.completion_ids for r in cut]
    for bad, error in (({"coder": 3}, TypeError), ({"coder": "("}, ValueError), ([("coder", "x")], TypeError)):
        with pytest.raises(error, match="reply_ends"):
            LocalModelPolicy(loaded=loaded, reply_ends=bad)


@pytest.mark.parametrize("share", [True, False])
def test_role_budgets_stop_an_agents_replies_at_its_own_budget(loaded: LoadedModel, share: bool) -> None:
    """``role_max_new_tokens`` (an env's ``suggested_max_new_tokens([agent])`` per agent, e.g. a verifier's 48 beside
    coders' 160): an agent's reply takes at most its own budget and is the start of the reply it writes without (same
    seed), recorded as cut by length; another agent's replies are unchanged. Both sampling paths agree."""
    user = [{"role": "user", "content": "Write aux."}]
    requests = [ActionRequest.from_messages("coder", user), ActionRequest.from_messages("writer", user)] * 3
    settings = GenerationSettings(temperature=1.0, max_new_tokens=24, seed=3)
    free = LocalModelPolicy(loaded=loaded, share_prefix=share, reuse_prompts=False).generate(requests, settings)
    budgets = {"coder": 3, "writer": 99}  # the writer's is above the call's 24: capped there, so no change
    cut = LocalModelPolicy(loaded=loaded, share_prefix=share, reuse_prompts=False,
                           role_max_new_tokens=budgets).generate(requests, settings)
    shorter = 0
    for mine, theirs, request in zip(cut, free, requests, strict=True):
        if request.agent == "writer":
            assert (mine.completion_ids, mine.finish_reason) == (theirs.completion_ids, theirs.finish_reason)
            continue
        ids, whole = list(mine.completion_ids or ()), list(theirs.completion_ids or ())
        assert ids == whole[:3]
        if len(whole) > 3:
            shorter += 1
            assert mine.finish_reason == "length"
        else:
            assert mine.finish_reason == theirs.finish_reason
    assert shorter, "no coder reply ran past its budget"
    reference = LocalModelPolicy(loaded=loaded, share_prefix=not share, reuse_prompts=False,
                                 role_max_new_tokens=budgets)
    assert [r.completion_ids for r in reference.generate(requests, settings)] == [r.completion_ids for r in cut]
    for bad, error in (({"coder": 0}, ValueError), ({"coder": True}, ValueError), ([("coder", 3)], TypeError)):
        with pytest.raises(error, match="role_max_new_tokens"):
            LocalModelPolicy(loaded=loaded, role_max_new_tokens=bad)
