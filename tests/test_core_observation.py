"""What an observation holds (the task once, the agent's own draft once, feedback, messages, the cue last), the
offer to end, what gives way when it overflows, the replies the coding env starts for the model, and the writing
passage."""

from __future__ import annotations

import re

import pytest
from envs_helpers import ARTICLE_ACTIONS, ENV_FACTORIES, coding_env, scripted_action, writing_env

from llm_marl_envs.core.observation import (
    DONE_OFFER,
    FEEDBACK_LABEL,
    INBOX_LABEL,
    MAX_INBOX_MESSAGES,
    OWN_DRAFT_LABEL,
    PROTOCOL_HELP,
    REPLACES_DRAFT,
    TRUNCATION_MARKER,
)
from llm_marl_envs.envs.coding.roles import FENCE, MAIN_CALL_START
from llm_marl_envs.envs.writing.tasks import SOURCE_WORDS, lead, load_writing_tasks

NEWS_TASK = "news/000"
CODE_TASK = "HumanEval/0"  # has_close_elements(numbers: List[float], threshold: float) -> bool
AUX = "```python\ndef aux(a, b):\n    return abs(a - b)\n```"
MAIN_WRONG = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"


def test_a_writing_observation_holds_each_thing_once_and_the_cue_last() -> None:
    env = writing_env(num_agents=2)
    obs, _ = env.reset(seed=0, options={"task_id": NEWS_TASK})
    source = env.task["source"]
    first = obs["concise"]
    assert first.count(source) == 1 and first.startswith("Source text:\n")
    # The instruction, then the offer to end, are the last lines (a part may be final at once).
    assert first.endswith(f"{env.roles['concise'].instruction_for(env.task)}\n{DONE_OFFER}")
    assert PROTOCOL_HELP in first and REPLACES_DRAFT not in first  # no draft to replace yet
    assert OWN_DRAFT_LABEL not in first and FEEDBACK_LABEL not in first  # empty sections are left out

    draft = ARTICLE_ACTIONS["concise"]
    obs, *_ = env.step({"concise": draft, "detailed": ARTICLE_ACTIONS["detailed"] + "<message>I cover who.</message>"})
    second = obs["concise"]
    assert second.count(source) == 1 and second.count(draft) == 1
    assert f"{FEEDBACK_LABEL}\nLength: " in second and "From detailed: I cover who." in second
    assert ARTICLE_ACTIONS["detailed"] not in second  # a teammate's draft stays private
    assert second.endswith(DONE_OFFER) and f"Turn 2 of {env.max_turns}" in second and REPLACES_DRAFT in second


def test_a_reply_of_only_done_keeps_the_draft_and_finishes_the_agent() -> None:
    env = writing_env(num_agents=2, max_turns=4, end_quorum="all")  # the teammate plays on
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    env.step({"concise": ARTICLE_ACTIONS["concise"], "detailed": ARTICLE_ACTIONS["detailed"]})
    _, _, term, _, infos = env.step({"concise": "<done/>", "detailed": ARTICLE_ACTIONS["detailed"] + " Crews fought."})
    assert env.state()["drafts"]["concise"] == ARTICLE_ACTIONS["concise"]
    assert term == {"concise": True, "detailed": False} and not infos["concise"]["action"]["problems"]
    _, _, term, _, infos = env.step({"detailed": "<done/>"})
    assert term == {"detailed": True} and infos["detailed"]["end_reason"] == "all_done"
    assert infos["detailed"]["reward_components"]["turns"] == 3  # one turn before the budget of 4


def test_another_offer_to_end_replaces_the_default_in_every_env_and_the_tag_still_ends() -> None:
    offer = "Finished? Then end your reply with:\n<done/>"
    for env in (writing_env(num_agents=2, done_offer=offer), coding_env(num_agents=2, done_offer=offer)):
        obs, _ = env.reset(seed=0)
        assert all(o.endswith(f"\n{offer}") and DONE_OFFER not in o for o in obs.values())
    silent = writing_env(num_agents=2, done_offer="")
    obs, _ = silent.reset(seed=0, options={"task_id": NEWS_TASK})
    instruction = silent.roles["concise"].instruction_for(silent.task)
    assert obs["concise"].endswith(instruction) and "<done/>" not in obs["concise"]
    _, _, term, _, infos = silent.step({a: ARTICLE_ACTIONS[a] + "\n<done/>" for a in silent.agents})
    assert all(term.values()) and infos["concise"]["end_reason"] == "all_done"  # not offered, still understood


@pytest.mark.parametrize(
    ("offer", "error", "match"),
    [
        (None, TypeError, "done_offer: expected str, got NoneType"),
        ("When final, say so.", ValueError, "shows the tag <done/>"),
        ("<done/>" + "x" * 300, ValueError, "at most 200 characters"),
    ],
)
def test_a_bad_offer_to_end_is_refused_with_a_clear_error(offer: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        writing_env(done_offer=offer)


def test_resubmitting_the_draft_unchanged_finishes_the_agent() -> None:
    env = writing_env(num_agents=2, max_turns=4, end_quorum="all")  # the teammate plays on
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    parts = {"concise": ARTICLE_ACTIONS["concise"], "detailed": ARTICLE_ACTIONS["detailed"]}
    _, _, term, _, infos = env.step(parts)  # turn 1: a first draft is no resubmission
    assert not any(term.values()) and not infos["concise"]["action"]["resubmitted"]
    _, _, term, _, infos = env.step({"concise": parts["concise"], "detailed": parts["detailed"] + " It spread."})
    assert term == {"concise": True, "detailed": False} and infos["concise"]["action"]["resubmitted"]
    assert not infos["concise"]["action"]["problems"]  # no cost: it is an ending, not a malformed action
    snapshot = env.snapshot()
    _, _, term, _, infos = env.step({"detailed": parts["detailed"] + " It spread."})
    assert term == {"detailed": True} and infos["detailed"]["end_reason"] == "all_done"
    env.restore(snapshot)  # a message alone keeps the draft but is no resubmission (the turn changed nothing: over)
    _, _, term, _, infos = env.step({"detailed": "<message>Done here.</message>"})
    assert not infos["detailed"]["action"]["resubmitted"] and infos["detailed"]["end_reason"] == "converged"


def test_ending_early_pays_the_turns_it_saves() -> None:
    """At equal final drafts, a team that ends at turn k earns w_t per turn it did not play: the return telescopes to
    the final score minus w_t per turn, so the MAGRPO tree's branches that end early are ranked above the others."""
    returns = {}
    for end_turn in (1, 2, 4):
        env = writing_env(num_agents=2, max_turns=4)
        env.reset(seed=0, options={"task_id": NEWS_TASK})
        parts = {"concise": ARTICLE_ACTIONS["concise"], "detailed": ARTICLE_ACTIONS["detailed"]}
        for turn in range(1, end_turn + 1):
            revision = {a: f"{text} (v{turn})" if turn < end_turn else text for a, text in parts.items()}
            done = "<done/>" if turn == end_turn < 4 else ""
            env.step({a: revision[a] + done for a in env.agents})
        assert not env.agents and env.state()["drafts"] == parts
        returns[end_turn] = env.state()["team_return"]
    turn_cost = env.reward_weights.turn
    assert returns[1] - returns[4] == pytest.approx(3 * turn_cost)
    assert returns[2] - returns[4] == pytest.approx(2 * turn_cost)


def test_coding_episode_ends_solved_when_every_visible_test_passes() -> None:
    correct = ("```python\ndef has_close_elements(numbers, threshold):\n    return any(aux(a, b) < threshold "
               "for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```")
    env = coding_env(num_agents=2, max_turns=4)
    env.reset(seed=0, options={"task_id": CODE_TASK})
    _, _, term, trunc, infos = env.step({"aux": AUX, "main": MAIN_WRONG})
    assert not any(term.values()) and infos["main"]["end_reason"] is None
    _, _, term, trunc, infos = env.step({"aux": AUX, "main": correct})
    assert all(term.values()) and not any(trunc.values()) and env.agents == []
    assert infos["main"]["end_reason"] == "solved" and infos["main"]["details"]["tests"]["held_out_passed"] >= 1
    # MAGRPO mode keeps the official episode: passing the visible tests does not end it.
    magrpo = coding_env(num_agents=2, reward_mode="magrpo")
    magrpo.reset(seed=0, options={"task_id": CODE_TASK})
    magrpo.step({"aux": AUX, "main": correct})
    assert magrpo.agents == ["aux", "main"]


def test_a_task_without_visible_tests_is_never_solved_by_its_visible_tests(tmp_path) -> None:
    path = tmp_path / "one_test.jsonl"
    path.write_text('{"task_id": "t/0", "prompt": "def f(x):\\n    \\"\\"\\"Return x.\\"\\"\\"\\n", '
                    '"entry_point": "f", "tests": ["assert f(1) == 1"]}\n', encoding="utf-8")
    env = coding_env(num_agents=1, dataset=str(path))
    env.reset(seed=0)
    _, _, term, _, infos = env.step({"solo": "```python\ndef f(x):\n    return x\n```"})
    assert infos["solo"]["details"]["tests"]["visible_total"] == 0
    assert infos["solo"]["end_reason"] is None and not any(term.values())


def test_the_coding_env_starts_code_replies_and_reads_them_with_or_without_the_start() -> None:
    env = coding_env(num_agents=4)
    obs, _ = env.reset(seed=0, options={"task_id": CODE_TASK})
    chats = {agent: env.chat_messages(agent) for agent in env.agents}
    starts = {agent: chat[-1]["content"] for agent, chat in chats.items() if chat[-1]["role"] == "assistant"}
    signature = "def has_close_elements(numbers: List[float], threshold: float) -> bool:"
    assert starts == {"aux": f"{FENCE}def aux(", "main": f"{FENCE}{signature}\n{MAIN_CALL_START}",
                      "tester": f"{FENCE}assert has_close_elements("}
    assert [m["role"] for m in chats["reviewer"]] == ["system", "user"]
    assert all(chat[1]["content"] == obs[agent] for agent, chat in chats.items())  # the observation stays plain
    assert all(FENCE not in obs[agent][-200:] for agent in env.agents)  # no reply start in any observation

    # A policy returns the start plus what the model wrote; another policy writes the whole reply itself.
    continued = {"aux": starts["aux"] + "a, b):\n    return abs(a - b)\n```",
                 "main": starts["main"] + "numbers[0], threshold)\n    return False\n```",
                 "tester": starts["tester"] + "[1.0], 0.5)\n```", "reviewer": "Looks fine."}
    body = "    result = aux(numbers[0], threshold)\n    return False"
    whole = {"aux": AUX, "main": f"```python\n{signature}\n{body}\n```",
             "tester": "```python\nassert has_close_elements([1.0], 0.5)\n```", "reviewer": "Looks fine."}
    env.step(continued)
    drafts_from_starts = env.state()["drafts"]
    assert {a: env.chat_messages(a)[-1]["content"] for a in starts} == starts  # started every turn
    env.reset(seed=0, options={"task_id": CODE_TASK})
    env.step(whole)
    assert env.state()["drafts"] == drafts_from_starts

    plain = coding_env(num_agents=2, reply_prefixes=False)
    plain.reset(seed=0, options={"task_id": CODE_TASK})
    assert all([m["role"] for m in plain.chat_messages(a)] == ["system", "user"] for a in plain.agents)
    writing = writing_env(num_agents=2)
    writing.reset(seed=0)
    assert all(len(writing.chat_messages(a)) == 2 for a in writing.agents)  # prose is never started
    with pytest.raises(TypeError, match="reply_prefixes: expected bool, got str"):
        coding_env(reply_prefixes="no")


def test_main_learns_the_helper_from_the_task_never_from_aux() -> None:
    env = coding_env(num_agents=2, dataset="decomposable")
    obs, _ = env.reset(seed=0, options={"task_id": "LME/0"})
    hint = env.task["helper_hint"]
    assert hint.startswith("aux(word)") and all(hint in obs[agent] for agent in ("aux", "main"))
    secret = "def aux(word, unusual_name_7):\n    return word"
    obs, *_ = env.step({"aux": f"```python\n{secret}\n```", "main": MAIN_WRONG})
    assert "unusual_name_7" in obs["aux"] and "unusual_name_7" not in obs["main"]


def test_the_writing_passage_is_the_lead_in_whole_sentences() -> None:
    text = "First sentence has five words. Second one is here too. Third sentence ends it all now."
    assert lead(text, 10) == "First sentence has five words. Second one is here too."
    assert lead(text, 3) == "First sentence has five words."  # at least the first sentence
    assert lead(text, None) == text
    prices = "Prices rose 1.75 per cent. Mr Smith said so."
    assert lead(prices, 9) == prices and lead(prices, 8) == "Prices rose 1.75 per cent."  # "1.75" ends nothing
    news = load_writing_tasks("news")
    task = news.get(NEWS_TASK)
    assert task["article"].startswith(task["source"][:80]) and len(task["source"].split()) <= SOURCE_WORDS
    whole = load_writing_tasks("news", source_words=None).get(NEWS_TASK)
    assert whole["source"] == task["article"]
    env = writing_env(source_words=60)
    env.reset(seed=0, options={"task_id": NEWS_TASK})
    assert len(env.task["source"].split()) <= 60 and env.state()["config"]["task"]["source_words"] == 60
    with pytest.raises(ValueError, match="source_words: expected >= 10, got 0"):
        writing_env(source_words=0)


@pytest.mark.parametrize("name", sorted(ENV_FACTORIES))
def test_huge_messages_give_way_oldest_first_and_never_the_task_or_the_own_draft(name: str) -> None:
    # Four agents each send an 8,000-character message to everyone for two turns (beside the scripted action's short
    # note): 6 such messages reach each agent, more than its observation holds (32,768 characters).
    env = ENV_FACTORIES[name](num_agents=4, end_quorum="all", max_action_chars=16_384)
    env.reset(seed=0)
    limit = env.observation_space(env.agents[0]).max_length
    checked = 0
    for turn in (1, 2):
        actions = {}
        for agent in env.agents:
            body = f"M{turn}{agent}:" + "x" * (8_000 - len(f"M{turn}{agent}:"))
            actions[agent] = f"{scripted_action(env, agent, turn)}\n<message>{body}</message>"
        observations, *_ = env.step(actions)
        for agent, text in observations.items():
            task_view = env.roles[agent].view(env.task)
            assert len(text) <= limit
            assert text.startswith(task_view) and text.count(task_view) == 1  # the task, whole
            assert env.drafts[agent] in text  # the agent's own draft, whole
            assert text.endswith(f"{env.roles[agent].instruction_for(env.task)}\n{DONE_OFFER}")  # the cue last
            inbox = text.split(f"\n{INBOX_LABEL}\n", 1)[1].split("\n\n", 1)[0].splitlines()
            received = [f"From {m.sender}: {m.text}" for m in env.channel.inbox(agent)[-MAX_INBOX_MESSAGES:]]
            senders = [a for a in env.possible_agents if a != agent]
            assert all(f"From {sender}: M{turn}{sender}:{'x' * 7_900}" in text for sender in senders)  # this turn's
            if turn == 1:
                assert inbox == received  # all fit
            else:  # the oldest give way, and a marker says how many
                (left_out,) = re.fullmatch(r"\[(\d+) earlier messages? left out for length\]", inbox[0]).groups()
                shown = inbox[1:]
                assert int(left_out) >= 1 and len(shown) + int(left_out) == len(received)
                assert shown[1:] == received[-len(shown) + 1:]  # the newest, whole
                first = received[int(left_out)]
                assert shown[0] == first or (shown[0].endswith(TRUNCATION_MARKER)
                                             and first.startswith(shown[0][: -len(TRUNCATION_MARKER)]))
            checked += 1
    assert checked == 8


def test_the_parts_give_way_in_order_messages_teammates_feedback_then_the_draft_then_the_task() -> None:
    from llm_marl_envs.core.channel import Message
    from llm_marl_envs.core.observation import TEAM_DRAFTS_LABEL, ObservationParts, cue, render_observation

    parts = ObservationParts(
        agent="a", instruction="Write it.", task_view="TASK " * 40, turn=1, max_turns=4, teammates=["b", "c"],
        own_draft="DRAFT " * 40, feedback="FEEDBACK " * 20,
        inbox=[Message("b", ("a",), f"note {i} " + "m" * 100, 1) for i in range(3)],
        teammate_drafts={"b": "B" * 300, "c": "c"},  # c's draft is shorter than the cut marker
    )
    full = render_observation(parts, 100_000)
    assert "earlier messages" not in full and TRUNCATION_MARKER not in full
    stages = set()
    for budget in range(len(full), len(cue(parts)) + 200, -3):  # below that, only the cue and markers are left
        text = render_observation(parts, budget)
        assert len(text) <= budget and text.endswith("Write it.\n" + DONE_OFFER)
        messages = text.count("From b: note")
        teammates_whole = "B" * 300 in text
        feedback = "FEEDBACK" in text
        draft_whole, task_whole = parts.own_draft in text, text.startswith(parts.task_view)
        if messages < 3:
            assert re.search(rf"\[{3 - messages} earlier messages? left out for length\]", text)
        if not teammates_whole:
            assert messages == 0 and f"{TEAM_DRAFTS_LABEL}\nb wrote:\n" in text  # cut, not dropped
        if not feedback:
            assert messages == 0 and "B" * 20 not in text
        if not draft_whole:
            assert not feedback and messages == 0
            assert task_whole or "DRAFT" not in text  # the task is cut only once the draft has nothing left
        if not task_whole:
            kept = text.split(TRUNCATION_MARKER, 1)[0]  # the task's start, then the marker
            assert "DRAFT " not in text and parts.task_view.startswith(kept)  # the draft gave way first
        stages.add((messages, teammates_whole, feedback, draft_whole, task_whole))
    # Every stage was reached on the way down: the messages, then the teammates, the feedback, the draft, the task.
    assert {(3, True, True, True, True), (0, False, True, True, True), (0, False, False, True, True),
            (0, False, False, False, True), (0, False, False, False, False)} <= stages
