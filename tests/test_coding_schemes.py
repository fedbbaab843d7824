"""The coding env's role schemes (``scheme=``): chosen by name, the MAGRPO split kept as it was, the candidate
schemes' selection rule, feedback and counterfactual credit, on hand-made code run by the real (local) executor."""

from __future__ import annotations

import pytest
from envs_helpers import coding_env, default_coding_env

from llm_marl_envs.envs.coding.contribution import coder_contributions, fixer_contribution, verifier_contribution
from llm_marl_envs.envs.coding.env import CANDIDATE_TESTS_LABEL
from llm_marl_envs.envs.coding.program import CandidateResult, normalized_code, select_candidate, verifier_choice
from llm_marl_envs.envs.coding.roles import CODER_STYLES, MAIN_CALL_START, SCHEMES, coding_team
from llm_marl_envs.registry import make_env

TASK = "HumanEval/0"  # has_close_elements(numbers, threshold)
CORRECT = """def has_close_elements(numbers, threshold):
    for i in range(len(numbers)):
        for j in range(i + 1, len(numbers)):
            if abs(numbers[i] - numbers[j]) < threshold:
                return True
    return False
"""
CORRECT_OTHER = """def has_close_elements(numbers, threshold):
    ordered = sorted(numbers)
    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))
"""
WRONG = "def has_close_elements(numbers, threshold):\n    return None\n"


def _fence(code: str) -> str:
    return f"```python\n{code}```"


TEAMS = {
    "magrpo": ["aux", "main", "tester", "reviewer"],
    "magrpo_fallback": ["aux", "main", "tester", "reviewer"],
    "propose_verify": ["coder_1", "coder_2", "tester", "verifier"],
    "author_fixer": ["author", "fixer", "tester", "verifier"],
}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("num_agents", [1, 2, 3, 4])
def test_each_scheme_is_chosen_by_name_through_the_registry(scheme: str, num_agents: int) -> None:
    env = make_env("coding", num_agents=num_agents, scheme=scheme, similarity="tfidf", executor="local")
    expected = ["solo"] if num_agents == 1 else TEAMS[scheme][:num_agents]
    assert env.possible_agents == expected
    assert env.config.scheme == scheme
    env.reset(seed=0, options={"task_id": TASK})
    assert env.state()["config"]["scheme"] == scheme


def test_the_default_scheme_is_propose_verify_and_magrpo_is_kept_exactly() -> None:
    env = default_coding_env(num_agents=4)
    assert env.scheme == "propose_verify" and env.possible_agents == TEAMS["propose_verify"]
    assert [role.name for role in coding_team(4)] == TEAMS["propose_verify"]
    env = default_coding_env(num_agents=2, scheme="magrpo")
    assert env.scheme == "magrpo" and env.possible_agents == ["aux", "main"]
    env.reset(seed=0, options={"task_id": TASK})
    assert env.reply_prefix("main").endswith(MAIN_CALL_START)


def test_magrpo_reward_mode_plays_magrpo_unless_a_scheme_is_named() -> None:
    env = default_coding_env(num_agents=2, reward_mode="magrpo")
    assert env.scheme == "magrpo" and env.possible_agents == ["aux", "main"]
    assert env.config.scheme is None  # resolved, not stored: a config copied with another reward mode resolves anew


def test_the_candidate_schemes_read_the_problem_without_the_helper_hint() -> None:
    # A hint names `aux`, which no candidate scheme has: a coder told of it calls a function nobody defines.
    for scheme, roles in (("magrpo", ["aux", "main"]), ("propose_verify", []), ("author_fixer", [])):
        env = default_coding_env(num_agents=4, scheme=scheme, dataset="decomposable")
        observations, _ = env.reset(options={"task_id": "LME/0"})
        assert sorted(a for a, text in observations.items() if "Helper: aux(word)" in text) == sorted(
            roles + (["tester", "reviewer"] if scheme == "magrpo" else []))


def test_fallback_main_opens_on_its_own_first_line() -> None:
    env = coding_env(num_agents=2, scheme="magrpo_fallback")
    env.reset(seed=0, options={"task_id": TASK})
    assert MAIN_CALL_START not in env.reply_prefix("main")
    assert env.reply_prefix("main").endswith("def has_close_elements(numbers: List[float], threshold: float) -> bool:")
    assert "fallback" in env.chat_messages("main")[1]["content"]


@pytest.mark.parametrize("num_agents", [2, 3, 4])
def test_distinct_coder_briefs_ask_each_coder_for_its_own_way_and_change_nothing_else(num_agents: int) -> None:
    briefed = default_coding_env(num_agents=num_agents, coder_briefs="distinct")
    plain = default_coding_env(num_agents=num_agents)
    assert briefed.possible_agents == plain.possible_agents
    for env in (briefed, plain):
        env.reset(seed=0, options={"task_id": TASK})
    for agent in plain.possible_agents:
        text, plain_text = briefed.chat_messages(agent)[1]["content"], plain.chat_messages(agent)[1]["content"]
        assert briefed.reply_prefix(agent) == plain.reply_prefix(agent)
        if agent in CODER_STYLES:
            # The coder's instruction gains its own style clause, and nothing else moves.
            assert text == plain_text.replace("your own candidate.", f"your own candidate{CODER_STYLES[agent]}.")
            assert text != plain_text
        else:
            assert text == plain_text
    assert CODER_STYLES["coder_1"] != CODER_STYLES["coder_2"]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"coder_briefs": "loops"}, ValueError, r"coder_briefs: expected one of \('same', 'distinct'\)"),
    ({"coder_briefs": None}, TypeError, "coder_briefs: expected one of"),
    ({"coder_briefs": "distinct", "scheme": "author_fixer"}, ValueError, "scheme 'author_fixer' has none"),
    ({"coder_briefs": "distinct", "scheme": "magrpo"}, ValueError, "scheme 'magrpo' has none"),
])
def test_bad_coder_briefs_get_a_clear_error(kwargs: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make_env("coding", num_agents=2, similarity="tfidf", executor="local", **kwargs)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"tie_order": "random"}, ValueError, r"tie_order: expected one of \('fixed', 'shuffled'\)"),
    ({"tie_order": None}, TypeError, "tie_order: expected one of"),
    ({"tie_order": "shuffled", "scheme": "magrpo"}, ValueError, "scheme 'magrpo' has none"),
])
def test_a_bad_tie_order_gets_a_clear_error(kwargs: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make_env("coding", num_agents=2, similarity="tfidf", executor="local", **kwargs)


@pytest.mark.parametrize("scheme", ["propose_verify", "author_fixer"])
def test_a_shuffled_tie_order_sends_either_candidate_by_the_seed_and_nothing_else(scheme: str) -> None:
    """Two candidates the visible tests cannot tell apart (one special-cased to them, one correct): under "fixed"
    the scheme's first candidate is always sent; under "shuffled" each is sent on some seeds, the same seed always
    sends the same one (a snapshot carries it), and the tests still decide wherever they separate the two."""
    first, second = ("coder_1", "coder_2") if scheme == "propose_verify" else ("fixer", "author")
    env = default_coding_env(num_agents=2, scheme=scheme, similarity="tfidf", executor="local")
    env.reset(seed=0, options={"task_id": TASK})
    lookup = "def has_close_elements(numbers, threshold):\n" + "".join(
        f"    if (numbers, threshold) == {_args(test)}:\n        return {_expected(test)}\n"
        for test in env.task["visible_tests"]) + "    return None\n"

    def step(env, seed: int, codes: dict[str, str]) -> dict:
        env.reset(seed=seed, options={"task_id": TASK})
        _, rewards, _, _, infos = env.step({a: _fence(code) for a, code in codes.items()})
        return {"selected": infos[first]["details"]["selected"], "reward": rewards[first]}

    tie = {first: lookup, second: CORRECT}
    assert {step(env, seed, tie)["selected"] for seed in range(12)} == {first}
    shuffled = default_coding_env(num_agents=2, scheme=scheme, similarity="tfidf", executor="local",
                                  tie_order="shuffled")
    played = {seed: step(shuffled, seed, tie) for seed in range(12)}
    assert {p["selected"] for p in played.values()} == {first, second}
    # The correct candidate sent earns the team more than the special-cased one: the order decides a real outcome.
    sent_correct = [p["reward"] for p in played.values() if p["selected"] == second]
    sent_lookup = [p["reward"] for p in played.values() if p["selected"] == first]
    assert min(sent_correct) > max(sent_lookup)
    for seed in (0, 1, 2):
        assert step(shuffled, seed, tie)["selected"] == played[seed]["selected"]
    # A snapshot taken after reset carries the episode's order to every branch restored from it.
    shuffled.reset(seed=5, options={"task_id": TASK})
    snapshot = shuffled.snapshot()
    for _ in range(2):
        shuffled.restore(snapshot)
        _, _, _, _, infos = shuffled.step({a: _fence(code) for a, code in tie.items()})
        assert infos[first]["details"]["selected"] == played[5]["selected"]
    # Where the visible tests separate the two, no order matters.
    assert {step(shuffled, seed, {first: WRONG, second: CORRECT})["selected"] for seed in range(6)} == {second}
    # state() (privileged) names the episode's order; the fixed order's episodes have none to name.
    shuffled.reset(seed=5, options={"task_id": TASK})
    assert sorted(shuffled.state()["tie_order"]) == sorted((first, second))
    assert shuffled.state()["tie_order"][0] == played[5]["selected"]
    env.reset(seed=5, options={"task_id": TASK})
    assert "tie_order" in env.state() and env.state()["tie_order"] is None


@pytest.mark.parametrize(("value", "error"), [("bogus", ValueError), ("", ValueError), (3, TypeError)])
def test_a_bad_scheme_gets_a_clear_error(value: object, error: type) -> None:
    with pytest.raises(error, match=r"scheme: expected one of \('magrpo', 'magrpo_fallback'"):
        make_env("coding", scheme=value, similarity="tfidf", executor="local")


def test_magrpo_reward_mode_needs_the_aux_main_program() -> None:
    with pytest.raises(ValueError, match="expected scheme in"):
        coding_env(num_agents=2, reward_mode="magrpo", scheme="propose_verify")
    assert coding_env(num_agents=2, reward_mode="magrpo", scheme="magrpo_fallback").scheme == "magrpo_fallback"


def test_selection_rule_is_the_documented_order() -> None:
    order = ("coder_1", "coder_2")
    a, b = CandidateResult("coder_1", True, 2, 0), CandidateResult("coder_2", True, 3, 0)
    assert select_candidate([a, b], order) == "coder_2"  # 1. most visible tests
    a, b = CandidateResult("coder_1", True, 3, 1), CandidateResult("coder_2", True, 3, 4)
    assert select_candidate([a, b], order, choice="coder_1") == "coder_2"  # 2. then the tester's asserts
    a, b = CandidateResult("coder_1", True, 3, 4), CandidateResult("coder_2", True, 3, 4)
    assert select_candidate([a, b], order, choice="coder_2") == "coder_2"  # 3. then the verifier's choice
    assert select_candidate([a, b], order) == "coder_1"  # 4. then the fixed order
    assert select_candidate([a, b], ("coder_2", "coder_1")) == "coder_2"
    assert select_candidate([CandidateResult("coder_1", False, 0), CandidateResult("coder_2", False, 0)], order) is None
    assert verifier_choice("Choice: coder_2, since coder_1 fails", order) == "coder_2"
    assert verifier_choice("Choice: the second one", order) is None


def test_credit_over_candidates() -> None:
    order = ("coder_1", "coder_2")
    same = normalized_code(CORRECT)
    assert normalized_code('# mine\n' + CORRECT.replace("):\n", '):\n    """Doc."""\n', 1)) == same
    assert coder_contributions({"coder_1": 1.0, "coder_2": 1.0}, {"coder_1": same, "coder_2": same}, order) == {
        "coder_1": 1.0, "coder_2": 0.0}
    other = normalized_code(CORRECT_OTHER)
    assert coder_contributions({"coder_1": 1.0, "coder_2": 1.0}, {"coder_1": same, "coder_2": other}, order) == {
        "coder_1": 1.0, "coder_2": 1.0}
    assert fixer_contribution(1.0, 0.25, author_visible_clean=False, fixer_wrote=True) == 0.75
    assert fixer_contribution(0.25, 0.25, author_visible_clean=False, fixer_wrote=True) == 0.0
    assert fixer_contribution(1.0, 1.0, author_visible_clean=True, fixer_wrote=False) is None
    assert fixer_contribution(1.0, 1.0, author_visible_clean=True, fixer_wrote=True) == 0.0
    assert verifier_contribution("coder_2", {"coder_1": 0.0, "coder_2": 1.0}) == 0.5
    assert verifier_contribution("coder_1", {"coder_1": 0.0, "coder_2": 1.0}) == 0.0
    assert verifier_contribution(None, {"coder_1": 0.0, "coder_2": 1.0}) == 0.0
    assert verifier_contribution("coder_2", {"coder_1": 1.0, "coder_2": 1.0}) is None
    assert verifier_contribution("coder_2", {"coder_2": 1.0}) is None


def test_propose_verify_picks_the_passing_candidate_and_shares_results_not_code() -> None:
    env = coding_env(num_agents=2, scheme="propose_verify")
    env.reset(seed=0, options={"task_id": TASK})
    observations, _, _, _, infos = env.step({"coder_1": _fence(WRONG), "coder_2": _fence(CORRECT)})
    details = infos["coder_1"]["details"]
    assert details["selected"] == "coder_2" and env.end_reason == "solved"
    assert details["tests"]["held_out_passed"] == details["tests"]["held_out_total"] > 0
    assert infos["coder_1"]["reward_components"]["contributions"] == {"coder_1": 0.0, "coder_2": 1.0}
    assert env.state()["assessment"]["program"].endswith(CORRECT)
    # coder_1 learns coder_2's results and which candidate is the team's, never coder_2's code.
    assert "coder_2's candidate: " in observations["coder_1"] and "visible tests pass." in observations["coder_1"]
    assert "The team's program is coder_2's candidate." in observations["coder_1"]
    assert "abs(numbers[i] - numbers[j])" not in observations["coder_1"]
    # Its own candidate's failing calls with what they gave: its own code's values, as solo sees its own.
    assert f"{CANDIDATE_TESTS_LABEL}\n- has_close_elements(" in observations["coder_1"]
    assert "  got: None" in observations["coder_1"]
    assert "first failing: assert" in observations["coder_2"]  # coder_1's first failing visible call


def test_identical_candidates_earn_less_than_two_different_correct_ones() -> None:
    returns = {}
    for name, second in (("identical", CORRECT), ("different", CORRECT_OTHER)):
        env = coding_env(num_agents=2, scheme="propose_verify")
        env.reset(seed=0, options={"task_id": TASK})
        _, rewards, *_ = env.step({"coder_1": _fence(CORRECT), "coder_2": _fence(second)})
        returns[name] = rewards["coder_1"]
    assert returns["identical"] < returns["different"]


PADDED = '''def has_close_elements(numbers, threshold):
    """Check if in given list of numbers, are any two numbers closer to each other than
    given threshold. The docstring re-typed, and comments, cost words and change no outcome.
    """
    # compare every pair of numbers once
    for i in range(len(numbers)):
        # the second index starts after the first
        for j in range(i + 1, len(numbers)):
            if abs(numbers[i] - numbers[j]) < threshold:  # close enough
                return True
    return False
'''


def _first_step(weights: dict[str, float] | None, first: str, second: str) -> tuple[float, dict]:
    """A team of two coders' first step on TASK under ``weights``: the joint reward and its components."""
    env = coding_env(num_agents=2, scheme="propose_verify", reward_weights=weights)
    env.reset(seed=0, options={"task_id": TASK})
    _, rewards, _, _, infos = env.step({"coder_1": first, "coder_2": second})
    return rewards["coder_1"], infos["coder_1"]["reward_components"]


def test_pricing_the_longest_reply_pays_for_brevity_never_for_a_wrong_or_empty_program() -> None:
    """``reward_weights={"reply_token": w}`` (the turn's longest reply, whitespace tokens): the same correct program
    without its padding earns more; a short wrong program and an empty reply earn less than the padded correct one;
    at the default (0) padding costs nothing. Both coders' replies count through the longer one."""
    priced = {"reply_token": 0.002}
    plain, components = _first_step(priced, _fence(CORRECT), _fence(CORRECT_OTHER))
    longest = max(len(_fence(CORRECT).split()), len(_fence(CORRECT_OTHER).split()))
    assert components["step_longest_reply_tokens"] == components["longest_reply_tokens"] == longest
    padded, _ = _first_step(priced, _fence(PADDED), _fence(CORRECT_OTHER))
    wrong, _ = _first_step(priced, _fence(WRONG), _fence(WRONG))
    empty, _ = _first_step(priced, "", "")
    assert plain > padded > max(wrong, empty)
    assert padded - plain == pytest.approx(-0.002 * (len(_fence(PADDED).split()) - longest))
    unpriced_plain, _ = _first_step(None, _fence(CORRECT), _fence(CORRECT_OTHER))
    unpriced_padded, _ = _first_step(None, _fence(PADDED), _fence(CORRECT_OTHER))
    assert unpriced_plain == pytest.approx(unpriced_padded)


RAMBLE = ("\n\nThis function checks every pair of numbers and returns True when two are closer than the threshold."
          "\n\n```python\nprint(has_close_elements([1.0, 2.0], 0.5))\n```\n\nTest your code with more inputs.")


def test_pricing_discarded_text_taxes_what_follows_the_program_never_the_program() -> None:
    """``reward_weights={"discarded_token": w}`` prices the words of each reply that the env keeps as neither draft,
    message nor marker. A correct program followed by prose and a second block (what SmolLM2 coders write) earns
    less than the same program alone, by exactly ``w`` a discarded word; the surplus moved into a message is cheaper
    but still loses to stopping; a longer program is not taxed, so shortening the program (or writing nothing) is
    never how the charge is avoided: the rambling correct reply still beats a wrong or empty one."""
    priced = {"discarded_token": 0.005}
    clean, components = _first_step(priced, _fence(CORRECT), _fence(CORRECT_OTHER))
    assert components["step_discarded_tokens"] == components["discarded_tokens"] == 0
    finished, components = _first_step(priced, _fence(CORRECT) + "\n<done/>", _fence(CORRECT_OTHER) + "\n\n<done/>")
    assert components["step_discarded_tokens"] == 0 and finished == pytest.approx(clean)  # the marker is no surplus
    rambling, components = _first_step(priced, _fence(CORRECT) + RAMBLE, _fence(CORRECT_OTHER))
    discarded = components["step_discarded_tokens"]
    assert discarded == sum(not word.startswith("```") for word in RAMBLE.split())  # its fences are packaging
    assert rambling - clean == pytest.approx(-0.005 * discarded)
    messaged, components = _first_step(priced, _fence(CORRECT) + f"\n<message>{RAMBLE}</message>",
                                       _fence(CORRECT_OTHER))
    assert components["step_discarded_tokens"] == 0 and components["step_message_tokens"] > 0
    assert clean > messaged > rambling
    # The program's own length is free: a longer correct program with a comment line earns what the short one does.
    commented = CORRECT.replace("    return False\n", "    # no two numbers were close enough\n    return False\n")
    longer, components = _first_step(priced, _fence(commented), _fence(CORRECT_OTHER))
    assert components["step_discarded_tokens"] == 0 and longer == pytest.approx(clean)
    wrong, _ = _first_step(priced, _fence(WRONG), _fence(WRONG))
    empty, _ = _first_step(priced, "", "")
    assert rambling > max(wrong, empty)
    unpriced_clean, _ = _first_step(None, _fence(CORRECT), _fence(CORRECT_OTHER))
    unpriced_rambling, components = _first_step(None, _fence(CORRECT) + RAMBLE, _fence(CORRECT_OTHER))
    assert unpriced_clean == pytest.approx(unpriced_rambling) and components["discarded_tokens"] == discarded


def test_tester_asserts_break_a_visible_tie_and_the_verifier_the_rest() -> None:
    # A candidate special-cased to the visible tests ties the correct one on them; the tester's new asserts do not.
    env = coding_env(num_agents=3, scheme="propose_verify")
    env.reset(seed=0, options={"task_id": TASK})
    visible = env.task["visible_tests"]
    lookup = "def has_close_elements(numbers, threshold):\n" + "".join(
        f"    if (numbers, threshold) == {_args(test)}:\n        return {_expected(test)}\n" for test in visible
    ) + "    return None\n"
    tester = "assert has_close_elements([1.0, 1.05], 0.1) == True\nassert has_close_elements([1.0, 3.0], 0.5) == False"
    _, _, _, _, infos = env.step({"coder_1": _fence(lookup), "coder_2": _fence(CORRECT), "tester": _fence(tester)})
    details = infos["coder_1"]["details"]
    assert details["candidates"]["coder_1"]["visible_passed"] == details["candidates"]["coder_2"]["visible_passed"]
    assert details["selected"] == "coder_2"
    env = coding_env(num_agents=4, scheme="propose_verify")
    env.reset(seed=0, options={"task_id": TASK})
    actions = {"coder_1": _fence(lookup), "coder_2": _fence(CORRECT), "tester": "<done/>"}
    _, _, _, _, infos = env.step({**actions, "verifier": "Choice: coder_2"})
    assert infos["coder_1"]["details"]["selected"] == "coder_2"
    assert infos["coder_1"]["reward_components"]["contributions"]["verifier"] == 0.5


def _args(test: str) -> str:
    call = test.split("has_close_elements", 1)[1].rsplit("==", 1)[0].strip()
    return f"({call[1:-1]})"


def _expected(test: str) -> str:
    return test.rsplit("==", 1)[1].strip()


def test_the_fixer_reads_the_authors_code_and_is_paid_for_the_repair() -> None:
    env = coding_env(num_agents=2, scheme="author_fixer")
    env.reset(seed=0, options={"task_id": TASK})
    observations, *_ = env.step({"author": _fence(WRONG), "fixer": '<message to="author">Send it.</message>'})
    assert "author's code:\n```python\n" + WRONG in observations["fixer"]
    assert "fixer's candidate: none that runs yet." in observations["author"]
    _, _, _, _, infos = env.step({"author": _fence(WRONG), "fixer": _fence(CORRECT)})
    contributions = infos["fixer"]["reward_components"]["contributions"]
    assert infos["fixer"]["details"]["selected"] == "fixer" and env.end_reason == "solved"
    assert contributions["fixer"] > 0.5 and contributions["author"] < contributions["fixer"]


def test_the_study_passes_a_scheme_to_the_coding_env() -> None:
    from llm_marl_benchmarks.study.cli import build_parser, design_from_args

    argv = ["--preset", "smoke", "--envs", "coding", "--env-option", "coding.scheme=propose_verify",
            "coding.max_action_chars=4000"]
    design, _ = design_from_args(build_parser().parse_args(argv))
    for condition in design.conditions:
        kwargs = design.env_kwargs_for("coding", condition, 2)
        assert kwargs["scheme"] == "propose_verify" and kwargs["max_action_chars"] == 4000
    env = make_env("coding", **{**design.env_kwargs_for("coding", "untrained", 2), "executor": "local"})
    assert env.possible_agents == ["coder_1", "coder_2"]
    for bad in ("scheme=propose_verify", "chess.scheme=x", "coding.=x"):
        with pytest.raises(ValueError, match="--env-option"):
            design_from_args(build_parser().parse_args(["--env-option", bad]))


@pytest.mark.parametrize("scheme", ["magrpo_fallback", "propose_verify", "author_fixer"])
@pytest.mark.parametrize("num_agents", [2, 4])
def test_every_scheme_conforms_to_pettingzoo_and_copies_exactly(scheme: str, num_agents: int) -> None:
    import copy
    import pickle

    from pettingzoo.test import parallel_api_test

    parallel_api_test(coding_env(num_agents=num_agents, scheme=scheme), num_cycles=30)
    env = coding_env(num_agents=num_agents, scheme=scheme)
    env.reset(seed=3)
    for clone in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert clone.scheme == scheme and clone.possible_agents == env.possible_agents
        assert clone.state() == env.state()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_code_roles_reply_ends_where_its_block_closes_and_the_cut_keeps_the_draft(scheme: str) -> None:
    """``suggested_reply_end``: every role that answers with a code block ends with the block (the pattern a policy
    stops at under ``reply_ends``); the reviewer and verifier, who write no code, have none, nor has a writer. A reply
    cut at the first match, its given start included, leaves the env the draft, feedback and reward the whole reply
    does, and no discarded words: what a policy stops writing there is what the env throws away, but for a message
    or ``<done/>`` written after the block."""
    import re

    from llm_marl_envs.registry import make_env as make

    env = coding_env(num_agents=4, scheme=scheme)
    ends = {agent: env.suggested_reply_end(agent) for agent in env.possible_agents}
    assert {agent for agent, end in ends.items() if end is None} == ({"reviewer"} if scheme.startswith("magrpo")
                                                                      else {"verifier"})
    assert make("writing", num_agents=2, similarity="tfidf").suggested_reply_end("concise") is None
    with pytest.raises(ValueError, match="agent"):
        env.suggested_reply_end("nobody")
    end = re.compile(ends[env.possible_agents[0]])
    assert end.search("```python\ndef f():\n    return 1\n") is None  # an open block has not ended
    assert end.search("```python\ndef f():\n    return 1\n```\nmore").group().endswith("return 1\n```")

    pair = coding_env(num_agents=2, scheme="propose_verify", reward_weights={"discarded_token": 0.005})
    pair.reset(seed=0, options={"task_id": TASK})
    prefix = pair.reply_prefix("coder_1")
    whole = {"coder_1": prefix + CORRECT.split(":", 1)[1] + "```" + RAMBLE,
             "coder_2": prefix + "\n    return None\n```\nIt returns None.\n<message>try again</message>"}
    cut = {}
    for agent, reply in whole.items():
        match = re.compile(pair.suggested_reply_end(agent)).search(reply)
        assert match is not None and match.end() < len(reply)
        cut[agent] = reply[:match.end()]
    outcomes = []
    for replies in (whole, cut):
        env = coding_env(num_agents=2, scheme="propose_verify", reward_weights={"discarded_token": 0.005})
        env.reset(seed=0, options={"task_id": TASK})
        observations, rewards, _, _, infos = env.step(replies)
        outcomes.append((env.state()["drafts"], infos["coder_1"]["quality_terms"], rewards, observations))
    (drafts, quality, rewards, observations), (cut_drafts, cut_quality, cut_rewards, cut_observations) = outcomes
    assert cut_drafts == drafts and cut_quality == quality
    # What stopping there costs: a message written after the block goes with the tail (the docstring says so).
    assert "try again" in observations["coder_1"] and "try again" not in cut_observations["coder_1"]
    assert cut_rewards["coder_1"] > rewards["coder_1"]  # the whole replies' discarded words were priced
