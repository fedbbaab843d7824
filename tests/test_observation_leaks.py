"""Canary tests of partial observability: a random token one agent plants must reach no other agent, except as a
message sent to it.

A coding agent's program can print, raise, name things and fail to parse; whatever text it makes at run time is free
text it controls, so none of it may reach a teammate's observation or anyone's infos (the full reports live in
``state()``, which the tests check so that each canary is known to have been produced).
"""

from __future__ import annotations

import json
import secrets

import pytest
from envs_helpers import ARTICLE_ACTIONS, coding_env, writing_env

from llm_marl_envs.core.observation import FEEDBACK_LABEL

TASK = "HumanEval/0"  # has_close_elements(numbers, threshold)
ENTRY = "has_close_elements"


def _canary() -> str:
    return f"canary_{secrets.token_hex(6)}"


# Programs that plant the token at run time. `{t}` is the token; each defines `planted`, which the planting author's
# own function calls (`aux` for the helper's author, the entry point for main and solo), so the code runs as part of
# that author's function (the env reads an author's part as its function and what it uses: `program.role_function`).
# Effects at import time hang on a module-level assignment the function uses, so they are part of it too.
PLANTED_PROGRAMS: dict[str, str] = {
    "exception_message": "def planted(*a):\n    raise ValueError('{t}')\n",
    "stdout": "_AT_IMPORT = print('{t}')\ndef planted(*a):\n    print('{t}')\n    return _AT_IMPORT\n",
    "stderr": "import sys\n_AT_IMPORT = sys.stderr.write('{t}')\ndef planted(*a):\n    sys.stderr.write('{t}')\n"
              "    return _AT_IMPORT\n",
    "exception_class_name": "class {t}(Exception):\n    pass\ndef planted(*a):\n    raise {t}('x')\n",
    "name_error": "def planted(*a):\n    return {t}\n",
    "import_time_error": "_AT_IMPORT = int('{t}')\ndef planted(*a):\n    return _AT_IMPORT\n",
    "import_time_custom_exception": "class {t}(Exception):\n    pass\ndef _boom():\n    raise {t}()\n"
                                    "_AT_IMPORT = _boom()\ndef planted(*a):\n    return _AT_IMPORT\n",
    "compile_error": "def planted({t}, {t}):\n    return 0\n",
    "syntax_error": "def planted(*a):\n    return ({t} +\n",
    "recursion_error": "def {t}(n):\n    return {t}(n)\ndef planted(*a):\n    return {t}(1)\n",
    "assertion_in_program": "def planted(*a):\n    assert False, '{t}'\n",
}
CALLER = f"def {ENTRY}(numbers, threshold):\n    return aux(numbers, threshold)\n"
PLANTING_HELPER = "def aux(*a):\n    return planted(*a)\n"
PLANTING_ENTRY = f"def {ENTRY}(numbers, threshold):\n    return planted(numbers, threshold)\n"


def _leaks(token: str, observations: dict[str, str], infos: dict[str, dict], planter: str) -> list[str]:
    """Where the token shows up outside the planter's own observation."""
    places = [f"observation of {a}" for a, text in observations.items() if a != planter and token in text]
    places += [f"infos of {a}" for a, info in infos.items() if token in json.dumps(info, default=str)]
    return places


@pytest.mark.parametrize("vector", sorted(PLANTED_PROGRAMS))
@pytest.mark.parametrize("num_agents", [1, 2, 3, 4])
def test_run_time_text_of_a_program_reaches_no_teammate(vector: str, num_agents: int) -> None:
    env = coding_env(num_agents=num_agents)
    planters = ["solo"] if num_agents == 1 else ["aux", "main"]
    for planter in planters:
        token = _canary()
        program = PLANTED_PROGRAMS[vector].format(t=token)
        drafts = {"solo": program + "\n" + PLANTING_ENTRY} if num_agents == 1 else {"aux": "", "main": CALLER}
        if num_agents > 1:
            drafts[planter] = program + "\n" + (PLANTING_ENTRY if planter == "main" else PLANTING_HELPER)
        drafts.update({"tester": f"assert {ENTRY}([1.0, 2.0], 0.5) is False", "reviewer": "Looks fine."})
        env.reset(seed=0, options={"task_id": TASK})
        for _turn in range(2):  # the second turn shows the first turn's feedback again, and the reviewer's view
            if not env.agents:  # the planted program passed every visible test: the episode ended ("solved")
                break
            observations, _, _, _, infos = env.step({a: f"```python\n{drafts[a]}\n```" for a in env.agents})
            assert _leaks(token, observations, infos, planter) == [], (vector, planter)
        state = json.dumps(env.state(), default=str)
        assert token in state, "the canary must have been produced (full reports live in state())"


def test_builtin_exception_types_and_verdicts_are_shown() -> None:
    """What an agent may see of a failing run: the visible test's call, its verdict, the expected value and a builtin
    exception's type; the message a teammate's code chose is hidden, to the planter too (its draft holds the words
    but the message is only known to have been shown to it whole when every word is its own or the task's)."""
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    observations, *_ = env.step({"aux": "def aux(*a):\n    raise ValueError('secret text')", "main": CALLER})
    assert f"- {ENTRY}(" in observations["main"] and ": error (ValueError)" in observations["main"]
    assert "  expected: True" in observations["main"]
    assert "  raised: ValueError (hidden: its message holds text" in observations["main"]
    assert "secret text" not in observations["main"]
    assert "raised: ValueError: secret text" in observations["aux"]  # its own words, in its own feedback


def _feedback(observation: str) -> str:
    return observation.split(FEEDBACK_LABEL, 1)[1] if FEEDBACK_LABEL in observation else ""


@pytest.mark.parametrize("planter", ["aux", "main"])
@pytest.mark.parametrize("form", ["literal", "computed", "in_a_list", "as_exception", "as_number"])
def test_a_value_a_teammate_made_reaches_no_teammate_as_got(planter: str, form: str) -> None:
    """The ``got``/``raised`` lines of a failing visible test carry what the team's program returned: a teammate's
    code can make that a canary, so it is shown to a team member only when made of words it already sees."""
    token = _canary()
    number = str(secrets.randbelow(10**12) + 10**12)
    made = {
        "literal": f"return '{token}'",
        "computed": f"return '{token[::-1]}'[::-1]",  # the draft never holds the token itself
        "in_a_list": f"return [1, '{token}', 2]",
        "as_exception": f"raise KeyError('{token}')",
        "as_number": f"return {number}",
    }[form]
    helper = f"def aux(*a):\n    {made}\n"
    entry = f"def {ENTRY}(numbers, threshold):\n    {made}\n"
    drafts = {"aux": helper if planter == "aux" else "def aux(*a):\n    return 0\n",
              "main": entry if planter == "main" else CALLER}
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    observations, _, _, _, infos = env.step({a: f"```python\n{d}\n```" for a, d in drafts.items()})
    planted = number if form == "as_number" else token
    other = "main" if planter == "aux" else "aux"
    assert planted not in _feedback(observations[other]), (form, planter)
    assert planted not in json.dumps(infos, default=str)
    assert "got: (hidden" in observations[other] or "raised: KeyError (hidden" in observations[other]
    # The canary was produced and recorded: the full report in state() holds it.
    assert planted in json.dumps(env.state()["assessment"]["team_report"], default=str)


def test_one_agent_sees_its_own_programs_values_whole() -> None:
    token = _canary()
    env = coding_env(num_agents=1)
    env.reset(seed=0, options={"task_id": TASK})
    code = f"def {ENTRY}(numbers, threshold):\n    return ['{token}'[::-1], len(numbers)]\n"
    observations, *_ = env.step({"solo": f"```python\n{code}\n```"})
    feedback = _feedback(observations["solo"])
    assert f"got: ['{token[::-1]}', 6]" in feedback and "  expected: True" in feedback


def test_values_made_of_known_words_are_shown_to_the_team() -> None:
    """A team member sees a value its teammate's code returned when it holds only numbers and words it already sees."""
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    aux = "def aux(numbers, threshold):\n    return len(numbers) > 100\n"
    observations, *_ = env.step({"aux": aux, "main": CALLER})
    assert "  got: False" in observations["main"] and "  expected: True" in observations["main"]
    observations, *_ = env.step({"aux": "def aux(numbers, threshold):\n    return sorted(numbers)[0]\n",
                                 "main": CALLER})
    assert "  got: 1.0" in observations["main"]
    # Python's own error messages are made of its own words: shown whole to the teammate.
    env.reset(seed=0, options={"task_id": TASK})
    observations, *_ = env.step({"aux": "def aux(numbers, threshold):\n    return len(numbers)[0]\n", "main": CALLER})
    assert "  raised: TypeError: 'int' object is not subscriptable" in observations["main"]


def test_syntax_error_text_goes_to_its_author_only() -> None:
    env = coding_env(num_agents=2)
    env.reset(seed=0, options={"task_id": TASK})
    token = _canary()
    # aux's unterminated triple quote holds a canary: the syntax error is aux's own feedback, its part is left out of
    # the team's program, and main sees the visible tests of a program without it — never aux's text.
    aux = f'def aux(*a):\n    return 0\nnote = """{token}'
    observations, *_ = env.step({"aux": aux, "main": CALLER})
    assert "Syntax error in your code" in observations["aux"]
    assert "left out of the team's program" in observations["aux"]
    assert "Syntax error" not in observations["main"] and f"- {ENTRY}(" in observations["main"]
    assert token not in observations["main"]


@pytest.mark.parametrize("num_agents", [2, 3, 4])
def test_writing_drafts_stay_private_and_messages_reach_only_their_recipient(num_agents: int) -> None:
    env = writing_env(num_agents=num_agents)
    env.reset(seed=0, options={"task_id": "news/000"})
    planter, *others = env.possible_agents
    token, whisper = _canary(), _canary()
    actions = {a: ARTICLE_ACTIONS[a] for a in env.agents}
    actions[planter] = f'{ARTICLE_ACTIONS[planter]} {token}<message to="{others[0]}">{whisper}</message>'
    observations, _, _, _, infos = env.step(actions)
    assert _leaks(token, observations, infos, planter) == []
    assert whisper in observations[others[0]]
    assert all(whisper not in observations[a] for a in others[1:])
    assert token in json.dumps(env.state())


# The candidate schemes: every code author writes the whole entry point. Run-time text is built at run time from the
# reversed token, so the source (which the verifier, and for the author's code the fixer, read by the scheme) never
# holds it: only the program's run could carry it to anyone.
RUN_TIME_PROGRAMS: dict[str, str] = {
    "exception_message": "def planted(*a):\n    raise ValueError('{r}'[::-1])\n",
    "stdout": "def planted(*a):\n    print('{r}'[::-1])\n    return None\n",
    "stderr": "import sys\ndef planted(*a):\n    sys.stderr.write('{r}'[::-1])\n    return None\n",
    "exception_class_name": "def planted(*a):\n    raise type('{r}'[::-1], (Exception,), {{}})()\n",
    "import_time_error": "_AT_IMPORT = int('{r}'[::-1])\ndef planted(*a):\n    return _AT_IMPORT\n",
}
CANDIDATES = {"propose_verify": ("coder_1", "coder_2"), "author_fixer": ("author", "fixer")}
READS_CODE_OF = {
    "propose_verify": {"coder_1": {"verifier"}, "coder_2": {"verifier"}},
    "author_fixer": {"author": {"fixer", "verifier"}, "fixer": {"verifier"}},
}
"""Who reads a candidate author's code by the scheme (the env card): nobody else ever sees it."""


def _candidate_actions(scheme: str, planter: str, planted: str) -> dict[str, str]:
    first, second = CANDIDATES[scheme]
    plain = f"def {ENTRY}(numbers, threshold):\n    return None\n"
    drafts = {first: plain, second: plain, planter: planted}
    actions = {a: f"```python\n{code}\n```" for a, code in drafts.items()}
    actions.update({"tester": f"```python\nassert {ENTRY}([1.0, 2.0], 0.5) is False\n```",
                    "verifier": f"Choice: {first}"})
    return actions


@pytest.mark.parametrize("vector", sorted(RUN_TIME_PROGRAMS))
@pytest.mark.parametrize("scheme", sorted(CANDIDATES))
@pytest.mark.parametrize("num_agents", [2, 3, 4])
def test_candidate_schemes_run_time_text_reaches_no_one(vector: str, scheme: str, num_agents: int) -> None:
    env = coding_env(num_agents=num_agents, scheme=scheme)
    for planter in CANDIDATES[scheme]:
        token = _canary()
        planted = RUN_TIME_PROGRAMS[vector].format(r=token[::-1]) + "\n" + PLANTING_ENTRY
        actions = _candidate_actions(scheme, planter, planted)
        env.reset(seed=0, options={"task_id": TASK})
        for _turn in range(2):
            if not env.agents:
                break
            observations, _, _, _, infos = env.step({a: actions[a] for a in env.agents})
            # Only the planter: a candidate is its author's own code, so its author reads what its calls gave (as
            # solo does); no teammate does, not even the roles that read its code by the scheme.
            assert _leaks(token, observations, infos, planter=planter) == [], (vector, planter)
        assert token in json.dumps(env.state(), default=str), "the canary must have been produced"


@pytest.mark.parametrize(("scheme", "coder_briefs"), [(scheme, "same") for scheme in sorted(CANDIDATES)]
                         + [("propose_verify", "distinct")])
@pytest.mark.parametrize("num_agents", [2, 3, 4])
def test_candidate_schemes_show_code_only_to_the_roles_that_read_it(scheme: str, coder_briefs: str,
                                                                    num_agents: int) -> None:
    env = coding_env(num_agents=num_agents, scheme=scheme, coder_briefs=coder_briefs)
    for planter in CANDIDATES[scheme]:
        token = _canary()
        planted = f"def {ENTRY}(numbers, threshold):\n    # {token}\n    return None\n"
        actions = _candidate_actions(scheme, planter, planted)
        env.reset(seed=0, options={"task_id": TASK})
        readers = READS_CODE_OF[scheme][planter] & set(env.possible_agents)
        observations, _, _, _, infos = env.step({a: actions[a] for a in env.agents})
        leaks = [place for place in _leaks(token, observations, infos, planter)
                 if place not in {f"observation of {reader}" for reader in readers}]
        assert leaks == [], (scheme, planter)
        assert all(token in observations[reader] for reader in readers), (scheme, planter, readers)


def test_propose_verify_coders_never_read_each_others_code_even_under_team_observability() -> None:
    env = coding_env(num_agents=3, scheme="propose_verify", observability="team")
    token = _canary()
    actions = _candidate_actions("propose_verify", "coder_1",
                                 f"def {ENTRY}(numbers, threshold):\n    # {token}\n    return None\n")
    env.reset(seed=0, options={"task_id": TASK})
    observations, *_ = env.step({a: actions[a] for a in env.agents})
    assert token not in observations["coder_2"]
    assert token in observations["tester"]  # team observability still shows the tester every draft
    assert "assert has_close_elements" in observations["coder_2"]  # and the coders the tester's asserts
