"""Copies of an env mid-episode (deepcopy, pickle, snapshot/restore, worker processes) continue exactly like it."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from typing import Any

import pytest
from envs_helpers import ENV_FACTORIES, scripted_action

from llm_marl_envs.core.base_env import EnvSnapshot

ENV_NAMES = sorted(ENV_FACTORIES)


def _turn(env: Any, turn: int) -> tuple:
    return env.step({agent: scripted_action(env, agent, turn) for agent in env.agents})


def _started(name: str, num_agents: int, turns: int) -> Any:
    env = ENV_FACTORIES[name](num_agents=num_agents)
    env.reset(seed=num_agents)
    for turn in range(1, turns + 1):
        _turn(env, turn)
    return env


@pytest.mark.parametrize("name", ENV_NAMES)
@pytest.mark.parametrize("num_agents", [1, 2, 3, 4])
@pytest.mark.parametrize("turns_before", [0, 1, 2])
def test_copies_continue_like_the_original(name: str, num_agents: int, turns_before: int) -> None:
    env = _started(name, num_agents, turns_before)
    copies = {"deepcopy": copy.deepcopy(env), "pickle": pickle.loads(pickle.dumps(env))}
    snapshot = env.snapshot()
    if turns_before:
        for how, clone in copies.items():
            assert clone is not env and clone.state() == env.state(), how
    expected = _turn(env, turns_before + 1)
    for how, clone in copies.items():
        assert _turn(clone, turns_before + 1) == expected, how
        assert clone.state() == env.state(), how
    # The original moved on; restoring the snapshot twice replays the same step twice (a group's G branches).
    for _ in range(2):
        env.restore(snapshot)
        assert _turn(env, turns_before + 1) == expected


def test_snapshot_is_independent_of_later_steps_and_checked_on_restore() -> None:
    writing = _started("writing", 2, 1)
    snapshot = writing.snapshot()
    drafts = dict(snapshot.state["drafts"])
    _turn(writing, 2)
    assert snapshot.state["drafts"] == drafts and writing.state()["drafts"] != drafts
    coding = _started("coding", 2, 0)
    with pytest.raises(ValueError, match="snapshot of a WritingEnv cannot restore a CodingEnv"):
        coding.restore(snapshot)
    with pytest.raises(TypeError, match="expected EnvSnapshot"):
        coding.restore(snapshot.state)  # type: ignore[arg-type]
    assert isinstance(snapshot, EnvSnapshot)


def _step_in_worker(pickled_env: bytes) -> tuple:
    env = pickle.loads(pickled_env)
    return _turn(env, 2)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_envs_step_in_a_pool_of_worker_processes(name: str) -> None:
    assert ENV_FACTORIES[name]().metadata["is_parallelizable"]
    envs = [_started(name, size, 1) for size in (2, 3)]
    blobs = [pickle.dumps(env) for env in envs]
    # spawn: a fresh interpreter that shares nothing with this one, so only what was pickled can arrive there
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_step_in_worker, blobs)
    assert results == [_turn(env, 2) for env in envs]


def test_an_env_on_an_executor_object_says_it_cannot_go_to_a_worker_process() -> None:
    from llm_marl_envs.sandbox import make_executor

    with make_executor("local") as executor:
        env = ENV_FACTORIES["coding"](executor=executor)
        assert env.metadata["is_parallelizable"] is False
        assert type(env).metadata["is_parallelizable"] is True  # envs built from a backend name still can
