"""Bad input: clear errors naming the agent, and the env exactly as it was afterwards."""

from __future__ import annotations

import copy
import json

import pytest
from envs_helpers import ENV_FACTORIES, scripted_action

from llm_marl_envs.core.config import LimitsConfig, RewardConfig, TeamConfig
from llm_marl_envs.core.magrpo_episode import OFFICIAL_EPISODE

ENV_NAMES = sorted(ENV_FACTORIES)


def _snapshot(env) -> tuple:
    return copy.deepcopy(env.state()), list(env.agents)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_invalid_joint_actions_raise_and_change_nothing(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=3)
    env.reset(seed=0)
    a, b, c = env.agents
    good = {x: scripted_action(env, x, 1) for x in env.agents}
    before = _snapshot(env)
    cases = [
        ({a: good[a], b: good[b]}, ValueError, rf"missing actions for agents \['{c}'\]"),
        ({**good, "ghost": "hi"}, ValueError, r"unknown agent 'ghost'"),
        ({**good, b: 42}, TypeError, rf"action of agent '{b}': expected str, got int"),
        ({**good, c: None}, TypeError, rf"action of agent '{c}': expected str, got NoneType"),
        ({**good, a: b"bytes"}, TypeError, rf"action of agent '{a}': expected str, got bytes"),
        ([good[a]], TypeError, r"actions: expected a dict"),
    ]
    for actions, error, message in cases:
        with pytest.raises(error, match=message):
            env.step(actions)
        assert _snapshot(env) == before
    env.step(good)  # still healthy
    assert env.state()["turn"] == 1


@pytest.mark.parametrize("name", ENV_NAMES)
def test_over_long_actions_are_truncated_and_flagged(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2, max_action_chars=500)
    env.reset(seed=0)
    a, b = env.agents
    huge = "word " * 100_000
    _, _, _, _, infos = env.step({a: huge, b: scripted_action(env, b, 1)})
    assert infos[a]["action"]["truncated"] and infos[a]["action"]["original_length"] == len(huge)
    assert not infos[b]["action"]["truncated"]
    assert len(env.state()["drafts"][a]) <= 500
    assert infos[a]["reward_components"]["step_invalid_actions"] == 1


@pytest.mark.parametrize("name", ENV_NAMES)
def test_invalid_unicode_is_replaced_and_flagged(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2)
    env.reset(seed=0)
    a, b = env.agents
    # "return ...": code to the coding env (prose alone would be no code, keeping the previous draft)
    obs, _, _, _, infos = env.step({a: "return broken \udc80 text \ud800", b: scripted_action(env, b, 1)})
    assert infos[a]["action"]["invalid_unicode_replaced"]
    assert "\ufffd" in env.state()["drafts"][a]
    for text in obs.values():
        text.encode("utf-8")  # every observation is valid UTF-8


@pytest.mark.parametrize("name", ENV_NAMES)
def test_surrogates_in_an_action_within_the_limit_are_not_truncation(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2, max_action_chars=64)
    env.reset(seed=0)
    a, b = env.agents
    action = "return " + "x" * 53 + "\ud800\udfff\udc80y"  # exactly 64 characters, three of them lone surrogates
    _, _, _, _, infos = env.step({a: action, b: scripted_action(env, b, 1)})
    assert infos[a]["action"]["invalid_unicode_replaced"]
    assert not infos[a]["action"]["truncated"] and infos[a]["action"]["original_length"] == 64
    assert env.state()["drafts"][a] == "return " + "x" * 53 + "\ufffd" * 3 + "y"


@pytest.mark.parametrize("name", ENV_NAMES)
def test_empty_and_malformed_actions_cost_reward_but_never_crash(name: str) -> None:
    env = ENV_FACTORIES[name](num_agents=2)
    env.reset(seed=0)
    a, b = env.agents
    _, rewards, _, _, infos = env.step({a: "", b: "<message>unclosed"})
    assert "empty_action" in infos[a]["action"]["problems"]
    assert "unclosed_message_tag" in infos[b]["action"]["problems"]
    assert infos[a]["reward_components"]["step_invalid_actions"] == 2
    weights = env.reward_weights
    expected = infos[a]["score"] - weights.turn - 2 * weights.invalid_action
    assert rewards[a] == pytest.approx(expected)


def test_constructor_arguments_are_checked() -> None:
    make = ENV_FACTORIES["writing"]
    with pytest.raises(ValueError, match=r"num_agents: expected 1..4, got 5"):
        make(num_agents=5)
    with pytest.raises(TypeError, match=r"num_agents: expected int, got str"):
        make(num_agents="2")
    with pytest.raises(ValueError, match=r"observability: expected one of \('local', 'team'\), got 'global'"):
        make(observability="global")
    with pytest.raises(ValueError, match=r"max_turns: expected >= 1, got 0"):
        make(max_turns=0)
    with pytest.raises(ValueError, match=r"style: expected one of"):
        make(style="poetry")
    with pytest.raises(ValueError, match=r"dataset: expected 'news'"):
        make(dataset="nonexistent")
    with pytest.raises(ValueError, match=r"expected num_agents=2, got 3"):
        make(num_agents=3, reward_mode="magrpo")
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        make().step({})
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'num_agent'; known: \[.*'num_agents'"):
        make(num_agent=2)
    with pytest.raises(TypeError, match=r"team: expected TeamConfig, got RewardConfig"):
        make(team=RewardConfig())
    with pytest.raises(TypeError, match=r"team: unexpected fields \['agents'\]"):
        make(team={"agents": 2})
    with pytest.raises(ValueError, match=r"executor: expected one of \(.*'docker'.*\), got 'dockr'"):
        ENV_FACTORIES["coding"](executor="dockr")
    with pytest.raises(ValueError, match=r"magrpo_episode: applies to reward_mode='magrpo' only"):
        make(magrpo_episode=OFFICIAL_EPISODE["writing"])


@pytest.mark.parametrize("name", ENV_NAMES)
def test_config_objects_and_keywords_build_the_same_env(name: str) -> None:
    from_keywords = ENV_FACTORIES[name](num_agents=3, observability="team", max_turns=2)
    groups = {"team": TeamConfig(num_agents=3), "observation": {"observability": "team"}, "limits": LimitsConfig(2)}
    from_objects = ENV_FACTORIES[name](**groups)
    assert from_keywords.config == from_objects.config
    rebuilt = type(from_keywords)(from_keywords.config)  # a whole config object, as a checkpoint would restore it
    assert rebuilt.config == from_keywords.config and rebuilt.max_turns == 2
    from_keywords.reset(seed=0)
    recorded = from_keywords.state()["config"]
    assert recorded["team"] == {"num_agents": 3} and recorded["observation"]["observability"] == "team"
    json.dumps(recorded)  # artefacts store it as JSON
