"""Trainer step: our MAGRPO step against CoMLRL's ``MAGRPOTrainer`` and TRL's ``GRPOTrainer``, side by side in one run.

Every configuration runs in a fresh Python interpreter (so peak memory is its own) with the same model, the same
prompts in the same order, the same group size G, the same sampling (temperature 1, top-p 1, top-k 50) and a fixed
number of new tokens (min = max, so no trainer stops early). Each child times ``--warmup`` steps it then discards and
``--steps`` steady steps; the figures are medians of the steady steps and the child's peak memory
(``ru_maxrss`` on CPU, ``torch.cuda.max_memory_allocated`` on CUDA).

Cases, for each G of ``--groups`` (one step = every agent samples G completions for its prompt of one task):

- ``ours_n2``: :class:`llm_marl_trainers.magrpo.MAGRPOTrainer`, 2 agents (one LoRA adapter each on one shared base);
- ``comlrl_n2``: CoMLRL's ``MAGRPOTrainer`` on the same 2 prompts per step (one full model per agent, as CoMLRL
  trains by default; ``--peer-lora`` gives it our LoRA adapters instead);
- ``ours_n1x2``: our trainer with 1 agent and 2 envs per step: the same 2·G completions from the same prompts;
- ``trl_n1x2``: TRL's ``GRPOTrainer`` with 2 prompts × G completions per optimizer step (full fine-tuning by default;
  ``bf16=False`` on CPU; gradient checkpointing off, as in our trainer);
- ``floor``: the least work such a step can do: one plain batched ``generate`` of those 2·G completions on the base
  model, then one forward/backward/AdamW pass over them with one LoRA adapter;

and for memory, at the first G only: ``ours_n1`` and ``ours_n4`` (1 and 4 agents, one env per step).

The JSON holds every case and ``ratio_vs_comlrl`` (ours_n2 / comlrl_n2), ``ratio_vs_trl`` (ours_n1x2 / trl_n1x2),
``ratio_vs_floor`` (ours_n2 / floor) — step-time medians, at the first G (``by_group`` has every G) — and
``memory_ratio_n4_n1`` (peak memory ours_n4 / ours_n1), each with its target (≤ 0.7, ≤ 1.0, ≤ 1.15, ≤ 1.5).

Prompts are the writing env's (``make_env("writing", num_agents=2, similarity="tfidf", max_turns=1)``, tasks 0, 1,
...): prompt row ``2·t + i`` is agent ``i``'s chat of task ``t``; step ``s`` of every case reads rows ``2s, 2s+1`` (4
agents: rows ``4s`` to ``4s+3``). Rewards are a cheap text statistic (the share of the letter e), the same for all.

    python -m llm_marl_benchmarks.trainer_step --json results/trainer_step.json   # SmolLM2-135M, G = 4 and 8
    python -m llm_marl_benchmarks.trainer_step --tiny --steps 1 --warmup 0 --new-tokens 8        # seconds: a smoke run
    python -m llm_marl_benchmarks.trainer_step --only ours floor --groups 4 --device cuda        # bf16 on a GPU
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from llm_marl_benchmarks.figures_json import write_figures_json

REPO_ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS: tuple[str, ...] = ("ours", "comlrl", "trl", "floor")
"""What ``--only`` picks from."""
TARGETS: dict[str, float] = {
    "ratio_shared_vs_repeated": 0.5,
    "ratio_vs_comlrl": 0.35,
    "ratio_vs_trl": 1.0,
    "memory_ratio_n4_n1": 1.5,
    "ratio_vs_floor": 1.15,
}
"""The targets (issues 10 and 24): every ratio must be at most its target."""
LEARNING_RATE = 1e-4
LORA_R, LORA_ALPHA = 8, 16
TOP_K = 50
"""transformers' default top-k, which our trainer samples with; the peers are given it explicitly."""
PROMPTS_PER_STEP = 2
"""Prompts per step of the two-agent comparison (one per agent), which the one-agent cases get as two envs."""


# ----------------------------------------------------------------------------------------------------------------
# Cases and prompts (parent side: no torch needed)
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One configuration, run in its own interpreter."""

    name: str
    framework: str
    agents: int
    group: int
    envs_per_step: int = 1
    share_prefix: bool = True
    """Ours only: read each prompt once (False: the repeated path, ``generate`` and a full forward per row)."""
    recipe: str | None = None
    """Ours only: train with this recipe (YAML) on its real env instead of the fixed prompts."""
    graph_decode: bool | None = None
    """Ours only: the trainer's ``graph_decode`` (None: its default, on for CUDA)."""
    graph_compile: bool = False
    """Ours only: the trainer's ``graph_compile`` (the graph decoder's step through ``torch.compile``)."""
    stop_at_reply_end: bool | None = None
    """Ours, with a recipe only: the trainer's ``stop_at_reply_end`` (None: the recipe's own)."""

    @property
    def completions_per_step(self) -> int:
        """Completions sampled (and trained on) per step."""
        return self.agents * self.envs_per_step * self.group


def plan_cases(groups: Sequence[int], only: Sequence[str]) -> list[Case]:
    """The cases of one run, in the order they run (see the module docstring)."""
    cases: list[Case] = []
    for index, group in enumerate(groups):
        if "ours" in only:
            cases.append(Case(f"ours_n2_g{group}", "ours", 2, group))
            cases.append(Case(f"ours_n2_repeated_g{group}", "ours", 2, group, share_prefix=False))
        if "comlrl" in only:
            cases.append(Case(f"comlrl_n2_g{group}", "comlrl", 2, group))
        if "ours" in only:
            cases.append(Case(f"ours_n1x2_g{group}", "ours", 1, group, envs_per_step=PROMPTS_PER_STEP))
        if "trl" in only:
            cases.append(Case(f"trl_n1x2_g{group}", "trl", 1, group, envs_per_step=PROMPTS_PER_STEP))
        if "floor" in only:
            cases.append(Case(f"floor_g{group}", "floor", 1, group, envs_per_step=PROMPTS_PER_STEP))
        if "ours" in only and index == 0:  # memory against team size: the first G only
            cases.append(Case(f"ours_n1_g{group}", "ours", 1, group))
            cases.append(Case(f"ours_n4_g{group}", "ours", 4, group))
    return cases


RECIPE_COMPARISONS = ("prefix", "graphs", "compiled", "stops")
"""What ``--recipe`` compares: reading each prompt once against prefilling every row (``prefix``), the graph
decoder against the eager decode, both reading each prompt once (``graphs``; CUDA), those two and the graph decoder
with its step compiled by ``torch.compile`` (``compiled``; CUDA), or replies stopped where their env ends them against
replies that run on (``stops``: the trainer's ``stop_at_reply_end``)."""


def plan_recipe_cases(recipes: Sequence[Path], compare: str = "prefix") -> list[Case]:
    """For each recipe, two cases of our trainer on the recipe's own env and settings (see
    :data:`RECIPE_COMPARISONS`): ``recipe_<stem>_shared`` / ``_repeated``, ``recipe_<stem>_graphs`` / ``_eager``, or
    ``recipe_<stem>_stopped`` / ``_unstopped``."""
    if compare not in RECIPE_COMPARISONS:
        raise ValueError(f"compare: expected one of {RECIPE_COMPARISONS}, got {compare!r}")
    variants: dict[str, dict[str, Any]] = {
        "prefix": {"shared": {"share_prefix": True}, "repeated": {"share_prefix": False}},
        "stops": {"stopped": {"stop_at_reply_end": True}, "unstopped": {"stop_at_reply_end": False}},
    }.get(compare, {"graphs": {"graph_decode": True}, "eager": {"graph_decode": False}})
    if compare == "compiled":
        variants = {"compiled": {"graph_decode": True, "graph_compile": True}, **variants}
    cases = []
    for recipe in recipes:
        values = _recipe_values(recipe)
        for suffix, options in variants.items():
            cases.append(Case(f"recipe_{recipe.stem}_{suffix}", "ours",
                              int(values.get("num_agents", 2)), int(values.get("num_generations", 4)),
                              int(values.get("envs_per_step", 1)), recipe=str(recipe.resolve()), **options))
    return cases


def _recipe_values(recipe: Path) -> dict[str, Any]:
    import yaml

    values = yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}
    if not isinstance(values, dict):
        raise ValueError(f"--recipe {recipe}: expected a mapping of trainer options")
    return values


def build_prompt_rows(count: int) -> list[list[dict[str, str]]]:
    """``count`` chats: row ``2t + i`` is agent ``i``'s chat messages at task ``t`` of the two-agent writing env."""
    from llm_marl_envs.registry import make_env

    env = make_env("writing", num_agents=2, similarity="tfidf", max_turns=1)
    rows: list[list[dict[str, str]]] = []
    task = 0
    while len(rows) < count:
        env.reset(seed=task)
        rows += [[dict(message) for message in env.chat_messages(agent)] for agent in env.possible_agents]
        task += 1
    return rows[:count]


def build_tiny_model(folder: Path) -> Path:
    """Save a random-weight 4-layer Llama with a small byte-level BPE tokenizer (ChatML tokens at SmolLM2's ids) to
    ``folder``, loadable by :func:`llm_marl_baselines.models.load_model` like any local model."""
    from llm_marl_benchmarks.adapter_generation import tiny_loaded

    loaded = tiny_loaded()
    # Its tokenizer splits the writing env's prompts into ~1-2k tokens; a context that holds them whole keeps our
    # loader from trimming prompts that the peers, which never trim, would read in full.
    loaded.model.config.max_position_embeddings = 8192
    loaded.model.save_pretrained(str(folder))
    loaded.tokenizer.save_pretrained(str(folder))
    return folder


# ----------------------------------------------------------------------------------------------------------------
# Child side: one case in a fresh interpreter
# ----------------------------------------------------------------------------------------------------------------


def share_of_e(text: str) -> float:
    """The cheap reward every trainer gets: the share of letters in ``text`` that are 'e' (0 for no letters)."""
    letters = [c for c in text.lower() if c.isalpha()]
    return sum(c == "e" for c in letters) / len(letters) if letters else 0.0


class FixedPromptEnv:
    """A one-turn PettingZoo-style ParallelEnv with text spaces over fixed chats, for our trainer.

    ``reset(seed=k)`` gives agent ``i`` chat row ``k · num_agents + i``; our trainer seeds env ``e`` of step ``s``
    with ``s · envs_per_step + e`` (seed 0), so 2 agents × 1 env and 1 agent × 2 envs read the same rows per step.
    The joint reward is the mean :func:`share_of_e` of the agents' texts.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "fixed_prompt_v0", "render_modes": []}

    def __init__(self, rows: Sequence[Sequence[dict[str, str]]], num_agents: int) -> None:
        from llm_marl_envs.core.spaces import UnicodeText

        self.rows = rows
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.turn = 0
        self._chats: dict[str, list[dict[str, str]]] = {}
        self._space = UnicodeText(8192)

    def __deepcopy__(self, memo: dict[int, Any]) -> FixedPromptEnv:
        # The tree copies the env once per joint action; the chat rows never change, so copies share them.
        copy_ = FixedPromptEnv.__new__(FixedPromptEnv)
        copy_.__dict__.update(self.__dict__)
        copy_.agents, copy_._chats = list(self.agents), dict(self._chats)
        return copy_

    def observation_space(self, agent: str) -> Any:
        """Text observations."""
        return self._space

    def action_space(self, agent: str) -> Any:
        """Text actions."""
        return self._space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Pick the chats of ``seed``'s rows."""
        index = seed or 0
        n = len(self.possible_agents)
        self._chats = {agent: [dict(m) for m in self.rows[(index * n + i) % len(self.rows)]]
                       for i, agent in enumerate(self.possible_agents)}
        self.agents, self.turn = list(self.possible_agents), 0
        return {a: chat[-1]["content"] for a, chat in self._chats.items()}, {a: {} for a in self.agents}

    def chat_messages(self, agent: str) -> list[dict[str, str]]:
        """The agent's chat (system and user messages), as the suite's envs give it."""
        return [dict(m) for m in self._chats[agent]]

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        """Pay the mean share of 'e' to everyone and end the episode."""
        reward = sum(share_of_e(actions[a]) for a in self.agents) / len(self.agents)
        agents, self.agents = self.agents, []
        self.turn += 1
        return ({a: "" for a in agents}, {a: reward for a in agents}, {a: True for a in agents},
                {a: False for a in agents}, {a: {"reward_components": {"quality": reward}} for a in agents})

    def state(self) -> dict[str, Any]:
        """A minimal state (the runner's trajectories read it)."""
        return {"task": {"task_id": "fixed"}, "turn": self.turn, "team_return": 0.0, "end_reason": None,
                "drafts": {}, "config": {}}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _load(spec: dict[str, Any]) -> Any:
    from llm_marl_baselines.models import load_model

    return load_model(spec["model"], dtype=spec["dtype"], device=spec["device"])


def _lora_config() -> Any:
    from llm_marl_trainers.generation import LoraSettings

    return LoraSettings(r=LORA_R, alpha=LORA_ALPHA)


def _rendered(tokenizer: Any, rows: Sequence[Sequence[dict[str, str]]]) -> list[str]:
    """Each chat as the prompt text every trainer feeds its tokenizer (the model's chat template, assistant turn
    opened): exactly what our trainer renders before tokenizing."""
    return [tokenizer.apply_chat_template([dict(m) for m in row], tokenize=False, add_generation_prompt=True)
            for row in rows]


def run_ours(spec: dict[str, Any], case: Case) -> dict[str, Any]:
    """Our trainer: ``training_step()`` timed from outside; its own ``generation_time`` splits the step."""
    from llm_marl_trainers.config import TrainerConfig
    from llm_marl_trainers.generation import TeamModel
    from llm_marl_trainers.magrpo import MAGRPOTrainer

    steps_total = spec["warmup"] + spec["steps"]
    output_dir = str(Path(spec["workdir"]) / "ours")
    if case.recipe is not None:  # the recipe's own env, model, dtype and sampling; only the run's length changes
        config = TrainerConfig.from_yaml(case.recipe, steps=steps_total, output_dir=output_dir,
                                         share_prefix=case.share_prefix, graph_decode=case.graph_decode,
                                         graph_compile=case.graph_compile, report_to="none",
                                         **({} if case.stop_at_reply_end is None
                                            else {"stop_at_reply_end": case.stop_at_reply_end}))
        trainer = MAGRPOTrainer(config)
    else:
        loaded = _load(spec)
        agents = [f"agent_{i}" for i in range(case.agents)]
        team = TeamModel(loaded, agents, lora=_lora_config(), seed=0)
        tokens = spec["new_tokens"]
        config = TrainerConfig(env="writing", num_agents=case.agents, num_generations=case.group,
                               envs_per_step=case.envs_per_step, max_completion_length=tokens,
                               min_completion_length=tokens, temperature=1.0, top_p=1.0,
                               learning_rate=LEARNING_RATE, lora_r=LORA_R, lora_alpha=LORA_ALPHA, steps=steps_total,
                               output_dir=output_dir, seed=0, share_prefix=case.share_prefix)
        trainer = MAGRPOTrainer(config, team=team, env_factory=functools.partial(FixedPromptEnv, spec["rows"],
                                                                                 case.agents))
    steps, generation, completion_tokens, prompt_tokens, distinct_prompt_tokens = [], [], [], [], []
    for _ in range(config.steps):
        _sync(spec["device"])
        started = time.perf_counter()
        row = trainer.training_step()
        _sync(spec["device"])
        steps.append(time.perf_counter() - started)
        generation.append(float(row["generation_time"]))
        completion_tokens.append(int(row["completion_tokens"]))
        prompt_tokens.append(int(row["prompt_tokens"]))
        distinct_prompt_tokens.append(int(row["distinct_prompt_tokens"]))
    result = {"step_s": steps, "generation_s": generation, "completion_tokens": completion_tokens,
              "prompt_tokens": prompt_tokens, "distinct_prompt_tokens": distinct_prompt_tokens,
              "share_prefix": case.share_prefix}
    if trainer.team.graph_decode or (trainer.team.graph_decode is None and spec["device"].startswith("cuda")):
        result["graph_decode"] = _decode_stats(trainer.team, steps_total)
    return result


def _decode_stats(team: Any, steps: int) -> dict[str, Any]:
    """What the team's graph decoder did over the run, per trainer step, and the floor of its decode: the bytes its
    steps had to read (weights, and keys and values of the captured rows) over the device's memory bandwidth."""
    from llm_marl_baselines.graph_decode import graph_decoder, supports

    model = team.model_of(team.agents[0])
    if not supports(model):
        return {"used": False}
    stats = graph_decoder(model, team.agents, compile=team.graph_compile).stats
    bandwidth = memory_bandwidth()
    floor_s = stats.bytes_read / bandwidth if bandwidth else None
    return {"used": stats.steps > 0, "decode_steps_per_trainer_step": stats.steps / steps,
            "row_steps_per_trainer_step": stats.row_steps / steps, "captures": stats.captures,
            "capture_error": stats.capture_error, "compiled": stats.compiled, "compile_error": stats.compile_error,
            "compile_s": stats.compile_s, "graph_shapes": stats.shapes,
            "bytes_read_per_decode_step": stats.bytes_read / max(stats.steps, 1),
            "memory_bandwidth_bytes_s": bandwidth,
            "decode_floor_s_per_trainer_step": None if floor_s is None else floor_s / steps}


MEMORY_BANDWIDTH: dict[str, float] = {"H200": 4.8e12, "H100 80GB HBM3": 3.35e12, "H100": 3.35e12, "A100": 2.0e12}
"""Datasheet memory bandwidth (bytes/s) by a substring of ``torch.cuda.get_device_name()`` (first match): H200 SXM
4.8 TB/s, H100 SXM 3.35 TB/s, A100 80GB 2.0 TB/s (NVIDIA's datasheets). The floor it gives is a lower bound."""


def memory_bandwidth() -> float | None:
    """The current CUDA device's memory bandwidth from :data:`MEMORY_BANDWIDTH`, or None (CPU, unknown device)."""
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((value for key, value in MEMORY_BANDWIDTH.items() if key in name), None)


def run_comlrl(spec: dict[str, Any], case: Case) -> dict[str, Any]:
    """CoMLRL's ``MAGRPOTrainer.train()`` over one epoch of ``warmup + steps`` items; each item is one step
    (``_train_step_returns``: the tree's generations, then, with ``rollout_buffer_size=1``, every agent's update),
    timed by wrapping that method; generation time by wrapping ``_generate_completions``."""
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
    from datasets import Dataset

    total = spec["warmup"] + spec["steps"]
    models, tokenizer = [], None
    for _ in range(case.agents):  # CoMLRL trains one model per agent
        loaded = _load(spec)
        model = loaded.model
        if spec["peer_lora"]:
            import peft

            model = peft.get_peft_model(model, _lora_config().to_peft())
        models.append(model)
        tokenizer = loaded.tokenizer
    texts = _rendered(tokenizer, spec["rows"])
    n = case.agents

    def formatter_for(agent: int) -> Callable[[dict[str, Any]], str]:
        return lambda item: texts[item["task"] * n + agent]

    def reward(*agent_completions: list[str]) -> list[float]:
        # CoMLRL calls this with one list per agent, each holding one completion (aligned joint action).
        return [sum(share_of_e(c[0]) for c in agent_completions) / len(agent_completions)]

    args = MAGRPOConfig(num_train_epochs=1, agent_learning_rate=LEARNING_RATE, num_agents=n,
                        num_generations=case.group, max_new_tokens=spec["new_tokens"], temperature=1.0, top_p=1.0,
                        top_k=TOP_K, num_turns=1, joint_mode="aligned", early_termination_threshold=None,
                        eval_interval=0, eval_num_samples=0, rollout_buffer_size=1, logging_steps=1,
                        agent_devices=spec["device"])
    dataset = Dataset.from_list([{"prompt": "", "task": t} for t in range(total)])
    trainer = MAGRPOTrainer(agents=models, num_agents=n, tokenizer=tokenizer, train_dataset=dataset,
                            reward_func=reward, formatters=[formatter_for(i) for i in range(n)], args=args)
    steps, generation, completion_tokens = [], [], []
    generate, step = trainer._generate_completions, trainer._train_step_returns
    pending = {"generation": 0.0, "tokens": 0}

    def timed_generate(*args_: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = generate(*args_, **kwargs)
        pending["generation"] += time.perf_counter() - started
        pending["tokens"] += sum(int(x) for x in result["response_lens"])
        return result

    def timed_step(*args_: Any, **kwargs: Any) -> Any:
        pending["generation"], pending["tokens"] = 0.0, 0
        _sync(spec["device"])
        started = time.perf_counter()
        result = step(*args_, **kwargs)
        _sync(spec["device"])
        steps.append(time.perf_counter() - started)
        generation.append(pending["generation"])
        completion_tokens.append(pending["tokens"])
        return result

    trainer._generate_completions, trainer._train_step_returns = timed_generate, timed_step
    trainer.verbose = False
    # Extra train() keywords reach CoMLRL's generate call: min = max new tokens.
    trainer.train(min_new_tokens=spec["new_tokens"])
    return {"step_s": steps, "generation_s": generation, "completion_tokens": completion_tokens,
            "peer_finetuning": "lora" if spec["peer_lora"] else "full"}


def run_trl(spec: dict[str, Any], case: Case) -> dict[str, Any]:
    """TRL's ``GRPOTrainer.train()`` for ``warmup + steps`` optimizer steps of ``envs_per_step`` prompts × G
    completions (one generation batch per step, no shuffling), timed from ``on_step_begin`` to ``on_step_end``;
    generation time by wrapping ``_generate``."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    loaded = _load(spec)
    total = spec["warmup"] + spec["steps"]
    prompts_per_step = case.envs_per_step * case.agents
    texts = _rendered(loaded.tokenizer, spec["rows"])[: total * prompts_per_step]
    device = spec["device"]
    steps: list[float] = []
    generation: list[float] = []
    mean_lengths: list[float] = []
    pending = {"started": 0.0, "generation": 0.0}

    class StepTimer(TrainerCallback):
        """Wall time of each optimizer step (generation, loss, backward, optimizer) and its mean completion length."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(device)
            pending["started"], pending["generation"] = time.perf_counter(), 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(device)
            steps.append(time.perf_counter() - pending["started"])
            generation.append(pending["generation"])

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if logs and "completions/mean_length" in logs:
                mean_lengths.append(float(logs["completions/mean_length"]))

    def reward(completions: list[str], **kwargs: Any) -> list[float]:
        return [share_of_e(c) for c in completions]

    cuda = device.startswith("cuda")
    tokens = spec["new_tokens"]
    args = GRPOConfig(
        output_dir=str(Path(spec["workdir"]) / "trl"), per_device_train_batch_size=prompts_per_step * case.group,
        gradient_accumulation_steps=1, num_generations=case.group, max_completion_length=tokens,
        generation_kwargs={"min_new_tokens": tokens}, temperature=1.0, top_p=1.0, top_k=TOP_K,
        learning_rate=LEARNING_RATE, max_steps=total, shuffle_dataset=False, beta=0.0, num_iterations=1,
        # bf16 defaults to True in GRPOConfig: on CPU that would train an fp32 model under bf16 autocast.
        bf16=cuda, use_cpu=not cuda, gradient_checkpointing=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )
    peft_config = _lora_config().to_peft() if spec["peer_lora"] else None
    trainer = GRPOTrainer(model=loaded.model, reward_funcs=reward, args=args, processing_class=loaded.tokenizer,
                          train_dataset=Dataset.from_dict({"prompt": texts}), callbacks=[StepTimer()],
                          peft_config=peft_config)
    generate = trainer._generate

    def timed_generate(*args_: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = generate(*args_, **kwargs)
        pending["generation"] += time.perf_counter() - started
        return result

    trainer._generate = timed_generate
    trainer.train()
    completions = prompts_per_step * case.group
    return {"step_s": steps, "generation_s": generation,
            "completion_tokens": [round(length * completions) for length in mean_lengths],
            "peer_finetuning": "lora" if spec["peer_lora"] else "full"}


def run_floor(spec: dict[str, Any], case: Case) -> dict[str, Any]:
    """The floor: per step, one plain batched ``generate`` of every completion on the base model (adapter off),
    then one forward/backward pass over prompt + completion under one LoRA adapter and one AdamW step."""
    import peft
    import torch

    from llm_marl_trainers.generation import left_pad

    loaded = _load(spec)
    tokenizer, device, tokens = loaded.tokenizer, loaded.device, spec["new_tokens"]
    model = peft.get_peft_model(loaded.model, _lora_config().to_peft())
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE)
    texts = _rendered(tokenizer, spec["rows"])
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompts_per_step = case.envs_per_step * case.agents
    torch.manual_seed(0)
    steps, generation, completion_tokens = [], [], []
    for step in range(spec["warmup"] + spec["steps"]):
        rows = [encoded[step * prompts_per_step + p] for p in range(prompts_per_step) for _ in range(case.group)]
        input_ids, attention_mask = left_pad(rows, pad_id, device)
        _sync(device)
        started = time.perf_counter()
        model.eval()
        with torch.inference_mode(), model.disable_adapter():
            sequences = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=True,
                                       temperature=1.0, top_p=1.0, top_k=TOP_K, max_new_tokens=tokens,
                                       min_new_tokens=tokens, pad_token_id=pad_id, eos_token_id=eos_id)
        sequences = sequences.clone()  # out of inference mode, so autograd may use it
        completions = sequences[:, input_ids.shape[1]:]
        generated = time.perf_counter()
        texts_out = tokenizer.batch_decode(completions, skip_special_tokens=True)
        rewards = torch.tensor([share_of_e(t) for t in texts_out]).view(prompts_per_step, case.group)
        advantages = (rewards - rewards.mean(dim=1, keepdim=True)).flatten().to(device)
        model.train()
        full_mask = torch.cat([attention_mask, torch.ones_like(completions)], dim=1)
        position_ids = (full_mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = model(input_ids=sequences, attention_mask=full_mask, position_ids=position_ids,
                       logits_to_keep=tokens + 1).logits[:, :-1]
        logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, completions.unsqueeze(-1)).squeeze(-1)
        loss = -(advantages[:, None] * logps).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        _sync(device)
        steps.append(time.perf_counter() - started)
        generation.append(generated - started)
        completion_tokens.append(int(completions.numel()))
    return {"step_s": steps, "generation_s": generation, "completion_tokens": completion_tokens}


RUNNERS: dict[str, Callable[[dict[str, Any], Case], dict[str, Any]]] = {
    "ours": run_ours, "comlrl": run_comlrl, "trl": run_trl, "floor": run_floor,
}


def run_child(spec_path: Path) -> None:
    """Run the case of ``spec_path`` (JSON written by the parent) and write its result JSON where the spec says."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    case = Case(**spec["case"])
    import torch

    started = time.perf_counter()
    result = RUNNERS[case.framework](spec, case)
    warmup = spec["warmup"]
    steady = result["step_s"][warmup:]
    if len(steady) != spec["steps"]:
        raise RuntimeError(f"{case.name}: expected {spec['steps']} steady steps after {warmup} warm-up steps, "
                           f"timed {len(result['step_s'])} in all")
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30  # Linux reports KiB
    cuda = spec["device"].startswith("cuda")
    result.update({
        "median_step_s": statistics.median(steady),
        "median_generation_s": statistics.median(result["generation_s"][warmup:]),
        "median_completion_tokens": statistics.median(result["completion_tokens"][warmup:]),
        **({"median_prompt_tokens": statistics.median(result["prompt_tokens"][warmup:]),
            "median_distinct_prompt_tokens": statistics.median(result["distinct_prompt_tokens"][warmup:])}
           if "prompt_tokens" in result else {}),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else rss_gib,
        "memory_source": "torch.cuda.max_memory_allocated" if cuda else "ru_maxrss",
        "host_peak_rss_gib": rss_gib,
        "child_wall_s": time.perf_counter() - started,
    })
    Path(spec["out"]).write_text(json.dumps(result), encoding="utf-8")


# ----------------------------------------------------------------------------------------------------------------
# Parent side: run the children, collect, compare
# ----------------------------------------------------------------------------------------------------------------


def run_case(case: Case, settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Run ``case`` in a fresh interpreter; returns its figures (or ``error`` with the tail of its output)."""
    spec_path, out_path = workdir / f"{case.name}.spec.json", workdir / f"{case.name}.out.json"
    spec = {**settings, "case": vars(case), "workdir": str(workdir / case.name), "out": str(out_path)}
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    process = subprocess.run([sys.executable, "-m", "llm_marl_benchmarks.trainer_step", "--child", str(spec_path)],
                             cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    record: dict[str, Any] = {**vars(case), "completions_per_step": case.completions_per_step}
    if process.returncode != 0 or not out_path.is_file():
        tail = (process.stdout + process.stderr)[-3000:]
        return {**record, "error": f"exit status {process.returncode}; output tail:\n{tail}"}
    record.update(json.loads(out_path.read_text(encoding="utf-8")))
    record["wall_s"] = time.perf_counter() - started
    return record


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or not denominator:
        return None
    return numerator / denominator


def compare(results: dict[str, dict[str, Any]], groups: Sequence[int]) -> dict[str, Any]:
    """The ratios of the report from the cases' medians (None where a case is missing or failed)."""

    def value(name: str, key: str) -> float | None:
        row = results.get(name)
        return None if row is None or "error" in row else row[key]

    def recipes_with(variant: str) -> list[str]:
        """The recipe cases' common names (``recipe_<stem>``) that ran ``variant``."""
        return sorted({n.removesuffix(f"_{variant}") for n in results
                       if n.startswith("recipe_") and n.endswith(f"_{variant}")})

    def step_ratios(name: str, a: str, b: str) -> dict[str, float | None]:
        """Variant ``a``'s step and generation seconds over variant ``b``'s, for the recipe cases ``name``."""
        return {f"ratio_{a}_vs_{b}": _ratio(value(f"{name}_{a}", "median_step_s"),
                                            value(f"{name}_{b}", "median_step_s")),
                f"ratio_generation_{a}_vs_{b}": _ratio(value(f"{name}_{a}", "median_generation_s"),
                                                        value(f"{name}_{b}", "median_generation_s"))}

    by_group = {}
    for group in groups:
        ours = value(f"ours_n2_g{group}", "median_step_s")
        by_group[str(group)] = {
            "ratio_shared_vs_repeated": _ratio(ours, value(f"ours_n2_repeated_g{group}", "median_step_s")),
            "ratio_vs_comlrl": _ratio(ours, value(f"comlrl_n2_g{group}", "median_step_s")),
            "ratio_vs_trl": _ratio(value(f"ours_n1x2_g{group}", "median_step_s"),
                                   value(f"trl_n1x2_g{group}", "median_step_s")),
            "ratio_vs_floor": _ratio(ours, value(f"floor_g{group}", "median_step_s")),
        }
    first = groups[0]
    ratios = {
        **by_group[str(first)],
        "memory_ratio_n4_n1": _ratio(value(f"ours_n4_g{first}", "peak_memory_gib"),
                                     value(f"ours_n1_g{first}", "peak_memory_gib")),
    }
    passed = {name: None if ratios[name] is None else bool(ratios[name] <= target) for name, target in TARGETS.items()}
    by_recipe: dict[str, dict[str, Any]] = {}
    for name in recipes_with("shared"):
        by_recipe[name.removeprefix("recipe_")] = step_ratios(name, "shared", "repeated")
    for name in recipes_with("graphs"):
        graphs, eager = results.get(f"{name}_graphs", {}), results.get(f"{name}_eager", {})
        tokens = value(f"{name}_graphs", "median_completion_tokens")
        by_recipe[name.removeprefix("recipe_")] = {
            "step_s": value(f"{name}_graphs", "median_step_s"),
            "eager_step_s": value(f"{name}_eager", "median_step_s"),
            "generation_s": value(f"{name}_graphs", "median_generation_s"),
            "eager_generation_s": value(f"{name}_eager", "median_generation_s"),
            "ratio_graphs_vs_eager": _ratio(value(f"{name}_graphs", "median_step_s"),
                                            value(f"{name}_eager", "median_step_s")),
            "completion_tokens_per_step": tokens,
            "generated_tokens_per_s": _ratio(tokens, value(f"{name}_graphs", "median_generation_s")),
            "eager_generated_tokens_per_s": _ratio(value(f"{name}_eager", "median_completion_tokens"),
                                                   value(f"{name}_eager", "median_generation_s")),
            "graph_decode": graphs.get("graph_decode"),
            "eager_error": eager.get("error"),
        }
        if f"{name}_compiled" in results:  # --recipe-compare compiled: the compiled step beside both
            compiled = results[f"{name}_compiled"]
            by_recipe[name.removeprefix("recipe_")].update({
                "compiled_step_s": value(f"{name}_compiled", "median_step_s"),
                "compiled_generation_s": value(f"{name}_compiled", "median_generation_s"),
                "ratio_compiled_vs_graphs": _ratio(value(f"{name}_compiled", "median_step_s"),
                                                   value(f"{name}_graphs", "median_step_s")),
                "ratio_compiled_vs_eager": _ratio(value(f"{name}_compiled", "median_step_s"),
                                                  value(f"{name}_eager", "median_step_s")),
                "compiled_graph_decode": compiled.get("graph_decode"),
                "compiled_error": compiled.get("error"),
            })
    for name in recipes_with("stopped"):  # --recipe-compare stops: steps sampled and trained up to each reply's end
        by_recipe[name.removeprefix("recipe_")] = {
            "step_s": value(f"{name}_stopped", "median_step_s"),
            "unstopped_step_s": value(f"{name}_unstopped", "median_step_s"),
            **step_ratios(name, "stopped", "unstopped"),
            "completion_tokens_per_step": value(f"{name}_stopped", "median_completion_tokens"),
            "unstopped_completion_tokens_per_step": value(f"{name}_unstopped", "median_completion_tokens"),
        }
    return {**{name: ratios[name] for name in TARGETS}, "by_group": by_group, "by_recipe": by_recipe,
            "targets": dict(TARGETS), "passed": passed}


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in ("torch", "transformers", "peft", "trl", "comlrl"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def print_report(report: dict[str, Any]) -> None:
    """The cases as a table and the ratios against their targets (rich when installed, plain text otherwise)."""
    header = ("case", "N", "G", "compl./step", "step s", "gen s", "gen %", "rest s", "peak GiB")
    lines = []
    for row in report["cases"]:
        if "error" in row:
            lines.append((row["name"], str(row["agents"]), str(row["group"]), str(row["completions_per_step"]),
                          "failed", "", "", "", ""))
            continue
        step, gen = row["median_step_s"], row["median_generation_s"]
        lines.append((row["name"], str(row["agents"]), str(row["group"]), str(row["completions_per_step"]),
                      f"{step:.2f}", f"{gen:.2f}", f"{100 * gen / step:.0f}", f"{step - gen:.2f}",
                      f"{row['peak_memory_gib']:.2f}"))
    verdicts = []
    for name, target in report["targets"].items():
        value, ok = report[name], report["passed"][name]
        verdicts.append((name, "n/a" if value is None else f"{value:.3f}", f"≤ {target}",
                         "n/a" if ok is None else ("pass" if ok else "FAIL")))
    title = (f"{report['model']} ({report['dtype']}, {report['device']}): {report['new_tokens']} new tokens, "
             f"medians of {report['steps']} steps after {report['warmup']} warm-up")
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the [cli] extra is optional
        print(title)
        print("  ".join(f"{h:>11}" for h in header))
        for line in lines:
            print("  ".join(f"{c:>11}" for c in line))
        for line in verdicts:
            print("  ".join(f"{c:>20}" for c in line))
        return
    console = Console()
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right")
    for line in lines:
        table.add_row(*line)
    console.print(table)
    ratios = Table(title=f"ratios at G = {report['groups'][0]} (our step / theirs; memory N=4 / N=1)")
    for name in ("ratio", "value", "target", "verdict"):
        ratios.add_column(name)
    for line in verdicts:
        ratios.add_row(*line)
    console.print(ratios)
    for label, table_ in (("G = ", report["by_group"]), ("recipe ", report.get("by_recipe", {}))):
        for key, values in table_.items():
            shown = ", ".join(f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in values.items()
                              if v is None or isinstance(v, (int, float)))
            console.print(f"{label}{key}: {shown}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (every case in its own interpreter), print the table, optionally write JSON; exit status 1
    when a case failed to run (missed targets are reported, not an error)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the report here")
    parser.add_argument("--steps", type=int, default=5, help="steady steps timed per case (medians)")
    parser.add_argument("--warmup", type=int, default=1, help="steps run first and not counted")
    parser.add_argument("--new-tokens", type=int, default=64, help="new tokens per completion (min = max)")
    parser.add_argument("--groups", type=int, nargs="+", default=[4, 8], help="G values; ratios are at the first")
    parser.add_argument("--only", nargs="*", choices=FRAMEWORKS, default=list(FRAMEWORKS),
                        help="cases to run (none: only the --recipe cases)")
    parser.add_argument("--model", default="default", help="'default' (offline SmolLM2-135M-Instruct) or a folder")
    parser.add_argument("--tiny", action="store_true", help="a random-weight tiny Llama instead (quick checks)")
    parser.add_argument("--device", default="cpu", help="cpu (fp32, ru_maxrss) or cuda (bf16, CUDA peak memory)")
    parser.add_argument("--peer-lora", action="store_true",
                        help="give CoMLRL and TRL our LoRA adapters instead of their default full fine-tuning")
    parser.add_argument("--recipe", type=Path, nargs="+", default=[], metavar="YAML",
                        help="also time our trainer on these recipes (their env and settings), with and without "
                             "reading each prompt once: ratio_shared_vs_repeated at the recipes' settings")
    parser.add_argument("--recipe-compare", choices=RECIPE_COMPARISONS, default="prefix",
                        help="what each --recipe compares: prefix (shared vs repeated), graphs (graph vs eager "
                             "decode, for CUDA), compiled (the graph decoder's step compiled, beside both) or stops "
                             "(replies stopped at their env's end vs run on: stop_at_reply_end)")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.child is not None:
        run_child(args.child)
        return 0
    if args.steps < 1 or args.warmup < 0 or args.new_tokens < 1 or any(g < 2 for g in args.groups):
        parser.error("expected --steps >= 1, --warmup >= 0, --new-tokens >= 1 and every G >= 2")
    if args.model != "default" and not args.tiny and not Path(args.model).is_dir():
        parser.error(f"--model: no model folder at {args.model!r}")
    groups = list(dict.fromkeys(args.groups))
    for recipe in args.recipe:
        if not recipe.is_file():
            parser.error(f"--recipe: no YAML file at {recipe}")
    cases = plan_cases(groups, args.only) + plan_recipe_cases(args.recipe, args.recipe_compare)
    total_steps = args.warmup + args.steps
    with tempfile.TemporaryDirectory(prefix="trainer_step-") as tmp:
        workdir = Path(tmp)
        model: str | None = None if args.model == "default" else str(Path(args.model).resolve())
        if args.tiny:
            model = str(build_tiny_model(workdir / "tiny-llama"))
        settings = {
            "model": model, "device": args.device, "dtype": "bfloat16" if args.device.startswith("cuda") else "float32",
            "steps": args.steps, "warmup": args.warmup, "new_tokens": args.new_tokens, "peer_lora": args.peer_lora,
            # The four-agent case reads 4 rows per step, the most of any case.
            "rows": build_prompt_rows(4 * total_steps),
        }
        results: dict[str, dict[str, Any]] = {}
        for number, case in enumerate(cases, 1):
            row = run_case(case, settings, workdir)
            results[case.name] = row
            shown = (f"failed:\n{row['error']}" if "error" in row else
                     f"{row['median_step_s']:.2f} s/step (generation {row['median_generation_s']:.2f} s), "
                     f"peak {row['peak_memory_gib']:.2f} GiB")
            print(f"[{number}/{len(cases)}] {case.name}: {shown}", file=sys.stderr, flush=True)
            if args.json:  # after every case, so a long run interrupted late still leaves its figures
                write_figures_json(args.json, build_report(args, settings, model, groups, results))
    report = build_report(args, settings, model, groups, results)
    print_report(report)
    if args.json:
        write_figures_json(args.json, report)
    return 1 if any("error" in row for row in results.values()) else 0


def build_report(args: argparse.Namespace, settings: dict[str, Any], model: str | None, groups: list[int],
                 results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON report: the run's settings, every case run so far and the ratios (see :func:`compare`)."""
    import torch

    return {
        "benchmark": "trainer_step",
        "model": "tiny-random-llama" if args.tiny else ("SmolLM2-135M-Instruct" if model is None else model),
        "device": args.device,
        "dtype": settings["dtype"],
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
        "versions": _versions(),
        "steps": args.steps,
        "warmup": args.warmup,
        "new_tokens": args.new_tokens,
        "groups": groups,
        "sampling": {"temperature": 1.0, "top_p": 1.0, "top_k": TOP_K},
        "lora": {"r": LORA_R, "alpha": LORA_ALPHA, "target_modules": ["q_proj", "v_proj"]},
        "learning_rate": LEARNING_RATE,
        "peer_finetuning": "lora" if args.peer_lora else "full",
        "cases": list(results.values()),
        **compare(results, groups),
    }


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
