"""The suite's envs as TorchRL LLM envs (history mode), and TorchRL's own GRPO pieces training on them.

TorchRL's LLM stack trains one policy on a text env: a chat env in *history mode* hands the policy a
``("history", "prompt")`` :class:`~torchrl.data.llm.History` and takes back ``("history", "full")`` (the prompt plus
the assistant turn); :class:`~torchrl.modules.llm.TransformersWrapper` samples,
:class:`~torchrl.collectors.llm.LLMCollector` collects, :class:`~torchrl.objectives.llm.MCAdvantage` groups
trajectories on a replay buffer and :class:`~torchrl.objectives.llm.GRPOLoss` optimises. Its ``PettingZooWrapper``
resets our envs but cannot step string actions, and its dataset envs download from the hub; :class:`TeamChatEnv` is a
TorchRL ``EnvBase`` built from our tasks instead::

    env = TeamChatEnv("writing", num_agents=2, seeds=range(64), group_size=4, similarity="tfidf")
    records = train_grpo(env, steps=10)            # TransformersWrapper + LLMCollector + MCAdvantage + GRPOLoss

How a team plays a single-policy env
------------------------------------
* One TorchRL step is one *role's* turn: the observation is that role's own chat (``env.chat_messages(role)``: system
  and user message, nothing a teammate wrote), ``"agent"`` names the role, and the action is the assistant turn the
  policy appended. Within a joint turn the roles act one after another but see only what the Dec-POMDP shows them
  (the env steps once all live roles have answered), so decentralized execution is kept. One shared policy plays
  every role by default; :class:`RolePolicies` routes each role's rows to its own policy when collecting (TorchRL's
  collector takes any callable). :func:`train_grpo` trains the shared policy: TorchRL's ``GRPOLoss`` takes one actor,
  so per-role training means one loss and optimizer per role over that role's rows, which is left to the caller.
* Reward: the env's joint reward of a joint turn is paid at the step of the role that completed it (``0`` at the other
  roles' steps), so a trajectory's reward sum is the env's team return. ``done`` when the episode ends
  (``terminated`` for all-done or converged, ``truncated`` at ``max_turns``). Shapes follow TorchRL's GSM8K env:
  reward ``[B, 1, 1]``, done ``[B, 1]``.
* Groups: the batch holds ``num_groups × group_size`` copies of the env; copy ``b`` plays the tasks of slot
  ``b // group_size`` in order (its k-th episode is the schedule's ``k·num_groups + slot``-th seed), so the
  ``group_size`` copies of a slot play the same task from the same seed and share the ``"group"`` string that
  ``MCAdvantage(prompt_key="group")`` groups by (GRPO's G samples of one prompt), however the copies' episodes
  interleave.
* Partial resets (TorchRL's ``"_reset"`` mask) restart only the finished copies.

The contract, as read in torchrl 0.14.1 / tensordict 0.14.3 (``torchrl/envs/llm/chat.py`` ``ChatEnv`` specs and
``_step_history``; ``torchrl/envs/llm/reward/gsm8k.py`` reward shape; ``torchrl/modules/llm/policies/
transformers_wrapper.py`` generation outputs; ``torchrl/objectives/llm/grpo.py`` ``GRPOLoss`` keys and
``MCAdvantage``; ``torchrl/collectors/llm/base.py``): the env needs ``tensordict.set_list_to_stack(True)`` (set on
import of this module's TorchRL parts); ``TransformersWrapper(generate=True)`` returns the response's log-probabilities
only (``log_probs.full`` is None: "we only have the log-probs for the new tokens"), while ``GRPOLoss`` reads
``("log_probs", "full")`` as the sampling policy's. :func:`train_grpo` therefore fills it, before each update, with
the training wrapper's own log-probabilities of ``("tokens", "full")`` (no gradient): with one update per batch the
ratio starts at 1, as TRL's on-policy ``old_per_token_logps = per_token_logps.detach()``.

Heavy imports (torch, tensordict, torchrl, transformers, peft) happen inside the functions.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_marl_envs.core.termination import END_REASONS
from llm_marl_envs.registry import env_spec, make_env

TORCHRL_EXTRA_HINT = "pip install 'llm-marl-envs[torchrl]'"
"""What to install when TorchRL (or tensordict) is missing."""
END_REASONS_TERMINATED = frozenset(END_REASONS) - {"max_turns"} | {"magrpo_threshold"}
"""Episode ends that are terminations (a solved task and a quorum's ending among them); ``max_turns`` is a
truncation."""


def import_torchrl() -> Any:
    """The ``torchrl`` module, with tensordict's list-to-stack mode on (History batches need it; TorchRL's
    ``DatasetChatEnv`` refuses to run without it). A missing package raises an ``ImportError`` naming the extra."""
    try:
        import tensordict
        import torchrl
        import torchrl.envs.llm  # the LLM stack (it checks its own optional dependencies on import)
    except ImportError as error:
        raise ImportError(f"TorchRL's LLM stack is not installed ({error}); {TORCHRL_EXTRA_HINT}") from error
    tensordict.set_list_to_stack(True).set()
    return torchrl


@dataclass
class _Copy:
    """One env of the batch: the suite env, its place in the task schedule and the joint turn being assembled."""

    env: Any
    slot: int
    episode: int = -1
    seed: int = 0
    task_id: str = ""
    group: str = ""
    queue: list[str] = field(default_factory=list)
    """Roles still to act in this joint turn, in order; ``queue[0]`` is the one the observation is for."""
    pending: dict[str, str] = field(default_factory=dict)
    """The joint turn's actions so far."""
    last_role: str = ""
    finished: bool = True


@dataclass(frozen=True)
class EpisodeRecord:
    """A finished episode, as the env paid it."""

    group: str
    seed: int
    task_id: str
    team_return: float
    turns: int
    end_reason: str | None
    actions: tuple[tuple[tuple[str, str], ...], ...]
    """Per joint turn, ``(role, action)`` pairs in acting order."""


def _make_env_class() -> type:
    """Build :class:`TeamChatEnv` on TorchRL's ``EnvBase`` (imported lazily, so this module imports without it)."""
    import_torchrl()
    import torch
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import Categorical, Composite, NonTensor, Unbounded
    from torchrl.data.llm.history import History
    from torchrl.envs import EnvBase
    from torchrl.modules.llm.policies.common import ChatHistory

    class TeamChatEnv(EnvBase):
        __doc__ = _TEAM_CHAT_ENV_DOC
        batch_locked = True

        def __init__(self, env: str, num_agents: int = 1, *, seeds: int | Iterable[int] = 64, group_size: int = 1,
                     num_groups: int = 1, split: str = "train",
                     on_episode: Callable[[EpisodeRecord], None] | None = None, device: Any = None,
                     **env_kwargs: Any) -> None:
            if not isinstance(env, str):
                raise TypeError(f"env: expected an env name (str), got {type(env).__name__}")
            self.env_name = env_spec(env).name  # a ValueError listing the known names
            for name, value in (("group_size", group_size), ("num_groups", num_groups)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
            self.seeds = _seed_list(seeds)
            first = make_env(self.env_name, num_agents=num_agents, **env_kwargs)  # bad kwargs / team size fail here
            self.num_agents = num_agents
            self.env_kwargs = dict(env_kwargs)
            self.agents: tuple[str, ...] = tuple(first.possible_agents)
            self.split = split
            self.group_size = group_size
            self.num_groups = num_groups
            self.on_episode = on_episode
            self.episodes: list[EpisodeRecord] = []
            """Every finished episode, in the order they ended."""
            batch = group_size * num_groups
            # Copies share the first env's heavy resources (similarity model, sandbox executor).
            self._copies = [_Copy(first if b == 0 else copy.deepcopy(first), slot=b // group_size)
                            for b in range(batch)]
            self._turn_actions: list[list[tuple[str, str]]] = [[] for _ in range(batch)]
            self._episode_actions: list[list[tuple[tuple[str, str], ...]]] = [[] for _ in range(batch)]
            super().__init__(batch_size=torch.Size([batch]), device=device)
            self._make_specs()

        # ---------------------------------------------------------------------------------------------- specs
        def _make_specs(self) -> None:
            shape = self.batch_size
            # As TorchRL's ChatEnv in history mode: the prompt History out, the full History (prompt + assistant
            # turn) in; plus who is to act and which GRPO group the episode belongs to.
            prompt = ChatHistory.default_spec(shape=shape, keys=["prompt"]).to(self.device)
            for unused in ("tool_calls", "tool_responses"):  # our chats carry no tool calls (History.from_chats)
                if ("prompt", unused) in prompt.keys(True):
                    del prompt["prompt", unused]
            self.full_observation_spec = Composite(
                history=prompt,
                agent=NonTensor(example_data="role", shape=shape, device=self.device),
                group=NonTensor(example_data="0:task", shape=shape, device=self.device),
                task_id=NonTensor(example_data="task", shape=shape, device=self.device),
                seed=Unbounded(shape=(*shape, 1), dtype=torch.int64, device=self.device),
                shape=shape, device=self.device)
            self.full_action_spec = Composite(
                history=ChatHistory.default_spec(shape=shape, keys=["full"]).to(self.device),
                shape=shape, device=self.device)
            # [B, 1, 1] as TorchRL's GSM8K reward parser writes it: MCAdvantage's advantage then broadcasts over the
            # tokens of GRPOLoss's [B, T, 1] log-weights.
            self.full_reward_spec = Composite(
                reward=Unbounded(shape=(*shape, 1, 1), dtype=torch.float32, device=self.device),
                shape=shape, device=self.device)
            flag = Categorical(2, shape=(*shape, 1), dtype=torch.bool, device=self.device)
            self.full_done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(),
                                            shape=shape, device=self.device)

        # ------------------------------------------------------------------------------------------ episodes
        def _start(self, b: int) -> None:
            state = self._copies[b]
            state.episode += 1
            index = state.episode * self.num_groups + state.slot
            state.seed = self.seeds[index % len(self.seeds)]
            state.env.reset(seed=state.seed, options={"split": self.split})
            state.task_id = str(state.env.task.task_id)
            state.group = f"{index}:{state.task_id}#{state.seed}"
            state.queue = list(state.env.agents)
            state.pending = {}
            state.last_role = state.queue[0] if state.queue else self.agents[0]
            state.finished = not state.queue
            self._turn_actions[b] = []
            self._episode_actions[b] = []

        def _observe(self, b: int) -> dict[str, Any]:
            state = self._copies[b]
            role = state.queue[0] if state.queue else state.last_role
            return {"messages": [dict(m) for m in state.env.chat_messages(role)], "agent": role,
                    "group": state.group, "task_id": state.task_id, "seed": state.seed}

        def _pack(self, rows: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> TensorDictBase:
            shape = self.batch_size
            history = History.from_chats([row["messages"] for row in rows])
            out = TensorDict(
                history=ChatHistory(prompt=history, batch_size=shape),
                agent=[row["agent"] for row in rows], group=[row["group"] for row in rows],
                task_id=[row["task_id"] for row in rows],
                seed=torch.tensor([[row["seed"]] for row in rows], dtype=torch.int64),
                batch_size=shape, device=self.device)
            for key, value in (extra or {}).items():
                out.set(key, value)
            # A lazy stack over the batch, as ChatEnv returns (``.to_lazystack(0)``): History rows stay separate.
            return out.to_lazystack(0)

        def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
            mask = None if tensordict is None else tensordict.get("_reset", None)
            flags = [True] * self.batch_size[0] if mask is None else mask.reshape(-1).tolist()
            for b, reset in enumerate(flags):
                if reset or self._copies[b].episode < 0:
                    self._start(b)
            # Every row is returned; TorchRL keeps the rows that were not reset from the input (``where`` on the
            # ``_reset`` mask, torchrl/envs/utils.py ``_update_during_reset``).
            return self._pack([self._observe(b) for b in range(self.batch_size[0])])

        def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
            texts = _assistant_texts(tensordict, self.batch_size[0])
            rewards, terminated, truncated = [], [], []
            for b, text in enumerate(texts):
                reward, term, trunc = self._act(b, text)
                rewards.append(reward)
                terminated.append(term)
                truncated.append(trunc)
            shape = (self.batch_size[0], 1)
            term_t = torch.tensor(terminated, dtype=torch.bool).reshape(shape)
            trunc_t = torch.tensor(truncated, dtype=torch.bool).reshape(shape)
            return self._pack([self._observe(b) for b in range(self.batch_size[0])], {
                "reward": torch.tensor(rewards, dtype=torch.float32).reshape(*shape, 1),
                "terminated": term_t, "truncated": trunc_t, "done": term_t | trunc_t})

        def _act(self, b: int, text: str) -> tuple[float, bool, bool]:
            state = self._copies[b]
            if state.finished or not state.queue:
                raise RuntimeError(f"env {b}: the episode is over; reset it before stepping (TorchRL's "
                                   f"step_and_maybe_reset does)")
            role = state.queue.pop(0)
            state.pending[role] = text
            state.last_role = role
            self._turn_actions[b].append((role, text))
            if state.queue:  # teammates still to answer this joint turn: nothing is paid yet
                return 0.0, False, False
            _, rewards, _, _, _ = state.env.step(dict(state.pending))
            reward = float(rewards[role])
            state.pending = {}
            state.queue = list(state.env.agents)
            self._episode_actions[b].append(tuple(self._turn_actions[b]))
            self._turn_actions[b] = []
            if state.queue:
                return reward, False, False
            state.finished = True
            reason = state.env.end_reason
            record = EpisodeRecord(state.group, state.seed, state.task_id, float(state.env.team_return),
                                   int(state.env.turn), reason, tuple(self._episode_actions[b]))
            self.episodes.append(record)
            if self.on_episode is not None:
                self.on_episode(record)
            return reward, reason in END_REASONS_TERMINATED, reason not in END_REASONS_TERMINATED

        def turns_so_far(self, b: int) -> list[tuple[tuple[str, str], ...]]:
            """The joint turns copy ``b`` completed in its current episode (``(role, action)`` pairs each)."""
            return list(self._episode_actions[b])

        def _set_seed(self, seed: int | None) -> None:
            # Tasks come from the seed schedule given at construction (so a group's copies share a task); TorchRL's
            # seed does not change it.
            return None

        def replay(self, record: EpisodeRecord) -> float:
            """The team return a *fresh* env pays for ``record``'s actions (an independent check)."""
            return replay_return(self.env_name, self.num_agents, self.env_kwargs, self.split, record.seed,
                                 record.actions)

        def close(self, *, raise_if_closed: bool = True) -> None:
            """Close the suite envs (the coding env's sandbox executor) and the TorchRL env."""
            for state in self._copies:
                state.env.close()
            super().close(raise_if_closed=raise_if_closed)

    TeamChatEnv.__module__, TeamChatEnv.__qualname__ = __name__, "TeamChatEnv"  # pickles by module attribute
    return TeamChatEnv


_TEAM_CHAT_ENV_DOC = """A suite env as a TorchRL LLM env in history mode (see the module docstring).

``env``: a registry name; ``num_agents``: team size (the env's range); ``seeds``: the task schedule (``n`` means
``0..n-1``; reset with ``options={"split": split}``); ``group_size``: copies per task (GRPO's G); ``num_groups``: tasks
played side by side; ``env_kwargs`` go to ``make_env``. Batch size ``group_size × num_groups``. Observation keys:
``("history", "prompt")``, ``"agent"``, ``"group"``, ``"task_id"``, ``"seed"``; action ``("history", "full")``;
reward ``[B, 1, 1]``. :attr:`episodes` lists the finished episodes (``on_episode`` sees each)."""

_ENV_CLASS: type | None = None


def __getattr__(name: str) -> Any:
    """``TeamChatEnv`` is built on first access (PEP 562), so importing this module needs no TorchRL; a missing
    TorchRL raises an ``ImportError`` naming the extra there."""
    global _ENV_CLASS
    if name == "TeamChatEnv":
        if _ENV_CLASS is None:
            _ENV_CLASS = _make_env_class()
        return _ENV_CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise TypeError("seeds: expected an int or ints, got a bool")
    values = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not values or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in values):
        raise ValueError(f"seeds: expected a positive count or non-negative ints, got {seeds!r:.80}")
    return values


def _assistant_texts(tensordict: Any, batch: int) -> list[str]:
    """Each row's action: the content of the last message of ``("history", "full")`` when it is the assistant's
    (as ``ChatEnv._step_history`` reads the policy's turn); anything else (a random spec sample) is an empty action,
    which the suite's envs accept and flag."""
    full = tensordict.get(("history", "full"), None)
    if full is None:
        raise KeyError("expected the policy's ('history', 'full') (prompt + assistant turn) in the step's tensordict; "
                       "use a TorchRL LLM wrapper in history mode (e.g. TransformersWrapper(input_mode='history'))")
    texts = []
    for b in range(batch):
        last = full[b][-1] if full[b].batch_size[-1] > 0 else None
        role = getattr(last, "role", None)
        content = getattr(last, "content", None)
        texts.append(content if role == "assistant" and isinstance(content, str) else "")
    return texts


def _strings(tensordict: Any, key: str) -> list[str]:
    """A non-tensor string entry of a (possibly lazily stacked) tensordict as a list of str."""
    value = tensordict.get(key)
    items = value.tolist() if hasattr(value, "tolist") else list(value)
    return [str(getattr(item, "data", item)) for item in items]


def replay_return(env: str, num_agents: int, env_kwargs: Mapping[str, Any], split: str, seed: int,
                  actions: Sequence[Sequence[tuple[str, str]]]) -> float:
    """The team return of a fresh env reset with ``seed`` (in ``split``) and stepped with ``actions`` (per joint
    turn, ``(role, action)`` pairs)."""
    fresh = make_env(env, num_agents=num_agents, **dict(env_kwargs))
    try:
        fresh.reset(seed=seed, options={"split": split})
        total = 0.0
        for turn in actions:
            _, rewards, _, _, _ = fresh.step(dict(turn))
            total += float(next(iter(rewards.values())))
        return total
    finally:
        fresh.close()


class RolePolicies:
    """Per-role policies for :class:`TeamChatEnv`: each row goes to the policy of its ``"agent"``. TorchRL's
    ``LLMCollector`` accepts it as its ``policy``.

    Each role's rows are handed to its policy as a lazy stack of the input's own rows, so a wrapper that writes in
    place (``TransformersWrapper``'s default ``inplace=True``) fills the input, which is returned: the output has the
    input's structure plus the policies' keys, as a single wrapper's would (the collector checks that structure).
    """

    def __init__(self, policies: Mapping[str, Callable[[Any], Any]]) -> None:
        if not policies:
            raise ValueError("policies: expected {role: policy} for at least one role")
        self.policies = dict(policies)

    @property
    def out_keys(self) -> list[Any]:
        """The policies' output keys (TorchRL's collectors read a policy's ``out_keys`` instead of probing it)."""
        keys: list[Any] = []
        for policy in self.policies.values():
            keys += [key for key in getattr(policy, "out_keys", ()) if key not in keys]
        return keys

    def __call__(self, tensordict: Any) -> Any:
        from tensordict import LazyStackedTensorDict, lazy_stack

        if not isinstance(tensordict, LazyStackedTensorDict) or tensordict.stack_dim != 0:
            tensordict = tensordict.to_lazystack(0)
        roles = _strings(tensordict, "agent")
        unknown = sorted(set(roles) - set(self.policies))
        if unknown:
            raise ValueError(f"no policy for roles {unknown}; policies for {sorted(self.policies)}")
        for role, policy in self.policies.items():
            index = [i for i, r in enumerate(roles) if r == role]
            if index:
                rows = lazy_stack([tensordict.tensordicts[i] for i in index])
                out = policy(rows)
                if out is not rows:  # a policy that does not write in place: copy its rows back
                    for i, row in zip(index, out.unbind(0), strict=True):
                        tensordict.tensordicts[i].update(row)
        return tensordict


# ---------------------------------------------------------------------------------------------------- training
def policy_pair(model: Any, tokenizer: Any, *, max_new_tokens: int = 64, temperature: float = 1.0,
                top_p: float = 1.0) -> tuple[Any, Any]:
    """TorchRL's two views of one model: a sampler (``TransformersWrapper(generate=True, input_mode="history")``,
    what ``LLMCollector`` runs) and a scorer (``generate=False, input_mode="tokens"``, what ``GRPOLoss`` trains),
    sharing the weights. The scorer reads ``("tokens", "full")``, exactly the tokens that were sampled (re-rendering
    ``("history", "full")`` would add the template's end of turn and misalign them)."""
    import_torchrl()
    from torchrl.modules.llm import TransformersWrapper

    sampler = TransformersWrapper(model, tokenizer=tokenizer, input_mode="history", generate=True,
                                  return_log_probs=True, pad_output=False,
                                  generate_kwargs={"max_new_tokens": int(max_new_tokens), "do_sample": True,
                                                   "temperature": float(temperature), "top_p": float(top_p)})
    scorer = TransformersWrapper(model, tokenizer=tokenizer, input_mode="tokens", generate=False,
                                 return_log_probs=True, pad_output=False)
    return sampler, scorer


@dataclass(frozen=True)
class StepRecord:
    """One optimisation step of :func:`train_grpo`."""

    step: int
    wall_time: float
    """Training seconds since the start, at the end of the step (replays and ``on_step`` left out)."""
    step_time: float
    """Seconds of collection and update of this step (from the end of the previous step's bookkeeping)."""
    trajectories: int
    torchrl_reward: float
    """Mean over the step's trajectories of the reward sum TorchRL collected (``("next", "reward")``)."""
    env_reward: float
    """Mean team return a fresh env pays for the same actions (:func:`replay_return`)."""
    loss: float
    groups: tuple[str, ...]


def train_grpo(env: Any, steps: int, *, model: Any = None, tokenizer: Any = None, learning_rate: float = 1e-4,
               max_new_tokens: int = 64, temperature: float = 1.0, top_p: float = 1.0, peft_config: Any = "default",
               on_step: Callable[[StepRecord], None] | None = None, replay: bool = True) -> list[StepRecord]:
    """GRPO with TorchRL's own pieces on a :class:`TeamChatEnv`: ``TransformersWrapper`` samples (one shared policy
    for every role), ``LLMCollector`` collects completed trajectories, a replay buffer with
    ``MCAdvantage(grpo_size=group_size, prompt_key="group", trajectory_return="sum")`` writes whole groups with their
    group-relative advantages, and ``GRPOLoss`` (response tokens only) takes one AdamW step per batch of complete
    groups. ``model``: None (the offline default SmolLM2-135M-Instruct, float32) or a ``LoadedModel``/model with
    ``tokenizer``; ``peft_config``: ``"default"`` (our trainer's LoRA), a peft config, or None (full fine-tuning).
    Returns one :class:`StepRecord` per optimisation step (``replay`` recomputes each step's returns in fresh envs).
    """
    import_torchrl()
    import torch
    from torchrl.collectors.llm import LLMCollector
    from torchrl.data import LazyStackStorage, ReplayBuffer, SamplerWithoutReplacement
    from torchrl.envs import InitTracker, TransformedEnv
    from torchrl.objectives.llm import GRPOLoss, MCAdvantage

    from llm_marl_baselines.models import LoadedModel, load_model

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected an int >= 1, got {steps!r}")
    if env.group_size < 2:
        raise ValueError(f"group_size: GRPO needs >= 2 trajectories per group, the env has {env.group_size}")
    if model is None or isinstance(model, str):
        model = load_model(model, dtype="float32", device="cpu")
    if isinstance(model, LoadedModel):
        model, tokenizer = model.model, tokenizer or model.tokenizer
    if tokenizer is None:
        raise ValueError("tokenizer: required with a model object (or pass a LoadedModel)")
    if peft_config is not None:
        import peft

        from llm_marl_trainers.comlrl_adapter import default_lora

        model = peft.get_peft_model(model, default_lora() if isinstance(peft_config, str) else peft_config)
    model.eval()  # GRPOLoss's note: keep the policy in eval mode so sampling and scoring match
    sampler, scorer = policy_pair(model, tokenizer, max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=learning_rate)
    loss_module = GRPOLoss(actor_network=scorer, entropy_bonus=False, masking_strategy="sft")
    batch = env.batch_size[0]
    # One joint turn of every copy per yielded batch: complete groups arrive as soon as their episodes end.
    # InitTracker is what TorchRL's LLM wrappers ask of an env (the collector warns without it, and appends it itself
    # from torchrl 0.15 on); the env itself stays the one the replays read.
    collector = LLMCollector(TransformedEnv(env, InitTracker()), policy=sampler,
                             dialog_turns_per_batch=batch * len(env.agents), yield_completed_trajectories=True)
    buffer = ReplayBuffer(storage=LazyStackStorage(100_000), sampler=SamplerWithoutReplacement())
    buffer.append_transform(MCAdvantage(grpo_size=env.group_size, prompt_key="group", trajectory_return="sum"))
    records: list[StepRecord] = []
    started = last = time.perf_counter()
    excluded = 0.0  # replays and on_step callbacks: left out of the training wall time
    try:
        for data in collector:
            buffer.extend(data.reshape(-1))
            if len(buffer) == 0:
                continue  # no group complete yet
            samples = buffer[:]
            buffer.empty()
            loss = _grpo_update(samples, scorer, loss_module, optimizer, trainable)
            now = time.perf_counter()
            trajectories = _trajectories(samples)
            torchrl_rewards = [float(t.get(("next", "reward")).sum()) for t in trajectories]
            env_rewards = [_replay_trajectory(env, t) for t in trajectories] if replay else []
            record = StepRecord(step=len(records) + 1, wall_time=now - started - excluded, step_time=now - last,
                                trajectories=len(trajectories),
                                torchrl_reward=sum(torchrl_rewards) / len(torchrl_rewards),
                                env_reward=sum(env_rewards) / len(env_rewards) if env_rewards else float("nan"),
                                loss=loss, groups=tuple(sorted({_strings(t, "group")[0] for t in trajectories})))
            records.append(record)
            if on_step is not None:
                on_step(record)
            last = time.perf_counter()
            excluded += last - now
            if len(records) >= steps:
                break
    finally:
        collector.shutdown(close_env=False)  # the env is the caller's: it stays usable (env.close() ends it)
    return records


def _grpo_update(samples: Any, scorer: Any, loss_module: Any, optimizer: Any, trainable: list[Any]) -> float:
    """One AdamW step of GRPOLoss over ``samples`` (every step of the batch's complete groups)."""
    import torch

    with torch.no_grad():  # the sampling policy's log-probabilities of the sampled tokens (module docstring)
        old = scorer(samples.copy()).get(("log_probs", "full"), as_list=True)
    for row, values in zip(samples.unbind(0), old, strict=True):
        row.set(("log_probs", "full"), values)
    optimizer.zero_grad()
    output = loss_module(samples)
    loss = sum(value for key, value in output.items() if isinstance(key, str) and key.startswith("loss_"))
    if not torch.isfinite(loss):  # a NaN/inf loss would poison the adapter: skip the update (reported as such)
        return float("nan")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    optimizer.step()
    return float(loss.detach())


def _trajectories(samples: Any) -> list[Any]:
    """Split a flat batch of steps into trajectories at ``("next", "done")``."""
    done = samples.get(("next", "done")).reshape(-1).tolist()
    out, start = [], 0
    for index, flag in enumerate(done):
        if flag:
            out.append(samples[start:index + 1])
            start = index + 1
    return out


def _replay_trajectory(env: Any, trajectory: Any) -> float:
    """The return a fresh env pays for one collected trajectory's actions (roles and assistant texts, per step)."""
    agents = _strings(trajectory, "agent")
    texts = _assistant_texts(trajectory, trajectory.batch_size[0])
    turns: list[list[tuple[str, str]]] = [[]]
    for agent, text in zip(agents, texts, strict=True):
        if any(agent == role for role, _ in turns[-1]):  # a role acts once per joint turn: it starts the next one
            turns.append([])
        turns[-1].append((agent, text))
    seed = int(trajectory[0].get("seed").reshape(-1)[0])
    return replay_return(env.env_name, env.num_agents, env.env_kwargs, env.split, seed, turns)


# TeamChatEnv is served by the module's __getattr__ (it needs TorchRL), so it is not listed for star-imports.
__all__ = ["TORCHRL_EXTRA_HINT", "EpisodeRecord", "RolePolicies", "StepRecord", "import_torchrl", "policy_pair",
           "replay_return", "train_grpo"]
