"""TRL's ``GRPOTrainer`` playing the suite's envs: a prompt dataset, a ``rollout_func`` and a reward function.

Three lines train SmolLM2 on the writing env with TRL (LoRA by default)::

    from trl import GRPOConfig
    from llm_marl_trainers.trl_adapter import grpo_trainer
    grpo_trainer("writing", args=GRPOConfig("out", max_steps=100), similarity="tfidf").train()

Or by hand, with any model and config: ``rollout = EnvRollout("coding", num_agents=1, executor="local")``, then
``GRPOTrainer(model, reward_funcs=env_reward, train_dataset=rollout.dataset(256), rollout_func=rollout, ...)``.

The contract, as read in TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, ``trl/trainer/grpo_config.py``)
---------------------------------------------------------------------------------------------------
* Who calls it: ``GRPOTrainer._generate`` calls ``rollout_func(prompts, trainer)`` (instead of its own generation) from
  ``_generate_and_score_completions``, once per *generation batch* (``per_device_train_batch_size ×
  steps_per_generation`` rows of this process; ``_prepare_inputs`` buffers it and slices it over the accumulation
  steps).
* ``prompts``: a deep copy of the dataset rows' ``prompt`` values, nothing else of the row — no ``seed`` column.
  The rows come from ``RepeatSampler(mini_repeat_count=num_generations)`` (``GRPOTrainer._get_train_sampler``), so
  every prompt already appears ``num_generations`` times in a row and the function must return exactly one
  completion per entry, in order (the docstring's "no duplication" means TRL adds no further copies; advantages are
  then ``rewards.view(-1, num_generations)`` group statistics). Conversational prompts arrive as message lists and
  templating is the function's job (the comment in ``_generate``: "Chat templating must happen inside rollout_func").
* The returned dict must hold ``prompt_ids``, ``completion_ids`` and ``logprobs`` (``ValueError`` otherwise), one list
  per prompt, unpadded (``_generate_and_score_completions`` pads prompts left and completions right). TRL trains on
  the *returned* ``prompt_ids``, not on its own tokenization of the prompt. ``completion_ids`` are not truncated by
  TRL; a completion counts as truncated (``mask_truncated_completions``, ``completions/clipped_ratio``) when its last
  id is neither an eos id nor pad.
* ``logprobs`` are only read as ``sampling_per_token_logps``: by the vLLM importance-sampling correction
  (``use_vllm`` with ``vllm_importance_sampling_correction``) and by ``off_policy_mask_threshold``. Otherwise the loss
  uses ``old_per_token_logps`` (recomputed by TRL when generation and optimisation steps are misaligned) or
  ``per_token_logps.detach()``. TRL's recomputation divides the logits by ``args.temperature`` (``add_fused_lm_head(
  ..., temperature=self.temperature)`` in ``__init__``).
* Every other key is an *extra field*: ``env_mask`` (popped, per-token 1 = model token, 0 = environment token, masked
  out of the loss like tool output) and anything else, merged into each row (``inp[key] = values[i]`` for lists)
  after the log-prob passes and before ``_calculate_rewards``, which calls every reward function with ``prompts=``,
  ``completions=``, ``completion_ids=`` and every row key (dataset columns and extra fields) as a list, plus
  ``trainer_state``, ``log_extra`` and ``log_metric``.
* vLLM is not needed: without it the rollout function is simply the generation backend. With ``use_vllm`` TRL only
  syncs the vLLM weights before calling it; this adapter generates with the trainer's model and refuses ``use_vllm``.
* ``environment_factory`` (also experimental): a zero-argument callable (or a ``{name: callable}`` dict routed by an
  ``environment`` column) returning an object with ``reset(**row)`` — called with the *whole* dataset row before
  generation; a returned string is appended to the last user message — whose other public methods become *tools*
  the model calls during TRL's own tool-calling loop (``_tool_call_loop``), and an optional ``get_reward()`` that
  becomes one more reward function. It needs a chat template that renders tool calls (``supports_tool_calling``):
  SmolLM2's does not (checked: ``supports_tool_calling`` is False), and our envs act on free text, not tool calls, so
  this adapter uses ``rollout_func``.

How the adapter meets it
------------------------
* :func:`build_dataset`: one row per (seed, agent): ``prompt`` = ``env.chat_messages(agent)`` after
  ``env.reset(seed=seed)``, plus ``seed``, ``agent`` and ``task_id``.
* :class:`EnvRollout` (the ``rollout_func``): TRL hands it prompts only, so it finds each prompt's seed in the
  trainer's own ``train_dataset`` / ``eval_dataset`` (the ``seed`` column), resets an env with that seed, checks that
  the env's chat for some agent is exactly the prompt (so the env kwargs match the dataset's), plays one episode per
  prompt with :func:`llm_marl_envs.rollout.run_episodes` and a policy that generates with the trainer's model and
  processing class under TRL's own generation config, and returns the prompt's agent's tokens, log-probabilities and
  the episode's return (``env_reward``) and reward components as extra fields.
* :func:`env_reward`: the reward function returning those env returns (and logging the mean components).

Teams (``num_agents > 1``) are trained as one *shared-parameter* policy: the model plays every role, each from its
own observation only; the dataset has one row per (seed, role); each TRL sample is one episode in which the row's role
is the sample and its teammates are the same model, credited with the team return. A group of ``num_generations``
samples of one row is ``num_generations`` independent episodes from the same seed, so the group baseline is the usual
GRPO one for that role's completions, and summing the per-role terms over the dataset's rows gives the policy gradient
of the team return for the shared policy (``log π(joint action) = Σ_roles log π(a_role | o_role)``). Teammates'
completions are generated but not trained on in that sample (they are trained on in their own rows' samples). For
per-agent adapters and MAGRPO's joint-action trees use :class:`llm_marl_trainers.magrpo.MAGRPOTrainer`.

Multi-turn episodes (``max_turns > 1``): TRL trains one token sequence per sample, so an agent's turns form one
growing chat — its first prompt, its completion, the env's next observation as a new user message (``env_mask`` 0),
its next completion, and so on — and each turn is generated from exactly that sequence (the env's own prompts are
self-contained per turn; here the model also sees its earlier turns). Each turn gets up to
``max_completion_length`` new tokens; the whole sequence is not cut. This needs a prefix-preserving chat template
(ChatML's is); anything else is refused with an error.

Heavy imports (torch, datasets, trl, peft) happen inside the functions.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_marl_baselines.policies.base import Generation
from llm_marl_envs.registry import env_spec, make_env
from llm_marl_envs.rollout import ChatRequest, Trajectory, run_episodes

if TYPE_CHECKING:  # pragma: no cover - typing only
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

SEED_COLUMN = "seed"
"""The dataset column the rollout needs: the ``env.reset`` seed that reproduces the row's prompt."""
PROMPT_COLUMN = "prompt"
DEFAULT_NUM_SEEDS = 256
"""Rows per agent of :func:`grpo_trainer`'s dataset when no dataset or seeds are given (seeds ``0..255``)."""
ENV_FIELDS: tuple[str, ...] = ("env_reward", "env_reward_components", "env_actions", "env_agent", "env_task_id",
                               "env_end_reason")
"""The extra fields :class:`EnvRollout` returns next to the token lists (reward functions receive them by name)."""
_SENTINEL = "@@llm_marl_assistant_turn@@"


def _check_env_name(env: str) -> str:
    if not isinstance(env, str):
        raise TypeError(f"env: expected an env name (str), got {type(env).__name__}")
    env_spec(env)  # a ValueError that lists the known names
    return env


def _seed_list(seeds: int | Sequence[int]) -> list[int]:
    """``n`` → ``0..n-1``; a sequence → its (distinct, non-negative) ints."""
    if isinstance(seeds, bool):
        raise TypeError("seeds: expected an int or a sequence of ints, got a bool")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds: expected a positive count, got {seeds}")
        return list(range(seeds))
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ValueError(f"seeds: expected a positive int or a non-empty sequence of ints, got {seeds!r:.80}")
    values = []
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seeds: expected non-negative ints, got {seed!r}")
        values.append(int(seed))
    if len(set(values)) != len(values):
        raise ValueError("seeds: expected distinct seeds (a repeated seed repeats its prompt)")
    return values


def _prompt_key(prompt: Any, where: str) -> str:
    """A canonical string of a conversational prompt (role and content of each message), for exact matching."""
    if isinstance(prompt, str) or not isinstance(prompt, Sequence) or not prompt:
        raise ValueError(f"{where}: expected a conversational prompt (a non-empty list of chat messages, as "
                         f"build_dataset makes), got {type(prompt).__name__}")
    try:
        return json.dumps([[str(message["role"]), str(message["content"])] for message in prompt])
    except (KeyError, TypeError) as error:
        raise ValueError(f"{where}: expected chat messages with 'role' and 'content', got {prompt!r:.120}") from error


def build_dataset(env: str, seeds: int | Sequence[int] = DEFAULT_NUM_SEEDS, num_agents: int = 1,
                  **env_kwargs: Any) -> Dataset:
    """A ``datasets.Dataset`` of TRL prompts from env tasks: one row per seed and agent.

    Each row: ``prompt`` (``env.chat_messages(agent)`` right after ``env.reset(seed=seed)``: the agent's own chat,
    system + user), ``seed`` (replays the episode), ``agent`` and ``task_id``. ``seeds``: a count ``n`` (seeds
    ``0..n-1``) or distinct seeds. ``env_kwargs`` go to ``make_env`` and must match the rollout's.
    """
    probe = make_env(_check_env_name(env), num_agents=num_agents, **env_kwargs)
    try:
        return _rows_dataset(probe, _seed_list(seeds))
    finally:
        probe.close()


def _rows_dataset(env: Any, seeds: Sequence[int]) -> Dataset:
    from datasets import Dataset

    rows: dict[str, list[Any]] = {PROMPT_COLUMN: [], SEED_COLUMN: [], "agent": [], "task_id": []}
    for seed in seeds:
        env.reset(seed=seed)
        for agent in env.agents:
            rows[PROMPT_COLUMN].append([dict(message) for message in env.chat_messages(agent)])
            rows[SEED_COLUMN].append(seed)
            rows["agent"].append(agent)
            rows["task_id"].append(str(env.state()["task"]["task_id"]))
    return Dataset.from_dict(rows)


def check_dataset(dataset: Any) -> None:
    """Raise a ``ValueError``/``TypeError`` unless ``dataset`` is a map-style ``datasets.Dataset`` with a
    conversational ``prompt`` column and an integer ``seed`` column (what :class:`EnvRollout` reads)."""
    from datasets import Dataset

    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset: expected a map-style datasets.Dataset (the rollout looks up each prompt's seed in "
                        f"it), got {type(dataset).__name__}")
    missing = [name for name in (PROMPT_COLUMN, SEED_COLUMN) if name not in dataset.column_names]
    if missing:
        raise ValueError(f"dataset: missing column(s) {missing} (have {dataset.column_names}); the rollout replays "
                         f"each prompt's episode from its '{SEED_COLUMN}' (build it with build_dataset)")


@dataclass
class _Transcript:
    """One agent's token sequence over an episode: its first prompt, then its turns and the env's observations."""

    prompt_ids: list[int]
    head: list[dict[str, str]]
    """The first turn's messages (their system message must not change)."""
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    last_stop: int | None = None
    """The stop token the last turn ended with (None: it ran out of tokens)."""

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add_observation(self, ids: Sequence[int]) -> None:
        self.completion_ids += list(ids)
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)  # environment tokens are not sampled; env_mask keeps them out of the loss

    def add_turn(self, ids: Sequence[int], logprobs: Sequence[float], text: str, stop: int | None) -> None:
        self.completion_ids += list(ids)
        self.env_mask += [1] * len(ids)
        self.logprobs += list(logprobs)
        self.actions.append(text)
        self.last_stop = stop


class _TemperedLogprobs:
    """A logits processor recording ``log_softmax(logits / T)`` of each generated token.

    transformers 5 runs the processors passed to ``generate`` after its own processors (repetition penalty, token
    suppression) and before the sampling warpers (temperature, top-k, top-p, min-p:
    ``GenerationMixin._get_logits_processor``), so with TRL's defaults (``repetition_penalty=1``) the scores seen
    here are the raw logits. Dividing them by TRL's ``temperature`` gives exactly what TRL recomputes for the loss
    (``add_fused_lm_head(..., temperature=...)``): log-probabilities at the sampling temperature, *before* top-k/top-p
    truncation (which TRL's recomputation does not apply either). With ``repetition_penalty != 1`` the recorded values
    include the penalty and TRL's do not. Measured on SmolLM2-135M (fp32, CPU, T=0.7, LoRA without dropout): the
    largest difference from a full forward pass's ``log_softmax(logits / T)`` was 1.6e-5 over 64 tokens, against
    0.58-2.0 from the raw logits' (the default-model test checks < 2e-3 and > 0.05). Only one step's distribution is
    held at a time.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = float(temperature)
        self.steps: list[Any] = []
        self._last: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._last is not None:  # the token sampled from the previous step's distribution is now known
            self.steps.append(self._last.gather(1, input_ids[:, -1:]).squeeze(1))
        self._last = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, new_tokens: Any) -> Any:
        """``[rows, steps]`` log-probabilities of ``new_tokens``."""
        import torch

        if self._last is not None:
            self.steps.append(self._last.gather(1, new_tokens[:, -1:]).squeeze(1))
            self._last = None
        if len(self.steps) != new_tokens.shape[1]:
            raise RuntimeError(f"recorded {len(self.steps)} steps for {new_tokens.shape[1]} generated tokens")
        if not self.steps:
            return torch.zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self.steps, dim=1)


def _tokenizer_of(processing_class: Any) -> Any:
    return getattr(processing_class, "tokenizer", processing_class)  # a multimodal processor wraps its tokenizer


class _TrainerPolicy:
    """The policy :func:`run_episodes` drives: every request of a turn in one ``generate`` of the trainer's model.

    Keeps one :class:`_Transcript` per (env index, agent); a request for an agent that already acted continues its
    transcript (the new observation as a user message, then generation from the whole sequence).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.tokenizer = _tokenizer_of(trainer.processing_class)
        config = trainer.generation_config
        eos = config.eos_token_id
        self.stop_ids = frozenset(int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos]) if i is not None)
        if not self.stop_ids:
            raise ValueError("trainer.generation_config: expected an eos_token_id to end completions")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.stop_ids)
        self.transcripts: dict[tuple[int, str], _Transcript] = {}

    def __call__(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        transcripts = []
        for request in requests:
            messages = [dict(message) for message in request.messages]
            key = (request.env_index, request.agent)
            transcript = self.transcripts.get(key)
            if transcript is None:
                transcript = _Transcript(self._render(messages, add_generation_prompt=True), messages)
                self.transcripts[key] = transcript
            else:
                transcript.add_observation(self._observation_ids(transcript, messages))
            transcripts.append(transcript)
        contexts = [transcript.context() for transcript in transcripts]
        records = []
        for transcript, context, (ids, logprobs) in zip(transcripts, contexts, self._generate(contexts), strict=True):
            stop = ids[-1] if ids and ids[-1] in self.stop_ids else None
            text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
            transcript.add_turn(ids, logprobs, text, stop)
            records.append(Generation(text=text, prompt_ids=tuple(context), completion_ids=tuple(ids),
                                      logprobs=tuple(logprobs), finish_reason="length" if stop is None else "stop"))
        return records

    def _render(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
        text = self._template(messages, add_generation_prompt=add_generation_prompt)
        # The template already wrote every special token; the tokenizer must not add a BOS of its own.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _template(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> str:
        kwargs = dict(getattr(self.trainer, "chat_template_kwargs", None) or {})
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt, **kwargs)

    def _observation_ids(self, transcript: _Transcript, messages: list[dict[str, str]]) -> list[int]:
        """The tokens between an agent's last completion and its next one: the end of its turn (unless its stop token
        already wrote it), the new observation as a user message and the generation prompt.

        Found by rendering the first turn's chat with a placeholder assistant turn, with and without the next user
        message, like TRL's ``_get_tool_suffix_ids`` does for tool results; the template must be prefix-preserving.
        """
        if messages[:-1] != transcript.head[:-1]:
            raise ValueError(f"multi-turn: expected the agent's system messages to stay the same, got "
                             f"{messages[:-1]!r:.120}")
        placeholder = [*transcript.head, {"role": "assistant", "content": _SENTINEL}]
        closed = self._template(placeholder, add_generation_prompt=False)
        opened = self._template([*placeholder, messages[-1]], add_generation_prompt=True)
        if _SENTINEL not in closed or not opened.startswith(closed):
            raise ValueError("multi-turn (max_turns > 1): the chat template is not prefix-preserving (a conversation "
                             "with one more user message does not extend it), so an agent's turns cannot form one "
                             "token sequence; use max_turns=1 or a ChatML-style template")
        closing = closed[closed.rindex(_SENTINEL) + len(_SENTINEL):]
        if transcript.last_stop is not None:
            written = self.tokenizer.decode([transcript.last_stop])
            if closing.startswith(written):
                closing = closing[len(written):]  # the model already ended its turn with this token
        text = closing + opened[len(closed):]
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _generate(self, contexts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        """Sample one completion per context with the trainer's model and generation config (as TRL's own
        transformers path does: same unwrapping, same config, the model left in its current mode)."""
        import torch
        from transformers import LogitsProcessorList
        from trl.models import unwrap_model_for_generation

        trainer, args = self.trainer, self.trainer.args
        width = max(len(ids) for ids in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, ids in enumerate(contexts):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids):] = 1
        device = trainer.accelerator.device
        # The temperature the tokens are sampled at: TRL's generation config takes it from args.temperature, the one
        # its loss recomputation divides by, unless args.generation_kwargs overrides it (then the two differ in TRL).
        recorder = _TemperedLogprobs(getattr(trainer.generation_config, "temperature", None) or args.temperature)
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped, trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                generation_kwargs=getattr(trainer, "generation_kwargs", None),
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
        ):
            sequences = model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                                       generation_config=trainer.generation_config,
                                       logits_processor=LogitsProcessorList([recorder]))
        new_tokens = sequences[:, width:]
        logprobs = recorder.finish(new_tokens).cpu()  # on the model's device until here, like the recorded steps
        new_tokens = new_tokens.cpu()
        results = []
        for row in range(len(contexts)):
            tokens = new_tokens[row].tolist()
            # Through the first stop token (kept, as TRL keeps it), nothing after: the rest is padding.
            length = next((i + 1 for i, token in enumerate(tokens) if token in self.stop_ids), len(tokens))
            results.append((tokens[:length], logprobs[row, :length].tolist()))
        return results


@dataclass(frozen=True)
class RolloutBatch:
    """What one ``rollout_func`` call did: per prompt, the seed, the agent, the episode and what TRL got."""

    prompts: list[Any]
    seeds: list[int]
    agents: list[str]
    trajectories: list[Trajectory]
    output: dict[str, list[Any]]
    """The dict returned to TRL (token lists, ``env_mask`` and the :data:`ENV_FIELDS`)."""


class EnvRollout:
    """TRL's ``rollout_func`` for a suite env: ``rollout(prompts, trainer) -> dict`` (see the module docstring).

    ``env``: a registry name (``"writing"``, ``"coding"``); ``num_agents`` and ``env_kwargs`` go to ``make_env`` and
    must be those the dataset was built with (:meth:`dataset` builds it with them). ``on_rollout`` is called with each
    call's :class:`RolloutBatch`; :attr:`last` holds the latest one.
    """

    def __init__(self, env: str, num_agents: int = 1, *, on_rollout: Callable[[RolloutBatch], None] | None = None,
                 **env_kwargs: Any) -> None:
        self.env = _check_env_name(env)
        self.num_agents = num_agents
        self.env_kwargs = dict(env_kwargs)
        # Built now so bad kwargs (an unknown field, num_agents outside the env's range) fail here, not mid-training.
        self._envs: list[Any] = [make_env(self.env, num_agents=num_agents, **self.env_kwargs)]
        self.agents: list[str] = list(self._envs[0].possible_agents)
        self.on_rollout = on_rollout
        self.last: RolloutBatch | None = None
        self._seed_table: dict[str, int] = {}
        self._seed_sources: tuple[tuple[int, int], ...] = ()
        self._agent_of: dict[str, tuple[int, str]] = {}
        self.__name__ = f"EnvRollout[{self.env}]"  # TRL and loggers print function names

    def dataset(self, seeds: int | Sequence[int] = DEFAULT_NUM_SEEDS) -> Dataset:
        """:func:`build_dataset` with this rollout's env and kwargs."""
        return _rows_dataset(self._envs[0], _seed_list(seeds))

    def close(self) -> None:
        """Close the envs (the coding env's sandbox executors)."""
        for env in self._envs:
            env.close()

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list[Any]]:
        """Play one episode per prompt (seeded by its row) with the trainer's model; return TRL's dict."""
        if getattr(trainer.args, "use_vllm", False):
            raise ValueError("EnvRollout generates with the trainer's own model: set use_vllm=False")
        seeds, agents = self._resolve(prompts, trainer)
        while len(self._envs) < len(prompts):
            # Copies share the first env's heavy resources (similarity model, sandbox executor).
            self._envs.append(copy.deepcopy(self._envs[0]))
        policy = _TrainerPolicy(trainer)
        trajectories = run_episodes(self._envs[:len(prompts)], policy, seeds=seeds)
        output: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
        output.update({name: [] for name in ENV_FIELDS})
        for index, (agent, trajectory) in enumerate(zip(agents, trajectories, strict=True)):
            transcript = policy.transcripts.get((index, agent))
            if transcript is None or not transcript.completion_ids:
                raise RuntimeError(f"prompt {index}: agent {agent!r} never acted in its episode (seed {seeds[index]})")
            # What the env was stepped with must be what TRL trains on (the policy's texts are the env's actions).
            env_actions = [step.action for step in trajectory.agent_steps(agent)]
            if env_actions != transcript.actions:
                raise RuntimeError(f"prompt {index}: the env's actions differ from the generated texts")
            output["prompt_ids"].append(transcript.prompt_ids)
            output["completion_ids"].append(transcript.completion_ids)
            output["logprobs"].append(transcript.logprobs)
            output["env_mask"].append(transcript.env_mask)
            output["env_reward"].append(float(trajectory.team_return))
            output["env_reward_components"].append(dict(trajectory.final_info.get("reward_components", {})))
            output["env_actions"].append(list(env_actions))
            output["env_agent"].append(agent)
            output["env_task_id"].append(trajectory.task_id)
            output["env_end_reason"].append(trajectory.end_reason)
        batch = RolloutBatch(list(prompts), list(seeds), list(agents), list(trajectories), output)
        self.last = batch
        if self.on_rollout is not None:
            self.on_rollout(batch)
        return output

    def _resolve(self, prompts: Sequence[Any], trainer: Any) -> tuple[list[int], list[str]]:
        """Each prompt's seed (from the trainer's datasets) and agent (the one whose chat after reset is the prompt)."""
        table = self._seeds_from(trainer)
        seeds, agents = [], []
        for index, prompt in enumerate(prompts):
            key = _prompt_key(prompt, f"prompts[{index}]")
            if key not in table:
                raise ValueError(f"prompts[{index}]: not a prompt of the trainer's train/eval dataset, so its seed is "
                                 "unknown (the rollout replays each row's episode from its 'seed' column)")
            seed = table[key]
            if key not in self._agent_of:
                env = self._envs[0]
                env.reset(seed=seed)
                matches = [a for a in env.agents if _prompt_key(env.chat_messages(a), "env") == key]
                if not matches:
                    raise ValueError(f"prompts[{index}]: env.reset(seed={seed}) gives no agent this prompt; the "
                                     f"dataset was built with other env settings than this rollout's "
                                     f"({self.env}, num_agents={self.num_agents}, {self.env_kwargs})")
                self._agent_of[key] = (seed, matches[0])
            seeds.append(self._agent_of[key][0])
            agents.append(self._agent_of[key][1])
        return seeds, agents

    def _seeds_from(self, trainer: Any) -> dict[str, int]:
        """prompt → seed over the trainer's datasets, rebuilt only when they change."""
        sources = [trainer.train_dataset]
        evaluation = getattr(trainer, "eval_dataset", None)
        sources += list(evaluation.values()) if isinstance(evaluation, Mapping) else [evaluation]
        sources = [source for source in sources if source is not None]
        identity = tuple((id(source), len(source)) for source in sources if hasattr(source, "__len__"))
        if identity == self._seed_sources and self._seed_table:
            return self._seed_table
        table: dict[str, int] = {}
        tasks: dict[str, str] = {}
        for source in sources:
            check_dataset(source)
            task_ids = source["task_id"] if "task_id" in source.column_names else [None] * len(source)
            for prompt, seed, task in zip(source[PROMPT_COLUMN], source[SEED_COLUMN], task_ids, strict=True):
                key = _prompt_key(prompt, "dataset prompt")
                if isinstance(seed, bool) or not isinstance(seed, int):
                    raise ValueError(f"dataset: expected int seeds in '{SEED_COLUMN}', got {seed!r}")
                # Two seeds may draw the same task (same prompt): their episodes are alike, the first one serves.
                # The same prompt for two different tasks would make the seed ambiguous.
                if key in tasks and task is not None and tasks[key] != task:
                    raise ValueError(f"dataset: one prompt belongs to tasks {tasks[key]!r} and {task!r}; its seed is "
                                     "ambiguous")
                table.setdefault(key, seed)
                if task is not None:
                    tasks.setdefault(key, task)
        self._seed_table, self._seed_sources, self._agent_of = table, identity, {}
        return table


def env_reward(prompts: list[Any], completions: list[Any], env_reward: list[float] | None = None,
               env_reward_components: list[Mapping[str, Any]] | None = None,
               log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: the env return :class:`EnvRollout` computed for each completion (the ``env_reward``
    extra field); logs the mean quality, consistency and turns of the batch as ``env/*`` metrics."""
    if env_reward is None:
        raise ValueError("env_reward: no 'env_reward' field in the batch; use it with rollout_func=EnvRollout(...)")
    if len(env_reward) != len(completions):
        raise ValueError(f"env_reward: expected {len(completions)} rewards, got {len(env_reward)}")
    if log_metric is not None and env_reward_components:
        for name in ("quality", "consistency", "turns"):
            values = [float(c[name]) for c in env_reward_components if isinstance(c.get(name), (int, float))]
            if values:
                log_metric(f"env/{name}", math.fsum(values) / len(values))
    return [float(value) for value in env_reward]


def _default_config(env: str) -> GRPOConfig:
    """TRL's defaults, except the precision: TRL defaults to ``bf16=True``, which refuses a CPU (``use_cpu=True``
    alone keeps it on); bf16 only where a GPU supports it, no trackers unless asked for."""
    import torch
    from trl import GRPOConfig

    gpu = torch.cuda.is_available()
    return GRPOConfig(output_dir=f"{env}-grpo", bf16=gpu and torch.cuda.is_bf16_supported(), use_cpu=not gpu,
                      report_to=[])


def default_lora() -> Any:
    """The LoRA :func:`grpo_trainer` uses unless told otherwise: rank 16 on every linear layer but the output head
    (TRL refuses an adapter on ``lm_head``), no dropout (so the log-probabilities taken while sampling equal TRL's
    recomputation, which runs in train mode)."""
    from peft import LoraConfig

    return LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


def grpo_trainer(env: str, num_agents: int = 1, model: Any = None, args: GRPOConfig | None = None, *,
                 train_dataset: Dataset | None = None, seeds: int | Sequence[int] | None = None,
                 peft_config: Any = "default", processing_class: Any = None,
                 on_rollout: Callable[[RolloutBatch], None] | None = None, **env_kwargs: Any) -> GRPOTrainer:
    """A ready ``trl.GRPOTrainer`` on a suite env: :class:`EnvRollout` as ``rollout_func``, :func:`env_reward` as the
    reward, a :func:`build_dataset` dataset (``seeds``, default :data:`DEFAULT_NUM_SEEDS`) unless ``train_dataset``.

    ``model``: None (the offline default, SmolLM2-135M-Instruct), a local path or hub id, a
    ``llm_marl_baselines.models.LoadedModel``, or a transformers model (its tokenizer from ``processing_class`` or its
    ``name_or_path``); paths and ids load in float32, as TRL loads them. ``args``: a ``GRPOConfig`` (default: TRL's,
    with bf16 only on a GPU that has it). ``peft_config``: ``"default"`` (:func:`default_lora`), a peft config, or
    None (full fine-tuning). ``env_kwargs`` go to ``make_env`` (e.g. ``similarity="tfidf"``, ``max_turns=1``).
    """
    from trl import GRPOTrainer

    from llm_marl_baselines.models import LoadedModel, load_model, load_tokenizer

    # Everything that can be checked without a model is checked first: a typo should not cost a model load.
    rollout = EnvRollout(env, num_agents, on_rollout=on_rollout, **env_kwargs)
    if train_dataset is not None and seeds is not None:
        raise ValueError("give train_dataset or seeds, not both")
    if train_dataset is None:
        train_dataset = rollout.dataset(DEFAULT_NUM_SEEDS if seeds is None else seeds)
    check_dataset(train_dataset)
    args = _default_config(env) if args is None else args
    if getattr(args, "use_vllm", False):
        raise ValueError("args.use_vllm: EnvRollout generates with the trainer's own model; set use_vllm=False")
    if isinstance(peft_config, str):
        if peft_config != "default":
            raise ValueError(f"peft_config: expected 'default', a peft config or None, got {peft_config!r}")
        peft_config = default_lora()

    tokenizer = processing_class
    if model is None or isinstance(model, (str, os.PathLike)):
        loaded = load_model(model, dtype="float32", device="cpu")  # the trainer's accelerator places it
        model, tokenizer = loaded.model, tokenizer or loaded.tokenizer
    elif isinstance(model, LoadedModel):
        model, tokenizer = model.model, tokenizer or model.tokenizer
    elif tokenizer is None:
        source = str(getattr(model, "name_or_path", "") or "")
        if not source:
            raise ValueError("processing_class: required for a model object that does not say where it was loaded from")
        tokenizer = load_tokenizer(source)
    return GRPOTrainer(model=model, reward_funcs=[env_reward], args=args, train_dataset=train_dataset,
                       processing_class=tokenizer, peft_config=peft_config, rollout_func=rollout)
