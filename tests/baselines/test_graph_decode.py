"""The graph decoder's step (``baselines/graph_decode.py``) against the eager decode, on CPU where it runs uncaptured.

The step CUDA graphs capture is plain PyTorch: here it runs eagerly on the tiny random-weight Llama of the baseline
tests (grouped-query attention: 4 heads over 2 key/value heads) and on that model with per-agent LoRA adapters, and it
must give the eager path's next-token logits (to float32 rounding) and, for the same seed, its samples. What only a
GPU can check (the capture and its replays) runs in ``benchmarks/graph_decode_check.py`` on a device machine.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from baseline_helpers import tiny_model

from llm_marl_baselines.decoding import cache_keyword, left_pad, new_cache, sample_rows
from llm_marl_baselines.graph_decode import (
    GraphDecoder,
    decoder_for_active_adapter,
    graph_decoder,
    row_bucket,
    supports,
)
from llm_marl_baselines.policies.base import GenerationSettings

STOP, PAD = [2], 0


def prompts_of(loaded) -> list[list[int]]:
    tokenizer = loaded.tokenizer
    texts = ["Summarize the text.", "def add(a, b): write it, then explain it in more words " * 2, "Hi"]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


@pytest.fixture(scope="module")
def loaded():
    return tiny_model(eos_bias=1.5)  # rows end at different steps


def test_the_step_gives_the_eager_forwards_logits_at_every_position(loaded) -> None:
    """Prefill three prompts, then feed the same tokens through the model's own forward (static cache) and through the
    decoder's step: the logits agree at every step, rows padded up to the bucket included (3 rows -> 4)."""
    model = loaded.model
    prompts = prompts_of(loaded)
    ids, mask = left_pad(prompts, PAD)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    width, steps = ids.shape[1], 6
    decoder = GraphDecoder(model)
    torch.manual_seed(0)
    feed = torch.randint(3, len(loaded.tokenizer), (len(prompts), steps))
    with torch.inference_mode():
        prefill = new_cache(model, "dynamic")
        model(input_ids=ids, attention_mask=mask, position_ids=positions, **{cache_keyword(model): prefill})
        reference = new_cache(model, "static", width + steps)
        model(input_ids=ids, attention_mask=mask, position_ids=positions, **{cache_keyword(model): reference})
        rows = torch.arange(len(prompts))
        session = decoder.start(prefill, rows, mask, positions, steps, [decoder.base_slot] * len(prompts))
        assert session.graph.rows == 4
        full_mask = mask
        for t in range(steps):
            full_mask = torch.cat([full_mask, torch.ones(len(prompts), 1, dtype=mask.dtype)], dim=1)
            after = positions[:, -1:] + 1 + t
            expected = model(input_ids=feed[:, t:t + 1], attention_mask=full_mask, position_ids=after,
                             **{cache_keyword(model): reference}).logits[:, -1].float()
            got = session.step(feed[:, t])
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert decoder.stats.steps == steps and decoder.stats.row_steps == steps * len(prompts)
    assert decoder.stats.bytes_read > 0


@pytest.mark.parametrize(("temperature", "min_new"), [(0.7, 0), (0.0, 3), (1.0, 5)])
def test_sample_rows_through_the_decoder_gives_the_eager_samples(loaded, temperature: float, min_new: int) -> None:
    prompts = prompts_of(loaded)
    rows = [0, 0, 1, 1, 2]  # 5 rows: bucket 8
    results = []
    for graphs in (None, GraphDecoder(loaded.model)):
        torch.manual_seed(11)
        results.append(sample_rows(loaded.model, prompts, rows, temperature=temperature, top_p=0.9,
                                   max_new_tokens=12, min_new_tokens=min_new, stop_ids=STOP, pad_id=PAD,
                                   graphs=graphs))
    eager, graph = results
    assert graph.tokens == eager.tokens
    assert graph.stopped == eager.stopped
    assert sum(len(tokens) for tokens in eager.tokens) > len(rows)  # decode steps ran, not only the prefill
    for a, b in zip(eager.logprobs or [], graph.logprobs or [], strict=True):
        assert a == pytest.approx(b, abs=1e-4)


def test_the_compiled_step_gives_the_uncompiled_samples_and_compiles_each_shape_once(loaded) -> None:
    """``compile=True`` traces the whole step as one graph (``fullgraph``: a graph break would raise) and runs it; on
    CPU through ``aot_eager`` (the same traced, functionalized graph Inductor compiles on a GPU, without generating
    code), the samples equal the uncompiled step's. A second call at the same shape does not compile again."""
    prompts = prompts_of(loaded)
    rows = [0, 0, 1, 1, 2]
    results = []
    compiled = GraphDecoder(loaded.model, compile=True, compile_backend="aot_eager")
    for graphs in (GraphDecoder(loaded.model), compiled, compiled):
        torch.manual_seed(5)
        results.append(sample_rows(loaded.model, prompts, rows, temperature=0.7, top_p=0.9, max_new_tokens=10,
                                   stop_ids=STOP, pad_id=PAD, graphs=graphs))
        if graphs is compiled and len(results) == 2:
            first_compile_s = compiled.stats.compile_s
    assert results[1].tokens == results[0].tokens == results[2].tokens
    for a, b in zip(results[0].logprobs or [], results[1].logprobs or [], strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    assert compiled.stats.compiled and compiled.stats.compile_error is None
    assert first_compile_s > 0 and compiled.stats.compile_s == first_compile_s  # one shape, compiled once
    assert list(compiled.stats.shapes) == ["8x256"]


def test_a_step_that_fails_to_compile_decodes_uncompiled_and_says_why(loaded) -> None:
    def broken_backend(graph_module, example_inputs):
        raise RuntimeError("no code generator here")

    prompts = prompts_of(loaded)
    torch.manual_seed(2)
    reference = sample_rows(loaded.model, prompts, [0, 1, 2], temperature=0.7, top_p=0.9, max_new_tokens=6,
                            stop_ids=STOP, pad_id=PAD, graphs=GraphDecoder(loaded.model))
    decoder = GraphDecoder(loaded.model, compile=True, compile_backend=broken_backend)
    torch.manual_seed(2)
    with pytest.warns(UserWarning, match="torch.compile of the step failed"):
        got = sample_rows(loaded.model, prompts, [0, 1, 2], temperature=0.7, top_p=0.9, max_new_tokens=6,
                          stop_ids=STOP, pad_id=PAD, graphs=decoder)
    assert decoder.stats.steps > 0 and got.tokens == reference.tokens
    assert not decoder.stats.compiled and "no code generator here" in (decoder.stats.compile_error or "")
    with pytest.raises(TypeError, match="compile expected True or False"):
        GraphDecoder(loaded.model, compile="inductor")  # type: ignore[arg-type]


def test_team_rows_run_under_their_own_adapters_and_see_weight_updates() -> None:
    """Per-agent LoRA (random ``B``): the decoder's per-row slots give each row its agent's adapter, as the team's
    eager stacked routing does; after an in-place update of one adapter (what an optimizer step does) the next call
    decodes with the new weights."""
    from llm_marl_envs.rollout import ChatRequest
    from llm_marl_trainers.generation import LoraSettings, TeamModel

    def chat(text: str) -> tuple[dict[str, str], ...]:
        return ({"role": "user", "content": text},)

    requests = [ChatRequest(0, "concise", 1, chat("Summarize: the cat sat.")),
                ChatRequest(0, "detailed", 1, chat("Hi")),
                ChatRequest(1, "detailed", 1, chat("def add(a, b): write it " * 3))]
    lora = LoraSettings(r=4, alpha=8, init_lora_weights=False)
    settings = GenerationSettings(temperature=0.7, top_p=0.9, max_new_tokens=10, seed=3)
    eager = TeamModel(tiny_model(eos_bias=1.5), ["concise", "detailed"], lora=lora, graph_decode=False)
    graph = TeamModel(tiny_model(eos_bias=1.5), ["concise", "detailed"], lora=lora, graph_decode=True)
    for _ in range(2):
        got = [[r.completion_ids for r in rs] for rs in graph.generate(requests, settings, samples_per_request=3)]
        want = [[r.completion_ids for r in rs] for rs in eager.generate(requests, settings, samples_per_request=3)]
        assert got == want
        for team in (eager, graph):  # the same update on both teams
            with torch.no_grad():
                for parameter in team.adapter_parameters("detailed"):
                    parameter.mul_(-3.0)
    decoder = graph_decoder(graph.model_of("concise"), graph.agents)
    assert decoder.stats.steps > 0


def test_only_supported_models_and_known_adapters_are_taken(loaded) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=32))
    assert supports(loaded.model) and not supports(gpt2)
    with pytest.raises(ValueError, match="not a supported architecture"):
        GraphDecoder(gpt2)
    with pytest.raises(ValueError, match="needs a CUDA model"):
        GraphDecoder(loaded.model, capture=True)
    decoder = GraphDecoder(loaded.model)
    with pytest.raises(ValueError, match="no adapter 'writer'"):
        decoder.slot_of("writer")
    with pytest.raises(ValueError, match="needs share_prefix=True"):
        sample_rows(loaded.model, prompts_of(loaded), [0], temperature=0.0, top_p=1.0, max_new_tokens=2,
                    stop_ids=STOP, pad_id=PAD, share_prefix=False, graphs=decoder)


def test_row_buckets() -> None:
    assert [row_bucket(n) for n in (1, 2, 3, 5, 33, 64, 65, 130)] == [1, 2, 4, 8, 64, 64, 128, 192]


def test_a_peft_model_decodes_under_its_active_adapter_or_the_base_when_disabled() -> None:
    """What the adapter-team policy and the local policy hand the decoder: a peft model with several adapters, one
    active (``set_adapter``) or all disabled (``disable_adapter``); the decoder must sample what the eager decode of
    that model as it stands samples."""
    import peft

    loaded = tiny_model(eos_bias=1.5)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = peft.get_peft_model(loaded.model, config, adapter_name="first")
    model.add_adapter("second", config)
    model.eval()
    prompts, rows = prompts_of(loaded), [0, 1, 2, 2]

    def sampled(graphs, keys):
        torch.manual_seed(7)
        return sample_rows(model, prompts, rows, temperature=0.8, top_p=0.95, max_new_tokens=10, stop_ids=STOP,
                           pad_id=PAD, graphs=graphs, prompt_keys=keys).tokens

    outputs = {}
    for active in ("first", "second", None):
        context = model.disable_adapter() if active is None else contextlib.nullcontext()
        if active is not None:
            model.set_adapter(active)
        with context:
            found = decoder_for_active_adapter(model, cuda_only=False)
            assert found is not None
            decoder, key = found
            assert key == active and decoder.adapters == ("first", "second")
            outputs[active] = sampled(decoder, [key] * len(prompts))
            assert outputs[active] == sampled(None, None)
    assert outputs["first"] != outputs["second"] != outputs[None]
    assert decoder_for_active_adapter(model) is None  # a CPU model keeps the eager decode by default


def test_on_a_cpu_the_default_is_the_eager_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path is unchanged: a team and a local model on a CPU never build a graph decoder unless asked to."""
    import llm_marl_baselines.graph_decode as graph_decode_module
    from llm_marl_baselines.policies.base import ActionRequest
    from llm_marl_baselines.policies.local import generate_records
    from llm_marl_envs.rollout import ChatRequest
    from llm_marl_trainers.generation import LoraSettings, TeamModel

    built: list[object] = []
    original = graph_decode_module.GraphDecoder.__init__

    def counting(self, *args, **kwargs) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(graph_decode_module.GraphDecoder, "__init__", counting)
    settings = GenerationSettings(temperature=0.7, top_p=0.9, max_new_tokens=6, seed=1)
    team = TeamModel(tiny_model(), ["a", "b"], lora=LoraSettings(r=4, alpha=8))
    team.generate([ChatRequest(0, "a", 1, ({"role": "user", "content": "Hi"},))], settings)
    loaded = tiny_model()
    generate_records(loaded, [ActionRequest.from_messages("a", [{"role": "user", "content": "Hi"}])], settings)
    assert built == []
    TeamModel(tiny_model(), ["a", "b"], lora=LoraSettings(r=4, alpha=8), graph_decode=True).generate(
        [ChatRequest(0, "a", 1, ({"role": "user", "content": "Hi"},))], settings)
    assert len(built) == 1  # asked for by name, it is built (and runs uncaptured)


def test_a_models_decoder_is_reused_and_freed_with_the_model() -> None:
    import gc
    import weakref

    model = tiny_model().model
    decoder = graph_decoder(model)
    assert graph_decoder(model) is decoder and graph_decoder(model, capture=False) is not decoder
    alive = weakref.ref(model)
    del model, decoder
    gc.collect()
    assert alive() is None
