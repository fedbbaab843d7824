"""Coding roles (MAGRPO's helper/main split, plus a tester and a reviewer) and what each sees of the problem.

* ``aux`` writes a helper function named ``aux`` (MAGRPO's auxiliary agent) with a return, for ``main`` to call;
* ``main`` writes the entry-point function, which may call ``aux`` and must not define it (MAGRPO's main agent);
* ``tester`` (3+ agents) writes extra ``assert`` statements against the entry point;
* ``reviewer`` (4 agents) reads the results of the visible tests on the team's program (its feedback) and sends
  fixes by message; its draft is a short review;
* ``solo`` (1 agent) writes the whole function: the single-agent baseline and the GRPO case.

Every role sees the problem once: the entry point's docstring as prose, then its code (imports, given helpers, the
signature line). Where the dataset describes a useful helper (``helper_hint``, e.g. ``aux(word) returns True when
...``) every role of the ``aux``/``main`` schemes sees it (the candidate schemes, with no ``aux``, do not), so
``main`` learns the helper's signature from the task, as ``aux`` does — never from ``aux``'s draft; without a hint
the two agree by message. The team's program is the prompt's preamble (imports,
given helpers), then ``aux``'s code, then ``main``'s.

Replies may be started for the model (:func:`reply_prefix`, the env's ``reply_prefixes``), every turn: ``aux``'s
opens a code fence and ``def aux(`` (MAGRPO's format line ``def aux(...):``), ``main``'s the entry point's signature
line and a first line that calls ``aux``, ``solo``'s the signature, the tester's ``assert ENTRY_POINT(``. A small
model then writes the right function instead of copying the signature it read, and ``main`` uses the helper at
all. Every turn, because a free reply undid it: probed on train-split tasks with the start on the first turn only,
the helper's final draft defined ``aux`` in 2 of 8 episodes (7 of 8 after turn 1). A started reply ends an agent's
work by ending with ``<done/>`` or by resubmitting its code unchanged.

**Schemes** (the env's ``scheme=``, :data:`SCHEMES`): how a team of 2-4 splits the work. 1 agent is ``solo`` under
every scheme.

* ``"magrpo"``: the roles above, exactly as MAGRPO splits the task (``aux``/``main``, then ``tester``, ``reviewer``);
  ``main``'s reply is started with ``result = aux(``. The official setting, and the scheme ``reward_mode="magrpo"``
  picks when none is named; at the default model's scale the split loses to one agent (docs/results.md,
  "Coding: the ``propose_verify`` scheme").
* ``"magrpo_fallback"``: the same roles and program, but ``main`` is not forced to open with the call: its reply
  starts at the signature, and it is asked to keep its own code as a fallback where ``aux`` might fail (MAGRPO's
  teams find this "fallback" scheme when main's first line is free; a wrong helper then need not sink the program).
* ``"propose_verify"`` (the default, :data:`DEFAULT_SCHEME`): ``coder_1`` and ``coder_2`` each write the whole entry
  point (a candidate); the visible tests run on every candidate and the team's program is the candidate
  :func:`~llm_marl_envs.envs.coding.program.select_candidate` picks. 3 agents add the ``tester`` (its asserts also
  run on every candidate and break ties between candidates that pass as many visible tests), 4 the ``verifier``, which
  reads every candidate and its verdicts and names one (``Choice: coder_2``): its choice breaks the ties the tests
  leave. Coders see their own code and each teammate's *results* (visible tests passed, the first failing call), never
  a teammate's code. Both coders get one instruction, unless ``coder_briefs="distinct"`` asks each for its own way
  of writing the function (:data:`CODER_STYLES`).
* ``"author_fixer"``: the ``author`` writes the entry point; the ``fixer`` reads the author's code and its failing
  visible tests and writes a repaired whole entry point. Both are candidates for the same rule (the fixer's first
  on a tie: a repair that passes as much is the later version). 3 agents add the ``tester``, 4 the ``verifier``.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from llm_marl_envs.core.config import check_choice
from llm_marl_envs.core.roles import Role, team_for
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.coding.program import split_prompt

HELPER_NAME = "aux"
FENCE = "```python\n"
HELPER_HINT_LABEL = "Helper:"
"""Before the dataset's description of a useful helper in the ``aux``/``main`` schemes' views of the problem."""


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


def _fallback_main_instruction(task: Task) -> str:
    return (f"Write the function {task['entry_point']} whole. Use {HELPER_NAME}(...), your teammate's helper, where "
            f"it helps, and keep your own code as a fallback; do not define {HELPER_NAME}.")


def _coder_instruction(task: Task, style: str = "") -> str:
    return (f"Write the function {task['entry_point']} whole: your own candidate{style}. The visible tests pick the "
            f"team's program among the candidates.")


CODER_STYLES: dict[str, str] = {
    "coder_1": ", with plain loops and if statements",
    "coder_2": ", with Python's built-in functions and comprehensions where they fit",
}
"""Under ``coder_briefs="distinct"``, what each coder's instruction adds: two ways to write the same function, so
that the two candidates need not fail on the same tasks (two samples of one prompt fail together: phi 0.37 between
best of 2's samples, 0.36 between the shipped coders', docs/results/coding-propose-verify/candidates)."""
CODER_BRIEFS: tuple[str, ...] = ("same", "distinct")
"""``propose_verify``'s coder instructions: ``"same"`` (the default; both coders get one instruction) or
``"distinct"`` (each coder is asked for its own way of writing it, :data:`CODER_STYLES`). ``"same"`` stays the
default: on 50 train tasks either of the distinct pair's candidates passed every visible test on 0.295 of pairs
against 0.261 with one brief (p = 0.22), and two samples of the built-ins brief alone did better than the mix
(docs/results/coding-propose-verify/briefs-train)."""


def _styled_coder(name: str) -> Role:
    def instruction(task: Task) -> str:
        return _coder_instruction(task, CODER_STYLES[name])

    return Role(name, "Coder", instruction, _problem)


def _fixer_instruction(task: Task) -> str:
    return (f"Write the function {task['entry_point']} whole: the author's code repaired so the failing tests pass "
            f"(your own version if the author has none).")


def _verifier_instruction(task: Task) -> str:
    return "Name the candidate that is right for every input, as: Choice: NAME."


_ROLES: tuple[Role, ...] = (
    Role(HELPER_NAME, "Helper author", _aux_instruction, _team_view),
    Role("main", "Main author", _main_instruction, _team_view),
    Role("tester", "Tester", _tester_instruction, _team_view),
    Role("reviewer", "Reviewer", _reviewer_instruction, _team_view),
)
_SOLO = Role("solo", "Programmer", _solo_instruction, _problem)

SCHEMES: tuple[str, ...] = ("magrpo", "magrpo_fallback", "propose_verify", "author_fixer")
"""The coding env's role schemes (the module docstring says what each is)."""
DEFAULT_SCHEME = "propose_verify"
"""The scheme of a coding env that names none. Chosen on the train split only, untrained team of 2 against one agent
(10 pairs, ``docs/results/train-split-coding-schemes``): ``propose_verify`` 0.108 vs 0.075, ``magrpo`` 0.050."""
MAGRPO_DEFAULT_SCHEME = "magrpo"
"""The scheme of a coding env that names none but asks for ``reward_mode="magrpo"`` (MAGRPO's own setting)."""
MAGRPO_SCHEMES: frozenset[str] = frozenset({"magrpo", "magrpo_fallback"})
"""Schemes with MAGRPO's aux/main program (the only ones ``reward_mode="magrpo"`` can score)."""
VERIFIER = "verifier"
_VERIFIER = Role(VERIFIER, "Verifier", _verifier_instruction, _problem)
# The candidate schemes have no `aux` to call: their roles read the problem without the dataset's helper hint (a
# coder told of "aux(word)" calls a function nobody defines).
_CANDIDATE_TESTER = Role("tester", "Tester", _tester_instruction, _problem)
_CATALOGUES: dict[str, tuple[Role, ...]] = {
    "magrpo": _ROLES,
    "magrpo_fallback": (_ROLES[0], Role("main", "Main author", _fallback_main_instruction, _team_view), *_ROLES[2:]),
    "propose_verify": (Role("coder_1", "Coder", _coder_instruction, _problem),
                       Role("coder_2", "Coder", _coder_instruction, _problem), _CANDIDATE_TESTER, _VERIFIER),
    "author_fixer": (Role("author", "Author", _solo_instruction, _problem),
                     Role("fixer", "Fixer", _fixer_instruction, _problem), _CANDIDATE_TESTER, _VERIFIER),
}
CANDIDATE_ORDER: dict[str, tuple[str, ...]] = {
    "propose_verify": ("coder_1", "coder_2"),
    "author_fixer": ("fixer", "author"),
}
"""Per candidate scheme, the roles that write a whole entry point (a candidate), in the fixed order that breaks the
ties no test and no verifier broke (:func:`~llm_marl_envs.envs.coding.program.select_candidate`)."""
CANDIDATE_ROLES: frozenset[str] = frozenset(name for names in CANDIDATE_ORDER.values() for name in names)

TIE_ORDERS: tuple[str, ...] = ("fixed", "shuffled")
"""How the candidate schemes break a tie that no test and no verifier broke: ``"fixed"`` (the default) by
:data:`CANDIDATE_ORDER`; ``"shuffled"`` by that order permuted once per episode with the env's seeded RNG, so that no
coder's candidate is always the one sent at a tie (the same seed gives the same permutation)."""

CODE_ROLES: frozenset[str] = frozenset({HELPER_NAME, "main", "tester", "solo", *CANDIDATE_ROLES})
"""Roles whose draft is code (the env extracts it from a fence)."""
ENTRY_POINT_ROLES: frozenset[str] = frozenset({"main", "solo", *CANDIDATE_ROLES})
"""Roles whose part is the entry point (``program.role_function`` reads their function)."""


MAIN_CALL_START = "    result = aux("
"""How ``main``'s reply goes on after the signature: a first line that calls the helper. Without it the untrained
SmolLM2-135M's ``main`` never called ``aux`` (0 of 8 train-split episodes; with it 7 of 8): the helper could not
matter, so no MAGRPO group ever varied on using it. The call's arguments, and what ``main`` does with the result,
are the model's; the reward still pays only what the tests and counterfactuals measure."""


VERIFIER_START = "Choice: "
"""How the verifier's reply starts: it goes on with a candidate's name (:func:`~llm_marl_envs.envs.coding.program.
verifier_choice` reads the first one it names)."""


def reply_prefix(role: str, task: Task, scheme: str = DEFAULT_SCHEME) -> str:
    """How ``role``'s reply starts when the env starts it for the model (see the module docstring); ``""``: free.

    Under ``"magrpo_fallback"`` ``main``'s reply starts at the signature only (its first line is its own)."""
    if role == HELPER_NAME:
        return f"{FENCE}def {HELPER_NAME}("
    if role == "main" and scheme == "magrpo":
        return f"{FENCE}{signature(task)}\n{MAIN_CALL_START}"
    if role in ENTRY_POINT_ROLES:
        return f"{FENCE}{signature(task)}"
    if role == "tester":
        return f"{FENCE}assert {task['entry_point']}("
    if role == VERIFIER:
        return VERIFIER_START
    return ""


def check_scheme(scheme: object) -> str:
    """``scheme`` if it names a scheme of :data:`SCHEMES`, else a ``TypeError``/``ValueError`` that lists them."""
    if not isinstance(scheme, str):
        raise TypeError(f"scheme: expected one of {SCHEMES}, got {type(scheme).__name__}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
    return scheme


def _check_scheme_option(name: str, value: object, choices: tuple[str, ...], scheme: str, applies_to: Collection[str],
                         what_it_does: str) -> str:
    """``value`` if it is one of ``choices`` and, unless it is the default ``choices[0]``, ``scheme`` is one of
    ``applies_to``; else a ``TypeError``/``ValueError`` naming the option (one check for every scheme option)."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected one of {choices}, got {type(value).__name__}")
    check_choice(name, value, choices)
    if value != choices[0] and scheme not in applies_to:
        raise ValueError(f"{name}={value!r} {what_it_does}; scheme {scheme!r} has none")
    return value


def check_coder_briefs(coder_briefs: object, scheme: str) -> str:
    """``coder_briefs`` if it is one of :data:`CODER_BRIEFS` and ``scheme`` has coders to brief (``"distinct"`` only
    under ``"propose_verify"``), else a ``TypeError``/``ValueError`` that says so."""
    return _check_scheme_option("coder_briefs", coder_briefs, CODER_BRIEFS, scheme, ("propose_verify",),
                                "briefs propose_verify's two coders (the other schemes' roles already differ)")


def check_tie_order(tie_order: object, scheme: str) -> str:
    """``tie_order`` if it is one of :data:`TIE_ORDERS` and ``scheme`` has candidates to order (``"shuffled"`` only
    in :data:`CANDIDATE_ORDER`'s schemes), else a ``TypeError``/``ValueError`` that says so."""
    return _check_scheme_option("tie_order", tie_order, TIE_ORDERS, scheme, CANDIDATE_ORDER,
                                f"orders the candidates of {sorted(CANDIDATE_ORDER)}")


def coding_team(num_agents: int, scheme: str = DEFAULT_SCHEME, coder_briefs: str = "same") -> tuple[Role, ...]:
    """The roles of a coding team of ``num_agents`` (1..4) under ``scheme`` (see the module docstring), its coders
    briefed by ``coder_briefs`` (:data:`CODER_BRIEFS`)."""
    catalogue = _CATALOGUES[check_scheme(scheme)]
    if check_coder_briefs(coder_briefs, scheme) == "distinct":
        catalogue = (_styled_coder("coder_1"), _styled_coder("coder_2"), *catalogue[2:])
    return team_for(catalogue, _SOLO, num_agents)
