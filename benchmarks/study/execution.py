"""Running a study's episodes: lockstep batches through the env package's rollout runner, here or on Ray.

A *batch* is up to ``batch_size`` planned episodes of one condition and one env (team sizes may mix: one policy
call serves every live agent of every episode in it — batched generation across envs and agents). A batch runs in
one process (:func:`run_batch`) and returns one JSON row per episode; the driver logs rows as batches finish. With
``ray_address`` each batch is a Ray task: workers build their policies once per process and return rows, so the log
and its resume semantics are the same as a local run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.collaboration import draft_part
from benchmarks.study.design import CONDITIONS, PlannedEpisode, StudyDesign


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

    def to_dict(self) -> dict[str, Any]:
        """What decides the outcomes (the key's name is kept, never the key)."""
        return {"kind": self.kind, "model": self.model, "dtype": self.dtype, "base_url": self.base_url,
                "endpoint_model": self.endpoint_model}


POLICY_KINDS: tuple[str, ...] = ("local", "endpoint", "scripted")


@dataclass(frozen=True)
class Batch:
    """Episodes run together in lockstep (one condition, one env)."""

    condition: str
    env: str
    episodes: tuple[PlannedEpisode, ...]
    team_dir: str | None = None
    """The trained team's directory (``trained`` condition with a model policy)."""


def make_batches(
    pending: Sequence[PlannedEpisode], batch_size: int, teams: Mapping[tuple[str, int], str] | None = None
) -> list[Batch]:
    """Group pending episodes into batches of one condition and env (and, for trained teams, one team), plan order."""
    groups: dict[tuple[str, str, str | None], list[PlannedEpisode]] = {}
    for episode in pending:
        team = None
        if CONDITIONS[episode.condition].trained and teams:
            team = teams[(episode.env, episode.team_size)]
        groups.setdefault((episode.condition, episode.env, team), []).append(episode)
    batches = []
    for (condition, env, team), episodes in groups.items():
        for start in range(0, len(episodes), batch_size):
            batches.append(Batch(condition, env, tuple(episodes[start:start + batch_size]), team))
    return batches


# -------------------------------------------------------------------------------------------------------- policies
_POLICIES: dict[Any, Any] = {}
"""Policies built in this process, by spec (a Ray worker process serves many batches with one model load)."""


def _rollout_policy(spec: PolicySpec, team_dir: str | None, settings: Any) -> Any:
    """The runner's policy callable for ``spec`` (with ``team_dir``'s adapters when given)."""
    if team_dir is not None and spec.kind != "scripted":
        key = ("team", team_dir, spec.dtype)
        if key not in _POLICIES:
            from baselines.policies.adapters import load_team_manifest
            from trainers.generation import TeamModel

            manifest = load_team_manifest(team_dir)
            adapters = {role: Path(team_dir) / folder for role, folder in manifest.roles.items()}
            _POLICIES[key] = TeamModel.load(list(manifest.roles), manifest.base_model, dtype=spec.dtype,
                                            adapters=adapters)
        return _POLICIES[key].as_rollout_policy(settings, logprobs=False)
    key = ("base", spec)
    if key not in _POLICIES:
        from baselines.policies import make_policy

        if spec.kind == "local":
            _POLICIES[key] = make_policy("local", model=spec.model, dtype=spec.dtype)
        elif spec.kind == "endpoint":
            _POLICIES[key] = make_policy("endpoint", base_url=spec.base_url, model=spec.endpoint_model,
                                         api_key_env=spec.api_key_env)
        else:
            _POLICIES[key] = make_policy("scripted")
    return _POLICIES[key].as_rollout_policy(settings, records=False)


# ---------------------------------------------------------------------------------------------------------- a batch
def run_batch(batch: Batch, design: StudyDesign, policy: PolicySpec) -> list[dict[str, Any]]:
    """Play one batch in lockstep and return one log row per episode (see :func:`episode_row`)."""
    from baselines.collaboration import get_baseline
    from baselines.policies import GenerationSettings
    from llm_marl_envs import rollout
    from llm_marl_envs.registry import make_env

    baseline = get_baseline(CONDITIONS[batch.condition].baseline)
    # Sampling is seeded per batch from its first episode, so a batch replays the same way.
    first = batch.episodes[0]
    envs = [make_env(e.env, **design.env_kwargs_for(e.env, e.condition, e.team_size)) for e in batch.episodes]
    budget = design.max_new_tokens or max(env.suggested_max_new_tokens() for env in envs)
    settings = GenerationSettings(temperature=design.temperature, top_p=design.top_p, max_new_tokens=budget,
                                  seed=_stable_seed(first.key))
    policy_fn = _rollout_policy(policy, batch.team_dir, settings)
    start = time.perf_counter()
    ended: dict[int, float] = {}
    try:
        trajectories = rollout.run_episodes(
            envs, policy_fn,
            seeds=[e.seed for e in batch.episodes],
            options=[{"task_id": e.task} for e in batch.episodes],
            schedule=baseline.schedule,
            on_episode=lambda t: ended.__setitem__(t.env_index, time.perf_counter()),
        )
    finally:
        for env in envs:
            env.close()
    worker = f"{os.uname().nodename}:{os.getpid()}"
    return [
        episode_row(planned, trajectory, design, ended.get(i, time.perf_counter()) - start, worker)
        for i, (planned, trajectory) in enumerate(zip(batch.episodes, trajectories, strict=True))
    ]


def episode_row(
    planned: PlannedEpisode, trajectory: Any, design: StudyDesign, wall_time_s: float, worker: str = ""
) -> dict[str, Any]:
    """The log row of one episode: what the report reads, plus the texts (final drafts) for inspection.

    The three consistency columns: ``consistency_similarity`` is the mean pairwise similarity of the agents' final
    contributions (MiniLM cosine clipped to [0, 1] with the default backend: the seeds' resemblance measure),
    ``consistency_contribution`` the env's counterfactual consistency (what the reward pays), ``duplication`` the
    share of near-identical pairs. All three are ``None`` for a single agent.
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
    return {
        "key": planned.key,
        "condition": planned.condition,
        "env": planned.env,
        "team_size": planned.team_size,
        "num_agents": planned.num_agents,
        "task": planned.task,
        "seed": planned.seed,
        "turns": trajectory.turns,
        "end_reason": trajectory.end_reason,
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
        "reward_components": {k: v for k, v in components.items() if not isinstance(v, Mapping)},
        "contributions": dict(components.get("contributions", {})),
        "texts": drafts,
        "wall_time_s": round(wall_time_s, 3),
        "worker": worker,
    }


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
    batches: Iterable[Batch], design: StudyDesign, policy: PolicySpec, on_rows: Callable[[list[dict[str, Any]]], None]
) -> None:
    """Run batches one after another in this process; ``on_rows`` gets each batch's rows as it ends."""
    for batch in batches:
        on_rows(run_batch(batch, design, policy))


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
    task = ray.remote(num_cpus=cpus_per_task, num_gpus=gpus_per_task)(run_batch)
    pending = [task.remote(batch, design, policy) for batch in batches]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            on_rows(ray.get(done[0]))
    finally:
        for ref in pending:  # a failure or an interrupt: do not leave the cluster busy with orphaned batches
            ray.cancel(ref, force=True)
