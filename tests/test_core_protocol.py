"""The action protocol: drafts, messages, done, and problems reported instead of raised."""

from __future__ import annotations

import pytest

from llm_marl_envs.core.protocol import parse_action

TEAM = ["aux", "main", "tester"]


def test_draft_messages_and_done_are_separated() -> None:
    parsed = parse_action('def aux(x):\n    return x\n<message to="main">call aux(x)</message><done/>', "aux", TEAM)
    assert parsed.draft == "def aux(x):\n    return x"
    assert [(m.recipients, m.text) for m in parsed.messages] == [(("main",), "call aux(x)")]
    assert parsed.done and parsed.is_valid


def test_broadcast_goes_to_every_teammate_but_the_sender() -> None:
    parsed = parse_action("<message>hello team</message>", "main", TEAM)
    assert parsed.messages[0].recipients == ("aux", "tester")
    assert parsed.draft == "" and not parsed.done and parsed.is_valid


def test_several_recipients_and_case_insensitive_tags() -> None:
    parsed = parse_action("<MESSAGE to='aux, tester'>x</MESSAGE> <Done/>", "main", TEAM)
    assert parsed.messages[0].recipients == ("aux", "tester")
    assert parsed.done


@pytest.mark.parametrize(
    "text",
    ["Part.\n<done/>", "Part.\n<done>", "Part.\n</done>", "Part.\n<done />", "Part.\n<done/",
     "Part.\n<done/</done>", "Part. <DONE/>"],
)
def test_done_is_read_in_the_forms_a_small_model_writes(text: str) -> None:
    parsed = parse_action(text, "main", TEAM)
    assert parsed.done and parsed.draft == "Part." and parsed.is_valid


@pytest.mark.parametrize(
    "code", ["if i<done:\n    pass", "y = a<done/2", "x = f(a<done/(b))", "<doneness> is a word"],
)
def test_code_and_words_that_look_like_a_done_tag_stay_text(code: str) -> None:
    parsed = parse_action(code, "main", TEAM)
    assert not parsed.done and parsed.draft == code


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty_action"),
        ("   \n ", "empty_action"),
        ("draft <message>never closed", "unclosed_message_tag"),
        ('<message to="ghost">hi</message>', "unknown_recipient:ghost"),
        ('<message to="aux">hi</message>', "message_to_self"),
        ("<message></message> text", "empty_message"),
        ("<message from=main>hi</message>", "bad_message_attribute"),
    ],
)
def test_problems_are_reported_not_raised(text: str, problem: str) -> None:
    parsed = parse_action(text, "aux", TEAM)
    assert problem in parsed.problems
    assert not parsed.is_valid


def test_messages_need_teammates() -> None:
    parsed = parse_action("<message>anyone?</message>", "solo", ["solo"])
    assert "no_teammates" in parsed.problems
    assert parsed.messages == ()


def test_hostile_text_never_raises() -> None:
    for text in [
        "<" * 10_000,
        "</message>" * 500,
        "\x00\x01<done/>\ufffd",
        "<message to=" + '"' * 300 + ">x</message>",
    ]:
        parse_action(text, "aux", TEAM)


def test_an_echoed_observation_label_ends_the_reply() -> None:
    """A small model writes its part and then echoes the prompt's scaffolding: the echo is no part of the draft."""
    from llm_marl_envs.core.observation import FEEDBACK_LABEL, OWN_DRAFT_LABEL

    text = f"The council closed the bridge.\n\n{FEEDBACK_LABEL}\nLength: 5 words\n<message>hi</message><done/>"
    parsed = parse_action(text, "aux", TEAM)
    assert parsed.draft == "The council closed the bridge." and not parsed.messages and not parsed.done
    assert parsed.problems == ("echoed_observation",)
    inline = parse_action("The feedback on your draft: it was short.", "aux", TEAM)  # words, not a label line
    assert inline.is_valid and inline.draft.startswith("The feedback")
    assert parse_action(f"  {OWN_DRAFT_LABEL}  \nold", "aux", TEAM).problems == ("echoed_observation", "empty_action")
