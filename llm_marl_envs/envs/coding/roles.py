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

HELPER_NAME = "aux"


def _problem(task: Task) -> str:
    return f"Problem (entry point `{task['entry_point']}`):\n```python\n{task['prompt'].rstrip()}\n```"


def _aux_view(task: Task) -> str:
    hint = task.fields.get("helper_hint")
    hint_text = f"\nA helper that would help: {hint}" if hint else ""
    return (
        f"{_problem(task)}\nWrite only `def {HELPER_NAME}(...)`, a helper the author of "
        f"`{task['entry_point']}` can call. Do not write `{task['entry_point']}` itself.{hint_text}"
    )


def _main_view(task: Task) -> str:
    return (
        f"{_problem(task)}\nWrite the complete function `{task['entry_point']}` with its signature. A teammate "
        f"writes a helper `{HELPER_NAME}(...)` you may call; agree on its arguments by message."
    )


def _tester_view(task: Task) -> str:
    return f"{_problem(task)}\nWrite 3-6 `assert` statements that call `{task['entry_point']}` and check its result."


def _reviewer_view(task: Task) -> str:
    return f"{_problem(task)}\nYour feedback shows how the team's program does on the visible tests."


def _solo_view(task: Task) -> str:
    return f"{_problem(task)}\nWrite the complete function `{task['entry_point']}` with its signature."


_CODE_FORMAT = "Put your code in one ```python block."

_ROLES: tuple[Role, ...] = (
    Role(
        HELPER_NAME,
        "Helper author",
        f"You write the helper function `{HELPER_NAME}`. {_CODE_FORMAT}",
        _aux_view,
    ),
    Role("main", "Main author", f"You write the problem's entry-point function. {_CODE_FORMAT}", _main_view),
    Role("tester", "Tester", f"You write unit tests as plain assert statements. {_CODE_FORMAT}", _tester_view),
    Role(
        "reviewer",
        "Reviewer",
        "You review the team's program: send concrete fixes to aux or main by message; your draft is a short review.",
        _reviewer_view,
    ),
)
_SOLO = Role("solo", "Programmer", f"You write the whole solution alone. {_CODE_FORMAT}", _solo_view)

CODE_ROLES: frozenset[str] = frozenset({HELPER_NAME, "main", "tester", "solo"})
"""Roles whose draft is code (the env extracts it from a fence)."""


def coding_team(num_agents: int) -> tuple[Role, ...]:
    """The roles of a coding team of ``num_agents`` (1..4)."""
    return team_for(_ROLES, _SOLO, num_agents)
