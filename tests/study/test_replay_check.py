"""``turn_digests`` and ``llm-marl bench replay_check``: two plays of one design, compared turn by turn. Real coding
envs and the real (local) executor; scripted replies stand in for the model, so each test knows where the plays
split and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_marl_benchmarks import replay_check
from llm_marl_benchmarks.study import execution
from llm_marl_envs import rollout
from llm_marl_envs.registry import make_env

CODING = {"dataset": "decomposable", "executor": "local", "similarity": "tfidf", "cache_verdicts": False}
# LME/0: count_vowel_words; visible tests ('Anna ate one apple') == 4, ('the sky is blue') == 0, ('') == 0.
ZERO = "```python\ndef count_vowel_words(sentence: str) -> int:\n    return 0\n```"  # passes 2 of the 3 visible
NONE = "```python\ndef count_vowel_words(sentence):\n    return None\n```"  # passes none
ONE = "```python\ndef count_vowel_words(sentence):\n    return 1\n```"  # passes none, a different program
# Slow on the first visible test only: a verdict under a generous time limit, a timeout under a tight one.
SLOW = ("```python\nimport time\n\ndef count_vowel_words(sentence):\n    if sentence.startswith('Anna'):\n"
        "        time.sleep(1.5)\n    return 0\n```")


def play(script: dict[tuple[str, int], str], **env_kwargs: Any) -> dict[str, Any]:
    """One 3-turn propose_verify episode of LME/0 whose coders write ``script[(agent, turn)]``: its study columns."""
    def policy(requests: list[Any]) -> list[str]:
        return [script[(r.agent, r.turn)] for r in requests]

    env = make_env("coding", num_agents=2, max_turns=3, scheme="propose_verify", **{**CODING, **env_kwargs})
    (episode,) = rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])
    return {"key": "trained/coding/2/LME/0/0", "texts": dict(episode.final_drafts), "turns": episode.turns,
            "end_reason": episode.end_reason, "pass_rate": None, "turn_tests": execution.turn_tests(episode.steps),
            "turn_digests": execution.turn_digests(episode.steps)}


SCRIPT = {("coder_1", 1): NONE, ("coder_2", 1): ONE, ("coder_1", 2): ONE, ("coder_2", 2): NONE,
          ("coder_1", 3): NONE, ("coder_2", 3): ONE}


def test_the_same_replies_replay_and_a_different_reply_is_the_samplers_split():
    """The same script twice replays exactly (every digest matches). Change coder_2's turn-2 reply only: its
    turn-2 prompt is still the same (prompts depend on earlier turns), so the split is the sampler's, at turn 2, by
    coder_2; the turn-3 prompts differ too, but only after it."""
    first, again = play(SCRIPT), play(SCRIPT)
    assert [t["turn"] for t in first["turn_digests"]] == [1, 2, 3]
    assert replay_check.compare_episode(first, again) is None
    drifted = play({**SCRIPT, ("coder_2", 2): ZERO})
    assert drifted["turn_digests"][1]["prompts"] == first["turn_digests"][1]["prompts"]
    assert drifted["turn_digests"][2]["prompts"] != first["turn_digests"][2]["prompts"]
    assert replay_check.compare_episode(first, drifted) == {"cause": "sampler", "turn": 2, "agents": ["coder_2"],
                                                             "timed_out_before": False}


def test_a_test_run_that_times_out_in_one_play_only_is_the_envs_split():
    """The same replies under two time limits: the slow program times out under 0.5 s and not under 10 s, so the
    feedback of turn 1 differs and coder_1's turn-2 prompt with it (coder_2's feedback is on its own candidate). The
    split is the env's, at turn 2, right after a timed-out run: what a loaded machine can do to a replay."""
    script = {**SCRIPT, ("coder_1", 1): SLOW}
    tight, generous = play(script, timeout_s=0.5), play(script, timeout_s=10.0)
    assert tight["turn_tests"][0]["timed_out"] and not generous["turn_tests"][0]["timed_out"]
    assert tight["turn_digests"][0] == generous["turn_digests"][0]
    assert replay_check.compare_episode(tight, generous) == {"cause": "env", "turn": 2, "agents": ["coder_1"],
                                                              "timed_out_before": True}


def test_logs_without_digests_are_compared_by_their_outcomes():
    """Rows written before ``turn_digests``: the first turn whose test counts differ, else final texts and endings;
    the cause cannot be told ("outcome")."""
    first, drifted = play(SCRIPT), play({**SCRIPT, ("coder_2", 2): ZERO})
    old = [{k: v for k, v in row.items() if k != "turn_digests"} for row in (first, drifted)]
    assert replay_check.compare_episode(old[0], old[0]) is None
    split = replay_check.compare_episode(old[0], old[1])
    assert split is not None and split["cause"] == "outcome" and split["turn"] == 2
    texts_only = {**old[0], "texts": {**old[0]["texts"], "coder_1": "changed"}}
    assert replay_check.compare_episode(old[0], texts_only)["turn"] is None


def write_log(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    base = {"condition": "trained", "env": "coding", "team_size": 2, "num_agents": 2, "seed": 0, "quality": 0.0,
            "team_return": 0.0, "success": False}
    (folder / "episodes.jsonl").write_text(
        "".join(json.dumps({**base, **row, "task": row["key"].split("/", 3)[3]}) + "\n" for row in rows))
    return folder


def test_the_benchmark_counts_replays_and_splits_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    first, drifted = play(SCRIPT), play({**SCRIPT, ("coder_2", 2): ZERO})
    other = {**first, "key": "trained/coding/2/LME/1/0"}
    a = write_log(tmp_path / "a", [first, other])
    b = write_log(tmp_path / "b", [drifted, other])
    assert replay_check.main([str(a), str(b), "--json", str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["shared"], result["replayed"], result["split"]) == (2, 1, 1)
    assert result["causes"] == {"env": 0, "sampler": 1, "outcome": 0}
    assert "1 replayed exactly, 1 split" in capsys.readouterr().out
    c = write_log(tmp_path / "c", [{**first, "key": "trained/coding/2/LME/9/0"}])
    with pytest.raises(SystemExit):
        replay_check.main([str(a), str(c)])
    assert "share no episode" in capsys.readouterr().err
