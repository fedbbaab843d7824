"""``llm_marl_benchmarks.default_team`` on a scripted policy (no model): the figures it reports per env and
condition."""

from __future__ import annotations

from llm_marl_baselines.policies.scripted import ScriptedPolicy
from llm_marl_benchmarks.default_team import _baseline, _line, measure


def test_coding_figures_count_endings_and_the_helper() -> None:
    policy = ScriptedPolicy()  # aux writes `def aux(*args)`, main `def <entry>(...): return None`; done from turn 2
    row = measure("coding", "plain", 2, episodes=3, split="eval", tokens=16, policy=policy, max_turns=4)
    assert row["episodes"] == 3 and row["max_turns"] == 4
    assert sum(row["turns_distribution"].values()) == 3 and row["turns_distribution"]["2"] == 3
    assert row["early_end_share"] == 1.0 and row["end_reasons"] == {"all_done": 3}
    assert row["helper_defined_share"] == 1.0 and row["main_calls_helper_share"] == 0.0
    assert row["helper_load_bearing_share"] == 0.0 and row["mean_pass_rate"] >= 0.0
    row["label"] = "plain"
    assert "aux defines aux 100%, main calls aux 0%" in _line(row)


def test_writing_figures_and_the_single_agent_condition() -> None:
    baseline = _baseline(("single_agent_multiturn", "single_agent"))
    row = measure("writing", baseline, 2, episodes=2, split="eval", tokens=16, policy=ScriptedPolicy(), max_turns=4)
    assert row["num_agents"] == 1 and row["max_turns"] == 4 and "helper_defined_share" not in row
    assert row["mean_turns"] == 2.0 and row["early_end_share"] == 1.0
