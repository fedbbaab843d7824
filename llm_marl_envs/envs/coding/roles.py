"""Coding roles (MAGRPO's helper/main split, plus a tester and a reviewer) and what each sees of the problem.

* ``aux`` writes a helper function named ``aux`` (MAGRPO's auxiliary agent); it sees the problem and a hint of a
  useful helper when the dataset has one.
* ``main`` writes the entry-point function, which may call ``aux`` (MAGRPO's main agent); it sees the problem.
* ``tester`` (3+ agents) writes extra ``assert`` statements against the entry point; it sees the problem.
* ``reviewer`` (4 agents) reads the results of the visible tests on the team's program (its feedback) and sends
  fixes by message; its draft is a short review.
* ``solo`` (1 agent) writes the whole function: the single-agent baseline and the GRPO case.

The team's program is the prompt's preamble (imports, given helpers), then ``aux``'s code, then ``main``'s.
"""

from __future__ import annotations

from llm_marl_envs.core.roles import Role, team_for
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.coding.program import split_prompt

HELPER_NAME = "aux"


def _problem(task: Task) -> str:
    description, code = split_prompt(task["prompt"], task["entry_point"])
    if not description:
        return f"Problem:\n```python\n{code.rstrip()}\n```"
    return f"Problem: {description}\n\n```python\n{code}\n```"


def _aux_view(task: Task) -> str:
    hint = task.fields.get("helper_hint")
    return f"{_problem(task)}\nA helper that would help: {hint}" if hint else _problem(task)


def _aux_instruction(task: Task) -> str:
    return (
        f"Write one helper function named {HELPER_NAME} that {task['entry_point']} can call to do a step of the "
        f"work. Do not write {task['entry_point']} itself. {_CODE_FORMAT}"
    )


def _main_instruction(task: Task) -> str:
    return (
        f"Complete the function {task['entry_point']}: write it whole, with its signature. You may call "
        f"{HELPER_NAME}(...), a helper your teammate writes. {_CODE_FORMAT}"
    )


def _tester_instruction(task: Task) -> str:
    return f"Write 3 to 6 assert statements that call {task['entry_point']} and check its result. {_CODE_FORMAT}"


def _reviewer_instruction(task: Task) -> str:
    return (
        "Your feedback shows how the team's program does on the visible tests. Send concrete fixes to aux or main "
        "in a <message>; your draft is a short review."
    )


def _solo_instruction(task: Task) -> str:
    return f"Complete the function {task['entry_point']}: write it whole, with its signature. {_CODE_FORMAT}"


_CODE_FORMAT = "Answer with one ```python code block."

_ROLES: tuple[Role, ...] = (
    Role(HELPER_NAME, "Helper author", _aux_instruction, _aux_view),
    Role("main", "Main author", _main_instruction, _problem),
    Role("tester", "Tester", _tester_instruction, _problem),
    Role("reviewer", "Reviewer", _reviewer_instruction, _problem),
)
_SOLO = Role("solo", "Programmer", _solo_instruction, _problem)

CODE_ROLES: frozenset[str] = frozenset({HELPER_NAME, "main", "tester", "solo"})
"""Roles whose draft is code (the env extracts it from a fence)."""


def coding_team(num_agents: int) -> tuple[Role, ...]:
    """The roles of a coding team of ``num_agents`` (1..4)."""
    return team_for(_ROLES, _SOLO, num_agents)
