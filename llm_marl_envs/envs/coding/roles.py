"""Coding roles (MAGRPO's helper/main split, plus a tester and a reviewer) and what each sees of the problem.

* ``aux`` writes a helper function named ``aux`` (MAGRPO's auxiliary agent) with a return, for ``main`` to call;
* ``main`` writes the entry-point function, which may call ``aux`` and must not define it (MAGRPO's main agent);
* ``tester`` (3+ agents) writes extra ``assert`` statements against the entry point;
* ``reviewer`` (4 agents) reads the results of the visible tests on the team's program (its feedback) and sends
  fixes by message; its draft is a short review;
* ``solo`` (1 agent) writes the whole function: the single-agent baseline and the GRPO case.

Every role sees the problem once: the entry point's docstring as prose, then its code (imports, given helpers, the
signature line). Where the dataset describes a useful helper (``helper_hint``, e.g. ``aux(word) returns True when
...``) every team role sees it, so ``main`` learns the helper's signature from the task, as ``aux`` does — never from
``aux``'s draft; without a hint the two agree by message. The team's program is the prompt's preamble (imports,
given helpers), then ``aux``'s code, then ``main``'s.

Replies may be started for the model (:func:`reply_prefix`, the env's ``reply_prefixes``), every turn: ``aux``'s
opens a code fence and ``def aux(`` (MAGRPO's format line ``def aux(...):``), ``main``'s the entry point's signature
line and a first line that calls ``aux``, ``solo``'s the signature, the tester's ``assert ENTRY_POINT(``. A small
model then writes the right function instead of copying the signature it read, and ``main`` uses the helper at
all. Every turn, because a free reply undid it: probed on train-split tasks with the start on the first turn only,
the helper's final draft defined ``aux`` in 2 of 8 episodes (7 of 8 after turn 1). A started reply ends an agent's
work by ending with ``<done/>`` or by resubmitting its code unchanged.
"""

from __future__ import annotations

import re

from llm_marl_envs.core.roles import Role, team_for
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.coding.program import split_prompt

HELPER_NAME = "aux"
FENCE = "```python\n"
HELPER_HINT_LABEL = "Helper:"
"""Before the dataset's description of a useful helper in every team role's view of the problem."""


def _problem(task: Task) -> str:
    description, code = split_prompt(task["prompt"], task["entry_point"])
    block = f"{FENCE}{code.strip(chr(10))}\n```"
    return f"{description}\n{block}" if description else block


def _team_view(task: Task) -> str:
    hint = task.fields.get("helper_hint")
    return f"{_problem(task)}\n{HELPER_HINT_LABEL} {hint}" if hint else _problem(task)


def signature(task: Task) -> str:
    """The entry point's ``def`` line as the prompt writes it (``def f(x: int) -> int:``), one line."""
    _, code = split_prompt(task["prompt"], task["entry_point"])
    pattern = rf"^def\s+{re.escape(task['entry_point'])}\s*\(.*?\)\s*(?:->[^:]*)?:"
    match = re.search(pattern, code, re.MULTILINE | re.DOTALL)
    if match is None:
        return f"def {task['entry_point']}("
    return " ".join(match.group(0).split()).replace("( ", "(").replace(" )", ")")


def _aux_instruction(task: Task) -> str:
    return (f"Write a helper function {HELPER_NAME}, with a return, that {task['entry_point']} can call for one "
            f"step. Do not write {task['entry_point']}.")


def _main_instruction(task: Task) -> str:
    return (f"Write the function {task['entry_point']} whole. Call {HELPER_NAME}(...), your teammate's helper; do "
            f"not define {HELPER_NAME}.")


def _tester_instruction(task: Task) -> str:
    return f"Write 3 to 6 assert lines that call {task['entry_point']} and check its result."


def _reviewer_instruction(task: Task) -> str:
    return "Send concrete fixes to aux or main in a <message>; your draft is a short review."


def _solo_instruction(task: Task) -> str:
    return f"Write the function {task['entry_point']} whole."


_ROLES: tuple[Role, ...] = (
    Role(HELPER_NAME, "Helper author", _aux_instruction, _team_view),
    Role("main", "Main author", _main_instruction, _team_view),
    Role("tester", "Tester", _tester_instruction, _team_view),
    Role("reviewer", "Reviewer", _reviewer_instruction, _team_view),
)
_SOLO = Role("solo", "Programmer", _solo_instruction, _problem)

CODE_ROLES: frozenset[str] = frozenset({HELPER_NAME, "main", "tester", "solo"})
"""Roles whose draft is code (the env extracts it from a fence)."""


MAIN_CALL_START = "    result = aux("
"""How ``main``'s reply goes on after the signature: a first line that calls the helper. Without it the untrained
SmolLM2-135M's ``main`` never called ``aux`` (0 of 8 train-split episodes; with it 7 of 8): the helper could not
matter, so no MAGRPO group ever varied on using it. The call's arguments, and what ``main`` does with the result,
are the model's; the reward still pays only what the tests and counterfactuals measure."""


def reply_prefix(role: str, task: Task) -> str:
    """How ``role``'s reply starts when the env starts it for the model (see the module docstring); ``""``: free."""
    if role == HELPER_NAME:
        return f"{FENCE}def {HELPER_NAME}("
    if role == "main":
        return f"{FENCE}{signature(task)}\n{MAIN_CALL_START}"
    if role == "solo":
        return f"{FENCE}{signature(task)}"
    if role == "tester":
        return f"{FENCE}assert {task['entry_point']}("
    return ""


def coding_team(num_agents: int) -> tuple[Role, ...]:
    """The roles of a coding team of ``num_agents`` (1..4)."""
    return team_for(_ROLES, _SOLO, num_agents)
