"""The five collaboration baselines complete episodes on both envs at 2–4 agents, with the scripted policy and with
the default model (short real runs), through the one rollout runner, and each shows agents exactly what its
definition allows."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from baseline_helpers import ENV_KWARGS, default_model

from llm_marl_baselines.collaboration import (
    BASELINES,
    PLAIN,
    EpisodeResult,
    draft_part,
    get_baseline,
    run_episodes,
)
from llm_marl_baselines.policies import ActionRequest, Generation, GenerationSettings
from llm_marl_baselines.policies.local import LocalModelPolicy
from llm_marl_baselines.policies.scripted import ScriptedPolicy, extractive_responder
from llm_marl_envs import rollout
from llm_marl_envs.core import prompts
from llm_marl_envs.core.observation import TEAM_DRAFTS_LABEL
from llm_marl_envs.registry import ENV_NAMES, make_env

SETTINGS = GenerationSettings(temperature=0.7, max_new_tokens=16, seed=0)
EXPECTED_TURNS = {
    "single_agent": 1,
    "naive_concatenation": 1,
    "sequential_pipeline": 1,
    "one_round_discussion": 2,
    "prompt_collaboration": 2,
}  # scripted agents finish at turn 2


def run(
    name: str, env: str, policy: object, num_agents: int = 2, seeds: tuple[int, ...] = (0, 1), **kwargs: object
) -> list[EpisodeResult]:
    return run_episodes(
        name,
        env,
        policy,
        SETTINGS,
        seeds=seeds,
        num_agents=num_agents,  # type: ignore[arg-type]
        env_kwargs=ENV_KWARGS[env],
        **kwargs,
    )  # type: ignore[arg-type]


def test_registry_has_the_five_baselines() -> None:
    assert list(BASELINES) == [
        "single_agent",
        "naive_concatenation",
        "sequential_pipeline",
        "one_round_discussion",
        "prompt_collaboration",
    ]
    assert get_baseline("plain") is PLAIN
    # Beside the five: one agent with a team's turn budget (the study's `single`); single_agent stays one-shot.
    multiturn = get_baseline("single_agent_multiturn")
    assert multiturn.single_agent and multiturn.turns_adjustable and "single_agent_multiturn" not in BASELINES
    assert multiturn.env_kwargs(3, 4) == {"num_agents": 1, "max_turns": 4, "observability": "local"}
    assert get_baseline("single_agent").env_kwargs(3, 4)["max_turns"] == 1
    with pytest.raises(ValueError, match=r"baseline: expected one of \('single_agent'"):
        get_baseline("telepathy")
    with pytest.raises(ValueError, match=r"env: expected one of \('writing', 'coding'\), got 'chess'"):
        run_episodes("single_agent", "chess", ScriptedPolicy(), SETTINGS)
    with pytest.raises(TypeError, match="policy: expected a Policy"):
        run_episodes("single_agent", "writing", object(), SETTINGS)  # type: ignore[arg-type]


@pytest.mark.parametrize("env", ENV_NAMES)
@pytest.mark.parametrize("num_agents", [2, 3, 4])
@pytest.mark.parametrize("name", list(BASELINES))
def test_scripted_episodes_complete(name: str, env: str, num_agents: int) -> None:
    results = run(name, env, ScriptedPolicy(), num_agents=num_agents)
    assert len(results) == 2
    for result in results:
        expected_agents = 1 if name == "single_agent" else num_agents
        assert len(result.agents) == expected_agents and set(result.actions) == set(result.agents)
        assert result.turns == EXPECTED_TURNS[name] and result.end_reason is not None
        assert result.reward_components["turns"] == result.turns
        assert all(len(actions) == result.turns for actions in result.actions.values())
        assert 0.0 <= result.quality <= 1.0
        if name == "single_agent":  # no teammate, so nothing to be consistent with
            assert result.consistency is None
        else:
            assert result.consistency is not None and 0.0 <= result.consistency <= 1.0
        assert isinstance(result.episode_return, float)
        json.loads(json.dumps(result.to_dict()))  # JSON-friendly
    # Episode i plays the task that reset(seed=seeds[i]) draws, in seed order (lockstep must not mix them up).
    config = {**ENV_KWARGS[env], **get_baseline(name).env_kwargs(num_agents)}
    drawn = []
    for seed in (0, 1):
        fresh = make_env(env, **config)
        _, infos = fresh.reset(seed=seed, options={"split": "train"})
        drawn.append(next(iter(infos.values()))["task_id"])
        fresh.close()
    assert [(r.seed, r.task_id) for r in results] == [(0, drawn[0]), (1, drawn[1])]


def _requests(policy: ScriptedPolicy) -> list[ActionRequest]:
    return [request for batch in policy.calls for request in batch]


def test_naive_concatenation_agents_never_see_teammates() -> None:
    policy = ScriptedPolicy(lambda r: f"part written by {r.agent} alone")
    (result,) = run("naive_concatenation", "writing", policy, num_agents=3, seeds=(0,))
    requests = _requests(policy)
    assert len(policy.calls) == 1 and len(requests) == 3  # one batched call for the whole team
    env = make_env("writing", num_agents=3, similarity="tfidf")
    for request in requests:
        others = [a for a in result.agents if a != request.agent]
        assert not any(f"written by {other}" in request.observation for other in others)
        assert prompts.BASELINE_RULES["naive_concatenation"] in request.observation
        assert request.system == env.system_prompt(request.agent)  # the env owns the system prompt
        assert request.messages()[0] == {"role": "system", "content": env.system_prompt(request.agent)}
    assert result.drafts == {a: f"part written by {a} alone" for a in result.agents}


def test_sequential_pipeline_shows_each_agent_the_earlier_outputs() -> None:
    policy = ScriptedPolicy(lambda r: f"text of {r.agent} <message>private note</message>")
    (result,) = run("sequential_pipeline", "writing", policy, num_agents=3, seeds=(0,))
    requests = _requests(policy)
    assert [r.agent for r in requests] == list(result.agents) and len(policy.calls) == 3
    assert prompts.SEQUENTIAL_HEADER not in requests[0].observation
    assert "concise wrote:\ntext of concise" in requests[1].observation
    assert "concise wrote:\ntext of concise" in requests[2].observation
    assert "detailed wrote:\ntext of detailed" in requests[2].observation
    assert "private note" not in requests[2].observation.split(prompts.SEQUENTIAL_HEADER)[1]
    assert draft_part("a <message>m</message> b <done/>") == "a  b"


def test_sequential_pipeline_batches_across_episodes() -> None:
    policy = ScriptedPolicy()
    results = run("sequential_pipeline", "writing", policy, num_agents=2, seeds=(0, 1, 2))
    assert len(results) == 3
    assert [len(batch) for batch in policy.calls] == [3, 3]  # position 0 of every episode, then position 1


def test_one_round_discussion_draft_then_revise_with_teammates_drafts() -> None:
    policy = ScriptedPolicy(lambda r: f"draft by {r.agent} <done/>")  # a model saying done early changes nothing
    (result,) = run("one_round_discussion", "writing", policy, num_agents=2, seeds=(0,))
    first, second = policy.calls
    assert result.turns == 2 and result.end_reason == "all_done"
    assert all("Round 1 of 2" in r.observation for r in first)
    assert all("<done/>" not in a for a in (result.actions["concise"][0], result.actions["detailed"][0]))
    assert all("Round 2 of 2" in r.observation for r in second)
    concise_round2 = next(r for r in second if r.agent == "concise")
    assert TEAM_DRAFTS_LABEL in concise_round2.observation
    assert "draft by detailed" in concise_round2.observation


def test_prompt_collaboration_runs_multi_turn_dialogue() -> None:
    turns_seen: list[str] = []

    def chatty(request: ActionRequest) -> str:
        turns_seen.append(request.agent)  # a new draft every turn, so the team never converges
        return f"my part ({request.agent}, version {len(turns_seen)}) <message>let us agree on names</message>"

    (result,) = run("prompt_collaboration", "writing", ScriptedPolicy(chatty), num_agents=2, seeds=(0,), max_turns=4)
    assert result.turns == 4 and result.end_reason == "max_turns"  # nobody said <done/>: truncated
    assert result.reward_components["message_tokens"] > 0
    assert len(turns_seen) == 8


def _drafts_in_view(observation: str) -> list[str]:
    """The teammates an observation's "Teammates' drafts" section shows (each wrote something or nothing yet)."""
    if TEAM_DRAFTS_LABEL not in observation:
        return []
    section = observation.split(TEAM_DRAFTS_LABEL, 1)[1]
    return re.findall(r"^(\w+) (?:wrote:|has written nothing yet\.)$", section, flags=re.MULTILINE)


@pytest.mark.parametrize("name", ["prompt_collaboration", "one_round_discussion"])
@pytest.mark.parametrize(("env", "num_agents", "scheme"), [
    ("writing", 2, None), ("writing", 4, None),
    ("coding", 2, "propose_verify"), ("coding", 3, "propose_verify"), ("coding", 4, "propose_verify"),
    ("coding", 2, "author_fixer"), ("coding", 2, "magrpo"),
])
def test_rules_name_exactly_the_teammates_whose_drafts_an_agent_sees(
    name: str, env: str, num_agents: int, scheme: str | None
) -> None:
    # A rule block must not tell a model it sees what it does not: the propose-and-verify coders never see each
    # other's candidates, so "you see your teammates' current drafts" would be false for them.
    policy = ScriptedPolicy(lambda r: f"part by {r.agent}")
    scheme_kwargs = {} if scheme is None else {"scheme": scheme}
    run_episodes(name, env, policy, SETTINGS, seeds=(0,), num_agents=num_agents,
                 env_kwargs={**ENV_KWARGS[env], **scheme_kwargs}, max_turns=2)
    requests = _requests(policy)
    agents = list(dict.fromkeys(r.agent for r in requests))  # the env's agent order (turn 1: one call)
    assert len(agents) == num_agents
    blind = partial = 0
    for request in requests:
        teammates = [a for a in agents if a != request.agent]
        seen = _drafts_in_view(request.observation)
        rule = "prompt_collaboration" if name == "prompt_collaboration" else (
            "discussion_draft" if "Round 1 of 2" in request.observation else "discussion_revise")
        assert prompts.rule_block(rule, teammates, seen) in request.observation
        unseen = [t for t in teammates if t not in seen]
        if unseen:
            assert prompts.BASELINE_RULES[rule] not in request.observation
            blind += not seen
            partial += bool(seen)
    if env == "writing" or scheme == "magrpo":  # every teammate in view: the registry's text, word for word
        assert blind == partial == 0
    if (env, num_agents, scheme) in {("coding", 3, "propose_verify"), ("coding", 4, "propose_verify")}:
        assert partial > 0  # a coder sees the tester's (and verifier's) drafts, not the other coder's
    if (env, num_agents, scheme) == ("coding", 2, "propose_verify"):
        assert blind == len(requests)  # two coders: neither sees the other's candidate, at any turn


def test_the_collaboration_rule_keeps_its_text_where_every_draft_is_in_view() -> None:
    # The untrained condition's figures (writing's and magrpo coding's) were played under these words.
    assert prompts.BASELINE_RULES["prompt_collaboration"] == (
        "Team rules (fixed): you see your teammates' current drafts. Each turn, write your full updated part. "
        "If something must be agreed (names, facts, who covers what), send one short <message>...</message>. "
        "When your part fits with your teammates' parts, end with <done/>.")
    assert prompts.rule_block("prompt_collaboration", ["coder_2", "tester"], ["tester"]).startswith(
        "Team rules (fixed): you see tester's current drafts (not coder_2's). ")
    assert prompts.rule_block("prompt_collaboration", ["coder_2"], []) == prompts.BLIND_RULES["prompt_collaboration"]
    assert prompts.rule_block("single_agent", ["x"], []) == prompts.BASELINE_RULES["single_agent"]  # no sight words
    with pytest.raises(ValueError, match="not among the teammates"):
        prompts.rule_block("prompt_collaboration", ["coder_2"], ["coder_3"])


def test_single_agent_uses_the_solo_role_on_both_envs() -> None:
    for env in ENV_NAMES:
        (result,) = run("single_agent", env, ScriptedPolicy(), num_agents=4, seeds=(0,))
        assert result.agents == ("solo",)


@pytest.mark.model
@pytest.mark.parametrize("env", ENV_NAMES)
@pytest.mark.parametrize("name", list(BASELINES))
def test_default_model_runs_every_baseline(name: str, env: str) -> None:
    policy = LocalModelPolicy(loaded=default_model())
    settings = GenerationSettings(temperature=0.7, max_new_tokens=12, seed=0)
    results = run_episodes(name, env, policy, settings, seeds=(0,), num_agents=2, env_kwargs=ENV_KWARGS[env])
    (result,) = results
    assert 1 <= result.turns <= 3 and result.end_reason is not None
    assert all(actions and all(isinstance(a, str) for a in actions) for actions in result.actions.values())
    assert any(a.strip() for actions in result.actions.values() for a in actions)  # the model wrote something


def test_progress_callbacks_report_every_turn_and_episode_in_lockstep_order() -> None:
    turns: list[tuple[int, int]] = []
    ended: list[EpisodeResult] = []
    results = run("one_round_discussion", "writing", ScriptedPolicy(), seeds=(0, 1, 2),
                  on_turn=lambda episode, turn: turns.append((episode, turn)), on_episode=ended.append)
    assert turns == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]  # one call per episode and turn
    assert ended == results  # one call per episode, with the result that is returned


def test_an_episode_that_ends_early_is_reported_when_it_ends() -> None:
    requests = itertools.count()
    events: list[tuple[str, int, int]] = []

    def first_episode_finishes_at_once(request: ActionRequest) -> str:
        # The first batch holds episode 0's two agents, then episode 1's; only episode 0's say <done/>. Every other
        # action is new text, so episode 1 neither converges nor finishes before max_turns.
        index = next(requests)
        return "final <done/>" if index < 2 else f"draft number {index}"

    results = run("prompt_collaboration", "writing", ScriptedPolicy(first_episode_finishes_at_once), seeds=(0, 1),
                  max_turns=3, on_turn=lambda episode, turn: events.append(("turn", episode, turn)),
                  on_episode=lambda result: events.append(("episode", int(result.seed or 0), result.turns)))
    assert [r.turns for r in results] == [1, 3]
    assert events == [("turn", 0, 1), ("episode", 0, 1), ("turn", 1, 1), ("turn", 1, 2), ("turn", 1, 3),
                      ("episode", 1, 3)]


@pytest.mark.parametrize("name", list(BASELINES))
def test_the_runner_drives_the_baseline_schedule_on_both_envs(name: str) -> None:
    # The baseline's schedule and env configuration, handed to the one rollout runner directly (as a study or a
    # trainer would), give the same episodes as collaboration.run_episodes, which is a thin driver over it.
    spec = get_baseline(name)
    for env_name in ENV_NAMES:
        envs = [make_env(env_name, **ENV_KWARGS[env_name], **spec.env_kwargs(num_agents=2)) for _ in range(2)]
        policy = ScriptedPolicy()
        trajectories = rollout.run_episodes(envs, policy.as_rollout_policy(SETTINGS), seeds=[0, 1],
                                            options={"split": "train"}, schedule=spec.schedule)
        results = run(name, env_name, ScriptedPolicy())
        for trajectory, result in zip(trajectories, results, strict=True):
            assert trajectory.turns == EXPECTED_TURNS[name] and trajectory.end_reason is not None
            assert len(trajectory.agents) == (1 if name == "single_agent" else 2)
            assert result.trajectory is not None and result.trajectory.agents == trajectory.agents
            assert {a: tuple(s.action for s in trajectory.agent_steps(a)) for a in trajectory.agents} == result.actions
            assert trajectory.team_return == pytest.approx(result.episode_return)
            assert all(isinstance(step.generation, Generation) for step in trajectory.steps)
            assert all(step.messages[0]["content"] == envs[0].system_prompt(step.agent) for step in trajectory.steps)


def test_the_sequential_pipeline_makes_one_policy_call_per_agent_position() -> None:
    spec = get_baseline("sequential_pipeline")
    envs = [make_env("coding", **ENV_KWARGS["coding"], **spec.env_kwargs(num_agents=3)) for _ in range(2)]
    policy = ScriptedPolicy(lambda r: f"{extractive_responder(r)}\n<message>private note</message>")
    (first, _) = rollout.run_episodes(envs, policy.as_rollout_policy(SETTINGS), seeds=[0, 1], schedule=spec.schedule)
    # Position k of both episodes in call k; each later position sees the earlier agents' drafts.
    assert [[r.agent for r in call] for call in policy.calls] == [[a, a] for a in first.agents]
    assert all(prompts.SEQUENTIAL_HEADER not in r.observation for r in policy.calls[0])
    for position, call in enumerate(policy.calls[1:], start=1):
        for request in call:
            shown = request.observation.split(prompts.SEQUENTIAL_HEADER)[1]
            assert all(f"{earlier} wrote:\n" in shown for earlier in first.agents[:position])
            assert "private note" not in shown  # earlier agents' messages never reach a later agent


class RecordingPolicy(ScriptedPolicy):
    """Scripted texts with a full token-level record, as a local model gives them."""

    def _generate(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        texts = self._act(requests, settings)
        return [Generation(text, prompt_ids=(1, len(r.observation)), completion_ids=(5, 6), logprobs=(-0.5, -0.25),
                           finish_reason="stop") for r, text in zip(requests, texts, strict=True)]


def test_generation_records_are_carried_into_trajectories() -> None:
    eager = RecordingPolicy(lambda r: f"draft by {r.agent} <done/>")  # done at once: round 1's finish removes it
    (result,) = run("one_round_discussion", "writing", eager, seeds=(0,))
    assert result.trajectory is not None
    steps = result.trajectory.steps
    assert len(steps) == 4  # 2 agents x 2 rounds
    for step in steps:
        assert isinstance(step.generation, Generation) and step.generation.has_token_record
        assert step.generation.prompt_ids == (1, len(step.messages[-1]["content"]))
        assert step.generation.logprobs == (-0.5, -0.25)
    # The schedule's finish rule changed the action the env got, not the record of what was generated.
    round1 = [s for s in steps if s.turn == 1]
    assert all(s.generation.text.endswith("<done/>") and "<done/>" not in s.action for s in round1)
    assert "trajectory" not in result.to_dict()
    (plain,) = run("one_round_discussion", "writing", RecordingPolicy(), seeds=(0,), records=False)
    assert plain.trajectory is not None and all(s.generation is None for s in plain.trajectory.steps)
