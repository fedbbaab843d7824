"""Counterfactual credit for a coding team: what the team's program loses when one agent's part is replaced.

Consistency in the coding env is not a resemblance between texts (resemblance pays for copying). It is a *difference
reward* (Wolpert & Tumer 2002, "Optimal payoff functions for members of collectives"; the counterfactual baseline of
COMA, Foerster et al. 2018): an agent's contribution is the part of the team's success that disappears when its
part is swapped for a neutral stub, everything else held fixed.

``aux`` (helper author). Its whole draft is replaced by each of two neutral stubs with the helper's own signature
and docstring: ``return None`` and ``return <first argument>`` (identity); a draft that defines no ``aux`` is replaced
by nothing. aux is *load-bearing* when **no** stub can stand in for it: each stub loses at least one test (visible or
held-out) that the team's program passes. (Asking one test to fail under every stub would miss true/false helpers: a
``None`` stub passes the tests expecting ``False`` and an identity stub, returning a truthy argument, those expecting
``True``. All tests decide this, because more tests tell a real helper from a stub more often; only held-out tests
are paid.) What this rules out, by construction:

* duplicated programs and helpers pasted into main: main's own definitions shadow aux's (the program is aux's code
  then main's), the stubs change nothing, contribution 0;
* dead calls (``if False: aux()``) and discarded calls (``aux(x)`` as a statement, result unused): a ``None`` stub
  changes no outcome, contribution 0;
* a trivial helper (identity, or a constant the identity stub reproduces): contribution 0;
* a main that only checks that aux has a docstring: the stubs keep it.

If a stub changes an outcome, aux's code was executed during that test (or its definition was inspected): outcomes
can only change through the name ``aux`` or other names aux's draft defines. So "the helper actually ran" needs no
separate call counter in the sandbox.

``main`` (entry-point author). Its draft is replaced by nothing (the entry point then exists only if aux's draft
defines it too, as when both submit the same full program) and by a pass-through ``def entry(*a, **k): return
aux(*a, **k)`` (a main that only wraps aux adds nothing). Load-bearing as for aux.

**Share of the work.** A dependency can be manufactured at no cost: aux boxes a value (``return [x]``) that main
unboxes, or answers a password main checks, or aux computes the whole answer in a box main merely opens. So a
load-bearing part earns ``pass rate × min(1, share / 0.25)``, where ``share`` is its fraction of the two parts'
statements and expressions (docstrings aside): a part that holds a quarter of the code or more earns the held-out
pass rate, a one-line box or password about half or less. Honest splits of the decomposable set hold 19–78 % in aux.

A team where one agent does all the work gets at most half the consistency of a team where both parts carry weight
(consistency is the mean of the contributions), at the same quality. **Known gaps**, which the integrity suite
measures (they lose to honest work there, by less than the blunt cases): a helper padded with code that does
nothing, to inflate its share; a main that inspects aux's code object rather than calling it.

``tester`` (3+ agents). Its asserts do not change the program, so its counterfactual is the information the team
would lack without them: an assert counts when it is *valid* (passes on the task's reference solution),
*discriminating* (fails on a null program whose entry point returns ``None``) and *new* (not a copy of a visible test
the team already sees). Contribution = counted asserts / max(3, asserts written), times the team's held-out pass
rate (a tester earns nothing for a team that fails). ``assert True``, ``f(x) == f(x)``, copies of visible tests and
wrong asserts all count zero.

``reviewer`` (4 agents). Its review changes neither program nor tests; what the team would lose without it shows up
only in later turns. It is credited with the held-out pass-rate gains of the turns that follow a message it sent to a
code author (``aux``/``main``), capped at 1. While the team's program has not yet failed a visible test the reviewer
could see, there is nothing to review and it is not scored (``None``: left out of the mean rather than counted as 0,
so a team that is right at once is not punished for its idle reviewer). Weakness, documented: the gain is credited
post hoc, not by replaying the episode without the review; message tokens cost reward, so a reviewer that messages
every turn pays for the credit it might collect.

**Candidate schemes** (``scheme="propose_verify"`` or ``"author_fixer"``: every code author writes the whole entry
point, and the team's program is the candidate :func:`~llm_marl_envs.envs.coding.program.select_candidate` picks).
``v(S)`` is the held-out pass rate of the program the rule picks among the candidates of the set ``S``.

* Coders (``propose_verify``) earn ``v({i})``, their own candidate's held-out pass rate — the team outcome with only
  this coder against the outcome with none — and a candidate identical to an earlier coder's (the same code once
  layout, comments and docstrings are set aside: :func:`~llm_marl_envs.envs.coding.program.normalized_code`) adds
  nothing: 0. Why not the difference ``v(N) - v(N without i)`` alone: with two candidates that both pass, it pays
  each 0, and it pays a lone correct coder whose teammate idles in full, so it would teach one coder to go solo and
  the other to idle; and its average over orders (the Shapley value) sums to ``v(N)`` whatever the split, so its
  mean cannot tell two independent solutions from one and a passenger. With ``v({i})`` two distinct correct
  candidates earn twice what one correct candidate and an idle, wrong or duplicated one earn.
* The ``author`` earns ``v({author})``; the ``fixer`` earns the difference its part makes, ``v({author, fixer}) -
  v({author})`` (at least 0): a resubmitted copy, a duplicate or a repair that fixes nothing earns 0. A fixer that
  wrote nothing while the author's candidate passes every visible test (nothing it could see to fix) is not scored
  (``None``, as an idle reviewer).
* The ``tester`` earns as under the MAGRPO split (valid, discriminating, new asserts); its asserts also run on every
  candidate and break ties between candidates that pass as many visible tests.
* The ``verifier`` earns ``v(chosen) - mean v(tied)``, at least 0, where *tied* are the candidates the tests left
  tied at the top: what its choice adds over picking among them at random. It is not scored (``None``) when the
  tests left no tie whose candidates differ on the held-out tests (nothing to choose), and earns 0 when it names no
  tied candidate (the fixed order decided, not it). Known limit: a verifier reads the candidates' code, so a coder
  can address it in a comment.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.python_source import try_parse_module
from llm_marl_envs.envs.coding.program import assemble_program, defined_functions

HELPER_STUB_KINDS: tuple[str, ...] = ("none", "identity")
"""The neutral stubs that replace the helper author's draft."""


def _top_level_function(code: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = try_parse_module(code)
    if tree is None:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node  # the last definition wins at run time
    return found


def helper_stub(helper_code: str, helper_name: str, kind: str) -> str | None:
    """The neutral replacement for the helper author's whole draft, with the helper's own signature.

    ``kind`` is ``"none"`` (returns ``None``) or ``"identity"`` (returns its first positional argument). When the
    draft defines no such helper, the ``"none"`` replacement is the empty draft (whatever else it defined is gone)
    and ``"identity"`` does not apply (``None``); ``"identity"`` also does not apply to a helper without a
    positional argument (it would equal ``"none"``).
    """
    if kind not in HELPER_STUB_KINDS:
        raise ValueError(f"kind: expected one of {HELPER_STUB_KINDS}, got {kind!r}")
    node = _top_level_function(helper_code, helper_name)
    if node is None:
        return "" if kind == "none" else None
    positional = [*node.args.posonlyargs, *node.args.args]
    if kind == "identity":
        if positional:
            returned = positional[0].arg
        elif node.args.vararg is not None:
            returned = f"({node.args.vararg.arg}[0] if {node.args.vararg.arg} else None)"
        else:
            return None
    else:
        returned = "None"
    signature = ast.unparse(node.args)
    docstring = ast.get_docstring(node, clean=False)
    doc_line = f"    {docstring!r}\n" if docstring is not None else ""
    return f"def {helper_name}({signature}):\n{doc_line}    return {returned}\n"


def pass_through_main(entry_point: str, helper_name: str) -> str:
    """A main that adds nothing: the entry point hands its arguments to the helper."""
    return f"def {entry_point}(*args, **kwargs):\n    return {helper_name}(*args, **kwargs)\n"


def null_program(entry_point: str) -> str:
    """A program whose entry point returns ``None``: asserts that pass on it check nothing."""
    return f"def {entry_point}(*args, **kwargs):\n    return None\n"


@dataclass(frozen=True)
class Counterfactual:
    """One program to run in place of the team's: ``agent``'s part replaced by the stub named ``kind``.

    ``program`` is ``None`` when the replacement cannot pass any test, which is known without running it: the
    program would not define the entry point (or the helper the pass-through calls).
    """

    agent: str
    kind: str
    program: str | None


def counterfactual_programs(
    preamble: str, helper_code: str, main_code: str, entry_point: str, helper_name: str
) -> list[Counterfactual]:
    """The programs with the helper author's or the main author's part swapped for each neutral stub that applies
    (at least one per agent)."""
    programs = []
    for kind in HELPER_STUB_KINDS:
        stub = helper_stub(helper_code, helper_name, kind)
        if stub is not None:
            programs.append(Counterfactual(helper_name, kind, assemble_program(preamble, stub, main_code).program))
    without_main = assemble_program(preamble, helper_code, "").program
    defined = defined_functions(without_main)
    programs.append(Counterfactual("main", "absent", without_main if entry_point in defined else None))
    pass_through = assemble_program(preamble, helper_code, pass_through_main(entry_point, helper_name)).program
    programs.append(Counterfactual("main", "pass_through", pass_through if helper_name in defined else None))
    return programs


def dependent_tests(team_passed: list[bool], counterfactual_passed: list[list[bool]]) -> int:
    """How many tests pass with the team's program and fail under every counterfactual of one agent."""
    if not counterfactual_passed:
        raise ValueError("an agent's contribution needs at least one counterfactual run")
    return sum(
        1 for index, passed in enumerate(team_passed) if passed and not any(run[index] for run in counterfactual_passed)
    )


def load_bearing(team_passed: list[bool], counterfactual_passed: list[list[bool]]) -> bool:
    """Whether no neutral stub can stand in for the agent's part: each one loses at least one test the team passes.

    (Asking one test to fail under *every* stub would miss true/false helpers, where a ``None`` stub passes the
    tests expecting ``False`` and an identity stub, returning a truthy argument, those expecting ``True``.)
    """
    if not counterfactual_passed:
        raise ValueError("an agent's contribution needs at least one counterfactual run")
    return all(
        any(passed and not stubbed for passed, stubbed in zip(team_passed, run, strict=True))
        for run in counterfactual_passed
    )


LOGIC_SHARE_FULL = 0.25
"""A load-bearing part that holds this share of the team's code (or more) earns its full contribution."""


def logic_size(code: str) -> int:
    """Statements and expressions in ``code`` (function headers and docstrings aside); 0 if it does not parse."""
    tree = try_parse_module(code)
    if tree is None:
        return 0
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                skipped |= {id(first), id(first.value)}
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, (ast.stmt, ast.expr))
        and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and id(node) not in skipped
    )


def share_factor(own: str, other: str) -> float:
    """``min(1, share / LOGIC_SHARE_FULL)``: ``own``'s share of the two parts' code (see the module docstring)."""
    own_size, other_size = logic_size(own), logic_size(other)
    total = own_size + other_size
    return min(1.0, own_size / total / LOGIC_SHARE_FULL) if total else 0.0


def normalized_assert(source: str) -> str:
    """An assert's structure without formatting (``ast.dump``), the two sides of a lone ``==`` or ``!=`` in a fixed
    order, to recognise a copied test however it is rephrased; the raw text if it does not parse."""
    tree = try_parse_module(source)
    if tree is None:
        return source.strip()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = sorted((node.left, node.comparators[0]), key=ast.dump)
            node.left, node.comparators = left, [right]
    return ast.dump(tree)


def checks_a_value(source: str, entry_point: str) -> bool:
    """Whether an assert compares the entry point's result with a value that does not come from calling it again
    (``f(x) == 3``, ``f(x) < y``, ``x in f(y)``): ``is not None`` and ``isinstance`` checks say nothing about the
    answer, and ``f(x) == f(x)`` nothing at all."""
    tree = try_parse_module(source)
    if tree is None or not tree.body or not isinstance(tree.body[0], ast.Assert):
        return False

    def calls_entry(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == entry_point
            for n in ast.walk(node)
        )

    for node in ast.walk(tree.body[0].test):
        if isinstance(node, ast.Compare) and not any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(calls_entry(side) for side in sides) and any(not calls_entry(side) for side in sides):
                return True
    return False


def tester_contribution(valid: list[bool], discriminating: list[bool], new: list[bool], pass_rate: float) -> float:
    """(asserts valid, discriminating and new) / max(3, asserts written), times the team's held-out pass rate."""
    counted = sum(1 for v, d, n in zip(valid, discriminating, new, strict=True) if v and d and n)
    return counted / max(3, len(valid)) * pass_rate


def coder_contributions(
    standalone: Mapping[str, float], normalized: Mapping[str, str], order: Sequence[str]
) -> dict[str, float]:
    """Each coder's ``v({i})`` (``standalone``: its candidate's held-out pass rate), 0 for a candidate whose
    ``normalized`` code equals that of a coder earlier in ``order`` (see the module docstring)."""
    seen: set[str] = set()
    contributions = {}
    for agent in order:
        if agent not in standalone:
            continue
        code = normalized.get(agent, "")
        duplicate = bool(code) and code in seen
        contributions[agent] = 0.0 if duplicate else standalone[agent]
        if code:
            seen.add(code)
    return contributions


def fixer_contribution(team: float, author_alone: float, author_visible_clean: bool, fixer_wrote: bool) -> float | None:
    """``team - author_alone`` (at least 0); ``None`` when the fixer wrote nothing while the author's candidate passed
    every visible test (see the module docstring)."""
    if not fixer_wrote and author_visible_clean:
        return None
    return max(0.0, team - author_alone)


def verifier_contribution(choice: str | None, tied: Mapping[str, float]) -> float | None:
    """``v(choice) - mean v(tied)`` (at least 0) over the candidates the tests left ``tied`` at the top (agent ->
    held-out pass rate); ``None`` when they do not differ (nothing to choose), 0 when ``choice`` is none of them."""
    if len(tied) < 2 or len(set(tied.values())) < 2:
        return None
    if choice not in tied:
        return 0.0
    return max(0.0, tied[choice] - sum(tied.values()) / len(tied))
