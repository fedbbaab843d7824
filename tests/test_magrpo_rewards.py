"""MAGRPO's level-gated rewards (writing: TLDR / arXiv; coding: aux + main), level by level with exact values."""

from __future__ import annotations

import math

import pytest

from llm_marl_envs.core.rewards import MagrpoReward
from llm_marl_envs.envs.coding.magrpo_reward import magrpo_code_reward
from llm_marl_envs.envs.writing.magrpo_reward import (
    ARXIV_LENGTH_BAND_UPSTREAM,
    band_score,
    content_jaccard,
    magrpo_arxiv_reward,
    magrpo_tldr_reward,
    transition_categories,
    transition_scale,
)


def words(count: int, prefix: str, length: int | None = None) -> str:
    """``count`` distinct tokens (``prefix`` + digits; no transition words inside), padded to ``length`` chars."""
    text = " ".join(f"{prefix}{i}" for i in range(count))
    if length is not None:
        assert length >= len(text), "padding can only lengthen"
        text += "z" * (length - len(text))
    return text


def approx(value: float) -> object:
    return pytest.approx(value, abs=1e-12)


# ------------------------------------------------------------------------------------------------ writing: TLDR
def test_tldr_empty_or_too_short_gets_the_floor() -> None:
    assert magrpo_tldr_reward("", "").total == 0.0
    short = magrpo_tldr_reward(words(7, "c"), words(40, "d"))  # 7 tokens < 8
    assert short.total == 0.0 and short.levels_passed == 0
    assert magrpo_tldr_reward(words(10, "c"), words(257, "d")).total == 0.0  # 257 tokens > 256


def test_tldr_length_ratio_gate_stops_after_structure() -> None:
    same = words(10, "c")
    reward = magrpo_tldr_reward(same, same)  # length ratio 1.0 < 1.1: outside the acceptable band
    assert reward.total == 0.5 and reward.levels_passed == 1
    assert reward.levels == {
        "structure": 0.5,
        "coordination": 0.0,
        "vocabulary": 0.0,
        "transition": 0.0,
        "jaccard": 0.0,
    }


def test_tldr_vocabulary_gate_and_ramps() -> None:
    # Ten punctuation tokens: the structure level passes but there is no word to count, so scoring stops.
    no_words = magrpo_tldr_reward("! " * 10, "?? " * 10)
    assert no_words.levels_passed == 2 and no_words.levels["vocabulary"] == 0.0

    # Length ratio 2.0 (full coordination) but unique-word ratio 12/10 = 1.2 < 1.3: stops after level 2.
    concise = words(10, "c", length=40)
    reward = magrpo_tldr_reward(concise, words(12, "d", length=80))
    assert reward.total == 1.5 and reward.levels_passed == 2

    # Length ratio 1.5 -> (1.5 - 1.1) / 0.5 = 0.8; unique ratio 33/20 = 1.65 -> 0.5 * 0.35 / 0.7 = 0.25;
    # no transition word and no shared word -> the style level adds 0.
    concise = words(20, "c", length=200)
    reward = magrpo_tldr_reward(concise, words(33, "d", length=300))
    assert reward.levels_passed == 4
    assert reward.levels["coordination"] == approx(0.8)
    assert reward.levels["vocabulary"] == approx(0.25)
    assert reward.total == approx(0.5 + 0.8 + 0.25)

    # Length ratio 4.1 on the falling edge: 1 - (4.1 - 3.2) / 1.8 = 0.5.
    reward = magrpo_tldr_reward(words(10, "c", length=100), words(30, "d", length=410))
    assert reward.levels["coordination"] == approx(0.5)


def test_tldr_style_level_transitions_in_detailed_and_capped_jaccard() -> None:
    concise = words(10, "c", length=60)
    # Shares c0..c4 with the concise text: Jaccard 5 / 35 > 0.03, so the Jaccard term is full (0.6).
    # "however" is in two categories (contrast, concession): 0.4 * (0.4 + 0.05) = 0.18.
    detailed = words(5, "c") + " however " + words(25, "d")
    detailed += "z" * (150 - len(detailed))
    assert transition_categories(detailed) == {"contrast", "concession"}
    reward = magrpo_tldr_reward(concise, detailed)
    assert reward.levels["jaccard"] == approx(0.6)
    assert reward.levels["transition"] == approx(0.18)
    assert reward.levels["vocabulary"] == approx(0.5)  # 31 / 10 >= 2
    assert reward.total == approx(0.5 + 1.0 + 0.5 + 0.18 + 0.6)
    # The same words in the concise text do not count: TLDR looks for transitions in the detailed one only.
    swapped = magrpo_tldr_reward(concise + " however", detailed.replace(" however", " d99999"))
    assert swapped.levels["transition"] == 0.0


def test_tldr_good_pair_beats_bad_pair() -> None:
    concise = "The city council approved a new bike lane plan that will cost two million dollars."
    detailed = (
        "On Tuesday the council approved protected bike lanes downtown, costing about two million dollars. "
        "However, shop owners fear losing parking, so a review follows after the first year."
    )
    good = magrpo_tldr_reward(concise, detailed)
    assert good.levels_passed == 4 and good.total > 2.0
    assert magrpo_tldr_reward(detailed, concise).total == 0.5  # roles swapped: ratio < 1.1
    assert good.total <= good.maximum == 3.0


# ----------------------------------------------------------------------------------------------- writing: arXiv
def test_arxiv_token_gate_is_128_to_256() -> None:
    assert magrpo_arxiv_reward(words(127, "b"), words(150, "m")).total == 0.0
    assert magrpo_arxiv_reward(words(128, "b"), words(257, "m")).total == 0.0
    assert magrpo_arxiv_reward(words(128, "b"), words(128, "m")).levels_passed >= 1


def test_arxiv_paper_band_and_upstream_band() -> None:
    background = words(150, "b", length=1000)
    method = words(150, "m", length=1400)  # length ratio 1.4, unique ratio 1.0 (full vocabulary score)
    paper = magrpo_arxiv_reward(background, method)
    assert paper.levels["coordination"] == approx(1 - (1.4 - 1.3) / 0.2)  # the paper's band: falling edge, 0.5
    assert paper.levels["vocabulary"] == approx(0.5)
    upstream = magrpo_arxiv_reward(background, method, length_band=ARXIV_LENGTH_BAND_UPSTREAM)
    assert upstream.levels["coordination"] == approx(1.0)  # the repository's current band: optimal
    assert magrpo_arxiv_reward(background, words(150, "m", length=2100)).total == 0.5  # ratio 2.1: stops


def test_arxiv_vocabulary_band_is_two_sided() -> None:
    background = words(200, "b", length=1200)
    # Unique ratio 130/200 = 0.65 -> 0.5 * (0.65 - 0.5) / 0.2 = 0.375; 340/200 = 1.7 would be the zero edge.
    low = magrpo_arxiv_reward(background, words(130, "m", length=1200))
    assert low.levels["vocabulary"] == approx(0.375)
    too_low = magrpo_arxiv_reward(background, " ".join(["m1"] * 200) + "z" * 601)  # 2 unique words, ratio 1.0
    assert too_low.levels_passed == 2 and too_low.total == approx(0.5 + 1.0)


def test_arxiv_transitions_count_in_both_texts() -> None:
    background = words(140, "b", length=1000) + " for example"
    method = words(140, "m", length=1100) + " moreover"
    found = transition_categories(background + method)
    reward = magrpo_arxiv_reward(background, method)
    assert {"examples", "elaboration"} <= found
    assert reward.levels["transition"] == approx(0.4 * transition_scale(len(found)))


def test_writing_helpers() -> None:
    band = (1.0, 2.0, 3.0, 5.0)
    assert band_score(0.99, band) is None and band_score(5.01, band) is None
    assert band_score(1.0, band) == 0.0 and band_score(1.5, band) == 0.5 and band_score(4.0, band) == 0.5
    assert transition_scale(0) == 0.0 and transition_scale(1) == 0.4 and math.isclose(transition_scale(12), 0.95)
    assert content_jaccard("", "") == 1.0 and content_jaccard("the cat", "the dog") == 0.0
    assert content_jaccard("cat dog", "cat bird") == pytest.approx(1 / 3)


def test_writing_bad_input_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="concise: expected str, got NoneType"):
        magrpo_tldr_reward(None, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="method: expected str, got int"):
        magrpo_arxiv_reward("x", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="length_band"):
        magrpo_arxiv_reward("x", "y", length_band=(2.0, 1.0, 3.0, 4.0))
    huge = "word " * 200_000  # far over the token limit: floor, fast, no crash
    assert magrpo_tldr_reward(huge, huge).total == 0.0


# ---------------------------------------------------------------------------------------------------- coding
AUX = "def aux(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
USES_AUX = "def f(xs):\n    if not xs:\n        return 0\n    return aux(xs)\n"


def code(aux: str, main: str, fraction: float | None) -> MagrpoReward:
    return magrpo_code_reward(aux, main, "f", fraction)


def test_code_empty_gets_the_floor_and_main_definition_gates() -> None:
    assert code("", "", None).total == 0.0
    assert code(AUX, "def g(xs):\n    return 1\n", 1.0).total == 0.4  # no entry point: only aux's 0.4
    assert code(AUX, "def f(xs):\n    print(xs)\n", 1.0).total == 0.4  # entry point without return
    assert code(AUX, "def f(xs):\n    print(xs)\n", 1.0).levels_passed == 0


def test_code_syntax_error_is_gated() -> None:
    broken = code(AUX, "def f(xs):\n    return sum(xs\n", 1.0)  # defined with return, but does not parse
    assert broken.total == approx(1.0) and broken.levels_passed == 1
    assert broken.levels["tests"] == 0.0


def test_code_tests_fraction_and_no_result() -> None:
    assert code(AUX, "def f(xs):\n    return sum(xs)\n", None).total == approx(1.5)  # program did not run
    no_aux_use = code(AUX, "def f(xs):\n    return sum(xs)\n", 1.0)
    assert no_aux_use.total == approx(2.5) and no_aux_use.levels["aux_usage"] == 0.0
    assert code("", "def f(xs):\n    return sum(xs)\n", 0.25).total == approx(0.6 + 0.5 + 0.25)


def test_code_aux_usage_bonus_only_when_main_calls_aux_and_a_test_passes() -> None:
    full = code(AUX, USES_AUX, 1.0)
    assert full.total == approx(4.0) == full.maximum
    assert full.levels == {
        "aux_defined": 0.4,
        "main_defined": 0.6,
        "syntax": 0.5,
        "tests": 1.0,
        "aux_usage": 0.5,
        "anti_wrapper": 1.0,
        "ignored_aux_result": 0.0,
    }
    assert code(AUX, USES_AUX, 0.5).total == approx(3.5)
    assert code(AUX, USES_AUX, 0.0).total == approx(1.5)  # no test passes: no bonus
    # aux not defined by the aux author: no bonus even though main calls a function named aux
    own_aux = AUX + "\ndef f(xs):\n    v = aux(xs)\n    return v + 0\n"
    assert code("", own_aux, 1.0).total == approx(2.1)
    # a comment or docstring mentioning aux() is not a call
    mention = 'def f(xs):\n    """Like aux(xs)."""\n    return sum(xs)  # aux(xs) is slower\n'
    assert code(AUX, mention, 1.0).levels["aux_usage"] == 0.0


@pytest.mark.parametrize(
    "main",
    [
        'def f(xs):\n    """Sum."""\n    return aux(xs)\n',
        "def f(xs):\n    result = aux(xs)\n    return result\n",
        "def f(xs):\n    return 2 * aux(xs)\n",
    ],
)
def test_code_wrapper_gets_no_anti_wrapper_bonus(main: str) -> None:
    reward = code(AUX, main, 1.0)
    assert reward.levels["aux_usage"] == 0.5 and reward.levels["anti_wrapper"] == 0.0
    assert reward.total == approx(3.0)


def test_code_ignored_aux_result_costs_half() -> None:
    reward = code(AUX, "def f(xs):\n    aux(xs)\n    return sum(xs)\n", 1.0)
    assert reward.levels["ignored_aux_result"] == -0.5
    assert reward.total == approx(3.5)


def test_code_fences_are_ignored_and_bad_input_is_a_clear_error() -> None:
    fenced = code("```python\n" + AUX + "```", "```python\n" + USES_AUX + "```", 1.0)
    assert fenced.total == approx(4.0)
    with pytest.raises(TypeError, match="main_code: expected str, got NoneType"):
        magrpo_code_reward(AUX, None, "f", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="test_pass_fraction"):
        magrpo_code_reward(AUX, USES_AUX, "f", 1.5)
    with pytest.raises(TypeError, match="test_pass_fraction"):
        magrpo_code_reward(AUX, USES_AUX, "f", "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="entry_point"):
        magrpo_code_reward(AUX, USES_AUX, "f(x)", 1.0)
    hostile = "def f(xs):\n    return " + "(" * 5000 + "1" + ")" * 5000 + "\n"  # absurd nesting: no crash
    assert code(AUX, hostile, None).levels["syntax"] == 0.0
    assert code(AUX, "def f(xs):\n    return 1\x00\n", None).levels["syntax"] == 0.0
