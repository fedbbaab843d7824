"""Team generation: one frozen base, one LoRA adapter per agent, one batched ``generate`` for all agents × G × envs.

:class:`TeamModel` holds the team. Every agent has its own peft LoRA adapter (named after the agent) on a base model
shared by the whole team, so memory grows by adapters, not models; a *heterogeneous* team gives some agents a base of
their own (pass a mapping ``agent -> LoadedModel``) and keeps the same interface. Its three jobs:

- :meth:`TeamModel.generate`: every request of a turn (all agents, all envs, ``samples_per_request`` = G rows each) in
  **one** left-padded ``model.generate`` call per base model, each row running under its own agent's adapter; back
  come :class:`~llm_marl_baselines.policies.base.Generation` records (text, prompt ids, completion ids through the first
  stop token, per-token log-probabilities of the raw logits, finish reason), as the baselines' local backend makes them.
  :meth:`TeamModel.as_rollout_policy` is the same as the callable :mod:`llm_marl_envs.rollout` drives.
- :meth:`TeamModel.forward_logprobs`: per-token log-probabilities of given prompt + completion ids under each row's
  adapter, with gradients, in one forward pass (the loss's ``per_token_logps``; ``reference=True`` gives the base
  model's, the KL reference for LoRA with no second model).
- :meth:`TeamModel.adapter_parameters` (one optimizer per agent) and :meth:`TeamModel.save_adapters` (peft format, one
  folder per agent, which ``TeamModel(..., adapters=...)`` loads back; for a team directory the baselines play,
  ``llm_marl_baselines.policies.adapters.save_team(dir, team.model_of(agent), env=..., roles=team.agents)`` takes the
  shared base's peft model as it is).

How a row gets its agent's adapter (``scheme``: the ``"stacked"`` routing by default, or peft's mixed batch)
is :mod:`llm_marl_trainers.lora_routing`, with the measurements that chose the default.

The SmolLM2 tokenizer: its GGUF declares ``<|im_start|>`` as eos and has no pad token. Stop tokens here are the model's
and tokenizer's eos plus ``<|im_end|>`` (the ChatML end of turn) where the vocabulary has it, and padding uses
``<|endoftext|>`` whenever the tokenizer's pad is missing or is a stop token, so padding is never mistaken for an end
(CoMLRL cuts prompts at the first pad when pad == eos). Nothing is changed on the shared tokenizer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from llm_marl_baselines.decoding import (
    RowTextStops,
    TopKSampler,
    cache_keyword,
    left_pad,
    new_cache,
    sample_rows,
    token_texts,
)
from llm_marl_baselines.graph_decode import GraphDecoder, graph_decoder
from llm_marl_baselines.graph_decode import supports as supports_graph_decode
from llm_marl_baselines.models import LoadedModel, load_model
from llm_marl_baselines.policies.base import CallSeeds, Generation, GenerationSettings
from llm_marl_baselines.policies.local import (
    check_reply_ends,
    check_role_budgets,
    completion_text,
    cut_rows,
    encode_prompts,
    end_rows,
    render_chat,
    reply_end_tests,
    reply_prefix,
)
from llm_marl_baselines.prompt_store import PromptStore
from llm_marl_envs.rollout import ChatRequest
from llm_marl_trainers.lora_routing import SCHEMES, AdapterRouter, install_router
from llm_marl_trainers.losses import completion_logits, entropy_from_logits, sequence_logprobs, token_logprobs

CHATML_END = "<|im_end|>"
"""The ChatML end-of-turn token: a stop token wherever the vocabulary has it (SmolLM2's GGUF declares another eos)."""
FALLBACK_PAD = "<|endoftext|>"
"""The padding token used when the tokenizer has none, or its pad is a stop token (SmolLM2: id 0)."""
TRAIN_EXTRA_HINT = "pip install 'llm-marl-envs[train]'"


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter every agent gets (peft ``LoraConfig``)."""

    r: int = 8
    """Rank of the update ``B·A``."""
    alpha: int = 16
    """``lora_alpha``: the update is scaled by ``alpha / r``."""
    dropout: float = 0.0
    """Dropout on the adapter's input during training (``lora_dropout``); 0 keeps training deterministic."""
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    """Names of the linear layers that get an adapter (Llama-style attention projections by default)."""
    init_lora_weights: bool = True
    """True: peft's default (``B = 0``), so every agent starts as the base model; False: random ``B`` (tests)."""

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ValueError(f"r: expected an int >= 1, got {self.r!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or self.alpha <= 0:
            raise ValueError(f"alpha: expected a number > 0, got {self.alpha!r}")
        if not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"dropout: expected a value in [0, 1), got {self.dropout!r}")
        if isinstance(self.target_modules, str) or not self.target_modules or not all(
            isinstance(name, str) and name for name in self.target_modules
        ):
            raise ValueError(f"target_modules: expected a non-empty tuple of module names, got {self.target_modules!r}")

    def to_peft(self) -> Any:
        """The equivalent ``peft.LoraConfig`` (causal LM task)."""
        peft = _import_peft()
        return peft.LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                               target_modules=list(self.target_modules), init_lora_weights=self.init_lora_weights,
                               task_type="CAUSAL_LM")


@dataclass(frozen=True)
class CompletionLogprobs:
    """What :meth:`TeamModel.forward_logprobs` returns, shaped as :class:`llm_marl_trainers.losses.PolicyBatch` takes
    it.

    ``B`` rows in the order given, ``T`` = the longest completion; completions are left-aligned (position t is the
    t-th completion token) and right-padded.
    """

    per_token_logps: Tensor
    """``[B, T]`` log π(y_t | prompt, y_<t) under the row's adapter (or the base, for ``reference=True``); 0 on
    padding. Carries gradients when grad mode is on."""
    completion_mask: Tensor
    """``[B, T]`` int64, 1 on completion tokens, 0 on padding."""
    entropies: Tensor | None = None
    """``[B, T]`` per-token entropies in nats (0 on padding), when asked for."""

    def rows(self) -> list[Tensor]:
        """Each row's log-probabilities without padding (a view of :attr:`per_token_logps`)."""
        lengths = self.completion_mask.sum(dim=1).tolist()
        return [self.per_token_logps[i, :n] for i, n in enumerate(lengths)]


@dataclass
class _Group:
    """The agents that share one base model, with that model wrapped by peft and its token ids."""

    loaded: LoadedModel
    model: Any
    agents: list[str]
    router: AdapterRouter
    pad_id: int
    stop_ids: frozenset[int]


class _RawLogprobRecorder:
    """A logits processor that records ``log_softmax`` of the raw logits at each generated token.

    transformers (5.x) runs the processors passed to ``generate`` before its sampling warpers (temperature, top-k,
    top-p), so the scores seen here are the model's raw logits (the tests compare the records with a forward pass at
    temperature 0.7 and top-p 0.8, so an order change would fail them). Only one step's distribution is held at a
    time (the token it scores is known one step later), not ``output_logits``' ``rows × steps × vocab`` floats.
    """

    def __init__(self) -> None:
        self.steps: list[Tensor] = []
        self._last: Tensor | None = None

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self._last is not None:
            self.steps.append(self._last.gather(1, input_ids[:, -1:]).squeeze(1))
        self._last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, new_tokens: Tensor) -> Tensor:
        """``[rows, steps]`` log-probabilities of ``new_tokens`` (the generated part of the sequences)."""
        if self._last is not None:
            self.steps.append(self._last.gather(1, new_tokens[:, -1:]).squeeze(1))
            self._last = None
        if len(self.steps) != new_tokens.shape[1]:
            raise RuntimeError(f"recorded {len(self.steps)} steps for {new_tokens.shape[1]} generated tokens")
        return torch.stack(self.steps, dim=1)


class TeamModel:
    """Per-agent LoRA adapters on a frozen base model (or one base per agent), batched across agents.

    Args:
        base: the base model every agent shares, or ``{agent: LoadedModel}`` for a heterogeneous team (agents mapped to
            the same ``LoadedModel`` object share it). LoRA layers are injected into these models in place.
        agents: the agent names (also the adapter names); order fixes :attr:`agents`.
        lora: settings of fresh adapters (default :class:`LoraSettings`); not with ``adapters``.
        adapters: ``{agent: folder}`` of saved peft adapters to load (trainable) instead of fresh ones.
        scheme: a key of :data:`SCHEMES`.
        seed: seeds the fresh adapters' initialisation (None: the global torch RNG).
        max_batch_rows: the most rows per ``generate`` call (None: all rows of a base model in one call).
        share_prefix: read each prompt once (default): sampling prefills every distinct (agent, prompt) once and
            decodes its rows in a static cache (:func:`llm_marl_baselines.decoding.sample_rows`), and
            :meth:`forward_logprobs` runs each distinct prompt once with its completions on top of its cache. False:
            ``model.generate`` and a forward over prompt + completion for every row (the reference path, for comparisons
            and debugging).
        graph_decode: run the decode steps of :meth:`generate` through
            :class:`~llm_marl_baselines.graph_decode.GraphDecoder` (with ``share_prefix``): the team's step, all agents'
            adapters in one batch, captured once as a CUDA graph per batch shape and replayed at every token. None
            (default): on for a model on CUDA whose architecture it supports, off elsewhere; True: always (on a CPU
            the same step runs uncaptured, for tests); False: the eager decode.
        graph_compile: with the graph decoder, compile its step with ``torch.compile`` (Inductor) before capturing it
            (fewer kernels a step; tens of seconds per batch shape the first time). Default False.
    """

    def __init__(
        self,
        base: LoadedModel | Mapping[str, LoadedModel],
        agents: Sequence[str],
        *,
        lora: LoraSettings | None = None,
        adapters: Mapping[str, str | os.PathLike[str]] | None = None,
        scheme: str = "stacked",
        seed: int | None = 0,
        max_batch_rows: int | None = None,
        share_prefix: bool = True,
        graph_decode: bool | None = None,
        graph_compile: bool = False,
    ) -> None:
        agents = _check_agents(agents)
        if scheme not in SCHEMES:
            raise ValueError(f"scheme: expected one of {tuple(SCHEMES)}, got {scheme!r}")
        if max_batch_rows is not None and (isinstance(max_batch_rows, bool) or not isinstance(max_batch_rows, int)
                                           or max_batch_rows < 1):
            raise ValueError(f"max_batch_rows: expected None or an int >= 1, got {max_batch_rows!r}")
        if adapters is not None and lora is not None:
            raise ValueError("lora and adapters: expected one of them (fresh adapters or saved ones), got both")
        if adapters is not None and sorted(adapters) != sorted(agents):
            raise ValueError(f"adapters: expected one folder per agent {list(agents)}, got {sorted(adapters)}")
        bases = dict.fromkeys(agents, base) if isinstance(base, LoadedModel) else dict(base)
        if sorted(bases) != sorted(agents) or not all(isinstance(b, LoadedModel) for b in bases.values()):
            raise TypeError(f"base: expected a LoadedModel or {{agent: LoadedModel}} for agents {list(agents)}, "
                            f"got {base!r:.120}")
        self.agents: tuple[str, ...] = tuple(agents)
        self.scheme = scheme
        self.max_batch_rows = max_batch_rows
        if not isinstance(share_prefix, bool):
            raise TypeError(f"share_prefix: expected True or False, got {share_prefix!r}")
        self.share_prefix = share_prefix
        if graph_decode is not None and not isinstance(graph_decode, bool):
            raise TypeError(f"graph_decode: expected None, True or False, got {graph_decode!r}")
        if graph_decode and not share_prefix:
            raise ValueError("graph_decode=True needs share_prefix=True (it decodes after the shared prefill)")
        self.graph_decode = graph_decode
        if not isinstance(graph_compile, bool):
            raise TypeError(f"graph_compile: expected True or False, got {graph_compile!r}")
        self.graph_compile = graph_compile
        if adapters is None and lora is None:
            lora = LoraSettings()
        self.lora = lora
        """The settings of the fresh adapters (None when they were loaded from folders)."""
        shared: dict[int, list[str]] = {}
        for agent in agents:
            shared.setdefault(id(bases[agent]), []).append(agent)
        self._groups: list[_Group] = []
        with _seeded(seed, next(iter(bases.values())).device):
            for names in shared.values():
                self._groups.append(self._build_group(bases[names[0]], names, adapters))
        self._group_of = {agent: group for group in self._groups for agent in group.agents}

    @classmethod
    def load(
        cls,
        agents: Sequence[str],
        model: str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]] | None = None,
        *,
        dtype: str = "auto",
        device: str = "auto",
        **kwargs: Any,
    ) -> TeamModel:
        """Load the base model(s) with :func:`llm_marl_baselines.models.load_model` and build the team.

        ``model`` is a model name or path (None: the offline default SmolLM2-135M-Instruct) shared by every agent, or
        ``{agent: name or path}`` for a heterogeneous team (agents naming the same model share one copy). Other
        keyword arguments go to :class:`TeamModel`.
        """
        if isinstance(model, Mapping):
            loaded: dict[str, LoadedModel] = {}
            by_source: dict[str, LoadedModel] = {}
            for agent in agents:
                source = str(model[agent]) if agent in model else None
                if source is None:
                    raise ValueError(f"model: no base model for agent {agent!r}; got models for {sorted(model)}")
                if source not in by_source:
                    by_source[source] = load_model(source, dtype=dtype, device=device)
                loaded[agent] = by_source[source]
            return cls(loaded, agents, **kwargs)
        return cls(load_model(model, dtype=dtype, device=device), agents, **kwargs)

    def _build_group(self, loaded: LoadedModel, agents: list[str],
                     adapters: Mapping[str, str | os.PathLike[str]] | None) -> _Group:
        peft = _import_peft()
        with warnings.catch_warnings():
            # peft 0.21 reads transformers' deprecated ``is_gradient_checkpointing``: not ours to fix, only noise.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            if adapters is None:
                assert self.lora is not None
                model = peft.get_peft_model(loaded.model, self.lora.to_peft(), adapter_name=agents[0])
                for agent in agents[1:]:
                    model.add_adapter(agent, self.lora.to_peft())
            else:
                model = peft.PeftModel.from_pretrained(loaded.model, str(adapters[agents[0]]),
                                                       adapter_name=agents[0], is_trainable=True)
                for agent in agents[1:]:
                    model.load_adapter(str(adapters[agent]), adapter_name=agent, is_trainable=True)
        model.eval()
        router = AdapterRouter(agents)
        if self.scheme == "stacked":
            install_router(model, router)
        pad_id, stop_ids = special_token_ids(loaded.tokenizer, loaded.model)
        group = _Group(loaded=loaded, model=model, agents=agents, router=router, pad_id=pad_id, stop_ids=stop_ids)
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        for agent in agents:
            for parameter in _adapter_parameters(model, agent):
                parameter.requires_grad_(True)
        return group

    # ------------------------------------------------------------------------------------------------------------
    # Parameters, modes, saving
    # ------------------------------------------------------------------------------------------------------------

    @property
    def heterogeneous(self) -> bool:
        """True when some agents have a base model of their own."""
        return len(self._groups) > 1

    def model_of(self, agent: str) -> Any:
        """The peft model that holds ``agent``'s adapter (shared with the agents of the same base)."""
        return self._group(agent).model

    def tokenizer_of(self, agent: str) -> Any:
        """The tokenizer of ``agent``'s base model."""
        return self._group(agent).loaded.tokenizer

    def special_tokens(self, agent: str) -> tuple[int, frozenset[int]]:
        """``(pad_id, stop_ids)`` used for ``agent``'s base model (see :func:`special_token_ids`)."""
        group = self._group(agent)
        return group.pad_id, group.stop_ids

    def prompt_ids(self, requests: Sequence[ChatRequest], max_new_tokens: int = 0) -> list[list[int]]:
        """The chat-templated, unpadded prompt ids :meth:`generate` feeds each request's base model (prompts longer
        than the context minus ``max_new_tokens`` lose their middle, as in the baselines)."""
        return [_encode(self._group(request.agent), [request], max_new_tokens)[0] for request in requests]

    def adapter_parameters(self, agent: str) -> list[torch.nn.Parameter]:
        """``agent``'s LoRA parameters (all trainable): what its own optimizer updates."""
        return _adapter_parameters(self._group(agent).model, agent)

    def train(self, mode: bool = True) -> TeamModel:
        """Train mode (LoRA dropout on) for :meth:`forward_logprobs`; :meth:`generate` always runs in eval mode."""
        for group in self._groups:
            group.model.train(mode)
        return self

    def eval(self) -> TeamModel:
        """Eval mode (no dropout)."""
        return self.train(False)

    def gradient_checkpointing_enable(self) -> None:
        """Recompute activations in the backward pass (non-reentrant checkpointing) to save memory.

        With the ``"stacked"`` scheme the rows' routing then stays in place after :meth:`forward_logprobs` returns, so
        the recomputation sees it: call ``backward`` before the next :meth:`forward_logprobs` or :meth:`generate`.
        """
        for group in self._groups:
            model = group.model
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 (the old name is deprecated)
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:  # pragma: no cover - transformers 4.x
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

    def save_adapters(self, directory: str | os.PathLike[str]) -> dict[str, Path]:
        """Write each agent's adapter in peft's format to ``directory/<agent>/`` (replacing what is there);
        returns ``{agent: folder}``, which ``TeamModel(..., adapters=...)`` loads back."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        folders = {}
        for agent in self.agents:
            staging = Path(tempfile.mkdtemp(prefix=f".{agent}.tmp-", dir=directory))
            try:
                self._group(agent).model.save_pretrained(str(staging), selected_adapters=[agent])
                # peft writes an adapter named "default" at the top level and any other into a subfolder of its name.
                written = staging if agent == "default" else staging / agent
                target = directory / agent
                if target.exists():
                    shutil.rmtree(target)
                shutil.move(str(written), str(target))
                folders[agent] = target
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return folders

    def load_adapter_weights(self, agent: str, folder: str | os.PathLike[str]) -> None:
        """Overwrite ``agent``'s (fresh) adapter with the weights saved in ``folder`` (a peft adapter, e.g. a role of
        a shipped team): a warm start. The saved adapter must have this team's LoRA rank, alpha and target modules;
        its weights are cast to the adapter's dtype (shipped teams store float16, training runs in float32)."""
        peft = _import_peft()
        from peft.utils import load_peft_weights

        if agent not in self.agents:
            raise ValueError(f"agent: expected one of {list(self.agents)}, got {agent!r}")
        folder = Path(folder)
        if not (folder / "adapter_config.json").is_file():
            raise FileNotFoundError(f"{folder}: expected a peft adapter (adapter_config.json missing)")
        saved = peft.PeftConfig.from_pretrained(str(folder))
        model = self._group(agent).model
        own = model.peft_config[agent]
        for key in ("r", "lora_alpha"):
            if getattr(saved, key, None) != getattr(own, key):
                raise ValueError(f"{folder}: {key} is {getattr(saved, key, None)!r}, but {agent!r}'s adapter has "
                                 f"{getattr(own, key)!r}: a warm start needs the same LoRA shape")
        if sorted(getattr(saved, "target_modules", None) or []) != sorted(own.target_modules or []):
            raise ValueError(f"{folder}: target_modules {sorted(getattr(saved, 'target_modules', None) or [])}, but "
                             f"{agent!r}'s adapter targets {sorted(own.target_modules or [])}: a warm start needs "
                             f"the same LoRA shape")
        weights = load_peft_weights(str(folder), device="cpu")
        parameters = _adapter_parameters(model, agent)
        if len(weights) != len(parameters):
            raise ValueError(f"{folder}: {len(weights)} saved tensors for {len(parameters)} adapter parameters of "
                             f"{agent!r}: not an adapter of this model")
        result = peft.set_peft_model_state_dict(model, weights, adapter_name=agent)
        if result.unexpected_keys:
            raise ValueError(f"{folder}: tensors that fit no layer of {agent!r}'s adapter: "
                             f"{result.unexpected_keys[:3]}")

    # ------------------------------------------------------------------------------------------------------------
    # Generation
    # ------------------------------------------------------------------------------------------------------------

    def generate(
        self,
        requests: Sequence[ChatRequest],
        settings: GenerationSettings,
        samples_per_request: int = 1,
        *,
        logprobs: bool = True,
        min_new_tokens: int = 0,
        prompt_store: PromptStore | None = None,
        role_max_new_tokens: Mapping[str, int] | None = None,
        role_reply_ends: Mapping[str, str | None] | None = None,
    ) -> list[list[Generation]]:
        """``samples_per_request`` records per request, in request order, from one ``generate`` call per base model.

        Each request (a :class:`~llm_marl_envs.rollout.ChatRequest`, or anything with ``agent`` and chat
        ``messages``) is rendered with its base model's chat template and repeated ``samples_per_request`` times;
        every row runs under the adapter of the request's agent. Sampling is seeded by ``settings.seed`` for this call
        only (the caller's torch RNG state is restored); ``seed=None`` draws from the global torch RNG instead, which
        is what a training loop wants (seed torch once and checkpoint its state). ``logprobs=False`` skips the
        per-token log-probabilities; ``min_new_tokens`` forbids stop tokens before that many tokens (benchmarks pin
        ``min = max``; the recorded log-probabilities stay those of the raw logits). Sampling is the baselines' local
        backend's: ``temperature`` and ``top_p`` from ``settings`` plus transformers' default top-k (50).
        ``prompt_store``: a :class:`~llm_marl_baselines.prompt_store.PromptStore` (with ``share_prefix``) from which
        each (agent, prompt) reuses the keys and values of its longest prefix prefilled before under its agent's
        adapter; only while the weights stay as they were (evaluation): training passes none.
        ``role_max_new_tokens``: per agent, a budget below ``settings.max_new_tokens`` at which its replies stop (an
        env's roles' budgets, ``env.suggested_max_new_tokens([agent])``, in a call that serves roles with different
        ones); the other rows sample what they would without it, and a reply cut short is the start of what it would
        have been (:func:`~llm_marl_baselines.decoding.sample_rows`).
        ``role_reply_ends``: per agent, a regular expression whose first match in the reply (its given start included)
        ends it, e.g. ``env.suggested_reply_end(agent)`` (a coder stops where its code block closes); such a reply
        is likewise the start of what it would have been, recorded as stopped
        (:func:`~llm_marl_baselines.policies.local.generate_records`).
        """
        if isinstance(samples_per_request, bool) or not isinstance(samples_per_request, int) or samples_per_request < 1:
            raise ValueError(f"samples_per_request: expected an int >= 1, got {samples_per_request!r}")
        if not isinstance(settings, GenerationSettings):
            raise TypeError(f"settings: expected GenerationSettings, got {type(settings).__name__}")
        requests = list(requests)
        for index, request in enumerate(requests):
            agent = getattr(request, "agent", None)
            if agent not in self._group_of:
                raise ValueError(f"requests[{index}]: no adapter for agent {agent!r}; "
                                 f"this team has {list(self.agents)}")
        budgets = check_role_budgets(role_max_new_tokens, settings.max_new_tokens)
        reply_ends = check_reply_ends(role_reply_ends)
        records: list[list[Generation]] = [[] for _ in requests]
        if not requests:
            return records
        run = (functools.partial(self._sample_shared, prompt_store=prompt_store) if self.share_prefix
               else self._generate_rows)
        with _seeded(settings.seed, self._groups[0].loaded.device):
            for group in self._groups:
                mine = [i for i, request in enumerate(requests) if request.agent in group.agents]
                if not mine:
                    continue
                encoded = _encode(group, [requests[i] for i in mine], settings.max_new_tokens)
                prefixes = {i: reply_prefix(_messages(requests[i])) for i in mine}
                rows = [(i, ids) for i, ids in zip(mine, encoded, strict=True) for _ in range(samples_per_request)]
                chunk = self.max_batch_rows or len(rows)
                if chunk < len(rows):  # several calls: group rows of similar length to keep padding small
                    rows.sort(key=lambda row: len(row[1]))
                for start in range(0, len(rows), chunk):
                    batch = rows[start:start + chunk]
                    agents = [requests[i].agent for i, _ in batch]
                    limits = (None if budgets is None
                              else [budgets.get(agent, settings.max_new_tokens) for agent in agents])
                    tests = reply_end_tests(reply_ends, agents, [prefixes[i] for i, _ in batch])
                    stops = None if tests is None else RowTextStops(tuple(tests), token_texts(group.loaded.tokenizer))
                    generated = run(group, [ids for _, ids in batch], agents, settings, logprobs, min_new_tokens,
                                    limits, stops)
                    for (i, _), record in zip(batch, generated, strict=True):
                        records[i].append(dataclasses.replace(record, text=completion_text(
                            prefixes[i], record.text)))
        return records

    def as_rollout_policy(
        self, settings: GenerationSettings, *, logprobs: bool = True, min_new_tokens: int = 0,
        prompt_store: PromptStore | None = None, role_max_new_tokens: Mapping[str, int] | None = None,
        role_reply_ends: Mapping[str, str | None] | None = None,
    ) -> TeamRolloutPolicy:
        """This team as the policy :func:`llm_marl_envs.rollout.run_episodes` / ``rollout_tree`` call: one record
        per :class:`~llm_marl_envs.rollout.ChatRequest` (``rollout_tree``'s G identical requests per agent are G rows
        of the same single ``generate`` call). ``min_new_tokens``: no stop before that many tokens (benchmarks use
        it to fix completion lengths). ``prompt_store``: see :meth:`generate` (evaluation only);
        ``role_max_new_tokens``, ``role_reply_ends``: see :meth:`generate`."""
        check_reply_ends(role_reply_ends)
        return TeamRolloutPolicy(self, settings, logprobs, min_new_tokens, prompt_store,
                                 dict(role_max_new_tokens) if role_max_new_tokens is not None else None,
                                 dict(role_reply_ends) if role_reply_ends is not None else None)

    def _sample_shared(self, group: _Group, encoded: list[list[int]], agents: list[str],
                       settings: GenerationSettings, logprobs: bool, min_new_tokens: int,
                       limits: list[int] | None = None, stops: RowTextStops | None = None,
                       prompt_store: PromptStore | None = None) -> list[Generation]:
        """Rows sampled with each distinct (agent, prompt) prefilled once under its agent's adapter
        (:func:`llm_marl_baselines.decoding.sample_rows`); the record text is the decoded continuation, unstripped."""
        distinct: dict[tuple[str, tuple[int, ...]], int] = {}
        row_prompt = [distinct.setdefault((agent, tuple(ids)), len(distinct)) for agent, ids in zip(agents, encoded,
                                                                                                    strict=True)]
        prompt_agents = [agent for agent, _ in distinct]

        def rows_context(prompt_of_row: Sequence[int]) -> contextlib.AbstractContextManager[dict[str, Any]]:
            return self._rows_routed(group, [prompt_agents[p] for p in prompt_of_row], reference=False)

        was_training = group.model.training
        group.model.eval()  # peft refuses adapter_names in train mode; no LoRA dropout while sampling either
        try:
            sampled = sample_rows(group.model, [list(ids) for _, ids in distinct], row_prompt,
                                  temperature=settings.temperature, top_p=settings.top_p,
                                  max_new_tokens=settings.max_new_tokens, stop_ids=sorted(group.stop_ids),
                                  pad_id=group.pad_id, min_new_tokens=min_new_tokens, row_max_new_tokens=limits,
                                  row_stops=stops, logprobs=logprobs, rows_context=rows_context,
                                  prompt_store=prompt_store, prompt_keys=prompt_agents,
                                  graphs=self._graph_decoder(group))
        finally:
            group.model.train(was_training)
        tokenizer = group.loaded.tokenizer
        return [
            Generation(text=tokenizer.decode(tokens, skip_special_tokens=True), prompt_ids=tuple(encoded[row]),
                       completion_ids=tuple(tokens),
                       logprobs=tuple(sampled.logprobs[row]) if sampled.logprobs is not None else None,
                       finish_reason="stop" if sampled.stopped[row] else "length")
            for row, tokens in enumerate(sampled.tokens)
        ]

    def _graph_decoder(self, group: _Group) -> GraphDecoder | None:
        """The group's graph decoder when :attr:`graph_decode` asks for one (see the constructor), else None."""
        if self.graph_decode is False or self.scheme != "stacked":
            return None
        if self.graph_decode is None and (not str(group.loaded.device).startswith("cuda")
                                         or not supports_graph_decode(group.model)):
            return None
        return graph_decoder(group.model, group.agents, compile=self.graph_compile)

    def _generate_rows(self, group: _Group, encoded: list[list[int]], agents: list[str], settings: GenerationSettings,
                       logprobs: bool, min_new_tokens: int, limits: list[int] | None = None,
                       stops: RowTextStops | None = None) -> list[Generation]:
        """The reference path: one ``model.generate`` call over every row (``share_prefix=False``), drawing its
        tokens with :func:`~llm_marl_baselines.decoding.sample_rows`' sampler; the record text is the decoded
        continuation, unstripped. ``limits`` and ``stops`` cut rows afterwards: generate draws every row at every
        step, so the cut rows and the others are what :func:`~llm_marl_baselines.decoding.sample_rows` gives with the
        same limits and stop tests."""
        from transformers import LogitsProcessorList, MinNewTokensLengthLogitsProcessor

        device = group.loaded.device
        input_ids, attention_mask = left_pad(encoded, group.pad_id, device)
        stop_ids = sorted(group.stop_ids)
        recorder = _RawLogprobRecorder() if logprobs else None
        processors: list[Any] = [recorder] if recorder is not None else []
        if min_new_tokens > 0:
            # Ours, after the recorder: transformers would put its own before it, and the recorder would see -inf.
            processors.append(MinNewTokensLengthLogitsProcessor(input_ids.shape[1], min_new_tokens, stop_ids,
                                                                device=device))
        if not settings.greedy:  # generate runs greedy on the token our sampler drew: sample_rows' draws
            processors.append(TopKSampler(settings.temperature, settings.top_p).as_logits_processor())
        kwargs: dict[str, Any] = {}
        routing: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self.scheme == "stacked":
            routing = group.router.routed(agents)
        else:
            kwargs["adapter_names"] = agents
        was_training = group.model.training
        group.model.eval()  # peft refuses adapter_names in train mode; no LoRA dropout while sampling either
        try:
            with torch.inference_mode(), routing:
                output = group.model.generate(
                    input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=settings.max_new_tokens,
                    pad_token_id=group.pad_id, eos_token_id=stop_ids, logits_processor=LogitsProcessorList(processors),
                    return_dict_in_generate=True, do_sample=False, **kwargs,
                )
        finally:
            group.model.train(was_training)
        new_tokens = output.sequences[:, input_ids.shape[1]:]
        token_logprobs = recorder.finish(new_tokens).tolist() if recorder is not None else None
        tokenizer = group.loaded.tokenizer
        rows, token_logprobs, stopped = end_rows(new_tokens.tolist(), token_logprobs, group.stop_ids, limits)
        if stops is not None:  # each row through the token where its stop test first holds
            rows, token_logprobs, stopped = cut_rows(stops, rows, token_logprobs, stopped)
        return [
            Generation(
                text=tokenizer.decode(completion, skip_special_tokens=True),
                prompt_ids=tuple(encoded[row]),
                completion_ids=tuple(completion),
                logprobs=tuple(token_logprobs[row]) if token_logprobs is not None else None,
                finish_reason="stop" if stopped[row] else "length",
            )
            for row, completion in enumerate(rows)
        ]

    # ------------------------------------------------------------------------------------------------------------
    # Training forward
    # ------------------------------------------------------------------------------------------------------------

    def forward_logprobs(
        self,
        batch_rows: Sequence[Generation | tuple[Sequence[int], Sequence[int]]],
        agent_of_row: Sequence[str],
        *,
        temperature: float = 1.0,
        entropies: bool = False,
        reference: bool = False,
    ) -> CompletionLogprobs:
        """Per-token log-probabilities of each row's completion given its prompt, under the row's agent's adapter.

        ``batch_rows`` are :class:`~llm_marl_baselines.policies.base.Generation` records or ``(prompt_ids,
        completion_ids)`` pairs. One forward pass per base model over all rows (prompts left-padded, completions
        right-padded, position ids counted from each row's first real token, so a row's values equal those of its
        unpadded forward); only the completion positions' logits are computed (``logits_to_keep``). Gradients flow to
        the adapters when grad mode is on (train or eval mode). ``temperature`` divides the logits (1: the raw
        log-probabilities that :meth:`generate` records); ``entropies`` adds per-token entropies; ``reference=True``
        runs the base model with every adapter off (the KL reference of a LoRA policy; wrap it in ``torch.no_grad()``).
        """
        rows = [_prompt_and_completion(row, i) for i, row in enumerate(batch_rows)]
        agent_of_row = list(agent_of_row)
        if len(agent_of_row) != len(rows):
            raise ValueError(f"agent_of_row: expected one agent per row ({len(rows)}), got {len(agent_of_row)}")
        unknown = sorted(set(agent_of_row) - set(self.agents))
        if unknown:
            raise ValueError(f"agent_of_row: no adapter for agents {unknown}; this team has {list(self.agents)}")
        if not rows:
            raise ValueError("batch_rows: expected at least one row, got none")
        width = max(len(completion) for _, completion in rows)
        parts: list[tuple[list[int], CompletionLogprobs]] = []
        for group in self._groups:
            mine = [i for i, agent in enumerate(agent_of_row) if agent in group.agents]
            if mine:
                # Checkpointing recomputes each layer in the backward pass under the routing in place then, which
                # can only be one: the prompts' and the completions' forwards route different rows, so it reads
                # every row whole instead.
                shared = self.share_prefix and not (
                    self.scheme == "stacked" and _checkpointing(group.model) and torch.is_grad_enabled())
                forward = self._forward_group_shared if shared else self._forward_group
                parts.append((mine, forward(group, [rows[i] for i in mine], [agent_of_row[i] for i in mine], width,
                                            temperature, entropies, reference)))
        if len(parts) == 1:
            return parts[0][1]
        device = parts[0][1].per_token_logps.device
        order = torch.tensor([i for mine, _ in parts for i in mine]).argsort().to(device)

        def joined(name: str) -> Tensor:
            return torch.cat([getattr(part, name).to(device) for _, part in parts]).index_select(0, order)

        return CompletionLogprobs(joined("per_token_logps"), joined("completion_mask"),
                                  joined("entropies") if entropies else None)

    def _forward_group(self, group: _Group, rows: list[tuple[list[int], list[int]]], agents: list[str], width: int,
                       temperature: float, want_entropies: bool, reference: bool) -> CompletionLogprobs:
        device = group.loaded.device
        prompt_width = max(len(prompt) for prompt, _ in rows)
        ids = torch.full((len(rows), prompt_width + width), group.pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        completion_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (prompt, completion) in enumerate(rows):
            start = prompt_width - len(prompt)
            ids[i, start:prompt_width + len(completion)] = torch.tensor(prompt + completion)
            attention[i, start:prompt_width + len(completion)] = 1
            completion_mask[i, :len(completion)] = 1
        ids, attention, completion_mask = ids.to(device), attention.to(device), completion_mask.to(device)
        position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
        inputs = {"input_ids": ids, "attention_mask": attention, "position_ids": position_ids,
                  "logits_to_keep": width + 1}
        model = group.model
        if self.scheme == "stacked":
            sticky = _checkpointing(model) and torch.is_grad_enabled()
            with group.router.routed(agents, base_only=reference, sticky=sticky):
                logits = model(**inputs).logits
        else:
            was_training = model.training
            model.eval()  # peft refuses adapter_names in train mode
            try:
                logits = model(**inputs, adapter_names=["__base__"] * len(rows) if reference else agents).logits
            finally:
                model.train(was_training)
        per_token = sequence_logprobs(logits, ids, completion_mask, temperature)
        entropy = None
        if want_entropies:
            entropy = entropy_from_logits(completion_logits(logits, width, temperature)) * completion_mask
        return CompletionLogprobs(per_token, completion_mask, entropy)

    def _forward_group_shared(self, group: _Group, rows: list[tuple[list[int], list[int]]], agents: list[str],
                              width: int, temperature: float, want_entropies: bool,
                              reference: bool) -> CompletionLogprobs:
        """:meth:`_forward_group` with each distinct (agent, prompt) read once: one forward of the distinct prompts
        (left-padded) fills a cache, whose keys and values are copied to the rows that continue each prompt
        (``index_select``, through which gradients flow back to the prompt's forward), then one forward of every
        row's completion tokens on top of it. The first completion token is predicted by its prompt's last position,
        token ``t`` by completion position ``t − 1``; position ids continue each prompt's, so every row's values are
        those of its unpadded prompt + completion forward (the tests compare them with the repeated path)."""
        device = group.loaded.device
        distinct: dict[tuple[str, tuple[int, ...]], int] = {}
        row_prompt = [distinct.setdefault((agent, tuple(prompt)), len(distinct))
                      for agent, (prompt, _) in zip(agents, rows, strict=True)]
        prompt_ids, prompt_mask = left_pad([list(prompt) for _, prompt in distinct], group.pad_id, device)
        prompt_positions = (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)
        index = torch.tensor(row_prompt, dtype=torch.long, device=device)
        completion_ids = torch.full((len(rows), width), group.pad_id, dtype=torch.long)
        completion_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (_, completion) in enumerate(rows):
            completion_ids[i, :len(completion)] = torch.tensor(completion, dtype=torch.long)
            completion_mask[i, :len(completion)] = 1
        completion_ids, completion_mask = completion_ids.to(device), completion_mask.to(device)
        model = group.model
        cache = new_cache(model)
        cache_arg = cache_keyword(model)
        with self._rows_routed(group, [agent for agent, _ in distinct], reference) as extra:
            first = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=prompt_positions,
                          logits_to_keep=1, **{cache_arg: cache}, **extra).logits[:, -1:]
        predicting = first.index_select(0, index)  # [R, 1, V]: each row's first token, from its prompt
        if width > 1:
            for layer in cache.layers:  # every row continues its prompt's keys and values
                layer.keys, layer.values = layer.keys.index_select(0, index), layer.values.index_select(0, index)
            attention = torch.cat([prompt_mask.index_select(0, index),
                                   prompt_mask.new_ones((len(rows), width - 1))], dim=1)
            offsets = torch.arange(1, width, device=device)
            positions = prompt_positions.index_select(0, index)[:, -1:] + offsets
            with self._rows_routed(group, agents, reference) as extra:
                rest = model(input_ids=completion_ids[:, :-1], attention_mask=attention, position_ids=positions,
                             **{cache_arg: cache}, **extra).logits
            predicting = torch.cat([predicting, rest], dim=1)
        if temperature != 1.0:
            predicting = predicting / temperature
        per_token = token_logprobs(predicting, completion_ids, completion_mask)
        entropy = entropy_from_logits(predicting) * completion_mask if want_entropies else None
        return CompletionLogprobs(per_token, completion_mask, entropy)

    @contextlib.contextmanager
    def _rows_routed(self, group: _Group, agents: list[str], reference: bool) -> Iterator[dict[str, Any]]:
        """Run the next forward passes of ``group``'s model with row ``i`` under ``agents[i]``'s adapter (none, for
        ``reference``); yields the keyword arguments the forward needs: nothing with the stacked router, peft's
        ``adapter_names`` otherwise (in eval mode, which peft needs for them)."""
        if self.scheme == "stacked":
            with group.router.routed(agents, base_only=reference):
                yield {}
            return
        was_training = group.model.training
        group.model.eval()
        try:
            yield {"adapter_names": ["__base__"] * len(agents) if reference else list(agents)}
        finally:
            group.model.train(was_training)

    def state_features(self, texts: Sequence[str], *, max_tokens: int = 1024) -> Tensor:
        """Features of ``texts`` for a value head (:mod:`llm_marl_trainers.critic`): the first base model's last-layer
        hidden state at each text's last token, every adapter off, no gradient; float32 ``[len(texts), hidden]``.

        Texts are tokenized as they are (no chat template); one over ``max_tokens`` keeps its head and tail. The
        rows are left-padded with position ids counted from each row's first token, so a row's features equal those
        of its unpadded forward.
        """
        if not texts:
            raise ValueError("texts: expected at least one text, got none")
        group = self._groups[0]
        encoded = [ids or [group.pad_id] for ids in encode_prompts(group.loaded.tokenizer, texts, max_tokens)]
        input_ids, attention = left_pad(encoded, group.pad_id, group.loaded.device)
        position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
        causal_lm = group.model.get_base_model()
        backbone = getattr(causal_lm, causal_lm.base_model_prefix)  # the decoder stack, without the LM head
        adapters_off = (group.router.routed([group.agents[0]] * len(encoded), base_only=True)
                        if self.scheme == "stacked" else group.model.disable_adapter())
        with torch.no_grad(), adapters_off:
            output = backbone(input_ids=input_ids, attention_mask=attention, position_ids=position_ids)
        return output.last_hidden_state[:, -1].float()

    # ------------------------------------------------------------------------------------------------------------
    # Routing for callers that run the model themselves (benchmarks, custom losses)
    # ------------------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def route(self, agent_of_row: Sequence[str]) -> Iterator[Any]:
        """Yield the team's peft model with the next forward passes' rows routed to ``agent_of_row``'s adapters
        (``"stacked"`` scheme, all agents on one base). Rows must match the batch the model is called with."""
        if self.scheme != "stacked" or self.heterogeneous:
            raise ValueError(f"route: needs scheme='stacked' and one shared base; this team has scheme="
                             f"{self.scheme!r} and {len(self._groups)} base models")
        unknown = sorted(set(agent_of_row) - set(self.agents))
        if unknown:
            raise ValueError(f"route: no adapter for agents {unknown}; this team has {list(self.agents)}")
        group = self._groups[0]
        with group.router.routed(list(agent_of_row)):
            yield group.model

    def _group(self, agent: str) -> _Group:
        if agent not in self._group_of:
            raise KeyError(f"no adapter for agent {agent!r}; this team has {list(self.agents)}")
        return self._group_of[agent]


@dataclass(frozen=True)
class TeamRolloutPolicy:
    """A :class:`TeamModel` as the rollout runner's policy: ``list[ChatRequest] -> list[Generation]``, in order, from
    one ``generate`` call per base model for the whole batch. Call k samples with seed
    :func:`~llm_marl_baselines.policies.base.call_seed` ``(settings.seed, k)``: each turn draws fresh numbers."""

    team: TeamModel
    settings: GenerationSettings
    logprobs: bool = True
    min_new_tokens: int = 0
    prompt_store: PromptStore | None = None
    role_max_new_tokens: Mapping[str, int] | None = None
    """Per agent, the budget its replies stop at (:meth:`TeamModel.generate`); None: ``settings.max_new_tokens``."""
    role_reply_ends: Mapping[str, str | None] | None = None
    """Per agent, the pattern whose first match ends its replies (:meth:`TeamModel.generate`); None: no such end."""
    calls: CallSeeds = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", CallSeeds(self.settings))

    def __call__(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        """One record per request."""
        generated = self.team.generate(requests, self.calls.next(), logprobs=self.logprobs,
                                       min_new_tokens=self.min_new_tokens, prompt_store=self.prompt_store,
                                       role_max_new_tokens=self.role_max_new_tokens,
                                       role_reply_ends=self.role_reply_ends)
        return [samples[0] for samples in generated]


def special_token_ids(tokenizer: Any, model: Any) -> tuple[int, frozenset[int]]:
    """``(pad_id, stop_ids)`` for batched generation with ``tokenizer`` and ``model``.

    Stop ids: the model's generation-config eos ids, the tokenizer's eos and ``<|im_end|>`` when the vocabulary has it
    (SmolLM2's GGUF declares ``<|im_start|>`` as eos). Pad: the tokenizer's pad unless it is missing or a stop id, then
    ``<|endoftext|>`` (SmolLM2: 0) when the vocabulary has it and it is not a stop id; as a last resort the pad stays a
    stop id, which the attention mask and the cut at the first stop token still handle.
    """
    vocab = tokenizer.get_vocab()
    eos = model.generation_config.eos_token_id
    stop = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    if tokenizer.eos_token_id is not None:
        stop.add(tokenizer.eos_token_id)
    if CHATML_END in vocab:
        stop.add(vocab[CHATML_END])
    if not stop:
        raise ValueError("tokenizer and model: expected an end-of-sequence token, found none")
    pad = tokenizer.pad_token_id
    if (pad is None or pad in stop) and FALLBACK_PAD in vocab and vocab[FALLBACK_PAD] not in stop:
        pad = vocab[FALLBACK_PAD]
    if pad is None:
        pad = min(stop)
    return int(pad), frozenset(int(i) for i in stop)


def _checkpointing(model: Any) -> bool:
    """Whether activation (gradient) checkpointing is on, under transformers 5's name or 4's."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model.get_base_model()), name):
            return bool(getattr(model.get_base_model(), name))
    return False


def _adapter_parameters(model: Any, agent: str) -> list[torch.nn.Parameter]:
    from peft.tuners.lora import LoraLayer

    parameters: list[torch.nn.Parameter] = []
    for module in model.modules():
        if isinstance(module, LoraLayer):
            for layer_name in module.adapter_layer_names:
                adapter = getattr(module, layer_name)
                if agent in adapter:
                    value = adapter[agent]
                    parameters.extend([value] if isinstance(value, torch.nn.Parameter) else value.parameters())
    return parameters


def _encode(group: _Group, requests: Sequence[Any], max_new_tokens: int) -> list[list[int]]:
    """Chat-templated prompt ids of each request (rendered once per distinct request object)."""
    tokenizer = group.loaded.tokenizer
    context = int(getattr(group.loaded.model.config, "max_position_embeddings", 2048) or 2048)
    rendered: dict[int, str] = {}
    for request in requests:
        if id(request) not in rendered:
            rendered[id(request)] = render_chat(tokenizer, _messages(request))
    prompts = [rendered[id(request)] for request in requests]
    return encode_prompts(tokenizer, prompts, max(16, context - max_new_tokens))


def _messages(request: Any) -> list[dict[str, str]]:
    """A request's chat messages (``ChatRequest.messages`` is a tuple, ``ActionRequest.messages`` a method)."""
    messages = request.messages() if callable(request.messages) else request.messages
    return [dict(message) for message in messages]


def _prompt_and_completion(row: Any, index: int) -> tuple[list[int], list[int]]:
    if isinstance(row, Generation):
        if row.prompt_ids is None or row.completion_ids is None:
            raise ValueError(f"batch_rows[{index}]: expected a record with prompt_ids and completion_ids, got None")
        prompt, completion = row.prompt_ids, row.completion_ids
    elif isinstance(row, (tuple, list)) and len(row) == 2:
        prompt, completion = row
    else:
        raise TypeError(f"batch_rows[{index}]: expected a Generation or (prompt_ids, completion_ids), "
                        f"got {type(row).__name__}")
    prompt, completion = [int(i) for i in prompt], [int(i) for i in completion]
    if not prompt:
        raise ValueError(f"batch_rows[{index}]: expected a non-empty prompt")
    return prompt, completion


def _check_agents(agents: Sequence[str]) -> list[str]:
    if isinstance(agents, str) or not isinstance(agents, Sequence) or not agents:
        raise ValueError(f"agents: expected a non-empty sequence of agent names, got {agents!r}")
    names = list(agents)
    for name in names:
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"agents: expected non-empty names without '.' (they name peft adapters), got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"agents: expected distinct names, got {names}")
    return names


@contextlib.contextmanager
def _seeded(seed: int | None, device: str) -> Iterator[None]:
    """Seed torch for the block and restore the caller's RNG state after; ``None`` leaves the global RNG running."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[] if str(device).startswith("cpu") else None):
        torch.manual_seed(seed)
        yield


def _import_peft() -> Any:
    try:
        import peft
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError(f"per-agent adapters need peft ({error}); {TRAIN_EXTRA_HINT}") from error
    return peft
