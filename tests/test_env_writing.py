"""The writing env's tasks, quality terms and consistency on hand-made drafts."""

from __future__ import annotations

import json

import pytest
from envs_helpers import ARTICLE_ACTIONS, writing_env

from llm_marl_envs.core.similarity import make_similarity, mean_pairwise_similarity
from llm_marl_envs.envs.writing.quality import form_terms, structure_ok
from llm_marl_envs.envs.writing.tasks import load_writing_tasks
from llm_marl_envs.envs.writing.text_stats import CorpusStats, SourceGrams, copied_fraction, fluency

NEWS_TASK = "news/000"


def test_news_corpus_is_300_real_articles_with_a_stable_split() -> None:
    source = load_writing_tasks("news")
    assert len(source) == 300
    assert len(source.ids("train")) + len(source.ids("eval")) == 300
    assert 40 <= len(source.ids("eval")) <= 80
    assert "Hill Top" in source.get(NEWS_TASK)["source"]


def _score(env, actions: dict[str, str]) -> dict:
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    _, _, _, _, infos = env.step({a: actions[a] for a in env.agents})
    return next(iter(infos.values()))


def test_good_summaries_beat_bad_ones() -> None:
    env = writing_env(num_agents=4)
    good = _score(env, ARTICLE_ACTIONS)
    bad = _score(env, {a: "the the the the" for a in env.possible_agents})
    assert good["reward_components"]["quality"] > bad["reward_components"]["quality"] + 0.3
    assert good["quality_terms"]["structure"] == 1.0
    assert bad["quality_terms"]["structure"] == 0.5  # a one-line headline, but no bullet list
    assert good["quality_terms"]["length_ratio"] == 1.0
    # "the the the the": one distinct bigram in three (the two telegraphic parts: 1/3 / 0.8), an order no document
    # uses (the two prose parts: 0), and none of the article's content
    assert bad["quality_terms"]["fluency"] == pytest.approx(0.5 * 1 / 3 / 0.8)
    assert bad["quality_terms"]["coverage"] == 0.0


@pytest.mark.parametrize("backend", ["tfidf", "minilm"])
def test_identical_contributions_earn_no_consistency(backend: str) -> None:
    model = make_similarity(backend)
    text = ARTICLE_ACTIONS["detailed"]
    assert mean_pairwise_similarity([text, text, text], model) == pytest.approx(1.0)
    unrelated = mean_pairwise_similarity([text, "Quarterly earnings of the chip maker rose."], model)
    assert unrelated < 0.5
    assert mean_pairwise_similarity([text, ""], model) == 0.0
    assert mean_pairwise_similarity([text], model) is None
    env = writing_env(num_agents=2, similarity=backend)
    duplicated = _score(env, {"concise": text, "detailed": text})
    honest = _score(env, {"concise": ARTICLE_ACTIONS["concise"], "detailed": text})
    # Resemblance is reported (the seeds' notion) but duplicated parts are redundant: no contribution, no consistency.
    assert duplicated["quality_terms"]["similarity"] == pytest.approx(1.0)
    assert duplicated["quality_terms"]["duplication"] == 1.0
    assert duplicated["reward_components"]["consistency"] == 0.0
    assert honest["reward_components"]["consistency"] > 0.8
    assert honest["reward_components"]["contributions"] == {"concise": 1.0, "detailed": 1.0}


def test_a_single_writer_has_no_consistency_and_renormalised_weights() -> None:
    env = writing_env(num_agents=1)
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    text = ARTICLE_ACTIONS["concise"] + " " + ARTICLE_ACTIONS["detailed"]
    _, rewards, _, _, infos = env.step({"solo": text})
    components = infos["solo"]["reward_components"]
    assert components["consistency"] is None and components["contributions"] == {}
    weights = env.reward_weights
    expected = (weights.quality + weights.consistency) * components["quality"] - weights.turn
    assert rewards["solo"] == pytest.approx(expected)


def test_minilm_rates_paraphrases_above_unrelated_text() -> None:
    model = make_similarity("minilm")
    paraphrase = mean_pairwise_similarity(
        ["A fire forced people out of their homes.", "Residents fled a blaze."], model
    )
    unrelated = mean_pairwise_similarity(["A fire forced people out of their homes.", "Shares rose on Monday."], model)
    assert paraphrase > unrelated + 0.2


def test_feedback_explains_length_and_structure() -> None:
    env = writing_env(num_agents=3)
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    obs, *_ = env.step({"concise": "Too short.", "detailed": ARTICLE_ACTIONS["detailed"], "key_points": "one line"})
    assert "Length: 2 words (target 10-30). Too short" in obs["concise"]
    assert "Use 3-5 lines, each starting with '- '." in obs["key_points"]


def test_structure_rules() -> None:
    assert structure_ok("- a\n- b\n* c", "bullets")
    assert not structure_ok("- a\n- b", "bullets")
    assert structure_ok("A headline", "one_line") and not structure_ok("two\nlines", "one_line")


def test_form_terms_for_solo_have_no_ratio() -> None:
    assert set(form_terms("tldr", {"solo": "source text here"})) == {"length"}


def test_copying_and_fluency_measures() -> None:
    tasks = load_writing_tasks("news")
    source = tasks.get(NEWS_TASK)["source"]
    grams, corpus = SourceGrams.of(source), CorpusStats(tasks.get(i)["article"] for i in tasks.ids())
    lead = " ".join(source.split()[:60])
    assert copied_fraction(lead, grams) == 1.0
    every_fifth_dropped = " ".join(w for i, w in enumerate(source.split()[:80]) if i % 5 != 4)
    assert copied_fraction(every_fifth_dropped, grams) > 0.9
    assert copied_fraction(ARTICLE_ACTIONS["detailed"], grams) < 0.2
    detailed = ARTICLE_ACTIONS["detailed"]
    assert fluency(detailed, telegraphic=False, corpus=corpus) == 1.0
    keywords = "bushfire Hill Top residents Goulburn Hume Highway winds Sydney Mittagong blaze crews evacuated"
    assert fluency(keywords, telegraphic=False, corpus=corpus) < 0.01
    assert fluency(" ".join(sorted(detailed.split())), telegraphic=False, corpus=corpus) < 0.5  # same words, no order
    assert fluency(detailed + " Figures: 500, 100, 60.", telegraphic=False, corpus=corpus) < 0.9  # a tacked-on list
    assert fluency((detailed + " ") * 3, telegraphic=False, corpus=corpus) < 0.5
    assert fluency(ARTICLE_ACTIONS["key_points"], telegraphic=True, corpus=corpus) == 1.0  # short bullets are fine
    long_bullet = "- Strong winds pushed the fire toward the town of Hill Top"
    assert fluency(long_bullet, telegraphic=True, corpus=corpus) == 1.0
    assert fluency("- " + keywords, telegraphic=True, corpus=corpus) < 0.3  # a long keyword bullet ("top": stop word)


def test_arxiv_style_from_a_local_jsonl(tmp_path) -> None:
    path = tmp_path / "abstracts.jsonl"
    rows = [
        {"task_id": f"paper/{i}", "abstract": f"We study problem {i} and propose a method.", "title": f"P{i}"}
        for i in range(12)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    env = writing_env(num_agents=4, style="arxiv", dataset=str(path))
    obs, _ = env.reset(seed=0)
    assert env.possible_agents == ["background", "method", "limitations", "title"]
    assert "We study problem" in obs["background"] and "Title: P" in obs["background"]


def test_broken_jsonl_gives_clear_errors(tmp_path) -> None:
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"source": "ok"}\n{not json}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        writing_env(dataset=str(bad_json))
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text('{"title": "only a title"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"no_text.jsonl:1: missing field 'source'.*the record has \['title'\]"):
        writing_env(dataset=str(no_text))


def test_magrpo_reward_mode_pays_the_papers_reward_each_turn() -> None:
    from llm_marl_envs.envs.writing.magrpo_reward import magrpo_tldr_reward

    env = writing_env(num_agents=2, reward_mode="magrpo")
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    actions = {"concise": ARTICLE_ACTIONS["concise"], "detailed": ARTICLE_ACTIONS["detailed"]}
    _, rewards, _, _, infos = env.step(actions)
    expected = magrpo_tldr_reward(actions["concise"], actions["detailed"]).total
    assert rewards["concise"] == pytest.approx(expected) and expected > 0
    assert infos["detailed"]["magrpo_reward"] == pytest.approx(expected)


def test_auto_similarity_falls_back_to_tfidf_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_marl_envs.core import similarity

    monkeypatch.setattr(similarity, "minilm_available", lambda: False)
    monkeypatch.setattr(similarity, "_WARNED_FALLBACK", False)
    with pytest.warns(UserWarning, match="fell back to TF-IDF"):
        assert similarity.make_similarity("auto").name == "tfidf"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second fallback stays silent
        assert similarity.make_similarity("auto").name == "tfidf"
