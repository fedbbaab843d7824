"""Every degenerate strategy of the integrity library scores strictly below honest teamwork, by a margin, at every
team size and under both similarity backends, with the envs' default settings (``benchmarks/reward_integrity.py``
prints the full table; these tests play a few tasks of it)."""

from __future__ import annotations

import pytest

from benchmarks.reward_integrity import HONEST_REFERENCE, MARGIN, evaluate, violations

TASKS = 3


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
def test_writing_rewards_only_honest_work(similarity: str) -> None:
    rows = evaluate("writing", sizes=(1, 2, 3, 4), backends=(similarity,), tasks=TASKS)
    assert {r.num_agents for r in rows if r.strategy == HONEST_REFERENCE} == {1, 2, 3, 4}
    assert len([r for r in rows if not r.honest]) >= 60  # every size plays the degenerate library
    assert violations(rows, MARGIN) == []


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
def test_coding_rewards_only_honest_work(similarity: str) -> None:
    rows = evaluate("coding", sizes=(1, 2, 3, 4), backends=(similarity,), tasks=TASKS)
    assert {r.num_agents for r in rows if r.strategy == HONEST_REFERENCE} == {1, 2, 3, 4}
    assert len([r for r in rows if not r.honest]) >= 60
    assert violations(rows, MARGIN) == []


def test_the_check_can_fail() -> None:
    """Scored under the old resemblance-based consistency, duplicated programs would beat honest work: the suite
    must see that (so a passing run means something)."""
    rows = evaluate("coding", sizes=(2,), backends=("tfidf",), tasks=1, strategies=("honest", "same_full_program"))
    same = next(r for r in rows if r.strategy == "same_full_program")
    assert same.gap_to_honest < -MARGIN  # today it loses...
    shifted = [
        type(same)(
            **{**same.__dict__, "mean_return": same.mean_return - same.gap_to_honest + 0.01, "gap_to_honest": 0.01}
        )
    ]
    assert violations(shifted, MARGIN) == shifted  # ...and a strategy that gained would be reported
