"""PettingZoo conformance and Dec-POMDP semantics shared by both envs."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium
import numpy as np
import pettingzoo
import pytest
from envs_helpers import ENV_FACTORIES, scripted_action
from pettingzoo.test import parallel_api_test

import llm_marl_envs
from llm_marl_envs import coding_v0, writing_v0

ENV_NAMES = sorted(ENV_FACTORIES)


@pytest.mark.parametrize("num_agents", [2, 3, 4])
@pytest.mark.parametrize("name", ENV_NAMES)
def test_parallel_api(name: str, num_agents: int) -> None:
    parallel_api_test(ENV_FACTORIES[name](num_agents=num_agents), num_cycles=100)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_single_agent_team_runs(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=1)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["solo"]
    _, rewards, *_ = env.step({"solo": scripted_action(env, "solo", 1)})
    assert set(rewards) == {"solo"}


def _rollout(env, seed: int) -> list:
    trace = []
    obs, infos = env.reset(seed=seed)
    trace.append((obs, infos))
    turn = 0
    while env.agents:
        turn += 1
        actions = {a: scripted_action(env, a, turn) for a in env.agents}
        trace.append(env.step(actions))
    return trace


@pytest.mark.parametrize("name", ENV_NAMES)
def test_whole_episodes_are_deterministic(name: str) -> None:
    """Same seed and actions give identical observations, rewards and infos at every step of whole episodes."""
    for seed in (0, 7):
        first = _rollout(ENV_FACTORIES[name](num_agents=3, max_turns=4), seed)
        second = _rollout(ENV_FACTORIES[name](num_agents=3, max_turns=4), seed)
        assert len(first) == 5  # reset + max_turns steps: the drafts change every turn
        assert first == second
    other = _rollout(ENV_FACTORIES[name](num_agents=3, max_turns=4), 1)
    assert other[0][1] != first[0][1] or other[0][0] != first[0][0]  # another seed, another task


@pytest.mark.parametrize("name", ENV_NAMES)
def test_local_observability_hides_teammate_drafts(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=4, max_turns=3)
    env.reset(seed=3)
    markers = {a: f"SECRET_{a.upper()}_DRAFT" for a in env.agents}
    actions = {a: _with_marker(scripted_action(env, a, 1), markers[a]) for a in env.agents}
    obs, *_ = env.step(actions)
    for agent, text in obs.items():
        assert markers[agent] in text  # an agent sees its own draft
        for other, marker in markers.items():
            if other != agent and other not in env.drafts_read_by_role(agent):  # the coding verifier reads code
                assert marker not in text, f"{agent} saw {other}'s draft"
    team = ENV_FACTORIES[name](num_agents=4, max_turns=3, observability="team")
    team.reset(seed=3)
    obs, *_ = team.step(actions)
    for agent in team.possible_agents:  # every draft the team setting shows, and none it keeps private
        shown = {agent, *team.drafts_shown_to(agent), *team.drafts_read_by_role(agent)}
        assert {a for a, marker in markers.items() if marker in obs[agent]} == shown, agent
    assert any(len(team.drafts_shown_to(a)) == len(markers) - 1 for a in team.possible_agents)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_messages_reach_only_their_recipients(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=3)
    env.reset(seed=0)
    first, second, third = env.agents
    actions = {a: scripted_action(env, a, 1) for a in env.agents}
    actions[first] += f'<message to="{second}">PRIVATE_NOTE_42</message>'
    obs, *_ = env.step(actions)
    assert "PRIVATE_NOTE_42" in obs[second]
    assert "PRIVATE_NOTE_42" not in obs[third]
    private = [m for m in env.state()["messages"] if m["text"] == "PRIVATE_NOTE_42"]
    assert [tuple(m["recipients"]) for m in private] == [(second,)]


@pytest.mark.parametrize("name", ENV_NAMES)
def test_state_is_global(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2)
    env.reset(seed=0)
    actions = {a: scripted_action(env, a, 1) for a in env.agents}
    env.step(actions)
    state = env.state()
    assert set(state["drafts"]) == set(env.possible_agents)
    assert all(state["drafts"][a] for a in env.possible_agents)
    assert state["turn"] == 1 and state["task"]["task_id"] == env.task.task_id
    assert len(state["messages"]) == 2


@pytest.mark.parametrize("name", ENV_NAMES)
def test_termination_all_done_converged_and_max_turns(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2, max_turns=3)
    env.reset(seed=0)
    a, b = env.agents
    _, _, term, trunc, infos = env.step({a: scripted_action(env, a, 1) + "<done/>", b: scripted_action(env, b, 1)})
    assert term == {a: True, b: False} and not any(trunc.values())
    assert env.agents == [b]
    with pytest.raises(ValueError, match=rf"agent '{a}' is finished"):
        env.step({a: "x", b: "y"})
    _, _, term, _, infos = env.step({b: "<done/>"})
    assert term == {b: True} and env.agents == [] and infos[b]["end_reason"] == "all_done"
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step({})

    env.reset(seed=0)
    same = {x: scripted_action(env, x, 1) for x in env.agents}
    env.step(same)
    _, _, term, trunc, infos = env.step(same)  # every part resubmitted unchanged: everyone is done
    assert all(term.values()) and not any(trunc.values()) and infos[a]["end_reason"] == "all_done"
    assert all(info["action"]["resubmitted"] for info in infos.values())

    env.reset(seed=0)
    env.step(same)
    _, _, term, trunc, infos = env.step({x: "<message>ok</message>" for x in env.agents})  # no draft changed
    assert all(term.values()) and not any(trunc.values()) and infos[a]["end_reason"] == "converged"

    env.reset(seed=0)
    for turn in range(1, 4):
        _, _, term, trunc, infos = env.step({x: scripted_action(env, x, turn) for x in env.agents})
    assert all(trunc.values()) and not any(term.values()) and infos[a]["end_reason"] == "max_turns"
    assert infos[a]["reward_components"]["turns"] == 3


@pytest.mark.parametrize("name", ENV_NAMES)
@pytest.mark.parametrize(("end_quorum", "num_agents", "finished_to_end"),
                         [("half", 2, 1), ("half", 3, 2), ("half", 4, 2), ("any", 4, 1), ("all", 3, 3)])
def test_a_quorum_of_finished_agents_ends_the_episode_for_everyone(
    name: str, end_quorum: str, num_agents: int, finished_to_end: int
) -> None:
    env = ENV_FACTORIES[name](num_agents=num_agents, max_turns=4, end_quorum=end_quorum)
    env.reset(seed=0)
    agents = list(env.agents)
    env.step({x: scripted_action(env, x, 1) for x in agents})
    # One agent finishes per turn (the others revise); the turn that brings the finished count to the quorum ends it.
    for turn in range(2, 2 + finished_to_end):
        finishing = agents[turn - 2]
        actions = {x: scripted_action(env, x, turn) + ("<done/>" if x == finishing else "") for x in env.agents}
        _, _, term, trunc, infos = env.step(actions)
        if turn < 1 + finished_to_end:
            assert term == {x: x == finishing for x in actions} and infos[finishing]["end_reason"] is None
    assert not env.agents and all(term.values()) and not any(trunc.values())
    reason = "all_done" if finished_to_end == num_agents else "quorum_done"
    assert {info["end_reason"] for info in infos.values()} == {reason} and env.state()["turn"] == 1 + finished_to_end
    assert env.config.limits.end_quorum == end_quorum


def test_quorum_sizes() -> None:
    from llm_marl_envs.core.termination import quorum_size

    assert [quorum_size("half", n) for n in (1, 2, 3, 4)] == [1, 1, 2, 2]
    assert [quorum_size("all", n) for n in (1, 2, 3, 4)] == [1, 2, 3, 4]
    assert {quorum_size("any", n) for n in (1, 2, 3, 4)} == {1}


@pytest.mark.parametrize(("name", "options", "default", "teammate_plays_on"), [
    ("writing", {}, "half", False), ("coding", {}, "half", False), ("coding", {"scheme": "magrpo"}, "all", True),
    ("coding", {"scheme": "author_fixer"}, "all", True)])
def test_each_env_plays_its_own_quorum_by_default(name: str, options: dict, default: str,
                                                  teammate_plays_on: bool) -> None:
    """Left unset, ``end_quorum`` is the env's own: writing and coding's default scheme end on half the team's
    ``<done/>`` (from turn 2); coding's other schemes on everyone's."""
    env = ENV_FACTORIES[name](num_agents=2, max_turns=4, **options)
    env.reset(seed=0)
    a, b = env.agents
    assert env.config.limits.end_quorum is None and env.end_quorum == default == env.state()["end_quorum"]
    env.step({x: scripted_action(env, x, 1) for x in env.agents})
    _, _, term, _, infos = env.step({a: scripted_action(env, a, 2) + "<done/>", b: scripted_action(env, b, 2)})
    assert term == {a: True, b: not teammate_plays_on}
    assert infos[b]["end_reason"] == (None if teammate_plays_on else "quorum_done")


def test_coding_takes_its_default_ending_per_scheme() -> None:
    """Only ``propose_verify``, the scheme the held-out look measured (RULE-quorum.md), ends on half the team by
    default, at every size; the other schemes, and any scheme given an ending, keep theirs."""
    from llm_marl_envs.envs.coding.roles import SCHEMES

    for scheme in SCHEMES:
        for size in (2, 3, 4):
            env = ENV_FACTORIES["coding"](num_agents=size, scheme=scheme)
            expected = "half" if scheme == "propose_verify" else "all"
            assert (env.end_quorum, env.quorum) == (expected, (size + 1) // 2 if expected == "half" else size), scheme
            assert ENV_FACTORIES["coding"](num_agents=size, scheme=scheme, end_quorum="any").quorum == 1
    assert ENV_FACTORIES["coding"](num_agents=2, reward_mode="magrpo", scheme="magrpo").end_quorum == "all"


@pytest.mark.parametrize("name", ENV_NAMES)
def test_magrpo_mode_needs_every_agent_by_default(name: str) -> None:
    """MAGRPO mode keeps the official apps' rule: one agent's ``<done/>`` ends no teammate's episode."""
    env = ENV_FACTORIES[name](num_agents=2, reward_mode="magrpo")
    assert env.end_quorum == "all" and ENV_FACTORIES[name](num_agents=2, reward_mode="magrpo",
                                                           end_quorum="half").end_quorum == "half"


@pytest.mark.parametrize("bad", ["most", "", 2])
def test_an_unknown_end_quorum_is_refused_with_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match=r"end_quorum: expected one of \('all', 'half', 'any'\)"):
        writing_v0.parallel_env(end_quorum=bad)


@pytest.mark.parametrize("name", ENV_NAMES)
@pytest.mark.parametrize("end_quorum", ["any", "half"])
def test_a_quorum_waits_for_the_second_turn(name: str, end_quorum: str) -> None:
    """On turn 1 no agent has had feedback or a message: one agent's <done/> there finishes that agent only, and its
    teammate plays turn 2 before the quorum ends the episode."""
    env = ENV_FACTORIES[name](num_agents=2, max_turns=4, end_quorum=end_quorum)
    env.reset(seed=0)
    first, second = env.agents
    _, _, term, trunc, infos = env.step({first: scripted_action(env, first, 1) + "<done/>",
                                         second: scripted_action(env, second, 1)})
    assert term == {first: True, second: False} and not any(trunc.values()) and env.agents == [second]
    assert infos[second]["end_reason"] is None
    _, _, term, _, infos = env.step({second: scripted_action(env, second, 2)})
    assert term == {second: True} and infos[second]["end_reason"] == "quorum_done" and env.state()["turn"] == 2
    assert not env.agents


def test_everyone_done_on_turn_one_still_ends_it() -> None:
    env = ENV_FACTORIES["writing"](num_agents=2, max_turns=4, end_quorum="half")
    env.reset(seed=0)
    _, _, term, _, infos = env.step({x: scripted_action(env, x, 1) + "<done/>" for x in env.agents})
    assert all(term.values()) and {i["end_reason"] for i in infos.values()} == {"all_done"}
    assert env.state()["turn"] == 1


@pytest.mark.parametrize("name", ENV_NAMES)
def test_reset_options_select_tasks_reproducibly(name: str) -> None:
    env = ENV_FACTORIES[name]()
    _, infos_a = env.reset(seed=11)
    _, infos_b = env.reset(seed=11)
    assert infos_a == infos_b
    task_id = env.task_source.ids("eval")[3]
    _, infos = env.reset(seed=5, options={"task_id": task_id})
    assert infos[env.agents[0]]["task_id"] == task_id
    _, infos = env.reset(seed=5, options={"split": "eval"})
    assert infos[env.agents[0]]["split"] == "eval"
    with pytest.raises(KeyError, match="has no task 'nope'"):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(ValueError, match=r"options\['split'\]: expected one of \('train', 'eval'\), got 'test'"):
        env.reset(options={"split": "test"})


@pytest.mark.parametrize("name", ENV_NAMES)
def test_bad_seed_and_options_name_the_argument_and_change_nothing(name: str) -> None:
    env = ENV_FACTORIES[name]()
    env.reset(seed=3)
    before = json.dumps(env.state(), default=str)
    cases = [
        ({"seed": -1}, ValueError, r"seed: expected an int >= 0 or None, got -1"),
        ({"seed": 1.5}, TypeError, r"seed: expected an int >= 0 or None, got float 1.5"),
        ({"seed": "7"}, TypeError, r"seed: expected an int >= 0 or None, got str '7'"),
        ({"seed": True}, TypeError, r"seed: expected an int >= 0 or None, got bool True"),
        ({"options": {"task": "x"}}, ValueError,
         r"options: unknown keys \['task'\]; accepted keys: \['split', 'task_id'\]"),
        ({"options": {"split": "eval", "seeds": 2}}, ValueError, r"unknown keys \['seeds'\]"),
        ({"options": ["split"]}, TypeError, r"options: expected a dict or None, got list"),
        ({"seed": -1, "options": {"split": "eval"}}, ValueError, r"seed: expected"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            env.reset(**kwargs)
        assert json.dumps(env.state(), default=str) == before  # a bad reset changes nothing
    # A bad reset leaves the seeded generator alone too: the next unseeded reset is the one it would have been.
    twin = ENV_FACTORIES[name]()
    twin.reset(seed=3)
    assert env.reset()[1] == twin.reset()[1]
    env.reset(seed=np.int64(4), options={"split": "eval"})  # numpy ints are ints
    # PettingZoo's conformance test probes reset(options={"options": 1}) only to see that the keyword exists.
    env.reset(seed=0, options={"options": 1})


def test_registered_with_pettingzoo_make() -> None:
    assert "llm_marl_envs/Writing-v0" in llm_marl_envs.ENV_IDS
    env = pettingzoo.make("parallel", "llm_marl_envs/Writing-v0", similarity="tfidf")
    assert isinstance(env, writing_v0.raw_env)
    env = pettingzoo.make("parallel", "llm_marl_envs/Coding-v0", executor="local", similarity="tfidf")
    assert isinstance(env, coding_v0.raw_env)


def _play_aec(env, actions, seed: int) -> list[tuple]:
    """One AEC episode from ``reset(seed)``; ``actions(agent, turn)`` acts for a live agent. Checks, at every step,
    what PettingZoo's ``api_test`` checks of a play-through (``pettingzoo/test/api_test.py``: ``play_test``) that
    applies to text, and returns what ``last()`` gave each time."""
    env.reset(seed=seed)
    raw = env.unwrapped
    assert not any(env.terminations.values()) and not any(env.truncations.values())
    assert isinstance(env.num_agents, int) and env.num_agents == len(env.agents) > 0
    seen, finished, generated = [], set(), set()
    accumulated: dict[str, float] = dict.fromkeys(env.agents, 0.0)
    selected: dict[int, list[str]] = {}  # turn -> the live agents selected to act in it, in order
    live_at: dict[int, list[str]] = {}  # turn -> the parallel env's live agents when it began
    for agent in env.agent_iter(env.num_agents * (raw.max_turns + 1)):
        generated.add(agent)
        assert agent not in finished, "agents cannot come back"
        observation, reward, terminated, truncated, info = env.last()
        seen.append((agent, observation, reward, terminated, truncated, json.dumps(info, sort_keys=True, default=str)))
        assert isinstance(terminated, bool) and terminated == env.terminations[agent]
        assert isinstance(truncated, bool) and truncated == env.truncations[agent]
        assert isinstance(info, dict) and info == env.infos[agent]
        assert reward == pytest.approx(accumulated[agent]) and isinstance(float(reward), float)  # accumulated
        accumulated[agent] = 0.0
        assert isinstance(observation, str) and env.observation_space(agent).contains(observation)
        assert env.observe(agent) == observation and env.last(observe=False)[0] is None
        if terminated or truncated:
            finished.add(agent)
            action = None  # the dead step: PettingZoo's only action for a finished agent
        else:
            live_at.setdefault(raw.turn, list(raw.agents))
            selected.setdefault(raw.turn, []).append(agent)
            action = actions(agent, raw.turn + 1)
            assert env.action_space(agent).contains(action)
        assert env.step(action) is None  # step() returns nothing
        for name, value in env.rewards.items():
            accumulated[name] = accumulated.get(name, 0.0) + value
        assert env.num_agents == len(env.agents) and set(env.agents) <= set(env.possible_agents)
        assert set(env.rewards) == set(env.terminations) == set(env.truncations) == set(env.infos) == set(env.agents)
    assert not env.agents and finished == generated == set(env.possible_agents)  # nobody skipped, everyone ended
    assert selected == live_at  # each turn every live agent acts once, in the order of env.agents
    return seen


@pytest.mark.parametrize("num_agents", [1, 3])
@pytest.mark.parametrize("name", ENV_NAMES)
def test_the_aec_version_passes_the_checks_of_pettingzoos_api_test_that_apply_to_text(name: str,
                                                                                      num_agents: int) -> None:
    module = writing_v0 if name == "writing" else coding_v0
    keywords = {"similarity": "tfidf", "num_agents": num_agents, "max_turns": 3, "end_quorum": "all",
                **({"executor": "local"} if name == "coding" else {})}
    env = module.env(**keywords)
    with pytest.raises(AssertionError, match="reset"):  # order enforcing
        env.step("x")
    env.reset(seed=0, options={"options": 1})  # api_test's probe of the reset signature
    assert isinstance(env, pettingzoo.AECEnv) and isinstance(env.unwrapped, module.raw_env)
    for agent in env.possible_agents:
        for space in (env.observation_space(agent), env.action_space(agent)):
            assert isinstance(space, gymnasium.spaces.Space)
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
    # Actions drawn from the action space, as api_test plays (nobody ends: everyone is truncated at max_turns).
    for agent in env.possible_agents:
        env.action_space(agent).seed(1)
    _play_aec(env, lambda agent, turn: env.action_space(agent).sample(), seed=0)
    # The first agent finishes at turn 1 and takes its dead steps while the others play on.
    first = env.possible_agents[0]

    def scripted(agent: str, turn: int) -> str:
        return scripted_action(env.unwrapped, agent, turn) + ("<done/>" if agent == first and turn == 1 else "")

    played = _play_aec(env, scripted, seed=3)
    assert played == _play_aec(module.env(**keywords), scripted, seed=3)  # the same seed and actions, the same run
    assert played[0][1] != _play_aec(env, scripted, seed=4)[0][1]  # another seed, another task
    assert env.render() is None
    env.close()


def test_the_aec_version_refuses_a_bad_action_and_stays_usable() -> None:
    env = writing_v0.env(similarity="tfidf", max_turns=2)
    env.reset(seed=0)
    first, second = env.agents
    with pytest.raises(TypeError, match=f"action of agent '{first}': expected str, got int"):
        env.step(5)  # refused at once, not when the turn's last agent acts
    env.step("A short summary of the article. <done/>")
    env.step("A longer summary of the article.")
    assert env.agent_selection == first and env.terminations[first]
    with pytest.raises(ValueError, match=f"agent '{first}' is finished: its only action is None"):
        env.step("more")
    env.step(None)
    assert env.agent_selection == second and not env.terminations[second]
    env.step("The longer summary again, revised. <done/>")
    assert all(env.terminations.values())


def test_spaces_are_stable_and_wide() -> None:
    env = writing_v0.parallel_env(similarity="tfidf", max_action_chars=100)
    agent = env.possible_agents[0]
    assert env.action_space(agent) is env.action_space(agent)
    assert env.observation_space(agent) is env.observation_space(agent)
    assert env.action_space(agent).contains("Déjà vu — 東京 <done/>\n\tx = 1")
    assert not env.action_space(agent).contains("x" * 101)
    obs, _ = env.reset(seed=0)
    assert env.observation_space(agent).contains(obs[agent])


def test_core_import_stays_light() -> None:
    code = (
        "import sys, llm_marl_envs; from llm_marl_envs import writing_v0, coding_v0; "
        "heavy = [m for m in ('torch', 'transformers', 'peft', 'sentence_transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _with_marker(action: str, marker: str) -> str:
    """Put ``marker`` inside the draft part of ``action``: for code, inside the author's function (what follows the
    fence's opening before a function is not the author's part), or at the top of a tester's asserts."""
    if "```python\n" in action:
        lines = action.split("\n")
        heading = next((i for i, line in enumerate(lines) if line.startswith("def ") and line.endswith(":")), None)
        if heading is not None:
            return "\n".join([*lines[: heading + 1], f"    # {marker}", *lines[heading + 1:]])
        return action.replace("```python\n", f"```python\n# {marker}\n", 1)
    return f"{marker} {action}"


@pytest.mark.parametrize("module", [writing_v0, coding_v0], ids=["writing", "coding"])
def test_help_on_parallel_env_shows_the_env_card(module) -> None:
    import pydoc

    card = sys.modules[module.raw_env.__module__].__doc__
    shown = pydoc.render_doc(module.parallel_env, renderer=pydoc.plaintext)
    # The whole card (its spaces, rewards and keyword arguments), not only "(**kwargs)".
    assert "## Observation Space" in shown and "## Rewards" in card
    assert card.strip().splitlines()[-1].strip() in shown
    assert module.raw_env.metadata["name"] in shown


@pytest.mark.parametrize("module", [writing_v0, coding_v0], ids=["writing", "coding"])
def test_parallel_env_takes_a_config_positionally_and_shows_every_keyword(module) -> None:
    import inspect

    from llm_marl_envs.core.config import TeamConfig
    from llm_marl_envs.registry import make_env

    config_type = module.raw_env.__init__.__annotations__["config"]  # "WritingConfig | None", as a string
    config = getattr(sys.modules[module.raw_env.__module__], config_type.split(" |")[0])(team=TeamConfig(3))
    local = {"executor": "local"} if module is coding_v0 else {}
    assert len(module.parallel_env(config, similarity="tfidf", **local).possible_agents) == 3
    name = module.__name__.rsplit(".", 1)[1]
    assert len(make_env(name, config, similarity="tfidf", **local).possible_agents) == 3
    assert len(make_env(name, config=config, num_agents=4, similarity="tfidf", **local).possible_agents) == 4
    for constructor in (module.parallel_env, module.env):
        parameters = inspect.signature(constructor).parameters
        assert list(parameters)[:2] == ["config", "team"] and parameters["config"].default is None
        assert parameters["num_agents"].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters["num_agents"].default == 2 and parameters["num_agents"].annotation is int
        assert {"similarity", "max_turns", "end_quorum", "dataset", "render_mode"} <= set(parameters)
    with pytest.raises(TypeError, match="config: expected"):
        module.parallel_env({"num_agents": 2})


@pytest.mark.parametrize("name", ENV_NAMES)
def test_a_setting_given_twice_must_agree_and_numpy_integers_are_ints(name: str) -> None:
    from llm_marl_envs.core.config import TeamConfig

    with pytest.raises(ValueError, match=r"num_agents=2 conflicts with team\.num_agents=1"):
        ENV_FACTORIES[name](team={"num_agents": 1}, num_agents=2)
    with pytest.raises(ValueError, match=r"num_agents=3 conflicts with team\.num_agents=2"):
        ENV_FACTORIES[name](team=TeamConfig(), num_agents=3)
    with pytest.raises(TypeError, match=r"team: expected TeamConfig, got int \(a dict of its fields works too\)"):
        ENV_FACTORIES[name](team=3)
    assert len(ENV_FACTORIES[name](team={"num_agents": 3}, num_agents=3).possible_agents) == 3  # agreeing is fine
    env = ENV_FACTORIES[name](num_agents=np.int64(3), max_turns=np.int32(2), max_action_chars=np.uint16(500))
    assert len(env.possible_agents) == 3 and env.max_turns == 2 and env.max_action_chars == 500
    limits = env.config.to_dict()["limits"]
    assert type(env.config.team.num_agents) is int and type(limits["max_turns"]) is int
    json.dumps(env.config.to_dict())  # plain Python numbers
    assert len(ENV_FACTORIES[name](team=TeamConfig(num_agents=np.int64(4))).possible_agents) == 4
    with pytest.raises(TypeError, match="num_agents: expected int, got bool"):
        ENV_FACTORIES[name](num_agents=True)


@pytest.mark.parametrize(("module", "agent", "reset", "keywords"), [
    (writing_v0, "concise", {"seed": 0, "options": {"task_id": "news/000"}}, {}),
    (coding_v0, "main", {"options": {"task_id": "LME/0"}},
     {"dataset": "decomposable", "executor": "local", "scheme": "magrpo"}),
], ids=["writing", "coding"])
def test_the_cards_sample_chat_is_the_envs_own(module, agent: str, reset: dict, keywords: dict) -> None:
    from llm_marl_envs.core.observation import render_chat

    card = sys.modules[module.raw_env.__module__].__doc__
    section = card.split("## Sample observation and chat\n", 1)[1].split("\n## ", 1)[0]
    shown = section.split("\n````\n")[1]  # the fenced sample, exactly as the card shows it
    env = module.parallel_env(similarity="tfidf", **keywords)  # the similarity backend never shows in a prompt
    observations, _ = env.reset(**reset)
    assert shown == render_chat(env.chat_messages(agent))
    assert f"--- user ---\n{observations[agent]}\n" in f"{shown}\n"  # the user message is the observation itself
