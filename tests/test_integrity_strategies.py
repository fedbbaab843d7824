"""The writing strategies of the reward-integrity suite: the hand-written honest texts are valid references (right
length and form per role, abstractive, grounded), and every strategy plays well-formed actions for its live agents.

No env reward is asserted here: ``benchmarks/reward_integrity.py`` measures the strategies against the reward.
"""

from __future__ import annotations

import json
import re

import pytest

from llm_marl_benchmarks.integrity.writing_strategies import (
    DATA_PATH,
    DONE,
    HONEST_TASK_IDS,
    NEEDS_HONEST_TEXT,
    WRITING_STRATEGIES,
    honest_parts,
    infer_style,
    load_honest_texts,
    shift_numbers,
    writing_strategies,
)
from llm_marl_envs.core.protocol import parse_action
from llm_marl_envs.core.tasks import SPLITS
from llm_marl_envs.envs.writing.quality import structure_ok, words
from llm_marl_envs.envs.writing.roles import PART_SPECS, STYLES, writing_team
from llm_marl_envs.envs.writing.tasks import load_writing_tasks

MIN_TEXTS = {"tldr": 24, "arxiv": 12}
COPY_SPAN = 7
"""Honest texts never reuse this many consecutive words of their article."""
_TOKEN = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@pytest.fixture(scope="module")
def news():
    return load_writing_tasks("news")


def _tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric runs, possessive 's dropped: punctuation and hyphens never hide a copied span."""
    return _TOKEN.findall(re.sub(r"['’]s\b", "", text.lower()))


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def _entries() -> list:
    """(style, task_id, role, text) for every honest part, with a readable test id."""
    return [
        pytest.param(style, task_id, role, text, id=f"{style}-{task_id}-{role}")
        for style, by_task in load_honest_texts().items()
        for task_id, parts in by_task.items()
        for role, text in parts.items()
    ]


def test_data_file_parses_into_complete_teams() -> None:
    lines = [json.loads(line) for line in DATA_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == sum(len(v) for v in load_honest_texts().values())
    for record in lines:
        assert set(record) == {"task_id", "style", "parts"}
        assert set(record["parts"]) == set(PART_SPECS[record["style"]])
        assert all(isinstance(t, str) and t.strip() for t in record["parts"].values())


@pytest.mark.parametrize("style", STYLES)
def test_enough_texts_in_both_splits(style: str, news) -> None:
    ids = HONEST_TASK_IDS(style)
    assert len(ids) >= MIN_TEXTS[style]
    assert list(ids) == sorted(set(ids))
    splits = {news.get(task_id).split for task_id in ids}
    assert splits == set(SPLITS)


def test_arxiv_texts_are_for_articles_with_tldr_texts() -> None:
    assert set(HONEST_TASK_IDS("arxiv")) <= set(HONEST_TASK_IDS("tldr"))


@pytest.mark.parametrize(("style", "task_id", "role", "text"), _entries())
def test_honest_part_fits_its_role(style: str, task_id: str, role: str, text: str) -> None:
    spec = PART_SPECS[style][role]
    assert spec.min_words <= len(words(text)) <= spec.max_words, f"{len(words(text))} words"
    assert structure_ok(text, spec.structure)


@pytest.mark.parametrize(("style", "task_id", "role", "text"), _entries())
def test_honest_part_is_abstractive_and_grounded(style: str, task_id: str, role: str, text: str, news) -> None:
    article = news.get(task_id)["source"]
    source = _tokens(article)
    spans = {tuple(source[i : i + COPY_SPAN]) for i in range(len(source) - COPY_SPAN + 1)}
    mine = _tokens(text)
    copied = [
        " ".join(mine[i : i + COPY_SPAN])
        for i in range(len(mine) - COPY_SPAN + 1)
        if tuple(mine[i : i + COPY_SPAN]) in spans
    ]
    assert not copied, f"copied from the article: {copied[:3]}"
    assert _numbers(text) <= _numbers(article), f"numbers not in the article: {_numbers(text) - _numbers(article)}"


def test_honest_parts_errors_name_the_runner_ids() -> None:
    with pytest.raises(KeyError, match="HONEST_TASK_IDS"):
        honest_parts("news/does-not-exist", "tldr")


def test_style_is_read_from_role_names() -> None:
    assert infer_style(("concise", "detailed")) == "tldr"
    assert infer_style(("method",)) == "arxiv"
    assert infer_style(("solo",)) == "tldr"
    assert infer_style(("solo",), default="arxiv") == "arxiv"
    with pytest.raises(ValueError, match="mix"):
        infer_style(("concise", "method"))


def test_shift_numbers_changes_every_number() -> None:
    assert (
        shift_numbers("9,200 soldiers, 1.75 per cent, 6:30am, in 1917")
        == "9,217 soldiers, 18.75 per cent, 23:47am, in 1934"
    )


def test_library_names_are_unique_and_honest_first() -> None:
    names = [s.name for s in WRITING_STRATEGIES]
    assert len(names) == len(set(names))
    assert names[0] == "honest"
    assert {s.env for s in WRITING_STRATEGIES} == {"writing"}
    assert set(names) >= NEEDS_HONEST_TEXT
    assert [s.name for s in writing_strategies("arxiv")] == names


def _play(strategy, task, roles: tuple[str, ...], max_turns: int = 3) -> list[dict[str, str]]:
    """Drive ``strategy`` like the runner does, dropping agents that say done; returns each turn's actions."""
    live = list(roles)
    played = []
    for turn in range(1, max_turns + 1):
        if not live:
            break
        actions = strategy.act(task, tuple(live), turn)
        if actions is None:
            break
        assert set(actions) == set(live), f"turn {turn}: actions for {sorted(actions)}, live {sorted(live)}"
        for agent, action in actions.items():
            assert isinstance(action, str)
            parsed = parse_action(action, agent, roles)
            assert not parsed.problems, f"{agent}: {parsed.problems}"
        played.append(actions)
        live = [a for a in live if DONE not in actions[a]]
    return played


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_strategy_plays_valid_actions_for_live_agents(style: str, size: int, news) -> None:
    roles = tuple(role.name for role in writing_team(style, size))
    task = news.get(HONEST_TASK_IDS(style)[0])
    for strategies in (writing_strategies(style), WRITING_STRATEGIES if size > 1 else ()):
        for strategy in strategies:
            if size not in strategy.team_sizes:
                continue
            played = _play(strategy, task, roles)
            assert played, f"{strategy.name} played nothing"


@pytest.mark.parametrize("style", STYLES)
def test_strategies_answer_only_the_live_subset(style: str, news) -> None:
    roles = tuple(role.name for role in writing_team(style, 4))
    task = news.get(HONEST_TASK_IDS(style)[-1])
    for strategy in writing_strategies(style):
        actions = strategy.act(task, roles[1:3], 2)
        assert actions is None or set(actions) == set(roles[1:3]), strategy.name


def test_strategies_without_honest_text_play_any_article(news) -> None:
    task = next(news.get(i) for i in news.ids() if i not in HONEST_TASK_IDS("tldr"))
    roles = tuple(role.name for role in writing_team("tldr", 4))
    for strategy in WRITING_STRATEGIES:
        if strategy.name not in NEEDS_HONEST_TEXT:
            _play(strategy, task, roles)


def test_honest_strategy_submits_the_honest_parts(news) -> None:
    task_id = HONEST_TASK_IDS("arxiv")[0]
    honest = next(s for s in writing_strategies("arxiv") if s.name == "honest")
    actions = honest.act(news.get(task_id), ("background", "method"), 1)
    assert actions is not None
    parts = honest_parts(task_id, "arxiv")
    for agent, action in actions.items():
        parsed = parse_action(action, agent, ("background", "method"))
        assert parsed.done and parsed.draft == parts[agent]
