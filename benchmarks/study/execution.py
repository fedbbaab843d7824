"""Running a study's episodes: lockstep batches through the env package's rollout runner, here or on Ray.

A *batch* is up to ``batch_size`` planned episodes of one env that one model plays with one token budget: with
``batching="policy"`` (the default) every condition the untrained base model plays — ``untrained``, ``single``,
``base``... — shares a batch, each episode under its own condition's schedule, and the trained team's episodes form
batches of their own (one team, its adapters). Team sizes may mix. Every turn, one policy call serves every live
agent of every episode in the batch (batched generation across envs, agents and conditions), so a generate call holds
as many rows as the batch has live agents. ``batching="condition"`` keeps one condition per batch (the schedule before
conditions shared batches, kept for side-by-side timing). A batch runs in one process (:func:`run_batch`) and returns
one JSON row per episode; the driver logs rows as batches finish and can show each turn of a running batch (its
``on_turn`` callback). With ``ray_address`` each batch is a Ray task: workers build their policies once per process
and return rows, so the log and its resume semantics are the same as a local run.

Batching does not change an episode's settings: episodes share a batch only when they have the same token budget (the
env's budget for the condition's roles, or the design's ``max_new_tokens``). It changes which random numbers an
episode draws (sampling is seeded per batch, each turn's call with its own seed drawn from the batch's), as any
change of batch composition does.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl_baselines.collaboration import draft_part
from llm_marl_benchmarks.progress import LockstepTurn
from llm_marl_benchmarks.study.best_of_n import BestOfN, BestOfNReply, coding_auditor, coding_chooser
from llm_marl_benchmarks.study.design import CONDITIONS, PlannedEpisode, StudyDesign

BATCHING: dict[str, str] = {
    "policy": "one batch per env, model and token budget: the conditions the same model plays share it",
    "condition": "one batch per condition and env (the schedule before conditions shared batches)",
}
"""How pending episodes are grouped into lockstep batches (``--batching``)."""
DEFAULT_BATCH_EPISODES = 64
"""The most episodes of a lockstep batch by default (``--batch-size``); a batch also holds at most
``generate_rows`` agents."""
GENERATE_ROWS = 64
"""The most rows of one local generate call (``--generate-rows``), and the most agents of a lockstep batch, so a
turn's requests fill one call."""
PROMPT_STORE_BYTES = 3 << 30
"""A batch's prompt store holds up to 3 GiB of keys and values: two turns of 64 prompts of 500 tokens of SmolLM2-135M
in float32 (46 KB per token), so every prompt of a turn is still there at the next."""


@dataclass(frozen=True)
class PolicySpec:
    """Which model writes the actions (picklable: Ray workers build the policy from it)."""

    kind: str = "local"
    """``local`` (a transformers model; the offline SmolLM2 by default), ``endpoint`` (OpenAI-compatible server) or
    ``scripted`` (no model: checks the machinery, its figures mean nothing)."""
    model: str | None = None
    dtype: str = "auto"
    base_url: str | None = None
    endpoint_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    generate_rows: int = GENERATE_ROWS
    """The most rows of one local ``generate`` call (execution, like the batch size: not in :meth:`to_dict`)."""
    reuse_prompts: bool = True
    """Whether a batch's local model reuses its earlier prompts' keys and values (a
    :class:`~llm_marl_baselines.prompt_store.PromptStore` per batch, so a batch replays the same way wherever it runs;
    execution: not in :meth:`to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        """What decides the outcomes (the key's name is kept, never the key)."""
        return {"kind": self.kind, "model": self.model, "dtype": self.dtype, "base_url": self.base_url,
                "endpoint_model": self.endpoint_model}


POLICY_KINDS: tuple[str, ...] = ("local", "endpoint", "scripted")


@dataclass(frozen=True)
class Batch:
    """Episodes run together in lockstep: one env, one model (the base, or one trained team) and one token budget;
    each episode plays under its own condition."""

    env: str
    episodes: tuple[PlannedEpisode, ...]
    team_dir: str | None = None
    """The trained team's directory (``trained`` condition with a model policy)."""

    @property
    def conditions(self) -> tuple[str, ...]:
        """The conditions of the batch's episodes, in order of first appearance."""
        return tuple(dict.fromkeys(episode.condition for episode in self.episodes))

    @property
    def label(self) -> str:
        """``env: condition + condition``: what the batch plays (progress lines)."""
        return f"{self.env}: {' + '.join(self.conditions)}"


def make_batches(
    pending: Sequence[PlannedEpisode],
    batch_size: int,
    teams: Mapping[tuple[str, int], str] | None = None,
    design: StudyDesign | None = None,
    batching: str = "policy",
    max_rows: int | None = None,
) -> list[Batch]:
    """Group pending episodes into lockstep batches of at most ``batch_size`` episodes and ``max_rows`` agents (the
    rows of a turn's generate call; ``None``: no cap), in plan order within each group.

    ``batching="policy"``: a group is one env, one model (the base model, or one trained team) and one token budget
    (``design.token_budget``; without a design, every condition of an env shares one); ``"condition"``: one
    condition and env (and team) per group. Capping agents rather than episodes alone keeps a turn's call full
    whatever the team size: 64 rows are 64 single agents, 32 pairs or 16 teams of four (a best-of-n agent takes a row
    per candidate: :attr:`~llm_marl_benchmarks.study.design.PlannedEpisode.rows`).
    """
    if batching not in BATCHING:
        raise ValueError(f"batching: expected one of {tuple(BATCHING)}, got {batching!r}")
    groups: dict[tuple[Any, ...], list[PlannedEpisode]] = {}
    for episode in pending:
        team = None
        if CONDITIONS[episode.condition].trained and teams:
            team = teams[(episode.env, episode.team_size)]
        if batching == "condition":
            key: tuple[Any, ...] = (episode.env, team, episode.condition)
        else:
            budget = design.token_budget(episode.env, episode.condition, episode.team_size) if design else None
            key = (episode.env, team, CONDITIONS[episode.condition].trained, budget)
        groups.setdefault(key, []).append(episode)
    batches = []
    for (env, team, *_), episodes in groups.items():
        current: list[PlannedEpisode] = []
        for episode in episodes:
            rows = sum(e.rows for e in current) + episode.rows
            if current and (len(current) == batch_size or (max_rows is not None and rows > max_rows)):
                batches.append(Batch(env, tuple(current), team))
                current = []
            current.append(episode)
        if current:
            batches.append(Batch(env, tuple(current), team))
    return batches


# -------------------------------------------------------------------------------------------------------- policies
PROMPT_TOKENS: Counter[str] = Counter()
"""Over the study's batches with a prompt store: ``prompt``, the tokens of the prompts the local model prefilled, and
``prefilled``, how many of them it read (the rest came from earlier prompts of their batch). Batches run as Ray tasks
count in their worker and send their counts back with their rows (:func:`run_ray`)."""
_POLICIES: dict[Any, Any] = {}
"""Policies built in this process, by spec (a Ray worker process serves many batches with one model load)."""


NO_PRECISION: dict[str, str | None] = {"dtype": None, "device": None}
"""The precision of a policy with no local weights (scripted; an endpoint, whose server decides)."""


def model_precision(models: Iterable[Any]) -> dict[str, str | None]:
    """``{"dtype", "device"}`` the weights of ``models`` (torch modules: a local model, a team's peft models) sit in,
    read from each input embedding (frozen base weights: LoRA adapters stay float32 whatever the base's precision);
    several models that differ give every distinct value joined by ``+``."""
    dtypes, devices = set(), set()
    for model in models:
        weight = model.get_input_embeddings().weight
        dtypes.add(str(weight.dtype).removeprefix("torch."))
        devices.add(str(weight.device))
    if not dtypes:
        return dict(NO_PRECISION)
    return {"dtype": "+".join(sorted(dtypes)), "device": "+".join(sorted(devices))}


def batch_prompt_store(spec: PolicySpec) -> Any:
    """A new :class:`~llm_marl_baselines.prompt_store.PromptStore` for one batch (None when ``spec`` turns reuse
    off). A store per batch: turns reuse their batch's earlier prompts and nothing else, so what a batch samples does
    not depend on which batches ran before it in this process (the reuse changes logits by rounding only)."""
    from llm_marl_baselines.prompt_store import PromptStore

    return PromptStore(PROMPT_STORE_BYTES) if spec.reuse_prompts else None


def decodes_here(spec: PolicySpec, team_dir: str | None) -> bool:
    """Whether a batch's replies are decoded by local weights in this process (a local model, or a team's adapters
    on its base model), so that decoding switches can stop them; a scripted or endpoint policy's are not."""
    return spec.kind == "local" or (team_dir is not None and spec.kind != "scripted")


def _rollout_policy(spec: PolicySpec, team_dir: str | None, settings: Any, store: Any = None,
                    role_budgets: Mapping[str, int] | None = None,
                    reply_ends: Mapping[str, str | None] | None = None) -> tuple[Any, dict[str, str | None]]:
    """The runner's policy callable for ``spec`` (with ``team_dir``'s adapters when given), for one batch, and the
    precision its weights run in (:func:`model_precision`; every log row records it). ``store``: the batch's
    :class:`~llm_marl_baselines.prompt_store.PromptStore` (None: no reuse) for a local model or a team.
    ``role_budgets``: per agent, the budget its replies stop at (the design's ``role_budgets``).
    ``reply_ends``: per agent, the pattern at whose first match its replies stop (the design's
    ``stop_at_reply_end``). Both for local weights only: an endpoint or a scripted policy has no decoding to stop."""
    decoded_here = decodes_here(spec, team_dir)
    for switch, value in (("role_budgets", role_budgets), ("stop_at_reply_end", reply_ends)):
        if value and not decoded_here:
            raise ValueError(f"{switch}: needs local weights (a local model or a team); the {spec.kind!r} "
                             f"policy's replies are not decoded here")
    if team_dir is not None and spec.kind != "scripted":
        key = ("team", team_dir, spec.dtype, spec.generate_rows)
        if key not in _POLICIES:
            from llm_marl_baselines.policies.adapters import load_team_manifest
            from llm_marl_trainers.generation import TeamModel

            manifest = load_team_manifest(team_dir)
            adapters = {role: Path(team_dir) / folder for role, folder in manifest.roles.items()}
            _POLICIES[key] = TeamModel.load(list(manifest.roles), manifest.base_model, dtype=spec.dtype,
                                            adapters=adapters, max_batch_rows=spec.generate_rows)
        team = _POLICIES[key]
        return (team.as_rollout_policy(settings, logprobs=False, prompt_store=store, role_max_new_tokens=role_budgets,
                                       role_reply_ends=reply_ends),
                model_precision(team.model_of(agent) for agent in team.agents))
    key = ("base", spec)
    if key not in _POLICIES:
        from llm_marl_baselines.policies import make_policy

        if spec.kind == "local":
            # Loaded once per process; each batch samples through a view of it with the batch's own store (below).
            _POLICIES[key] = make_policy("local", model=spec.model, dtype=spec.dtype, batch_size=spec.generate_rows,
                                         reuse_prompts=False)
        elif spec.kind == "endpoint":
            _POLICIES[key] = make_policy("endpoint", base_url=spec.base_url, model=spec.endpoint_model,
                                         api_key_env=spec.api_key_env)
        else:
            _POLICIES[key] = make_policy("scripted")
    policy = _POLICIES[key]
    if spec.kind == "local":
        from llm_marl_baselines.policies.local import LocalModelPolicy

        # Records with completion ids (the critical-path metric counts them) and no log-probabilities, like the
        # team's above; the view shares the loaded weights.
        view = LocalModelPolicy(loaded=policy.loaded, batch_size=policy.batch_size, share_prefix=policy.share_prefix,
                                reuse_prompts=False, prompt_store=store, logprobs=False, reply_ends=reply_ends,
                                role_max_new_tokens=role_budgets)
        return view.as_rollout_policy(settings), model_precision([policy.loaded.model])
    return policy.as_rollout_policy(settings, records=False), dict(NO_PRECISION)


# ---------------------------------------------------------------------------------------------------------- a batch
def run_batch(
    batch: Batch, design: StudyDesign, policy: PolicySpec, on_turn: Callable[[LockstepTurn], None] | None = None
) -> list[dict[str, Any]]:
    """Play one batch in lockstep and return one log row per episode (see :func:`episode_row`); ``on_turn`` hears
    of each turn once every episode still playing has stepped."""
    from llm_marl_baselines.collaboration import get_baseline
    from llm_marl_baselines.policies import GenerationSettings, env_reply_ends, env_role_budgets
    from llm_marl_envs import rollout
    from llm_marl_envs.registry import make_env

    # Sampling is seeded per batch from its first episode, so a batch replays the same way; the rollout policy gives
    # each turn's call a seed of its own (call_seed), so turns do not reuse the first turn's random numbers.
    first = batch.episodes[0]
    envs = [make_env(e.env, **design.env_kwargs_for(e.env, e.condition, e.team_size)) for e in batch.episodes]
    schedule = _EpisodeSchedules({id(env): get_baseline(CONDITIONS[e.condition].baseline).schedule
                                  for env, e in zip(envs, batch.episodes, strict=True)})
    budget = max(design.token_budget(e.env, e.condition, e.team_size) for e in batch.episodes)
    settings = GenerationSettings(temperature=design.temperature, top_p=design.top_p, max_new_tokens=budget,
                                  seed=_stable_seed(first.key))
    store = batch_prompt_store(policy)
    role_budgets = None
    if design.role_budgets:
        role_budgets = env_role_budgets(envs)
    reply_ends = None
    decoded = decodes_here(policy, batch.team_dir)
    # None, the default, stops wherever this process decodes; True asks for it outright (refused below otherwise).
    if design.stop_at_reply_end or (design.stop_at_reply_end is None and decoded):
        reply_ends = env_reply_ends(envs)
    model_fn, precision = _rollout_policy(policy, batch.team_dir, settings, store, role_budgets, reply_ends)
    # What each row records: the stops its decoding applied (None: nothing was decoded here to stop). An env whose
    # roles have no reply end (writing) had none to apply.
    decoding = [{"stop_at_reply_end": reply_ends is not None and bool(env_reply_ends([env])),
                 "role_budgets": role_budgets is not None}
                if decoded else None for env in envs]
    best_of_n = {i: e.candidates for i, e in enumerate(batch.episodes) if e.candidates > 1}
    # Best-of-n episodes ask each request n times in the same call and send the candidate the visible tests pick;
    # each candidate's held-out tests are counted for the log (after the choice, which they cannot change).
    policy_fn = BestOfN(model_fn, best_of_n, coding_chooser(envs), coding_auditor(envs)) if best_of_n else model_fn
    turns = _TurnCounter(batch, envs, [design.turn_budget(e.condition) for e in batch.episodes], on_turn)
    start = time.perf_counter()
    ended: dict[int, float] = {}
    try:
        trajectories = rollout.run_episodes(
            envs, policy_fn,
            seeds=[e.seed for e in batch.episodes],
            options=[{"task_id": e.task} for e in batch.episodes],
            schedule=schedule,
            on_turn=turns,
            on_episode=lambda t: ended.__setitem__(t.env_index, time.perf_counter()),
        )
    finally:
        for env in envs:
            env.close()
        if store is not None:
            PROMPT_TOKENS["prompt"] += store.prompt_tokens
            PROMPT_TOKENS["prefilled"] += store.prefilled_tokens
    worker = f"{os.uname().nodename}:{os.getpid()}"
    return [
        episode_row(planned, trajectory, design, ended.get(i, time.perf_counter()) - start, worker, precision,
                    decoding[i])
        for i, (planned, trajectory) in enumerate(zip(batch.episodes, trajectories, strict=True))
    ]


@dataclass(frozen=True)
class _EpisodeSchedules:
    """Each env of a mixed batch under its own condition's schedule (the runner asks with the env in hand)."""

    by_env: Mapping[int, Any]

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        return self.by_env[id(env)].groups(env, agents, turn)

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        return self.by_env[id(env)].messages(env, agent, turn, earlier)

    def finish(self, env: Any, action: str, turn: int) -> str:
        return self.by_env[id(env)].finish(env, action, turn)


class _TurnCounter:
    """The runner's per-episode ``on_turn`` folded into one :class:`LockstepTurn` per turn of the batch: the episodes
    of a lockstep batch step together, so a turn is over once every episode that was playing has reported it."""

    def __init__(self, batch: Batch, envs: Sequence[Any], budgets: Sequence[int],
                 report: Callable[[LockstepTurn], None] | None) -> None:
        self.batch, self.envs, self.budgets, self.report = batch, envs, budgets, report
        self.playing = len(envs)
        self.played = self.ended = self.unused = self.done = 0

    def __call__(self, index: int, turn: int) -> None:
        self.played += 1
        if not self.envs[index].agents:  # the runner's own test of an ended episode
            self.ended += 1
            self.unused += max(0, self.budgets[index] - turn)
        if self.played < self.playing:
            return
        self.done += self.ended
        if self.report is not None:
            self.report(LockstepTurn(self.batch.label, turn, self.played, self.ended, self.unused, self.done,
                                     len(self.envs)))
        self.playing -= self.ended
        self.played = self.ended = self.unused = 0


def episode_row(
    planned: PlannedEpisode, trajectory: Any, design: StudyDesign, wall_time_s: float, worker: str = "",
    precision: Mapping[str, str | None] | None = None, decoding: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """The log row of one episode: what the report reads, plus the texts (final drafts) for inspection.

    ``dtype`` and ``device``: the precision the policy's weights ran in (``precision``, from
    :func:`model_precision`; ``None`` for a policy without local weights). A published figure can hold in one
    precision and not in another (sampling differs), so every row says which it was played in.

    ``stop_at_reply_end`` and ``role_budgets``: whether the decoding stopped each reply at its env's reply end and at
    its role's budget (``decoding``, from the design and the policy; ``None`` where nothing was decoded here, or in
    a log from before rows recorded them, when both were off by default). The same team writes less with them on,
    so a critical-path or token figure says which it was played under.

    ``candidates_per_turn``: the candidates the agent sampled a turn (1 but for ``single_best_of_n``), and for a
    best-of-n episode ``selections``: per turn, the visible tests each candidate passed, the one sent, and (logged
    only, never seen by the agent or the choice) the held-out tests each passed.

    ``turn_tests`` (coding): per turn, the tests the team's program passed then (``visible``, ``held_out`` of
    ``held_out_total``) and, in the candidate schemes, each candidate's (``candidates``: ``{agent: [visible,
    held_out]}``), whether it ran (``runnable``) and the tester's asserts it passed (``tester_passed``), and the one
    ``selected``; it shows whether a later turn's program was better or worse than an
    earlier one's (a figure's episode dynamics, not its outcome: the outcome is the last turn's). ``None`` for an
    env without tests.

    ``sandbox_backend`` (coding): the executor that ran the tests (``docker``, ``bwrap`` or ``local``). The
    backends give one verdict for one program, except where a test runs near the time limit (``turn_tests``'
    ``timed_out``), so a log says which machine's sandbox scored it. ``None`` for an env without tests.

    ``turn_digests``: per turn, short digests of each agent's prompt and reply (:func:`turn_digests`), so two plays
    of one design can be checked for an exact replay without logging every turn's text.

    ``said_done``: per agent, the turn whose action said ``<done/>`` (the env's own parse of it; the agent acts no
    more after it), or None. ``end_reason`` says how the episode ended; this says who was ready when, e.g. a team
    that ran out its budget because one coder said it on turn 1 and the other never did.

    ``finished``: per agent, the turn it finished by the env's rule (said ``<done/>`` or resubmitted its part
    unchanged), or None (:func:`finished`): the agents an ``end_quorum`` counts, e.g. whether the two agents that
    ended a team of 4 under ``"half"`` were its coders or its tester and verifier.

    The three consistency columns: ``consistency_similarity`` is the mean pairwise similarity of the agents' final
    contributions (MiniLM cosine clipped to [0, 1] with the default backend: the seeds' resemblance measure),
    ``consistency_contribution`` the env's counterfactual consistency (what the reward pays), ``duplication`` the
    share of near-identical pairs. All three are ``None`` for a single agent.

    Latency without hardware: ``critical_path_tokens`` sums over turns the longest reply (completion tokens) among
    the agents who acted in that turn — teammates write in parallel, so a turn lasts as long as its longest reply —
    and ``completion_tokens`` counts every reply (the compute). Both are ``None`` when the policy gives no token ids
    (scripted, endpoints that do not return them). ``wall_time_s`` is the seconds from its batch's start to the
    episode's end: episodes of one lockstep batch share each turn's time.
    """
    info = trajectory.final_info
    components = info.get("reward_components", {})
    terms = info.get("quality_terms", {})
    tests = info.get("details", {}).get("tests")
    quality = float(components.get("quality", 0.0))
    pass_rate = None
    if isinstance(tests, Mapping) and tests.get("held_out_total"):
        pass_rate = tests["held_out_passed"] / tests["held_out_total"]
        success = tests["held_out_passed"] == tests["held_out_total"]
    else:
        success = quality >= design.writing_success_quality
    team = planned.num_agents > 1
    consistency = components.get("consistency")
    drafts = dict(trajectory.final_drafts)
    actions = [step.action for step in trajectory.steps]
    dependent = info.get("details", {}).get("dependent_tests")
    critical, total = token_counts(trajectory.steps)
    return {
        "key": planned.key,
        "condition": planned.condition,
        "env": planned.env,
        "team_size": planned.team_size,
        "num_agents": planned.num_agents,
        "task": planned.task,
        "seed": planned.seed,
        "turns": trajectory.turns,
        "turn_budget": design.turn_budget(planned.condition),
        "end_reason": trajectory.end_reason,
        "critical_path_tokens": critical,
        "completion_tokens": total,
        "team_return": float(trajectory.team_return),
        "quality": quality,
        "success": bool(success),
        "pass_rate": pass_rate,
        "consistency_similarity": _number(terms.get("similarity")) if team else None,
        "consistency_contribution": _number(consistency) if team else None,
        "duplication": _number(terms.get("duplication")) if team else None,
        # Signs of a degenerate team (the report's "Degenerate strategies?" table): parts left empty, actions that
        # carry only messages or <done/>, and (coding teams) whether any test depends on the helper at all.
        "empty_parts": sum(not text.strip() for text in drafts.values()) / len(drafts) if drafts else None,
        "protocol_only_actions": (sum(not draft_part(a) for a in actions) / len(actions)) if actions else None,
        "echoed_scaffolding": echoed_scaffolding(drafts),
        "helper_load_bearing": (float(dependent.get("aux", 0) > 0)
                                if team and isinstance(dependent, Mapping) and "aux" in dependent else None),
        "similarity_backend": info.get("details", {}).get("similarity_backend"),
        "sandbox_backend": tests.get("backend") if isinstance(tests, Mapping) else None,
        "reward_components": {k: v for k, v in components.items() if not isinstance(v, Mapping)},
        "contributions": dict(components.get("contributions", {})),
        "texts": drafts,
        "wall_time_s": round(wall_time_s, 3),
        "worker": worker,
        "candidates_per_turn": planned.candidates,
        "selections": ([{"turn": step.turn, "chosen": step.generation.chosen,
                         "visible_passed": list(step.generation.visible_passed),
                         "held_out_passed": (list(step.generation.held_out_passed)
                                             if step.generation.held_out_passed is not None else None)}
                        for step in trajectory.steps if isinstance(step.generation, BestOfNReply)]
                       if planned.candidates > 1 else None),
        "turn_tests": turn_tests(trajectory.steps),
        "said_done": said_done(trajectory.steps),
        "finished": finished(trajectory.steps),
        "turn_digests": turn_digests(trajectory.steps),
        "dtype": (precision or NO_PRECISION).get("dtype"),
        "device": (precision or NO_PRECISION).get("device"),
        "stop_at_reply_end": (decoding or {}).get("stop_at_reply_end"),
        "role_budgets": (decoding or {}).get("role_budgets"),
    }


def turn_tests(steps: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Per turn, the tests the team's program (and each candidate) passed after it, and whether a test run hit the
    sandbox's time limit (``timed_out``: an outcome that can change with the machine's load): the ``turn_tests``
    column of :func:`episode_row`. Every agent's step of a turn carries the same assessment; the first is read."""
    trace: dict[int, dict[str, Any]] = {}
    for step in steps:
        details = step.info.get("details", {})
        tests = details.get("tests")
        if step.turn in trace or not isinstance(tests, Mapping) or "held_out_passed" not in tests:
            continue
        row: dict[str, Any] = {"turn": step.turn, "visible": tests["visible_passed"],
                               "held_out": tests["held_out_passed"], "held_out_total": tests.get("held_out_total"),
                               "timed_out": bool(tests.get("timed_out"))}
        candidates = details.get("candidates")
        if isinstance(candidates, Mapping):
            row["candidates"] = {a: [c["visible_passed"], c["held_out_passed"]] for a, c in candidates.items()}
            row["selected"] = details.get("selected")
            # What else the env's choice read (program.select_candidate): whether each candidate ran, and the
            # tester's asserts it passed. Separate keys, so readers of the [visible, held_out] pairs are unchanged.
            row["runnable"] = {a: bool(c.get("runnable")) for a, c in candidates.items()}
            row["tester_passed"] = {a: int(c.get("tester_passed", 0)) for a, c in candidates.items()}
        trace[step.turn] = row
    return [trace[t] for t in sorted(trace)] or None


DIGEST_CHARS = 12
"""Hex characters kept of a SHA-256 digest in ``turn_digests``: enough to tell two texts apart, short in a log."""


def text_digest(value: Any) -> str:
    """A short SHA-256 digest of a text (or of JSON-encodable chat messages, as sorted-key JSON)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]


def turn_digests(steps: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Per turn, a digest of each acting agent's prompt (its chat messages) and of its reply: the ``turn_digests``
    column of :func:`episode_row`. Two plays of one design replay each other exactly when every digest matches; where
    they do not, the first turn whose *prompts* differ was changed by the env (a test outcome, a timeout), the first
    whose prompts match but *replies* differ by the sampler (``llm-marl bench replay_check`` reads it)."""
    trace: dict[int, dict[str, Any]] = {}
    for step in steps:
        row = trace.setdefault(step.turn, {"turn": step.turn, "prompts": {}, "replies": {}})
        row["prompts"][step.agent] = text_digest([dict(m) for m in step.messages])
        row["replies"][step.agent] = text_digest(step.action)
    return [trace[t] for t in sorted(trace)] or None


def _first_turn(steps: Sequence[Any], ended: Callable[[Mapping[str, Any]], bool]) -> dict[str, int | None]:
    """Per agent who acted, the first turn whose parsed action (``infos[agent]["action"]``) satisfies ``ended``, or
    None."""
    turns: dict[str, int | None] = {}
    for step in steps:
        action = step.info.get("action")
        turns.setdefault(step.agent, None)
        if turns[step.agent] is None and isinstance(action, Mapping) and ended(action):
            turns[step.agent] = step.turn
    return turns


def said_done(steps: Sequence[Any]) -> dict[str, int | None]:
    """Per agent who acted, the turn whose action said ``<done/>`` (``infos[agent]["action"]["done"]``, the env's
    parse), or None if none did: the ``said_done`` column of :func:`episode_row`. An agent that says it is finished
    acts no more after it (``core/termination.py``), so there is at most one such turn."""
    return _first_turn(steps, lambda action: bool(action.get("done")))


def finished(steps: Sequence[Any]) -> dict[str, int | None]:
    """Per agent who acted, the turn it finished on by the env's rule (``core/termination.py``): its action said
    ``<done/>`` or resubmitted its part unchanged (``infos[agent]["action"]["resubmitted"]``), or None if it never
    did: the ``finished`` column of :func:`episode_row`. These are the agents an ``end_quorum`` counts, so a log shows
    who made up the quorum that ended an episode (``said_done`` shows only the marker)."""
    return _first_turn(steps, lambda action: bool(action.get("done") or action.get("resubmitted")))


def token_counts(steps: Sequence[Any]) -> tuple[int | None, int | None]:
    """``(critical path, total)`` completion tokens of an episode's steps: per turn the longest reply among the agents
    who acted (teammates write in parallel), summed over turns; and every reply summed. A best-of-n step counts every
    candidate it sampled (its rows are sampled in parallel too: the longest is its latency, all are its compute).
    ``(None, None)`` when a step's reply has no token ids (a plain string, or a record without ``completion_ids``)."""
    longest: dict[int, int] = {}
    total = 0
    for step in steps:
        replies = step.generation.candidates if isinstance(step.generation, BestOfNReply) else (step.generation,)
        lengths = [getattr(reply, "completion_ids", None) for reply in replies]
        if any(ids is None for ids in lengths):
            return None, None
        longest[step.turn] = max(longest.get(step.turn, 0), *(len(ids) for ids in lengths))
        total += sum(len(ids) for ids in lengths)
    return sum(longest.values()), total


def echoed_scaffolding(drafts: Mapping[str, str]) -> float | None:
    """The share of final parts that copy a label of the observation's scaffolding (``Feedback on your draft:``...)
    instead of only writing the part (:func:`llm_marl_envs.core.observation.echoes_scaffolding`); None without
    parts."""
    from llm_marl_envs.core.observation import echoes_scaffolding

    texts = [text for text in drafts.values() if isinstance(text, str)]
    return sum(echoes_scaffolding(text) for text in texts) / len(texts) if texts else None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _stable_seed(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode("utf-8"))


# --------------------------------------------------------------------------------------------------- the drivers
def run_local(
    batches: Iterable[Batch],
    design: StudyDesign,
    policy: PolicySpec,
    on_rows: Callable[[list[dict[str, Any]]], None],
    on_turn: Callable[[LockstepTurn], None] | None = None,
) -> None:
    """Run batches one after another in this process; ``on_rows`` gets each batch's rows as it ends, ``on_turn``
    each turn of the running batch."""
    for batch in batches:
        on_rows(run_batch(batch, design, policy, on_turn))


def run_batch_counted(
    batch: Batch, design: StudyDesign, policy: PolicySpec
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """:func:`run_batch` for another process (a Ray worker): its rows and its prompt counts, which it takes back out
    of this process's :data:`PROMPT_TOKENS` so that the study's process, adding them to its own, counts them once
    wherever the task ran."""
    before = Counter(PROMPT_TOKENS)
    rows = run_batch(batch, design, policy)
    added = PROMPT_TOKENS - before
    PROMPT_TOKENS.subtract(added)
    return rows, dict(added)


def run_ray(
    batches: Sequence[Batch],
    design: StudyDesign,
    policy: PolicySpec,
    on_rows: Callable[[list[dict[str, Any]]], None],
    address: str,
    cpus_per_task: float = 1.0,
    gpus_per_task: float = 0.0,
) -> None:
    """Run batches as Ray tasks on the cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``); rows
    come back to this process, which alone writes the log. Every node needs this package installed (or a Ray
    ``runtime_env`` that installs it)."""
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError(f"--ray-address needs Ray: pip install 'llm-marl-envs[ray]' ({error})") from error
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    task = ray.remote(num_cpus=cpus_per_task, num_gpus=gpus_per_task)(run_batch_counted)
    pending = [task.remote(batch, design, policy) for batch in batches]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            rows, prompt_tokens = ray.get(done[0])
            PROMPT_TOKENS.update(prompt_tokens)
            on_rows(rows)
    finally:
        for ref in pending:  # a failure or an interrupt: do not leave the cluster busy with orphaned batches
            ray.cancel(ref, force=True)
