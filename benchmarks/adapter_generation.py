"""Adapter generation: what serving N per-agent LoRA adapters costs in ``generate``, scheme by scheme.

Every scheme generates the same rows (``--agents`` × ``--rows-per-agent``, each row's agent fixed) with the same
seeded sampling and the same number of new tokens (``min = max``, so early stops never shorten a scheme's work):

- ``base``: the plain base model in one call (no adapters): the floor;
- ``stacked``: :class:`llm_marl_trainers.generation.TeamModel`'s default: one call, per-row LoRA by two batched matmuls
  a layer;
- ``peft_mixed``: one call with peft's mixed-adapter batch (``adapter_names=[...]``);
- ``set_adapter``: one call per agent on its rows, switching peft's active adapter;
- ``merged``: one call per agent on a copy of the base with that agent's adapter merged in;
- ``team_generate``: :meth:`TeamModel.generate` end to end (``stacked`` plus chat rendering, records and per-token
  log-probabilities), to show what the API adds.

Correctness is measured too: each scheme's logits over the prompts (one forward pass, every row under its own
adapter) against per-adapter runs with ``set_adapter``, as the largest absolute difference. Schemes run interleaved,
one round each per repeat after a warm-up round; the figures are medians (wall and process CPU time: on a shared
machine CPU time is the steadier). The adapters get random ``B`` matrices so they really change the outputs.

By default the model is a tiny random-weight Llama built from a config (runs in seconds; CPU time there is mostly
Python overhead per layer, which exaggerates per-layer costs); ``--model default`` uses SmolLM2-135M-Instruct.

    python benchmarks/adapter_generation.py [--model tiny|default|PATH] [--agents 2] [--rows-per-agent 4]
                                            [--new-tokens 64] [--repeats 5] [--dtype float32] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from llm_marl_baselines.models import LoadedModel, load_model
from llm_marl_baselines.policies.base import GenerationSettings
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_envs.rollout import ChatRequest
from llm_marl_trainers.generation import LoraSettings, TeamModel, left_pad

SCHEMES = ("base", "stacked", "peft_mixed", "set_adapter", "merged", "team_generate")
TEXT = (
    "The city council met on Tuesday to discuss the new library, which will open downtown next spring. Members "
    "argued about the budget, the opening hours and whether the old building should become a community centre. "
    "After three hours they agreed to keep the reading room open late on weekdays and to ask residents for ideas. "
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_loaded() -> LoadedModel:
    """A random-weight 4-layer Llama (fp32, CPU) with a byte-level BPE tokenizer trained in milliseconds (ChatML
    special tokens at SmolLM2's ids)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator([TEXT] * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", padding_side="left")
    tokenizer.chat_template = CHATML_TEMPLATE
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    return LoadedModel(model=model, tokenizer=tokenizer, source="tiny-random-llama", dtype="float32", device="cpu")


def requests_for(agents: list[str], rows_per_agent: int) -> list[ChatRequest]:
    """One request per row, prompts of different lengths (so left padding is exercised), grouped by agent."""
    words = TEXT.split()
    requests = []
    for a, agent in enumerate(agents):
        for k in range(rows_per_agent):
            text = " ".join(words[: 30 + 7 * ((a * rows_per_agent + k) % 6)])
            messages = ({"role": "system", "content": f"You are the {agent} writer of a team."},
                        {"role": "user", "content": f"Summarize this text:\n{text}"})
            requests.append(ChatRequest(0, agent, 1, messages))
    return requests


def _timed(function: Callable[[], Any], device: str) -> tuple[float, float]:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - wall, time.process_time() - cpu


def run(model: str, agents: int, rows_per_agent: int, new_tokens: int, repeats: int, dtype: str,
        schemes: tuple[str, ...] = SCHEMES) -> dict[str, Any]:
    """Measure every scheme in ``schemes``; returns the report (see the module docstring)."""
    loaded = tiny_loaded() if model == "tiny" else load_model(None if model == "default" else model, dtype=dtype)
    device = loaded.device
    pristine = copy.deepcopy(loaded.model) if "base" in schemes else None
    names = [f"agent{i}" for i in range(agents)]
    team = TeamModel(loaded, names, lora=LoraSettings(init_lora_weights=False), seed=0)
    peft_model = team.model_of(names[0])  # init_lora_weights=False: random B, each adapter a different policy
    requests = requests_for(names, rows_per_agent)
    encoded = team.prompt_ids(requests)
    pad_id, stop_ids = team.special_tokens(names[0])
    agent_of_row = [request.agent for request in requests]
    settings = GenerationSettings(temperature=0.7, top_p=0.95, max_new_tokens=new_tokens, seed=0)
    sampling = {"do_sample": True, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": new_tokens,
                "min_new_tokens": new_tokens, "pad_token_id": pad_id, "eos_token_id": sorted(stop_ids)}

    def batch(rows: list[int]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = left_pad([encoded[i] for i in rows], pad_id, device)
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    everything = list(range(len(requests)))
    by_agent = {agent: [i for i, a in enumerate(agent_of_row) if a == agent] for agent in names}
    merged: dict[str, Any] = {}
    if "merged" in schemes:
        for agent in names:
            copy_ = copy.deepcopy(peft_model)
            copy_.set_adapter(agent)
            merged[agent] = copy_.merge_and_unload(adapter_names=[agent]).eval()

    def generate(model_: Any, rows: list[int], **extra: Any) -> None:
        torch.manual_seed(0)
        with torch.inference_mode():
            model_.generate(**batch(rows), **sampling, **extra)

    def stacked() -> None:
        with team.route(agent_of_row) as routed:
            generate(routed, everything)

    def per_adapter() -> None:
        for agent, rows in by_agent.items():
            peft_model.set_adapter(agent)
            generate(peft_model, rows)

    runners: dict[str, tuple[Callable[[], None], int]] = {
        "base": (lambda: generate(pristine, everything), 1),
        "stacked": (stacked, 1),
        "peft_mixed": (lambda: generate(peft_model, everything, adapter_names=agent_of_row), 1),
        "set_adapter": (per_adapter, agents),
        "merged": (lambda: [generate(merged[agent], rows) for agent, rows in by_agent.items()], agents),
        "team_generate": (lambda: team.generate(requests, settings, min_new_tokens=new_tokens), 1),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in schemes}
    for round_ in range(repeats + 1):  # round 0 warms up
        for name in schemes:
            measured = _timed(runners[name][0], device)
            if round_:
                times[name].append(measured)
    errors = _logit_errors(team, peft_model, merged, batch(everything), agent_of_row, by_agent, schemes)
    rows_total = len(requests)
    base_wall = statistics.median(w for w, _ in times["base"]) if "base" in schemes else None
    base_cpu = statistics.median(c for _, c in times["base"]) if "base" in schemes else None
    results = {}
    for name in schemes:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        results[name] = {
            "generate_calls": runners[name][1],
            "median_s": round(wall, 3),
            "median_cpu_s": round(cpu, 3),
            "times_s": [round(w, 3) for w, _ in times[name]],
            "tokens_per_s": round(rows_total * new_tokens / wall, 1),
            "ratio_vs_base": round(wall / base_wall, 3) if base_wall else None,
            "cpu_ratio_vs_base": round(cpu / base_cpu, 3) if base_cpu else None,
            "max_abs_logit_diff": errors.get(name),
        }
    adapter_schemes = [name for name in schemes if name not in ("base", "team_generate")]
    return {
        "benchmark": "adapter_generation",
        "model": loaded.source,
        "dtype": loaded.dtype,
        "device": device,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
        "agents": agents,
        "rows_per_agent": rows_per_agent,
        "rows": rows_total,
        "prompt_tokens": [len(ids) for ids in encoded],
        "new_tokens": new_tokens,
        "repeats": repeats,
        "lora": {"r": team.lora.r, "alpha": team.lora.alpha, "target_modules": list(team.lora.target_modules)},
        "results": results,
        "fastest_adapter_scheme": min(adapter_schemes, key=lambda n: results[n]["median_s"]) if adapter_schemes
        else None,
    }


def _logit_errors(team: TeamModel, peft_model: Any, merged: dict[str, Any], inputs: dict[str, torch.Tensor],
                  agent_of_row: list[str], by_agent: dict[str, list[int]],
                  schemes: tuple[str, ...]) -> dict[str, float]:
    """Largest |logit - reference| per scheme over the prompt batch; reference: one set_adapter run per agent."""
    with torch.inference_mode():
        reference = torch.empty(0)
        for agent, rows in by_agent.items():
            peft_model.set_adapter(agent)
            logits = peft_model(**{k: v[rows] for k, v in inputs.items()}).logits.float()
            if reference.numel() == 0:
                reference = logits.new_zeros((len(agent_of_row), *logits.shape[1:]))
            reference[rows] = logits
        found: dict[str, torch.Tensor] = {}
        if "stacked" in schemes or "team_generate" in schemes:
            with team.route(agent_of_row) as routed:
                found["stacked"] = routed(**inputs).logits.float()
            found["team_generate"] = found["stacked"]
        if "peft_mixed" in schemes:
            found["peft_mixed"] = peft_model(**inputs, adapter_names=agent_of_row).logits.float()
        if "set_adapter" in schemes:
            found["set_adapter"] = reference
        if merged:
            values = reference.clone()
            for agent, rows in by_agent.items():
                values[rows] = merged[agent](**{k: v[rows] for k, v in inputs.items()}).logits.float()
            found["merged"] = values
    mask = inputs["attention_mask"].bool()
    return {name: float((values - reference).abs()[mask].max()) for name, values in found.items() if name in schemes}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point: print the figures, optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny (random-weight Llama), default (SmolLM2-135M) or a path")
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--rows-per-agent", type=int, default=4, help="G × envs rows per agent")
    parser.add_argument("--new-tokens", type=int, default=32, help="new tokens per row (min = max)")
    parser.add_argument("--repeats", type=int, default=5, help="measured rounds after one warm-up round")
    parser.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16", "float16"))
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    report = run(args.model, args.agents, args.rows_per_agent, args.new_tokens, args.repeats, args.dtype,
                 tuple(args.schemes))
    print(f"{report['model']} {report['dtype']} on {report['device']}: {report['agents']} agents × "
          f"{report['rows_per_agent']} rows, {report['new_tokens']} new tokens, medians of {report['repeats']}")
    print(f"{'scheme':<14}{'calls':>6}{'wall s':>9}{'cpu s':>9}{'tok/s':>9}{'× base':>8}{'cpu × base':>11}"
          f"{'max |Δlogit|':>14}")
    for name, row in report["results"].items():
        diff = "" if row["max_abs_logit_diff"] is None else f"{row['max_abs_logit_diff']:.1e}"
        print(f"{name:<14}{row['generate_calls']:>6}{row['median_s']:>9.2f}{row['median_cpu_s']:>9.2f}"
              f"{row['tokens_per_s']:>9.1f}{row['ratio_vs_base'] or 0:>8.2f}{row['cpu_ratio_vs_base'] or 0:>11.2f}"
              f"{diff:>14}")
    print(f"fastest adapter scheme: {report['fastest_adapter_scheme']}")
    if args.json:
        write_figures_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
