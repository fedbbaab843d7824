"""``llm_marl_benchmarks.default_team`` on a scripted policy (no model): the figures it reports per env and
condition."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llm_marl_baselines.policies.scripted import ScriptedPolicy
from llm_marl_benchmarks.default_team import _baseline, _line, main, measure, reply_endings


def test_coding_figures_count_endings_and_the_helper() -> None:
    policy = ScriptedPolicy()  # aux writes `def aux(*args)`, main `def <entry>(...): return None`; done from turn 2
    row = measure("coding", "plain", 2, episodes=3, split="eval", tokens=16, policy=policy, max_turns=4)
    assert row["episodes"] == 3 and row["max_turns"] == 4
    assert sum(row["turns_distribution"].values()) == 3 and row["turns_distribution"]["2"] == 3
    assert row["early_end_share"] == 1.0 and row["end_reasons"] == {"all_done": 3}
    assert row["helper_defined_share"] == 1.0 and row["main_calls_helper_share"] == 0.0
    assert row["helper_load_bearing_share"] == 0.0 and row["mean_pass_rate"] >= 0.0
    # Each of the 2 agents replies once from turn 2 on, with its done tag; nobody echoes the offer.
    assert row["later_replies"] == 6 and row["done_tag_share"] == 1.0 and row["offer_echo_share"] == 0.0
    row["label"] = "plain"
    assert "aux defines aux 100%, main calls aux 0%" in _line(row)
    assert "of 6 replies from turn 2: done tag 100%, offer echoed 0%" in _line(row)


def test_reply_endings_count_done_tags_offer_echoes_and_near_copies() -> None:
    from llm_marl_envs.core.observation import DONE_OFFER

    def step(agent: str, turn: int, action: str) -> SimpleNamespace:
        return SimpleNamespace(agent=agent, turn=turn, action=action)

    draft = "The storm closed the highway and forced hundreds of families out of their homes near the town."
    steps = [step("a", 1, draft), step("b", 1, "Winds pushed the fire east."),
             step("a", 2, draft + " Today."),                      # a near-copy of a's turn-1 reply
             step("b", 2, DONE_OFFER.splitlines()[0] + " the fire"),  # the offer echoed, no tag
             step("a", 3, "Final. <done/>"), step("b", 3, "Rains came at night <done>")]
    assert reply_endings(steps) == {"replies": 4, "done_tag": 2, "offer_echo": 1, "near_copy": 1}
    assert reply_endings([step("a", 1, draft)]) == {"replies": 0, "done_tag": 0, "offer_echo": 0, "near_copy": 0}
    # Under another offer, its first line is what an echo copies.
    other = "Finished? Then end your reply with:\n<done/>"
    echoed = [step("b", 1, "x"), step("b", 2, "Finished? Then end your reply with the fire")]
    assert reply_endings(echoed, other)["offer_echo"] == 1 and reply_endings(echoed)["offer_echo"] == 0


def test_another_offer_to_end_reaches_the_envs_and_a_bad_one_is_refused(capsys) -> None:
    offer = "Finished? Then end your reply with:\n<done/>"
    policy = ScriptedPolicy()
    row = measure("writing", "plain", 2, episodes=1, split="train", tokens=16, policy=policy, max_turns=4,
                  done_offer=offer, first_seed=5)
    assert row["done_offer"] == offer and row["episodes"] == 1 and row["first_seed"] == 5
    default = measure("writing", "plain", 2, episodes=6, split="train", tokens=16, policy=ScriptedPolicy(),
                      max_turns=4)
    assert row["episodes_detail"][0]["task"] == default["episodes_detail"][5]["task"]  # seed 5 either way
    shown = [request.observation for batch in policy.calls for request in batch]
    assert shown and all(text.endswith(offer) for text in shown)  # every agent, every turn, read the new offer
    with pytest.raises(SystemExit):
        main(["--done-offer", "When final, say so.", "--episodes", "1"])
    assert "shows the tag <done/>" in capsys.readouterr().err


def test_the_end_quorum_reaches_the_envs() -> None:
    from llm_marl_baselines.policies.scripted import observed_turn

    def responder(request) -> str:  # a new draft every turn; only `concise` ever finishes, from turn 2
        turn, _ = observed_turn(request.observation)
        done = "<done/>" if request.agent == "concise" and turn >= 2 else ""
        return f"Draft {turn}: the fire moved past the town, and crews worked through the night. {done}"

    kwargs = {"episodes": 2, "split": "train", "tokens": 16, "max_turns": 4}
    half = measure("writing", "plain", 2, policy=ScriptedPolicy(responder=responder), **kwargs)  # the env's default
    every = measure("writing", "plain", 2, policy=ScriptedPolicy(responder=responder), end_quorum="all", **kwargs)
    assert half["end_quorum"] == "half" and every["end_quorum"] == "all"
    assert half["end_reasons"] == {"quorum_done": 2} and half["turns_distribution"]["2"] == 2
    assert every["end_reasons"] == {"max_turns": 2} and half["early_end_share"] == 1.0 > every["early_end_share"]


def test_writing_figures_and_the_single_agent_condition() -> None:
    baseline = _baseline(("single_agent_multiturn", "single_agent"))
    row = measure("writing", baseline, 2, episodes=2, split="eval", tokens=16, policy=ScriptedPolicy(), max_turns=4)
    assert row["num_agents"] == 1 and row["max_turns"] == 4 and "helper_defined_share" not in row
    assert row["mean_turns"] == 2.0 and row["early_end_share"] == 1.0


def test_every_turn_and_episode_prints_a_progress_line() -> None:
    import io

    from llm_marl_benchmarks.progress import EpisodeProgress

    stream = io.StringIO()
    with EpisodeProgress(2, 4, tag="default_team", stream=stream, live=False) as progress:
        row = measure("coding", "plain", 2, episodes=2, split="eval", tokens=16, policy=ScriptedPolicy(),
                      max_turns=4, progress=progress)
    lines = stream.getvalue().splitlines()
    # The scripted team ends both episodes at turn 2: 2 turns each, then one line per episode that ended.
    assert sum("turn" in line and "done" not in line for line in lines) == 4
    assert sum(" done: return " in line for line in lines) == row["episodes"] == 2
    assert all(line.startswith("[default_team] coding plain") and "ETA" in line for line in lines)
    assert "2/2 episodes · 4 turns" in lines[-1]
