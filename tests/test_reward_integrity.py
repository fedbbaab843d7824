"""Every degenerate strategy of the integrity library scores strictly below honest teamwork, by a margin, at every
team size and under both similarity backends, with the envs' default settings (``benchmarks/reward_integrity.py``
prints the full table; these tests play a few tasks of it)."""

from __future__ import annotations

import pytest

from llm_marl_benchmarks.reward_integrity import HONEST_REFERENCE, MARGIN, evaluate, violations

TASKS = 3


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
def test_writing_rewards_only_honest_work(similarity: str) -> None:
    rows = evaluate("writing", sizes=(1, 2, 3, 4), backends=(similarity,), tasks=TASKS)
    assert {r.num_agents for r in rows if r.strategy == HONEST_REFERENCE} == {1, 2, 3, 4}
    assert len([r for r in rows if not r.honest]) >= 60  # every size plays the degenerate library
    assert violations(rows, MARGIN) == []


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
def test_coding_rewards_only_honest_work(similarity: str) -> None:
    rows = evaluate("coding", sizes=(1, 2, 3, 4), backends=(similarity,), tasks=TASKS, scheme="magrpo")
    assert {r.num_agents for r in rows if r.strategy == HONEST_REFERENCE} == {1, 2, 3, 4}
    assert len([r for r in rows if not r.honest]) >= 60
    assert violations(rows, MARGIN) == []


def test_the_check_can_fail() -> None:
    """Scored under the old resemblance-based consistency, duplicated programs would beat honest work: the suite
    must see that (so a passing run means something)."""
    rows = evaluate("coding", sizes=(2,), backends=("tfidf",), tasks=1, strategies=("honest", "same_full_program"),
                    scheme="magrpo")
    same = next(r for r in rows if r.strategy == "same_full_program")
    assert same.gap_to_honest < -MARGIN  # today it loses...
    shifted = [
        type(same)(
            **{**same.__dict__, "mean_return": same.mean_return - same.gap_to_honest + 0.01, "gap_to_honest": 0.01}
        )
    ]
    assert violations(shifted, MARGIN) == shifted  # ...and a strategy that gained would be reported


def test_special_casing_the_visible_tests_ends_at_turn_one_and_loses() -> None:
    """The env ends a coding episode once every visible test passes ("solved"): a lookup table of the visible
    answers gets there at turn 1 without a <done/>, and the held-out tests make it lose."""
    from llm_marl_benchmarks.integrity.coding_strategies import CODING_STRATEGIES, HONEST_TASK_IDS
    from llm_marl_benchmarks.reward_integrity import make_env, play

    env = make_env("coding", 2, "tfidf", "local", scheme="magrpo")
    by_name = {s.name: s for s in CODING_STRATEGIES}
    task_id = HONEST_TASK_IDS()[0]
    cheat, _ = play(env, by_name["special_case_visible"], task_id)
    state = env.state()
    tests = env.last_assessment.details["tests"]
    assert state["end_reason"] == "solved" and state["turn"] == 1
    assert tests["visible_passed"] == tests["visible_total"] >= 1 and tests["held_out_passed"] < tests["held_out_total"]
    honest, _ = play(env, by_name["honest"], task_id)
    assert env.state()["turn"] == 1 and cheat < honest - MARGIN


@pytest.mark.parametrize(("env_name", "other_quorum", "scheme", "degenerate"), [
    ("writing", "all", None, 45), ("coding", "half", "magrpo", 45), ("coding", "all", "propose_verify", 18)])
def test_the_other_ending_opens_no_exploit(env_name: str, other_quorum: str, scheme: str | None,
                                           degenerate: int) -> None:
    """The other tests play each env's default ending (writing and coding's ``propose_verify``: half the team's
    ``<done/>`` ends the episode from turn 2; coding's other schemes: everyone's). Under the other one every
    degenerate strategy still loses: a finished agent that can end its teammates' work sooner must not gain from it,
    nor one that cannot from playing on."""
    rows = evaluate(env_name, sizes=(2, 3, 4), backends=("tfidf",), tasks=TASKS, executor="local",
                    end_quorum=other_quorum, scheme=scheme)
    assert len([r for r in rows if not r.honest]) >= degenerate
    assert violations(rows, MARGIN) == []


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
@pytest.mark.parametrize("scheme", ["propose_verify", "author_fixer"])
def test_candidate_schemes_reward_only_honest_work(scheme: str, similarity: str) -> None:
    """Per scheme, its own library (identical candidates, special-cased candidates, empty or copied tester and
    verifier parts, a fixer that resubmits unchanged...): every degenerate strategy strictly below honest work."""
    rows = evaluate("coding", sizes=(2, 3, 4), backends=(similarity,), tasks=TASKS, executor="local", scheme=scheme)
    assert {r.num_agents for r in rows if r.strategy == HONEST_REFERENCE} == {2, 3, 4}
    assert len([r for r in rows if not r.honest]) >= 18  # every size plays the scheme's degenerate library
    assert violations(rows, MARGIN) == []


def test_magrpo_fallback_rewards_only_honest_work() -> None:
    rows = evaluate("coding", sizes=(2, 3, 4), backends=("tfidf",), tasks=TASKS, executor="local",
                    scheme="magrpo_fallback")
    assert len([r for r in rows if not r.honest]) >= 60
    assert violations(rows, MARGIN) == []


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
@pytest.mark.parametrize("scheme", ["propose_verify", "author_fixer"])
def test_verifier_and_fixer_work_beats_an_empty_copied_or_unchanged_part(scheme: str, similarity: str) -> None:
    """In the situation where the role matters (the tests leave a tie for the verifier; the author's code fails for
    the fixer), its honest part beats every degenerate one strictly, everyone else playing the same."""
    from llm_marl_benchmarks.integrity.coding_strategies import FIXER_PAIRS, VERIFIER_PAIRS

    pairs = [(VERIFIER_PAIRS[scheme], (4,))]
    if scheme in FIXER_PAIRS:
        pairs.append((FIXER_PAIRS[scheme], (2, 3, 4)))
    for (honest, degenerate), sizes in pairs:
        rows = evaluate("coding", sizes=sizes, backends=(similarity,), tasks=TASKS, executor="local", scheme=scheme,
                        strategies=(HONEST_REFERENCE, honest, *degenerate))
        for size in sizes:
            by_name = {r.strategy: r.mean_return for r in rows if r.num_agents == size}
            assert set(by_name) >= {honest, *degenerate}, (size, by_name)
            assert all(by_name[name] < by_name[honest] - MARGIN for name in degenerate), (size, by_name)


PRICED_REPLIES = {"reply_token": 0.002, "discarded_token": 0.005}
"""coding-2-trim's reward weights (docs/results/coding-propose-verify/2-trim/recipe.yaml)."""


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
@pytest.mark.parametrize("scheme", ["propose_verify", "author_fixer"])
def test_a_recipe_that_prices_replies_opens_no_exploit(scheme: str, similarity: str) -> None:
    """Under the weights a recipe that prices replies trains on, an empty, copied or special-cased part saves tokens
    and must still lose to honest work, as it does under the defaults."""
    from llm_marl_benchmarks.reward_integrity import make_env

    env = make_env("coding", 2, similarity, "local", scheme=scheme, reward_weights=PRICED_REPLIES)
    assert (env.reward_weights.reply_token, env.reward_weights.discarded_token) == (0.002, 0.005)
    rows = evaluate("coding", sizes=(2, 3, 4), backends=(similarity,), tasks=TASKS, executor="local", scheme=scheme,
                    reward_weights=PRICED_REPLIES)
    assert len([r for r in rows if not r.honest]) >= 18
    assert violations(rows, MARGIN) == []


@pytest.mark.parametrize("bad", ["bogus=1", "discarded_token=x", "discarded_token", "turn=-1"])
def test_a_bad_reward_weight_is_refused_with_its_reason(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from llm_marl_benchmarks.reward_integrity import main

    with pytest.raises(SystemExit) as stop:
        main(["--env", "coding", "--reward-weight", bad])
    assert stop.value.code == 2 and f"--reward-weight {bad!r}" in capsys.readouterr().err


@pytest.mark.parametrize("similarity", ["minilm", "tfidf"])
@pytest.mark.parametrize("scheme", ["propose_verify", "author_fixer"])
def test_a_shuffled_tie_order_opens_no_exploit(scheme: str, similarity: str) -> None:
    """Under ``tie_order="shuffled"`` each task is played at seeds that break ties both ways, so a candidate that is
    only sent at a tie (a copy, a special-cased one) is sent on some episodes: every degenerate strategy still loses
    to honest work, 2-4 agents."""
    rows = evaluate("coding", sizes=(2, 3, 4), backends=(similarity,), tasks=TASKS, executor="local", scheme=scheme,
                    tie_order="shuffled")
    honest = [r for r in rows if r.strategy == HONEST_REFERENCE]
    assert {r.num_agents for r in honest} == {2, 3, 4} and {len(r.returns) for r in honest} == {2 * TASKS}
    assert len([r for r in rows if not r.honest]) >= 18
    assert violations(rows, MARGIN) == []
    # The other order was really played: a verifier that leaves the tie to the order is sent the right candidate
    # half the time, so it loses less than under the fixed order (which always sends the wrong one) -- and still loses.
    fixed = evaluate("coding", sizes=(4,), backends=(similarity,), tasks=TASKS, executor="local", scheme=scheme,
                     strategies=(HONEST_REFERENCE, "verifier_empty_on_tie"))
    gap = {r.strategy: r.gap_to_honest for r in fixed}["verifier_empty_on_tie"]
    shuffled_gap = next(r.gap_to_honest for r in rows if r.num_agents == 4 and r.strategy == "verifier_empty_on_tie")
    assert gap < shuffled_gap < -MARGIN


def test_the_seeds_cover_every_tie_order() -> None:
    from llm_marl_benchmarks.integrity.coding_strategies import HONEST_TASK_IDS
    from llm_marl_benchmarks.integrity.writing_strategies import HONEST_TASK_IDS as WRITING_TASK_IDS
    from llm_marl_benchmarks.reward_integrity import make_env, seeds_covering_tie_orders

    task_id = HONEST_TASK_IDS()[0]
    assert seeds_covering_tie_orders(make_env("coding", 2, "tfidf", "local", scheme="propose_verify"), task_id) == (0,)
    writing_task = WRITING_TASK_IDS("tldr")[0]
    assert seeds_covering_tie_orders(make_env("writing", 2, "tfidf", "local"), writing_task) == (0,)  # draws none
    env = make_env("coding", 3, "tfidf", "local", scheme="propose_verify", tie_order="shuffled")
    seeds = seeds_covering_tie_orders(env, task_id)
    orders = set()
    for seed in seeds:
        env.reset(seed=seed, options={"task_id": task_id})
        orders.add(tuple(env.state()["tie_order"]))
    assert orders == {("coder_1", "coder_2"), ("coder_2", "coder_1")}
    with pytest.raises(ValueError, match="tie_order is a coding env option"):
        make_env("writing", 2, "tfidf", "local", tie_order="shuffled")


def test_a_tie_order_for_writing_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_marl_benchmarks.reward_integrity import main

    with pytest.raises(SystemExit) as stop:
        main(["--env", "writing", "--tie-order", "shuffled"])
    assert stop.value.code == 2 and "writing has none" in capsys.readouterr().err
