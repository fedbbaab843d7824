"""CoMLRL's ``MAGRPOTrainer`` (the MAGRPO authors' library, PyPI ``comlrl``) on the suite's envs, unchanged.

CoMLRL trains a team from a dataset, one prompt formatter per agent, a ``reward_func`` and an
``external_transition`` for multi-turn feedback, but ships no environments. :class:`CoMLRLBridge` turns any registered
env, team size and split into exactly those four things; :func:`magrpo_trainer` builds the trainer with the offline
default model (one LoRA-wrapped copy per agent) in one call::

    from llm_marl_trainers.comlrl_adapter import magrpo_trainer
    trainer = magrpo_trainer("writing", num_agents=2, seeds=range(64), similarity="tfidf")
    trainer.train()

Or by hand, with any models: ``bridge = CoMLRLBridge("coding", 2, tokenizer=tok)``, then
``MAGRPOTrainer(agents=[m0, m1], tokenizer=tok, train_dataset=bridge.dataset(range(64)), args=MAGRPOConfig(...),
**bridge.trainer_kwargs())``.

The contract, as read in comlrl 1.4.3 (``comlrl/trainers/reinforce/magrpo.py``, ``comlrl/utils/formatters.py``,
``comlrl/utils/reward_utils.py``, ``comlrl/utils/tokenizer_utils.py``)
---------------------------------------------------------------------------------------------------------------
* Steps: one dataset row per step (``get_train_dataloader``: batch size 1, no shuffling). ``_train_step_returns``
  grows the row's tree *depth first*: at a node, every agent generates ``num_generations`` completions
  (``_generate_completions``: the agent's formatter is called on the row, the text is tokenized as is and sampled),
  then the reward function is called once per joint action (``aligned``: the k-th completions of all agents, G calls;
  ``cross``: every combination, G^N calls); then, for each joint action in turn, ``external_transition`` gives the
  child's prompts and the child is grown the same way, down to ``num_turns``. Returns are ``r + mean(children)``.
* Formatters: ``f(row)`` at the root; at later turns ``f(row_copy, external_prompts=prompt)`` where ``prompt`` is
  what the transition returned for that agent (``build_formatters(..., pass_none_external_prompts=False)``). With
  ``external_prompt_passthrough=True`` the transition's prompt is used as is, with no formatter call.
* Reward: ``call_reward_function`` passes each agent's completion as a one-element list (a ``*args`` function gets
  them all), ``batch_items=[row]`` — the dataset row, never the turn history — and ``prompts=[agent 0's prompt of
  this turn]`` when the function takes ``prompts``. In ``cross`` mode the reward function is called directly with the
  completions and ``batch_items`` only; ``evaluate()`` passes the root prompt at every turn. The first returned
  value is the joint reward of that joint action.
* Transition: ``external_transition(prompt=row["prompt"], agent_completions=[...], num_agents=N,
  prompt_history_per_agent=..., response_history_per_agent=...)`` with each agent's completions along the branch,
  this turn's included; it must return N prompts.
* Tokenizer: prompts are tokenized with ``tokenizer(prompts, padding=True, truncation=True)``; the prompt length is
  cut at the first pad id of the first row, so a pad token equal to a token the prompt contains (eos == pad) would cut
  prompts short: :func:`check_tokenizer` refuses that (SmolLM2: eos ``<|im_end|>``, pad ``<|endoftext|>``).
* Models: ``AdamW`` over ``agent.parameters()`` of each agent, i.e. full fine-tuning unless the agent is a PEFT model
  (then only its trainable parameters change). ``import wandb`` happens at import; ``wandb.init`` only with a
  ``wandb_config``.

How the bridge meets it
-----------------------
* :meth:`CoMLRLBridge.dataset`: one row per seed: ``prompt`` (the row's key, ``"<task_id>@<split>#<seed>"``: the model
  never sees it), ``task_id``, ``seed``, ``split``. A row's episode is ``env.reset(seed=seed, options={"split": split,
  "task_id": task_id})``: the task :class:`llm_marl_trainers.magrpo.MAGRPOTrainer` draws for that seed.
* Formatters: agent i's prompt is ``env.chat_messages(agent_i)`` of the node's env state, rendered with the tokenizer's
  chat template (assistant turn opened): the agent's own observation and nothing else.
* Env states: a node of the tree is ``(row, joint completions of every earlier turn)``; its env snapshot is computed
  once, by stepping its parent's snapshot with the joint action, and kept while the row's tree grows (a row change
  drops the other rows' nodes; any node can be replayed from the root). Since the reward function gets no history,
  the bridge follows CoMLRL's depth-first order: a transition makes its child the *current node*; a formatter call
  with no external prompt right after a reward call (or first of all) starts a new tree at the row's root; a reward
  call steps the current node with its joint action. In aligned mode CoMLRL also passes the node's agent-0 prompt,
  which is checked against the current node (a mismatch is an error, never a silently wrong reward).
* Reward: the env's joint reward of that step (the same for every agent). An episode that ended before
  ``num_turns`` (all agents said ``<done/>``, or a whole turn changed nothing) pays 0 for the turns CoMLRL still
  grows; an agent that finished early is left out of later steps (its completions there are ignored).
* The env's ``max_turns`` is set to ``num_turns`` (a different explicit one is refused), so CoMLRL's tree is the env's
  episode and a branch's return is the env's team return.

Heavy imports (datasets, comlrl, peft, torch) happen inside the functions.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_marl_envs.registry import env_spec, make_env

if TYPE_CHECKING:  # pragma: no cover - typing only
    from datasets import Dataset

COMLRL_EXTRA_HINT = "pip install 'llm-marl-envs[comlrl]'"
"""What to install when CoMLRL (or ``datasets``) is missing."""
DEFAULT_NUM_SEEDS = 64
"""Rows of :func:`magrpo_trainer`'s dataset when no seeds are given (seeds ``0..63``)."""

History = tuple[tuple[str, ...], ...]
"""The joint completions of the turns before a node: ``history[t][i]`` is agent i's completion at turn t."""


def import_comlrl() -> tuple[type, type]:
    """CoMLRL's ``(MAGRPOConfig, MAGRPOTrainer)``, with Weights & Biases kept off.

    ``comlrl/trainers/reinforce/magrpo.py`` imports wandb at module import and calls ``wandb.init`` only when given a
    ``wandb_config``; ``WANDB_MODE=disabled`` (set unless the caller set it) makes any such call an offline no-op.
    """
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("WANDB_SILENT", "true")
    try:
        from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
    except ImportError as error:
        raise ImportError(f"CoMLRL's MAGRPOTrainer is not installed ({error}); {COMLRL_EXTRA_HINT}") from error
    return MAGRPOConfig, MAGRPOTrainer


def _import_datasets() -> Any:
    try:
        import datasets
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError(f"the CoMLRL bridge builds a datasets.Dataset ({error}); {COMLRL_EXTRA_HINT}") from error
    return datasets


def check_tokenizer(tokenizer: Any) -> None:
    """Raise a ``ValueError`` unless ``tokenizer`` can render chats and pads with a token that is not its eos.

    CoMLRL cuts every prompt at the first pad id it finds (``_generate_completions``), so eos == pad would cut a
    prompt that contains the eos token; :func:`llm_marl_baselines.models.load_tokenizer` sets SmolLM2 up right.
    """
    if tokenizer is None or not callable(getattr(tokenizer, "apply_chat_template", None)):
        raise TypeError(f"tokenizer: expected a transformers tokenizer with a chat template, got "
                        f"{type(tokenizer).__name__}")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("tokenizer: expected a chat template (the agents' prompts are the env's chat messages)")
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        raise ValueError(f"tokenizer: expected a pad token distinct from eos (got pad {tokenizer.pad_token!r}, eos "
                         f"{tokenizer.eos_token!r}); CoMLRL cuts prompts at the first pad id, so pad == eos drops "
                         f"text. Load it with llm_marl_baselines.models.load_tokenizer (SmolLM2: eos <|im_end|>, pad "
                         f"<|endoftext|>)")


@dataclass(frozen=True)
class _Node:
    """One position of a row's tree: the env state after the turns of its history."""

    snapshot: Any
    live: tuple[str, ...]
    """Agents still acting (``env.agents``): empty once the episode is over."""
    prompts: tuple[str, ...]
    """Each agent's next prompt (its own observation, rendered with the chat template)."""
    reward: float = 0.0
    """The joint reward of the step that led here (0 at the root and after the episode ended)."""
    components: Mapping[str, Any] = field(default_factory=dict)
    """That step's ``reward_components`` (empty at the root)."""


@dataclass(frozen=True)
class RewardRecord:
    """One reward call: which row and branch, the joint completion and the joint reward paid."""

    row: str
    history: History
    completions: tuple[str, ...]
    reward: float
    components: Mapping[str, Any]

    @property
    def turn(self) -> int:
        """1-based turn of this joint action."""
        return len(self.history) + 1


class CoMLRLBridge:
    """A suite env as CoMLRL's dataset, formatters, ``reward_func`` and ``external_transition`` (module docstring).

    ``env``: a registry name (``"writing"``, ``"coding_v0"``, ...); ``num_agents``: the team size (the env's range);
    ``tokenizer``: the agents' tokenizer (chat template, pad != eos); ``num_turns``: CoMLRL's ``num_turns`` (the
    env's ``max_turns``); ``split``: the default split of :meth:`dataset`; ``env_kwargs`` go to ``make_env``.
    ``on_reward(record)`` sees every reward call; :attr:`records` keeps them when ``keep_records`` is True.
    """

    def __init__(self, env: str, num_agents: int = 2, *, tokenizer: Any, num_turns: int = 1, split: str = "train",
                 keep_records: bool = False, on_reward: Callable[[RewardRecord], None] | None = None,
                 **env_kwargs: Any) -> None:
        if not isinstance(env, str):
            raise TypeError(f"env: expected an env name (str), got {type(env).__name__}")
        self.env_name = env_spec(env).name  # a ValueError listing the known names
        if isinstance(num_turns, bool) or not isinstance(num_turns, int) or num_turns < 1:
            raise ValueError(f"num_turns: expected an int >= 1, got {num_turns!r}")
        if env_kwargs.get("max_turns") not in (None, num_turns):
            raise ValueError(f"max_turns={env_kwargs['max_turns']} disagrees with num_turns={num_turns}: CoMLRL grows "
                             f"every branch to num_turns turns, so the env's episode must have that many")
        check_tokenizer(tokenizer)
        self.num_turns = num_turns
        self.env_kwargs = {**env_kwargs, "max_turns": num_turns}
        self.num_agents = num_agents
        # Built now so a team size the env refuses (or any bad kwarg) fails here, before a model loads.
        self._env = make_env(self.env_name, num_agents=num_agents, **self.env_kwargs)
        if self._env.max_turns != num_turns:
            raise ValueError(f"num_turns={num_turns}, but the env runs {self._env.max_turns} turns with these settings "
                             f"({self.env_kwargs})")
        self.agents: tuple[str, ...] = tuple(self._env.possible_agents)
        self.split = split
        self.tokenizer = tokenizer
        self.keep_records = keep_records
        self.on_reward = on_reward
        self.records: list[RewardRecord] = []
        self._rows: dict[str, tuple[int, str, str]] = {}  # row key -> (seed, split, task_id)
        self._nodes: dict[tuple[str, History], _Node] = {}
        self._current: tuple[str, History] | None = None
        self._last_event: str | None = None
        self.__name__ = f"CoMLRLBridge[{self.env_name}]"  # CoMLRL and loggers print function names

    # ------------------------------------------------------------------------------------------------ the dataset
    def dataset(self, seeds: int | Iterable[int] = DEFAULT_NUM_SEEDS, split: str | None = None) -> Dataset:
        """A ``datasets.Dataset`` of tasks: one row per seed (``n`` means ``0..n-1``), in order.

        Columns: ``prompt`` (the row key; never shown to a model), ``task_id``, ``seed``, ``split``.
        """
        datasets = _import_datasets()
        split = self.split if split is None else split
        seed_list = list(range(seeds)) if isinstance(seeds, int) and not isinstance(seeds, bool) else list(seeds)
        if not seed_list:
            raise ValueError("seeds: expected a positive count or a non-empty sequence of seeds")
        rows: dict[str, list[Any]] = {"prompt": [], "task_id": [], "seed": [], "split": []}
        for seed in seed_list:
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise ValueError(f"seeds: expected non-negative ints, got {seed!r}")
            self._env.reset(seed=seed, options={"split": split})
            task_id = str(self._env.task.task_id)
            key = self.row_key(task_id, split, seed)
            self._rows[key] = (seed, split, task_id)
            for name, value in (("prompt", key), ("task_id", task_id), ("seed", seed), ("split", split)):
                rows[name].append(value)
        return datasets.Dataset.from_dict(rows)

    @staticmethod
    def row_key(task_id: str, split: str, seed: int) -> str:
        """The ``prompt`` column of a row: names its task, split and seed."""
        return f"{task_id}@{split}#{seed}"

    def _row_of(self, item: Mapping[str, Any]) -> str:
        try:
            seed, split, task_id = int(item["seed"]), str(item["split"]), str(item["task_id"])
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"dataset row: expected 'seed', 'split' and 'task_id' columns (build it with "
                             f"CoMLRLBridge.dataset), got {sorted(item) if isinstance(item, Mapping) else item!r}"
                             ) from error
        key = self.row_key(task_id, split, seed)
        self._rows.setdefault(key, (seed, split, task_id))
        return key

    # ------------------------------------------------------------------------------------------------- env states
    def _render(self) -> tuple[str, ...]:
        return tuple(self.tokenizer.apply_chat_template([dict(m) for m in self._env.chat_messages(agent)],
                                                        tokenize=False, add_generation_prompt=True)
                     for agent in self.agents)

    def node(self, row: str, history: History = ()) -> _Node:
        """The env state of ``row``'s tree after the joint completions ``history`` (computed once, then kept)."""
        key = (row, tuple(tuple(joint) for joint in history))
        found = self._nodes.get(key)
        if found is not None:
            return found
        if not key[1]:
            seed, split, task_id = self._rows[row]
            self._env.reset(seed=seed, options={"split": split, "task_id": task_id})
            found = _Node(self._env.snapshot(), tuple(self._env.agents), self._render())
        else:
            parent = self.node(row, key[1][:-1])
            found = self._step(parent, key[1][-1])
        self._nodes[key] = found
        return found

    def _step(self, parent: _Node, joint: tuple[str, ...]) -> _Node:
        if len(joint) != len(self.agents):
            raise ValueError(f"expected one completion per agent ({len(self.agents)}), got {len(joint)}")
        if not parent.live:  # the episode already ended: CoMLRL's extra turns change nothing and pay nothing
            return _Node(parent.snapshot, (), parent.prompts)
        self._env.restore(parent.snapshot)
        actions = {agent: text for agent, text in zip(self.agents, joint, strict=True) if agent in parent.live}
        _, rewards, _, _, infos = self._env.step(actions)
        acting = next(iter(actions))
        return _Node(self._env.snapshot(), tuple(self._env.agents), self._render(), float(rewards[acting]),
                     dict(infos[acting].get("reward_components", {})))

    def _start_tree(self, row: str) -> None:
        # A new tree: the other rows' nodes are done with (they can always be replayed from their roots).
        self._nodes = {key: node for key, node in self._nodes.items() if key[0] == row}
        self._current = (row, ())

    # ------------------------------------------------------------------------------------------ CoMLRL's callables
    def formatter(self, agent: int | str) -> Callable[..., str]:
        """Agent ``agent``'s CoMLRL formatter ``f(row, external_prompts=None) -> str``: its own observation of the
        current node, rendered with the chat template."""
        index = self.agents.index(agent) if isinstance(agent, str) else int(agent)
        if not 0 <= index < len(self.agents):
            raise ValueError(f"agent: expected an index in 0..{len(self.agents) - 1} or one of {self.agents}, got "
                             f"{agent!r}")

        def format_prompt(item: Mapping[str, Any], external_prompts: str | None = None) -> str:
            row = self._row_of(item)
            if external_prompts is not None:  # a later turn: the transition just made the child current
                if self._current is None or self._current[0] != row:
                    raise RuntimeError("formatter: an external prompt arrived before any transition of this row")
                expected = self.node(*self._current).prompts[index]
                if external_prompts != expected:
                    raise RuntimeError("formatter: the external prompt is not the current node's prompt for agent "
                                       f"{self.agents[index]!r}; the bridge follows CoMLRL's depth-first order")
                self._last_event = "format"
                return external_prompts
            # The root: a new tree starts at the first formatter call after a reward (CoMLRL's evaluate() also calls
            # the first formatter after generating, to name the prompt; that call must not move the current node).
            if self._last_event in (None, "reward") or self._current is None or self._current[0] != row:
                self._start_tree(row)
            self._last_event = "format"
            return self.node(row).prompts[index]

        format_prompt.__name__ = f"format_{self.agents[index]}"
        return format_prompt

    @property
    def formatters(self) -> list[Callable[..., str]]:
        """One formatter per agent, in ``agents`` order (CoMLRL's ``formatters=``)."""
        return [self.formatter(i) for i in range(len(self.agents))]

    def reward_func(self, *agent_completions: Any, batch_items: Sequence[Mapping[str, Any]] | None = None,
                    prompts: Sequence[str] | None = None) -> list[float]:
        """CoMLRL's ``reward_func``: the env's joint reward for one joint completion (one list per agent, as CoMLRL
        passes them), stepped from the current node of the row in ``batch_items``."""
        if len(agent_completions) != len(self.agents):
            raise ValueError(f"reward_func: expected one completion list per agent ({len(self.agents)}), got "
                             f"{len(agent_completions)}")
        joint = tuple(_single_completion(c, agent) for c, agent in zip(agent_completions, self.agents, strict=True))
        if not batch_items:
            raise ValueError("reward_func: expected batch_items=[row] (CoMLRL passes the dataset row)")
        row = self._row_of(batch_items[0])
        if self._current is None or self._current[0] != row:
            self._start_tree(row)  # called outside a tree (e.g. by hand): the row's first turn
        _, history = self._current
        node = self.node(row, history)
        if prompts and history and prompts[0] != node.prompts[0] and prompts[0] != self.node(row).prompts[0]:
            raise RuntimeError("reward_func: CoMLRL's prompt for agent 0 is not the current node's; the calls did "
                               "not come in CoMLRL's depth-first order")
        child = self.node(row, (*history, joint))
        self._last_event = "reward"
        record = RewardRecord(row, history, joint, child.reward, child.components)
        if self.keep_records:
            self.records.append(record)
        if self.on_reward is not None:
            self.on_reward(record)
        return [child.reward]

    def external_transition(self, prompt: str, agent_completions: Sequence[str], num_agents: int,
                            prompt_history_per_agent: Sequence[Sequence[str]] | None = None,
                            response_history_per_agent: Sequence[Sequence[str]] | None = None) -> list[str]:
        """CoMLRL's ``external_transition``: the next turn's prompts of the branch that ends with
        ``agent_completions`` — each agent's own observation after the env stepped that joint action."""
        if num_agents != len(self.agents):
            raise ValueError(f"external_transition: expected num_agents={len(self.agents)}, got {num_agents}")
        if prompt not in self._rows:
            raise ValueError(f"external_transition: {prompt!r} is not a row of this bridge's dataset")
        responses = [list(agent) for agent in (response_history_per_agent or [])]
        if len(responses) != num_agents or len({len(agent) for agent in responses}) != 1:
            raise ValueError("external_transition: expected response_history_per_agent with the same number of "
                             "completions for every agent")
        history = tuple(zip(*responses, strict=True))
        if list(history[-1]) != list(agent_completions):
            raise ValueError("external_transition: agent_completions is not the last turn of the response history")
        self._current = (prompt, history)
        self._last_event = "transition"
        return list(self.node(prompt, history).prompts)

    def trainer_kwargs(self) -> dict[str, Any]:
        """The keywords ``MAGRPOTrainer`` takes from the bridge: ``num_agents``, ``formatters``, ``reward_func`` and
        ``external_transition`` (the last only for ``num_turns > 1``, where CoMLRL requires it)."""
        kwargs: dict[str, Any] = {"num_agents": len(self.agents), "formatters": self.formatters,
                                  "reward_func": self.reward_func}
        if self.num_turns > 1:
            kwargs["external_transition"] = self.external_transition
        return kwargs

    def replay(self, record: RewardRecord) -> float:
        """The reward a *fresh* env pays for ``record``'s joint completion after its history (an independent check
        of what the bridge paid: no cached state is used)."""
        seed, split, task_id = self._rows[record.row]
        env = make_env(self.env_name, num_agents=self.num_agents, **self.env_kwargs)
        try:
            env.reset(seed=seed, options={"split": split, "task_id": task_id})
            reward = 0.0
            for joint in (*record.history, record.completions):
                if not env.agents:
                    return 0.0
                actions = {a: text for a, text in zip(self.agents, joint, strict=True) if a in env.agents}
                _, rewards, _, _, _ = env.step(actions)
                reward = float(next(iter(rewards.values())))
            return reward
        finally:
            env.close()

    def close(self) -> None:
        """Close the env (the coding env's sandbox executor)."""
        self._env.close()


@dataclass(frozen=True)
class CoMLRLStep:
    """One step of CoMLRL's ``MAGRPOTrainer`` (one dataset row's tree and the updates it triggered)."""

    step: int
    wall_time: float
    """Seconds since training started, at the end of the step."""
    step_time: float
    generation_time: float
    """Seconds of the step spent in CoMLRL's ``_generate_completions``."""
    peer_reward: float
    """Mean of the joint rewards CoMLRL's ``reward_func`` returned during the step (what its advantages use)."""
    env_reward: float
    """Mean reward a fresh env pays for the same joint completions after the same histories (NaN without replay)."""
    rewards: tuple[float, ...]
    records: tuple[RewardRecord, ...] = ()


def train_magrpo(trainer: Any, *, on_step: Callable[[CoMLRLStep], None] | None = None,
                 replay: bool = True) -> list[CoMLRLStep]:
    """Run ``trainer.train()`` (CoMLRL's own loop, unchanged) and return one :class:`CoMLRLStep` per step.

    The step is CoMLRL's ``_train_step_returns`` (one row's tree, then every agent's update once its rollout buffer
    fills), timed by wrapping that method on the instance; generation time by wrapping ``_generate_completions``; the
    rewards by wrapping ``reward_func`` (``functools.wraps`` keeps the signature CoMLRL inspects). ``replay`` checks
    every reward against a fresh env (:meth:`CoMLRLBridge.replay`; needs the trainer's ``.bridge``). ``wall_time``
    counts training only: replays and ``on_step`` (e.g. a held-out evaluation) are left out of it.
    """
    bridge: CoMLRLBridge | None = getattr(trainer, "bridge", None)
    if replay and bridge is None:
        raise ValueError("replay=True needs the trainer's CoMLRLBridge as trainer.bridge (magrpo_trainer sets it)")
    steps: list[CoMLRLStep] = []
    pending: dict[str, Any] = {"rewards": [], "records": [], "generation": 0.0, "excluded": 0.0}
    reward_func, generate, step = trainer.reward_func, trainer._generate_completions, trainer._train_step_returns

    @functools.wraps(reward_func)
    def recorded_reward(*args: Any, **kwargs: Any) -> Any:
        values = reward_func(*args, **kwargs)
        pending["rewards"].append(float(values[0]))
        return values

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            pending["generation"] += time.perf_counter() - started

    def on_record(record: RewardRecord) -> None:
        pending["records"].append(record)

    started = time.perf_counter()

    def timed_step(*args: Any, **kwargs: Any) -> Any:
        pending.update(rewards=[], records=[], generation=0.0)
        begin = time.perf_counter()
        result = step(*args, **kwargs)
        end = time.perf_counter()
        # Training time only: the replays and on_step callbacks (e.g. a held-out evaluation) are left out.
        wall_time = end - started - pending["excluded"]
        records = tuple(pending["records"])
        env_rewards = [bridge.replay(r) for r in records] if replay and bridge is not None else []
        rewards = tuple(pending["rewards"])
        row = CoMLRLStep(step=len(steps) + 1, wall_time=wall_time, step_time=end - begin,
                         generation_time=pending["generation"],
                         peer_reward=sum(rewards) / len(rewards) if rewards else float("nan"),
                         env_reward=sum(env_rewards) / len(env_rewards) if env_rewards else float("nan"),
                         rewards=rewards, records=records)
        steps.append(row)
        if on_step is not None:
            on_step(row)
        pending["excluded"] += time.perf_counter() - end
        return result

    previous = bridge.on_reward if bridge is not None else None
    if bridge is not None:
        bridge.on_reward = on_record
    trainer.reward_func, trainer._generate_completions, trainer._train_step_returns = (
        recorded_reward, timed_generate, timed_step)
    try:
        trainer.train()
    finally:
        trainer.reward_func, trainer._generate_completions, trainer._train_step_returns = reward_func, generate, step
        if bridge is not None:
            bridge.on_reward = previous
    return steps


def _single_completion(completions: Any, agent: str) -> str:
    if isinstance(completions, str):
        return completions
    if isinstance(completions, (list, tuple)) and len(completions) == 1 and isinstance(completions[0], str):
        return completions[0]
    raise ValueError(f"reward_func: expected one completion (a one-element list of str) for agent {agent!r}, got "
                     f"{json.dumps(completions, default=str)[:120]}")


def default_lora() -> Any:
    """The LoRA each CoMLRL agent gets from :func:`magrpo_trainer` unless told otherwise: our trainer's adapter
    (:class:`llm_marl_trainers.generation.LoraSettings`: rank 8, alpha 16 on ``q_proj``/``v_proj``, no dropout), so a
    race compares trainers, not adapter sizes."""
    from llm_marl_trainers.generation import LoraSettings

    return LoraSettings().to_peft()


def magrpo_trainer(env: str, num_agents: int = 2, *, model: Any = None, args: Any = None,
                   seeds: int | Iterable[int] = DEFAULT_NUM_SEEDS, split: str = "train", peft_config: Any = "default",
                   dtype: str = "float32", bridge_kwargs: Mapping[str, Any] | None = None, **env_kwargs: Any) -> Any:
    """A ready CoMLRL ``MAGRPOTrainer`` on a suite env: one model copy per agent (``model``: None for the offline
    default SmolLM2-135M-Instruct, or a local folder), each wrapped in ``peft_config`` (``"default"``:
    :func:`default_lora`; None: full fine-tuning, CoMLRL's own default), the bridge's dataset of ``seeds`` in
    ``split``, formatters, reward and transition. ``args``: a ``MAGRPOConfig`` (default: CoMLRL's, with ``num_agents``
    and ``eval_interval=0``); its ``num_turns`` sets the env's ``max_turns``. The trainer's bridge is ``.bridge``.
    """
    MAGRPOConfig, MAGRPOTrainer = import_comlrl()
    from llm_marl_baselines.models import load_model, load_tokenizer, resolve_model_source

    if args is None:
        # CoMLRL's early_termination_threshold=-0.2 is tied to its own rewards' scale: every node of our envs would
        # stop there, so multi-turn trees would never grow. Off here, as in llm_marl_trainers.config.TrainerConfig.
        args = MAGRPOConfig(num_agents=num_agents, eval_interval=0, early_termination_threshold=None)
    if int(getattr(args, "num_agents", num_agents)) != num_agents:
        raise ValueError(f"args.num_agents={args.num_agents} disagrees with num_agents={num_agents}")
    if isinstance(peft_config, str) and peft_config != "default":
        raise ValueError(f"peft_config: expected 'default', a peft config or None, got {peft_config!r}")
    # Everything that can be checked without the model weights is checked first (env, team size, turns, tokenizer):
    # a typo should not cost model loads.
    source = resolve_model_source(model)  # the default model's safetensors cache (converted once), or a folder
    tokenizer = load_tokenizer(source)
    bridge = CoMLRLBridge(env, num_agents, tokenizer=tokenizer, num_turns=int(args.num_turns), split=split,
                          **dict(bridge_kwargs or {}), **env_kwargs)
    dataset = bridge.dataset(seeds)
    agents = [load_model(source, dtype=dtype, device="cpu").model for _ in range(num_agents)]  # one copy per agent
    if peft_config is not None:
        import peft

        config = default_lora() if isinstance(peft_config, str) else peft_config
        # One config object per agent: peft records per-model state on the config it is given.
        agents = [peft.get_peft_model(agent, copy.deepcopy(config)) for agent in agents]
    trainer = MAGRPOTrainer(agents=agents, tokenizer=tokenizer, train_dataset=dataset, args=args,
                            **bridge.trainer_kwargs())
    trainer.bridge = bridge
    return trainer


__all__ = ["COMLRL_EXTRA_HINT", "CoMLRLBridge", "CoMLRLStep", "RewardRecord", "check_tokenizer", "default_lora",
           "import_comlrl", "magrpo_trainer", "train_magrpo"]
