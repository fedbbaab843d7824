"""The prompt-length benchmark's fixed turn-1 drafts: one for every live agent of every coding scheme and size."""

from __future__ import annotations

import pytest

from llm_marl_benchmarks.prompt_tokens import turn_one_actions
from llm_marl_envs.envs.coding.roles import SCHEMES
from llm_marl_envs.registry import make_env


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_agent_of_every_coding_scheme_gets_a_draft_and_the_env_takes_it(scheme: str, size: int) -> None:
    env = make_env("coding", num_agents=size, scheme=scheme, similarity="tfidf", max_turns=4, executor="local")
    try:
        env.reset(seed=0, options={"split": "eval"})
        actions = turn_one_actions(env)
        assert set(actions) == set(env.agents)
        assert all(action.strip() for action in actions.values())
        env.step(actions)
        # Turn 2 carries each agent's own draft or its verdicts, which is what the benchmark measures.
        assert env.agents, "a fixed draft that fails the tests must leave the episode running into turn 2"
        for agent in env.agents:
            assert env.chat_messages(agent)
    finally:
        env.close()
