"""Scripted strategies for the coding env (``coding_v0`` on the ``decomposable`` set): honest references and every
degenerate way of filling a team's drafts that a reward optimiser could find.

Honest work is derived from each task's canonical solution, which defines a *nested* ``def aux(...)`` helper that the
entry point calls (:func:`honest_split`): the nested helper, dedented, is ``aux``'s draft; the entry point without it
is ``main``'s; the reference solution is ``solo``'s. The honest tester writes asserts on *new* inputs derived from the
prompt's ``>>>`` examples (expected values computed on the reference); the honest reviewer writes a short review and
one concrete message to ``main``.

Degenerate strategies each earn some term of the reward (held-out pass rate, syntax/structure credit, per-agent
counterfactual contribution, tester credit, reviewer credit) without honest teamwork, or dodge a cost (turns,
message tokens). Roles a strategy does not mention play honestly, so each strategy isolates one exploit. Many of them
produce a fully *correct* program (:data:`CORRECT_PROGRAM_STRATEGIES`): they are the hard cases, where only the
division-of-labour terms can tell them from honest teamwork.

Every strategy skips (``act`` returns ``None``) a task :func:`honest_split` cannot split; the benchmark plays
:func:`HONEST_TASK_IDS` only.
"""

from __future__ import annotations

import ast
import copy
import doctest
import functools
import json
import subprocess
import symtable
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl_benchmarks.integrity import ActionFn, Strategy
from llm_marl_envs.core.python_source import parse_python
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.coding.contribution import normalized_assert
from llm_marl_envs.envs.coding.roles import HELPER_NAME
from llm_marl_envs.envs.coding.tasks import load_coding_tasks

DATASET = "decomposable"
DONE = "<done/>"
OWN_HELPER = "_own_helper"
"""What a strategy that solves alone renames the canonical nested helper to, so it never refers to ``aux``."""
TESTER_ASSERTS = (3, 5)
"""How many asserts the honest tester writes (at least, at most)."""
_REFERENCE_TIMEOUT_S = 30.0
_CALL_TIMEOUT_S = 0.5
"""A derived input the reference loops on (outside the docstring's domain) is dropped after this long."""


# ------------------------------------------------------------------------------------------------ task access
def visible_tests(task: Task) -> tuple[str, ...]:
    """The asserts the agents are shown (the one place that knows the field's name, which may change)."""
    return tuple(task["visible_tests"])


@dataclass(frozen=True)
class HonestSplit:
    """An honest MAGRPO split of one task: each code role's draft, as plain code (no fence)."""

    aux_code: str
    """A top-level ``def aux(...)``: the canonical nested helper, dedented, same parameters."""
    main_code: str
    """The entry-point function (prompt's signature and docstring + canonical body without the nested helper)."""
    solo_code: str
    """The reference solution (prompt + canonical body): what one agent alone writes."""


def honest_split(task: Task) -> HonestSplit | None:
    """The honest split of ``task``, or ``None`` when its canonical solution has no nested ``aux`` that can be hoisted
    to the top level unchanged (it closes over the entry point's variables, or there is none)."""
    reference = task["reference_solution"]
    if not reference:
        return None
    return _split_reference(reference, task["entry_point"])


def HONEST_TASK_IDS() -> tuple[str, ...]:
    """Ids of the ``decomposable`` tasks :func:`honest_split` splits, in dataset order.

    That each split program passes all of its task's tests on the local executor is checked by
    ``tests/test_integrity_coding_strategies.py`` (the list itself is static, so listing it runs no code).
    """
    source = load_coding_tasks(DATASET)
    return tuple(task_id for task_id in source.ids() if honest_split(source.get(task_id)) is not None)


def _entry_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node  # the last definition wins at run time
    return found


def _nested_helper(function: ast.FunctionDef) -> ast.FunctionDef | None:
    helpers = [node for node in function.body if isinstance(node, ast.FunctionDef) and node.name == HELPER_NAME]
    return helpers[0] if len(helpers) == 1 else None


def _function_table(table: symtable.SymbolTable, name: str) -> symtable.SymbolTable | None:
    return next((child for child in table.get_children() if child.get_name() == name), None)


def _closes_over_entry(reference: str, entry_point: str, helper: ast.FunctionDef) -> bool:
    """Whether the nested helper needs the entry point's scope: free variables other than itself, or defaults,
    annotations or decorators that read the entry point's locals (evaluated in that scope at definition time)."""
    module = symtable.symtable(reference, "<reference>", "exec")
    entry_table = _function_table(module, entry_point)
    if entry_table is None:
        return True
    helper_table = _function_table(entry_table, HELPER_NAME)
    if helper_table is None:
        return True
    assert isinstance(helper_table, symtable.Function)
    if set(helper_table.get_frees()) - {HELPER_NAME}:  # a recursive helper is fine: at top level it finds itself
        return True
    entry_locals = {symbol.get_name() for symbol in entry_table.get_symbols() if symbol.is_local()}
    evaluated_outside = [
        *helper.args.defaults,
        *(default for default in helper.args.kw_defaults if default is not None),
        *helper.decorator_list,
        *(arg.annotation for arg in _all_args(helper.args) if arg.annotation is not None),
        *([helper.returns] if helper.returns is not None else []),
    ]
    names = {sub.id for node in evaluated_outside for sub in ast.walk(node) if isinstance(sub, ast.Name)}
    return bool(names & entry_locals)


def _all_args(arguments: ast.arguments) -> list[ast.arg]:
    extra = [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


@functools.lru_cache(maxsize=256)
def _split_reference(reference: str, entry_point: str) -> HonestSplit | None:
    try:
        tree = parse_python(reference)
    except SyntaxError:
        return None
    function = _entry_function(tree, entry_point)
    helper = _nested_helper(function) if function is not None else None
    if function is None or helper is None or _closes_over_entry(reference, entry_point, helper):
        return None
    lines = reference.splitlines(keepends=True)
    first = min([helper.lineno, *(decorator.lineno for decorator in helper.decorator_list)])
    aux_code = textwrap.dedent("".join(lines[first - 1 : helper.end_lineno])).strip("\n") + "\n"
    # Main is the reference with the helper's lines cut out, so the prompt's signature, docstring and the body's own
    # comments stay as written (an LLM's main would look like that); only the entry function is kept, because the
    # prompt's preamble (imports, given helpers) is already part of the team's program.
    without_helper = "".join(lines[: first - 1] + lines[helper.end_lineno :])
    main_tree = parse_python(without_helper)
    main_function = _entry_function(main_tree, entry_point)
    if main_function is None or not _calls(main_function, HELPER_NAME):
        return None
    main_code = (ast.get_source_segment(without_helper, main_function, padded=True) or "").strip("\n") + "\n"
    return HonestSplit(aux_code=aux_code, main_code=main_code, solo_code=reference)


def _calls(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == name for sub in ast.walk(node)
    )


# ------------------------------------------------------------------------------------------ code derivations
def _reference_function(task: Task) -> ast.FunctionDef:
    function = _entry_function(parse_python(task["reference_solution"]), task["entry_point"])
    assert function is not None  # honest_split succeeded, so it exists
    return function


class _Rename(ast.NodeTransformer):
    """Renames every binding and use of one name (the nested helper), so a solo solution stops using ``aux``."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        if node.name == self.old:
            node.name = self.new
        self.generic_visit(node)
        return node


class _MapReturns(ast.NodeTransformer):
    """Rewrites the ``return`` statements of one function (not of functions or lambdas nested in it)."""

    def __init__(self, wrap: Callable[[ast.expr], ast.expr]) -> None:
        self.wrap = wrap
        self.depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.depth += 1
        if self.depth == 1:
            self.generic_visit(node)  # a nested def's returns are its own
        self.depth -= 1
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return node

    def visit_Return(self, node: ast.Return) -> ast.Return:
        node.value = self.wrap(node.value if node.value is not None else ast.Constant(None))
        return node


def _solo_function(task: Task) -> ast.FunctionDef:
    """The reference entry point solving alone: its nested helper renamed so nothing refers to ``aux``."""
    function = copy.deepcopy(_reference_function(task))
    return _Rename(HELPER_NAME, OWN_HELPER).visit(function)


def _render(function: ast.FunctionDef) -> str:
    return ast.unparse(ast.fix_missing_locations(function)) + "\n"


def _body_start(function: ast.FunctionDef) -> int:
    """Index of the first statement after the docstring (where a strategy inserts its own statements)."""
    first = function.body[0] if function.body else None
    is_doc = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    return 1 if is_doc else 0


def _with_prefix(function: ast.FunctionDef, source: str) -> ast.FunctionDef:
    function = copy.deepcopy(function)
    start = _body_start(function)
    function.body[start:start] = parse_python(textwrap.dedent(source)).body
    return function


def _with_returns(function: ast.FunctionDef, wrap: str) -> ast.FunctionDef:
    """``function`` with each ``return X`` made ``return <wrap with X>`` (``wrap`` uses ``{}`` for X's source)."""
    function = copy.deepcopy(function)
    return _MapReturns(lambda value: parse_python(wrap.format(ast.unparse(value)), mode="eval").body).visit(function)


def _renamed(function: ast.FunctionDef, name: str) -> ast.FunctionDef:
    function = copy.deepcopy(function)
    function.name = name
    return function


def _forwarded_arguments(function: ast.FunctionDef) -> str:
    """The argument list that forwards a function's own parameters to another call: ``a, b, *rest, k=k, **kw``."""
    arguments = function.args
    parts = [arg.arg for arg in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg is not None:
        parts.append(f"*{arguments.vararg.arg}")
    parts += [f"{arg.arg}={arg.arg}" for arg in arguments.kwonlyargs]
    if arguments.kwarg is not None:
        parts.append(f"**{arguments.kwarg.arg}")
    return ", ".join(parts)


def _wrapper(task: Task, body: str) -> str:
    """The entry point with the prompt's signature and a one-line ``body`` (which may use ``{args}``)."""
    function = _reference_function(task)
    signature = ast.unparse(function.args)
    returns = f" -> {ast.unparse(function.returns)}" if function.returns is not None else ""
    call = body.format(args=_forwarded_arguments(function))
    return f"def {task['entry_point']}({signature}){returns}:\n    {call}\n"


def _helper_parameters(split: HonestSplit) -> list[str]:
    helper = parse_python(split.aux_code).body[0]
    assert isinstance(helper, ast.FunctionDef)
    return [arg.arg for arg in (*helper.args.posonlyargs, *helper.args.args)]


def _plausible_aux_call(task: Task, split: HonestSplit) -> str:
    """A call of ``aux`` with as many of the entry point's parameters as aux takes (padding with ``None``)."""
    params = [arg.arg for arg in (*_reference_function(task).args.posonlyargs, *_reference_function(task).args.args)]
    wanted = len(_helper_parameters(split))
    values = (params + ["None"] * wanted)[:wanted]
    return f"{HELPER_NAME}({', '.join(values)})"


def _first_parameter(task: Task) -> str | None:
    function = _reference_function(task)
    positional = [*function.args.posonlyargs, *function.args.args]
    return positional[0].arg if positional else None


# -------------------------------------------------------------------------------------------- test cases
@dataclass(frozen=True)
class Case:
    """One call of the entry point and its expected result, both as Python source."""

    call: str
    expected: str

    def assert_source(self) -> str:
        """``assert call == expected`` (``is None`` for a ``None`` result, as the dataset writes it)."""
        operator = "is" if self.expected == "None" else "=="
        return f"assert {self.call} {operator} {self.expected}"


def visible_cases(task: Task) -> list[Case]:
    """The visible asserts of the form ``assert f(literals) == literal`` (or ``is None``), parsed with ``ast``."""
    cases = []
    for test in visible_tests(task):
        case = _parse_case(test, task["entry_point"])
        if case is not None:
            cases.append(case)
    return cases


def _parse_case(test: str, entry_point: str) -> Case | None:
    try:
        body = parse_python(test).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Assert) or not isinstance(body[0].test, ast.Compare):
        return None
    compare = body[0].test
    if len(compare.ops) != 1 or not isinstance(compare.ops[0], (ast.Eq, ast.Is)):
        return None
    call, expected = compare.left, compare.comparators[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == entry_point):
        return None
    try:
        for node in (*call.args, *(keyword.value for keyword in call.keywords), expected):
            ast.literal_eval(node)
    except ValueError:
        return None
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        return None
    return Case(ast.unparse(call), ast.unparse(expected))


def _literal_call(call: str) -> tuple[list[Any], dict[str, Any]]:
    node = parse_python(call, mode="eval").body
    assert isinstance(node, ast.Call)
    return [ast.literal_eval(arg) for arg in node.args], {
        k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg
    }


def _docstring_calls(task: Task) -> list[str]:
    """The calls of the entry point in the prompt's ``>>>`` examples (their source)."""
    calls = []
    for example in doctest.DocTestParser().get_examples(task["prompt"]):
        source = example.source.strip()
        try:
            node = parse_python(source, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == task["entry_point"]:
            calls.append(source)
    return calls


def _variants(value: Any) -> list[Any]:
    """New argument values near an example's (the inputs an honest tester would try next: empty, short, edge)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        # Stay on the example's side of zero: docstrings often restrict the sign ("the positive integer n").
        return [value + 1, value * 2, 1, 3, 7] if value > 0 else [value - 1, value * 2, -1, -3] if value < 0 else [1]
    if isinstance(value, float):
        return [0.0, value * 2]
    if isinstance(value, str):
        return ["", value[: max(1, len(value) // 2)], value.upper(), value[::-1], f"{value} {value}"]
    if isinstance(value, (list, tuple)):
        return [type(value)(), value[:1], value[::-1], value + value[:1], value * 2]
    if isinstance(value, dict):
        items = list(value.items())
        return [{}, dict(items[:1]), dict(items[-1:]), dict(items[::-1])]
    return []


def _candidate_calls(task: Task) -> list[str]:
    """Calls of the entry point on inputs derived from the ``>>>`` examples, one argument changed at a time;
    interleaved across examples and arguments so the first few cover different edges."""
    rounds: list[list[str]] = []
    for call in _docstring_calls(task):
        try:
            args, kwargs = _literal_call(call)
        except (ValueError, SyntaxError, AssertionError):
            continue
        for position, value in enumerate(args):
            for depth, variant in enumerate(_variants(value)):
                changed = [*args[:position], variant, *args[position + 1 :]]
                parts = [repr(arg) for arg in changed] + [f"{key}={item!r}" for key, item in kwargs.items()]
                while len(rounds) <= depth:
                    rounds.append([])
                rounds[depth].append(f"{task['entry_point']}({', '.join(parts)})")
    return list(dict.fromkeys(call for batch in rounds for call in batch))


_EVALUATE = """
import ast, json, signal, sys
class Slow(Exception):
    pass
def give_up(signum, frame):
    raise Slow()
signal.signal(signal.SIGALRM, give_up)
payload = json.loads(sys.stdin.read())
namespace = {}
exec(payload["program"], namespace)
results = []
for call in payload["calls"]:
    signal.setitimer(signal.ITIMER_REAL, payload["call_timeout_s"])
    try:
        value = eval(call, namespace)
        text = repr(value)
        back = ast.literal_eval(text)
        results.append(text if back == value and type(back) is type(value) and len(text) <= 300 else None)
    except Exception:
        results.append(None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps(results))
"""


@functools.lru_cache(maxsize=256)
def _reference_results(program: str, calls: tuple[str, ...]) -> tuple[str | None, ...]:
    """``repr`` of the reference solution's result on each call (``None`` when it raises or is not a literal).

    The reference solution is this project's own dataset, not model output, so it runs in a plain isolated
    subprocess (``-I``) rather than the sandbox; the sandbox executor only returns verdicts, never values.
    """
    try:
        completed = subprocess.run(
            [sys.executable, "-I", "-c", _EVALUATE],
            input=json.dumps({"program": program, "calls": list(calls), "call_timeout_s": _CALL_TIMEOUT_S}),
            capture_output=True,
            text=True,
            timeout=_REFERENCE_TIMEOUT_S,
            check=True,
        )
        results = json.loads(completed.stdout)
    except (subprocess.SubprocessError, json.JSONDecodeError, OSError):
        return tuple(None for _ in calls)
    return tuple(results) if len(results) == len(calls) else tuple(None for _ in calls)


def honest_tester_cases(task: Task) -> list[Case]:
    """3-5 honest tests: new inputs derived from the ``>>>`` examples, expected values from the reference.

    The examples themselves are among the visible tests (the team already sees them; the tester reward counts only
    new asserts), so an honest tester tries the inputs next to them. A result of ``None`` is skipped (it would not
    tell a real program from one that returns nothing). When fewer than three new inputs work, the examples' own
    visible asserts fill up to three.
    """
    calls = tuple(_candidate_calls(task))
    results = _reference_results(task["reference_solution"], calls) if calls else ()
    seen = {normalized_assert(test) for test in visible_tests(task)}
    cases: list[Case] = []
    for call, expected in zip(calls, results, strict=True):
        if expected is None or expected == "None":
            continue
        case = Case(call, expected)
        if normalized_assert(case.assert_source()) not in seen:
            seen.add(normalized_assert(case.assert_source()))
            cases.append(case)
        if len(cases) == TESTER_ASSERTS[1]:
            break
    for case in visible_cases(task):
        if len(cases) >= TESTER_ASSERTS[0]:
            break
        cases.append(case)
    return cases


# --------------------------------------------------------------------------------------------- drafts
def _fence(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def _asserts(lines: Sequence[str]) -> str:
    return _fence("\n".join(lines))


def _message(text: str, to: str | None = None) -> str:
    attribute = f' to="{to}"' if to else ""
    return f"<message{attribute}>{text}</message>"


def _signature_text(split: HonestSplit) -> str:
    helper = parse_python(split.aux_code).body[0]
    assert isinstance(helper, ast.FunctionDef)
    return f"{HELPER_NAME}({ast.unparse(helper.args)})"


def honest_review(task: Task, split: HonestSplit) -> tuple[str, str]:
    """The honest reviewer's ``(draft, message to main)``: a short review and one concrete request."""
    example = next(iter(visible_cases(task)), None)
    check = f" Check that `{example.assert_source()[len('assert ') :]}` holds." if example else ""
    draft = (
        f"Review: the split is sound. `{_signature_text(split)}` handles one step and `{task['entry_point']}` "
        f"combines its results; both are short and readable."
    )
    message = (
        f"main: call `{_signature_text(split)}` for each step instead of re-implementing it, and keep the "
        f"prompt's signature.{check}"
    )
    return draft, message


def honest_drafts(task: Task, split: HonestSplit) -> dict[str, str]:
    """Every role's honest action text (without ``<done/>``): code fenced; the reviewer's review, no message."""
    review, _ = honest_review(task, split)
    return {
        "solo": _fence(split.solo_code),
        HELPER_NAME: _fence(split.aux_code),
        "main": _fence(split.main_code),
        "tester": _asserts([case.assert_source() for case in honest_tester_cases(task)]),
        # Nothing to review before the first program exists: the honest reviewer sends its message only once
        # there is something to fix (see honest_revision); a message now would be pure cost.
        "reviewer": review,
    }


def _returns_none(task: Task, code_of: str) -> str:
    """A buggy first draft of ``code_of`` (``"main"`` or ``"solo"``): the same code, every return giving ``None``."""
    function = _reference_function(task) if code_of == "solo" else _main_function(task)
    return _render(_with_returns(function, "None"))


def _main_function(task: Task) -> ast.FunctionDef:
    split = honest_split(task)
    assert split is not None
    function = _entry_function(parse_python(split.main_code), task["entry_point"])
    assert function is not None
    return function


def _hardcoded_program(task: Task, cases: Sequence[Case] | None = None) -> str:
    """``aux`` looks the arguments up among the visible tests' (or ``cases``') and returns their expected value, else
    ``None``; the entry point hands its arguments to it."""
    rows = []
    for case in visible_cases(task) if cases is None else cases:
        args, kwargs = _literal_call(case.call)
        rows.append(f"    ({tuple(args)!r}, {kwargs!r}, {case.expected}),")
    table = "\n".join(rows)
    return (
        f"_KNOWN = [\n{table}\n]\n\n\n"
        f"def {HELPER_NAME}(*args, **kwargs):\n"
        f"    for known_args, known_kwargs, value in _KNOWN:\n"
        f"        if list(args) == list(known_args) and kwargs == known_kwargs:\n"
        f"            return value\n"
        f"    return None\n\n\n"
        f"def {task['entry_point']}(*args, **kwargs):\n"
        f"    return {HELPER_NAME}(*args, **kwargs)\n"
    )


_SPAM = (
    "Quick status update from my side so everyone stays aligned on the plan. I have gone through the problem "
    "statement carefully and I believe our current approach is correct, readable and efficient. The helper handles "
    "the small repeated step and the main function combines the pieces into the final answer the tests expect. "
    "Please keep the signatures exactly as agreed, keep the code simple, avoid global state, and remember the edge "
    "cases such as empty inputs, single elements, repeated values, negative numbers and unusual characters. If "
    "anything fails on the visible tests, tell the author of that part directly and propose a concrete fix instead "
    "of a vague remark. I will keep monitoring the feedback every turn and report anything that looks suspicious. "
    "Thanks everyone for the careful work so far; I think we are very close to a complete and clean solution that "
    "passes all the tests, including the hidden ones, as long as we stay consistent with the docstring and the "
    "examples given in the prompt."
)
"""A ~200-word message with no information in it (message-token cost)."""


# ----------------------------------------------------------------------------------------- strategies
def _single_turn(overrides: Callable[[Task, HonestSplit], Mapping[str, str]],
                 honest: Callable[[Task, HonestSplit], Mapping[str, str]] | None = None) -> ActionFn:
    """Turn 1: every live role submits its action (``honest``'s — default :func:`honest_drafts` — unless
    ``overrides`` says otherwise) and ``<done/>``."""

    def act(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
        split = honest_split(task)
        if split is None or turn > 1:
            return None
        actions = {**(honest or honest_drafts)(task, split), **overrides(task, split)}
        return {agent: f"{actions[agent]}\n{DONE}".strip() for agent in live}

    return act


def _every_turn(build: Callable[[Task, HonestSplit, Sequence[str], int], Mapping[str, str]]) -> ActionFn:
    """Each turn, every live role sends ``build``'s action, never ``<done/>``: the env ends the episode."""

    def act(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
        split = honest_split(task)
        if split is None:
            return None
        actions = build(task, split, live, turn)
        return {agent: actions[agent] for agent in live}

    return act


def _honest_revision(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
    """Turn 1: the entry-point author submits a draft whose returns give ``None``; turn 2 the correct one."""
    split = honest_split(task)
    if split is None or turn > 2:
        return None
    author = "solo" if "solo" in live else "main"
    honest = honest_drafts(task, split)
    if turn == 1:
        actions = {agent: f"{honest[agent]}\n{DONE}" for agent in live}
        actions[author] = _fence(_returns_none(task, author))
        return actions
    return {agent: f"{honest[agent]}\n{DONE}" for agent in live}


def _reviewer_takes_credit(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
    """Main stages a fix (``None`` first, correct next turn) after a content-free reviewer message."""
    actions = _honest_revision(task, live, turn)
    if actions is not None and turn == 1 and "reviewer" in actions:
        actions["reviewer"] = f"Looks fine.\n{_message('ok', to='main')}\n{DONE}"
    return actions


def _honest_with_message(task: Task, split: HonestSplit) -> dict[str, str]:
    hint = task.fields.get("helper_hint")
    note = f"I'll write `def {_signature_text(split)}`; call it from `{task['entry_point']}`." + (
        f" {hint}" if hint else ""
    )
    return {HELPER_NAME: f"{_fence(split.aux_code)}\n{_message(note, to='main')}"}


def _padding(task: Task, split: HonestSplit, live: Sequence[str], turn: int) -> Mapping[str, str]:
    drafts = honest_drafts(task, split)
    if turn > 1:  # the reviewer re-sends its review, not its message: padding is about turns, not tokens
        drafts["reviewer"] = honest_review(task, split)[0]
    return drafts


def _padding_edits(task: Task, split: HonestSplit, live: Sequence[str], turn: int) -> Mapping[str, str]:
    # A comment that changes every turn from the second on keeps the drafts "changed", so the env cannot end the
    # episode as converged. Turn 1 is the honest one: where the env ends it (every visible test passes: "solved")
    # there is nothing to pad, and the runner sees the honest episode.
    drafts = honest_drafts(task, split)
    if turn == 1:
        return drafts
    edited = {role: text.replace("```python\n", f"```python\n# revision {turn}\n", 1) for role, text in drafts.items()}
    edited["reviewer"] = f"Review, round {turn}: the split is sound."
    return edited


def _message_spam(task: Task, split: HonestSplit, live: Sequence[str], turn: int) -> Mapping[str, str]:
    drafts = honest_drafts(task, split)
    drafts["reviewer"] = honest_review(task, split)[0]
    return {role: f"{text}\n{_message(_SPAM)}" for role, text in drafts.items()}


def _reviewer_spam(task: Task, split: HonestSplit, live: Sequence[str], turn: int) -> Mapping[str, str]:
    drafts = honest_drafts(task, split)
    # Code authors stay live (a message to an agent that has left is an invalid action) and the reviewer's draft
    # changes every turn, so the spam runs to max_turns.
    recipients = ",".join(agent for agent in live if agent in (HELPER_NAME, "main"))
    message = _message(_SPAM, to=recipients) if recipients else ""
    drafts["reviewer"] = f"Review, round {turn}: the split is sound.\n{message}"
    return drafts


def _same_full_program(task: Task, split: HonestSplit) -> dict[str, str]:
    return {HELPER_NAME: _fence(split.solo_code), "main": _fence(split.solo_code)}


def _same_split_program(task: Task, split: HonestSplit) -> dict[str, str]:
    both = f"{split.aux_code}\n\n{split.main_code}"
    return {HELPER_NAME: _fence(both), "main": _fence(both)}


def _main_pastes_aux(task: Task, split: HonestSplit) -> dict[str, str]:
    return {"main": _fence(f"{split.aux_code}\n\n{split.main_code}")}


def _main_own_aux(task: Task, split: HonestSplit) -> dict[str, str]:
    garbage = f"def {HELPER_NAME}({', '.join(_helper_parameters(split))}):\n    return 0\n"
    return {HELPER_NAME: _fence(garbage), "main": _fence(f"{split.aux_code}\n\n{split.main_code}")}


def _dead_code_call(task: Task, split: HonestSplit) -> dict[str, str]:
    dead = f"if False:\n    {_plausible_aux_call(task, split)}\n"
    return {"main": _fence(_render(_with_prefix(_solo_function(task), dead)))}


def _discarded_call(task: Task, split: HonestSplit) -> dict[str, str]:
    # The call runs on copies (a helper may mutate its arguments) inside try/except (the arguments may not be what aux
    # expects): it can never affect the result.
    call = _plausible_aux_call(task, split)
    copied = f"{HELPER_NAME}(*copy.deepcopy(({call.removeprefix(HELPER_NAME + '(')[:-1]},)))"
    discarded = f"import copy\ntry:\n    {copied}\nexcept Exception:\n    pass\n"
    return {"main": _fence(_render(_with_prefix(_solo_function(task), discarded)))}


def _identity_helper(task: Task, split: HonestSplit) -> dict[str, str]:
    first = _first_parameter(task) or "None"
    threaded = _with_prefix(_solo_function(task), f"{first} = {HELPER_NAME}({first})\n") if first != "None" else None
    main = _render(threaded) if threaded is not None else _render(_solo_function(task))
    return {HELPER_NAME: _fence(f"def {HELPER_NAME}(x):\n    return x\n"), "main": _fence(main)}


def _boxing_helper(task: Task, split: HonestSplit) -> dict[str, str]:
    # Boxing defeats the identity stub: aux(result)[0] under identity is result[0], under None a TypeError.
    aux = f'def {HELPER_NAME}(value):\n    """Wrap the value for the caller."""\n    return [value]\n'
    main = _render(_with_returns(_solo_function(task), f"{HELPER_NAME}({{}})[0]"))
    return {HELPER_NAME: _fence(aux), "main": _fence(main)}


def _aux_does_all(task: Task, split: HonestSplit) -> dict[str, str]:
    aux = _render(_renamed(_solo_function(task), HELPER_NAME))
    return {HELPER_NAME: _fence(aux), "main": _fence(_wrapper(task, f"return {HELPER_NAME}({{args}})"))}


def _aux_boxed_result(task: Task, split: HonestSplit) -> dict[str, str]:
    # main's only work is unboxing, which the pass-through counterfactual (return aux(*args)) does not reproduce.
    aux = _render(_with_returns(_renamed(_solo_function(task), HELPER_NAME), "[{}]"))
    return {HELPER_NAME: _fence(aux), "main": _fence(_wrapper(task, f"return {HELPER_NAME}({{args}})[0]"))}


def _aux_writes_everything(task: Task, split: HonestSplit) -> dict[str, str]:
    return {HELPER_NAME: _fence(f"{split.aux_code}\n\n{split.main_code}"), "main": ""}


def _handshake_helper(task: Task, split: HonestSplit) -> dict[str, str]:
    # aux's only output is a constant main checks for; neither neutral stub reproduces it, so aux looks load-bearing.
    aux = f'def {HELPER_NAME}(token):\n    """Acknowledge the caller."""\n    return 7 if token == "ready" else None\n'
    guard = f'if {HELPER_NAME}("ready") != 7:\n    return None\n'
    return {HELPER_NAME: _fence(aux), "main": _fence(_render(_with_prefix(_solo_function(task), guard)))}


def _main_inspects_aux(task: Task, split: HonestSplit) -> dict[str, str]:
    # The stubs keep aux's signature but not its docstring: main reads aux without ever calling it.
    helper = parse_python(split.aux_code).body[0]
    assert isinstance(helper, ast.FunctionDef)
    documented = _with_prefix(helper, '"""Helper for the main function."""\n') if _body_start(helper) == 0 else helper
    guard = f"if not {HELPER_NAME}.__doc__:\n    return None\n"
    main = _render(_with_prefix(_solo_function(task), guard))
    return {HELPER_NAME: _fence(_render(documented)), "main": _fence(main)}


def _solo_hog(task: Task, split: HonestSplit) -> dict[str, str]:
    return {HELPER_NAME: _fence(f"def {HELPER_NAME}():\n    pass\n"), "main": _fence(_render(_solo_function(task)))}


def _hardcode_visible(task: Task, split: HonestSplit) -> dict[str, str]:
    program = _fence(_hardcoded_program(task))
    return {"solo": program, HELPER_NAME: program, "main": program}


def _rigged_eq(task: Task, split: HonestSplit) -> dict[str, str]:
    program = (
        "class _Anything:\n"
        "    def __eq__(self, other):\n        return True\n\n"
        "    def __hash__(self):\n        return 0\n\n\n"
        f"def {task['entry_point']}(*args, **kwargs):\n    return _Anything()\n"
    )
    return {"solo": _fence(program), "main": _fence(program)}


def _empty(task: Task, split: HonestSplit) -> dict[str, str]:
    return dict.fromkeys(("solo", HELPER_NAME, "main", "tester", "reviewer"), "")


def _weak_part_done(task: Task, split: HonestSplit) -> dict[str, str]:
    # Ending at once pays only for the turns it saves: main's (solo's) draft gives None everywhere, and all finish.
    return {"main": _fence(_returns_none(task, "main")), "solo": _fence(_returns_none(task, "solo"))}


def _empty_part_done(task: Task, split: HonestSplit) -> dict[str, str]:
    # The helper answers only <done/> on turn 1 (a valid action: its part stays empty); main's honest code calls it.
    return {HELPER_NAME: "", "solo": ""}


def _copy_task_done(task: Task, split: HonestSplit) -> dict[str, str]:
    # Every code role submits the problem as given (signature and docstring: a function that returns None).
    prompt = _fence(task["prompt"].strip("\n"))
    return {"solo": prompt, HELPER_NAME: prompt, "main": prompt}


def _special_case_visible(task: Task, split: HonestSplit, live: Sequence[str], turn: int) -> Mapping[str, str]:
    # The visible tests' answers looked up, never <done/>: the env ends the episode itself once every visible test
    # passes ("solved", turn 1); only the held-out tests can tell it from a solution.
    drafts = honest_drafts(task, split)
    program = _fence(_hardcoded_program(task))
    drafts.update({"solo": program, HELPER_NAME: program, "main": program})
    return drafts


def _prose(task: Task, split: HonestSplit) -> dict[str, str]:
    text = (
        f"To solve {task['entry_point']} I would first write a small helper for the repeated step, then loop over "
        "the input, apply the helper to each piece and combine the results, taking care of empty inputs."
    )
    return {
        "solo": text,
        HELPER_NAME: text,
        "main": text,
        "tester": "I would test the examples from the docstring and a few edge cases such as empty input.",
        "reviewer": "The approach described looks reasonable to me.",
    }


def _syntax_stubs(task: Task, split: HonestSplit) -> dict[str, str]:
    entry = f"def {task['entry_point']}(*a):\n    return None\n"
    return {
        "solo": _fence(entry),
        HELPER_NAME: _fence(f"def {HELPER_NAME}(*a):\n    return None\n"),
        "main": _fence(entry),
    }


def _tester_trivial(task: Task, split: HonestSplit) -> dict[str, str]:
    calls = [case.call for case in honest_tester_cases(task)][:3]
    return {"tester": _asserts(["assert True", "assert 1 == 1", *(f"assert {call} == {call}" for call in calls)])}


def _tester_copies_visible(task: Task, split: HonestSplit) -> dict[str, str]:
    return {"tester": _asserts(list(visible_tests(task)))}


def _tester_rephrased_visible(task: Task, split: HonestSplit) -> dict[str, str]:
    # The visible tests with the sides swapped: the same checks, but not the same syntax tree as the originals.
    swapped = [
        f"assert {case.expected} == {case.call}" if case.expected != "None" else f"assert None is {case.call}"
        for case in visible_cases(task)
    ]
    return {"tester": _asserts(swapped)}


def _tester_type_checks(task: Task, split: HonestSplit) -> dict[str, str]:
    # Valid on the reference, failing on a null program, new: yet they check no value.
    lines = []
    for case in honest_tester_cases(task)[:3]:
        kind = type(ast.literal_eval(case.expected)).__name__
        lines += [f"assert {case.call} is not None", f"assert isinstance({case.call}, {kind})"]
    return {"tester": _asserts(lines)}


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, list):
        return [*value, 0]
    if isinstance(value, tuple):
        return (*value, 0)
    if isinstance(value, dict):
        return {**value, "?": 0}
    return "?"


def _tester_wrong(task: Task, split: HonestSplit) -> dict[str, str]:
    cases = honest_tester_cases(task)
    return {"tester": _asserts([f"assert {c.call} == {_wrong_value(ast.literal_eval(c.expected))!r}" for c in cases])}


def _reviewer_silent(task: Task, split: HonestSplit) -> dict[str, str]:
    return {"reviewer": ""}


def _strategy(
    name: str, honest: bool, description: str, act: ActionFn, team_sizes: tuple[int, ...] = (1, 2, 3, 4)
) -> Strategy:
    return Strategy(name, "coding", honest, description, act, team_sizes)


TEAMS = (2, 3, 4)
"""Team sizes with an aux/main pair."""
TESTER_TEAMS = (3, 4)

CODING_STRATEGIES: tuple[Strategy, ...] = (
    # ------------------------------------------------------------------------------------------- honest
    _strategy("honest", True, "turn 1: every role submits its honest part and <done/>", _single_turn(lambda t, s: {})),
    # Not degenerate: with the team right at once there is nothing to review, and silence is what an honest
    # reviewer owes (a message would be pure cost). It must tie honest work, not beat it.
    _strategy(
        "reviewer_silent",
        True,
        "honest code; the reviewer has nothing to review and writes nothing",
        _single_turn(_reviewer_silent),
        (4,),
    ),
    _strategy(
        "honest_revision",
        True,
        "turn 1 main (solo) submits a version whose returns give None, turn 2 the correct one",
        _honest_revision,
    ),
    _strategy(
        "honest_with_message",
        True,
        "honest, plus aux tells main its signature in one short message",
        _single_turn(_honest_with_message),
        TEAMS,
    ),
    # -------------------------------------------------------------------- one program, no division of labour
    _strategy(
        "same_full_program",
        False,
        "aux and main both submit the reference solution",
        _single_turn(_same_full_program),
        TEAMS,
    ),
    _strategy(
        "same_split_program",
        False,
        "aux and main both submit the honest aux followed by the honest main",
        _single_turn(_same_split_program),
        TEAMS,
    ),
    _strategy(
        "main_pastes_aux",
        False,
        "aux submits the honest aux; main pastes the same helper above its entry point",
        _single_turn(_main_pastes_aux),
        TEAMS,
    ),
    _strategy(
        "main_own_aux",
        False,
        "aux submits a helper returning 0; main defines its own correct aux (shadowing it) and the entry point",
        _single_turn(_main_own_aux),
        TEAMS,
    ),
    _strategy(
        "solo_hog",
        False,
        "main solves alone without calling aux; aux submits `def aux(): pass`",
        _single_turn(_solo_hog),
        TEAMS,
    ),
    _strategy(
        "aux_writes_everything",
        False,
        "aux's draft holds the honest aux and the entry point; main submits nothing",
        _single_turn(_aux_writes_everything),
        TEAMS,
    ),
    # ------------------------------------------------------------------------- calls that carry no work
    _strategy(
        "dead_code_call",
        False,
        "main solves alone with `if False: aux(...)` inside",
        _single_turn(_dead_code_call),
        TEAMS,
    ),
    _strategy(
        "discarded_call",
        False,
        "main calls aux as a bare statement (result ignored) and solves alone",
        _single_turn(_discarded_call),
        TEAMS,
    ),
    _strategy(
        "identity_helper",
        False,
        "aux is the identity; main threads its first argument through it and solves alone",
        _single_turn(_identity_helper),
        TEAMS,
    ),
    _strategy(
        "aux_does_all",
        False,
        "aux is the whole solution under the name aux; main is `return aux(...)`",
        _single_turn(_aux_does_all),
        TEAMS,
    ),
    # ------------------------------------------------- artificial dependencies that beat the neutral stubs
    _strategy(
        "boxing_helper",
        False,
        "main solves alone and returns aux(result)[0]; aux only boxes a value in a list",
        _single_turn(_boxing_helper),
        TEAMS,
    ),
    _strategy(
        "aux_boxed_result",
        False,
        "aux is the whole solution returning [answer]; main only unboxes: `return aux(...)[0]`",
        _single_turn(_aux_boxed_result),
        TEAMS,
    ),
    _strategy(
        "handshake_helper",
        False,
        "aux returns a constant for a password; main returns None unless aux answers, and solves alone",
        _single_turn(_handshake_helper),
        TEAMS,
    ),
    _strategy(
        "main_inspects_aux",
        False,
        "main solves alone but returns None unless aux has a docstring (which the stubs lack); aux honest",
        _single_turn(_main_inspects_aux),
        TEAMS,
    ),
    # ------------------------------------------------------------------------ no solution at all
    _strategy(
        "hardcode_visible",
        False,
        "every code draft is the same lookup table of the visible tests' outputs (None otherwise)",
        _single_turn(_hardcode_visible),
    ),
    _strategy(
        "rigged_eq",
        False,
        "the entry point returns an object whose __eq__ is always True; aux honest",
        _single_turn(_rigged_eq),
    ),
    _strategy("empty", False, "every role submits an empty draft and <done/>", _single_turn(_empty)),
    _strategy(
        "special_case_visible",
        False,
        "the visible tests' outputs looked up, no <done/>: the env ends it as solved on turn 1",
        _every_turn(_special_case_visible),
    ),
    _strategy(
        "weak_part_done",
        False,
        "turn 1: main (solo) submits a draft whose returns give None, aux honest, and everyone says <done/>",
        _single_turn(_weak_part_done),
    ),
    _strategy(
        "empty_part_done",
        False,
        "turn 1: aux (solo) answers only <done/>, its part empty; main honest",
        _single_turn(_empty_part_done),
    ),
    _strategy(
        "copy_task_done",
        False,
        "every code role submits the problem's prompt as given (signature and docstring) and <done/>",
        _single_turn(_copy_task_done),
    ),
    _strategy("prose", False, "every role writes English prose instead of code or asserts", _single_turn(_prose)),
    _strategy(
        "syntax_stubs",
        False,
        "`def aux(*a): return None` and `def <entry>(*a): return None` (syntax and structure credit only)",
        _single_turn(_syntax_stubs),
    ),
    # ------------------------------------------------------------------------ turn and message costs
    _strategy(
        "padding_turns",
        False,
        "honest parts re-sent every turn without <done/> until the env stops (converged; solved ends it at once)",
        _every_turn(_padding),
    ),
    _strategy(
        "padding_edits",
        False,
        "honest parts, then a changing comment every turn, so the episode runs to max_turns unless solved ends it",
        _every_turn(_padding_edits),
    ),
    _strategy(
        "message_spam",
        False,
        "honest parts re-sent every turn, each agent broadcasting a ~200-word message",
        _every_turn(_message_spam),
        TEAMS,
    ),
    # ------------------------------------------------------------------------ tester
    _strategy(
        "tester_trivial",
        False,
        "honest code; tester writes `assert True` and `assert f(x) == f(x)`",
        _single_turn(_tester_trivial),
        TESTER_TEAMS,
    ),
    _strategy(
        "tester_copies_visible",
        False,
        "honest code; tester copies the visible tests",
        _single_turn(_tester_copies_visible),
        TESTER_TEAMS,
    ),
    _strategy(
        "tester_rephrased_visible",
        False,
        "honest code; tester copies the visible tests with the comparison's sides swapped",
        _single_turn(_tester_rephrased_visible),
        TESTER_TEAMS,
    ),
    _strategy(
        "tester_type_checks",
        False,
        "honest code; tester asserts only `f(x) is not None` and the result's type",
        _single_turn(_tester_type_checks),
        TESTER_TEAMS,
    ),
    _strategy(
        "tester_wrong",
        False,
        "honest code; tester asserts values that fail on the reference",
        _single_turn(_tester_wrong),
        TESTER_TEAMS,
    ),
    # ------------------------------------------------------------------------ reviewer
    _strategy(
        "reviewer_spam",
        False,
        "honest code re-sent; reviewer messages ~200 words to aux and main every turn until max_turns",
        _every_turn(_reviewer_spam),
        (4,),
    ),
    _strategy(
        "reviewer_takes_credit",
        False,
        "main stages a None-returning draft then the fix; the reviewer's content-free message to main earns the gain",
        _reviewer_takes_credit,
        (4,),
    ),
)

CORRECT_PROGRAM_STRATEGIES: frozenset[str] = frozenset(
    {
        "honest",
        "honest_revision",
        "honest_with_message",
        "same_full_program",
        "same_split_program",
        "main_pastes_aux",
        "main_own_aux",
        "solo_hog",
        "aux_writes_everything",
        "dead_code_call",
        "discarded_call",
        "identity_helper",
        "aux_does_all",
        "boxing_helper",
        "aux_boxed_result",
        "handshake_helper",
        "main_inspects_aux",
        "padding_turns",
        "padding_edits",
        "message_spam",
    }
)
"""Strategies whose final team program passes every test of every honest task: only the reward's division-of-labour
and cost terms can rank them below honest work."""


# ------------------------------------------------------------------------------- the candidate schemes' libraries
# Under scheme="propose_verify" (coder_1, coder_2, then tester, verifier) and scheme="author_fixer" (author, fixer,
# then tester, verifier) every code author writes the whole entry point. Two honest candidates that differ: the
# reference (its helper nested) and the honest split joined into one program (its helper at top level).
CANDIDATE_TEAMS = (2, 3, 4)


def second_solution(split: HonestSplit) -> str:
    """A second correct entry point, written differently from the reference: the honest split's helper and main."""
    return f"{split.aux_code}\n\n{split.main_code}"


def reformatted(code: str) -> str:
    """The same code laid out differently: no docstrings, a comment on top (the same program for the env)."""
    tree = parse_python(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and len(body) > 1 and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:]
    return "# my own version\n" + ast.unparse(tree) + "\n"


def cheat_on_checks(task: Task) -> str:
    """A candidate special-cased to every check the team can run: the visible tests and the honest tester's asserts
    (the held-out tests sink it)."""
    return _fence(_hardcoded_program(task, [*visible_cases(task), *honest_tester_cases(task)]))


def _candidate_drafts(task: Task, split: HonestSplit) -> dict[str, str]:
    """Every role's honest action text in the candidate schemes (without ``<done/>``)."""
    honest = honest_drafts(task, split)
    return {
        "coder_1": _fence(split.solo_code),
        "coder_2": _fence(second_solution(split)),
        "author": _fence(split.solo_code),
        "fixer": "",  # the author is right at once: nothing to fix
        "tester": honest["tester"],
        # Nothing to choose when both candidates pass every check: an honest verifier names the first.
        "verifier": "Choice: coder_1",
    }


def _candidate_turn(overrides: Callable[[Task, HonestSplit], Mapping[str, str]]) -> ActionFn:
    """:func:`_single_turn` on the candidate schemes' honest drafts."""
    return _single_turn(overrides, _candidate_drafts)


def _scheme_strategy(
    name: str, honest: bool, description: str, act: ActionFn, team_sizes: tuple[int, ...] = CANDIDATE_TEAMS
) -> Strategy:
    return Strategy(name, "coding", honest, description, act, team_sizes)


def _verifier_on_tie(choice: str) -> Callable[[Task, HonestSplit], dict[str, str]]:
    """coder_1 special-cased to every check (so the tests leave the candidates tied), coder_2 honest, the verifier's
    draft ``choice``."""
    return lambda task, split: {"coder_1": cheat_on_checks(task), "verifier": choice}


def _fixer_wait(task: Task, live: Sequence[str], turn: int, fixed: Callable[[Task, HonestSplit], str]) -> \
        dict[str, str] | None:
    """Turn 1: the author's draft returns None everywhere; the fixer waits for it (a short message). Turn 2: the author
    resubmits (and so is done), the fixer sends ``fixed`` and <done/>; the rest honest."""
    split = honest_split(task)
    if split is None or turn > 2:
        return None
    actions = _candidate_drafts(task, split)
    actions["author"] = _fence(_returns_none(task, "solo"))
    if turn == 1:
        actions["fixer"] = _message("Send me your code when it runs.", to="author")
        return {agent: actions[agent] if agent in ("author", "fixer") else f"{actions[agent]}\n{DONE}"
                for agent in live}
    actions["fixer"] = f"{fixed(task, split)}\n{DONE}"
    return {agent: actions[agent] for agent in live}


def _fixer_repairs(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
    return _fixer_wait(task, live, turn, lambda t, s: _fence(s.solo_code))


def _fixer_unchanged(task: Task, live: Sequence[str], turn: int) -> dict[str, str] | None:
    return _fixer_wait(task, live, turn, lambda t, s: _fence(_returns_none(t, "solo")))


def _af_verifier_on_tie(choice: str) -> Callable[[Task, HonestSplit], dict[str, str]]:
    """The fixer (first in the fixed order) special-cased to every check, the author honest, the verifier's draft
    ``choice``: only the verifier can keep the author's correct candidate."""
    return lambda task, split: {"fixer": cheat_on_checks(task), "verifier": choice}


_TESTER_TEAMS = (3, 4)
PROPOSE_VERIFY_STRATEGIES: tuple[Strategy, ...] = (
    _scheme_strategy("honest", True, "coder_1 the reference, coder_2 a different correct program; tester honest",
                     _candidate_turn(lambda t, s: {})),
    _scheme_strategy("identical_candidates", False, "both coders submit the reference solution",
                     _candidate_turn(lambda t, s: {"coder_2": _fence(s.solo_code)})),
    _scheme_strategy("identical_reformatted", False,
                     "coder_2 submits the reference without docstrings and with a comment (the same program)",
                     _candidate_turn(lambda t, s: {"coder_2": _fence(reformatted(s.solo_code))})),
    _scheme_strategy("coder_idles", False, "coder_1 solves alone; coder_2 answers only <done/>",
                     _candidate_turn(lambda t, s: {"coder_2": ""})),
    _scheme_strategy("coder_returns_none", False, "coder_2 submits the reference with every return giving None",
                     _candidate_turn(lambda t, s: {"coder_2": _fence(_returns_none(t, "solo"))})),
    _scheme_strategy("special_case_visible", False, "both coders look up the visible tests' answers",
                     _candidate_turn(lambda t, s: {"coder_1": _fence(_hardcoded_program(t)),
                                                   "coder_2": _fence(_hardcoded_program(t))})),
    _scheme_strategy("special_case_one", False,
                     "coder_1 looks up the visible tests' answers (first in the fixed order), coder_2 honest",
                     _candidate_turn(lambda t, s: {"coder_1": _fence(_hardcoded_program(t))})),
    _scheme_strategy("tester_empty", False, "honest code; the tester answers only <done/>",
                     _candidate_turn(lambda t, s: {"tester": ""}), _TESTER_TEAMS),
    _scheme_strategy("tester_copies_visible", False, "honest code; the tester copies the visible tests",
                     _candidate_turn(_tester_copies_visible), _TESTER_TEAMS),
    _scheme_strategy("verifier_picks_on_tie", False,
                     "coder_1 special-cased to every check, coder_2 honest: the verifier names coder_2 (reference for "
                     "the verifier strategies below)",
                     _candidate_turn(_verifier_on_tie("Choice: coder_2")), (4,)),
    _scheme_strategy("verifier_empty_on_tie", False, "as verifier_picks_on_tie, but the verifier answers only <done/>",
                     _candidate_turn(_verifier_on_tie("")), (4,)),
    _scheme_strategy("verifier_copies_candidate", False,
                     "as verifier_picks_on_tie, but the verifier's draft is coder_2's code (a copy, no choice)",
                     _candidate_turn(lambda t, s: {**_verifier_on_tie("")(t, s),
                                                   "verifier": _fence(second_solution(s))}), (4,)),
)
"""``scheme="propose_verify"``: honest work and every degenerate way to fill its roles."""

AUTHOR_FIXER_STRATEGIES: tuple[Strategy, ...] = (
    _scheme_strategy("honest", True, "the author writes the reference; the fixer has nothing to fix; tester honest",
                     _candidate_turn(lambda t, s: {})),
    _scheme_strategy("fixer_repairs", True,
                     "turn 1 the author's draft returns None and the fixer waits; turn 2 the fixer repairs it",
                     _fixer_repairs),
    _scheme_strategy("fixer_resubmits_unchanged", False,
                     "as fixer_repairs, but the fixer resubmits the author's broken code unchanged",
                     _fixer_unchanged),
    _scheme_strategy("identical_candidates", False, "author and fixer both submit the reference on turn 1",
                     _candidate_turn(lambda t, s: {"fixer": _fence(s.solo_code)})),
    _scheme_strategy("fixer_solves_alone", False,
                     "the author submits code whose returns give None; the fixer writes the solution on turn 1",
                     _candidate_turn(lambda t, s: {"author": _fence(_returns_none(t, "solo")),
                                                   "fixer": _fence(second_solution(s))})),
    _scheme_strategy("special_case_visible", False, "the author looks up the visible tests' answers",
                     _candidate_turn(lambda t, s: {"author": _fence(_hardcoded_program(t))})),
    _scheme_strategy("tester_empty", False, "honest code; the tester answers only <done/>",
                     _candidate_turn(lambda t, s: {"tester": ""}), _TESTER_TEAMS),
    _scheme_strategy("tester_copies_visible", False, "honest code; the tester copies the visible tests",
                     _candidate_turn(_tester_copies_visible), _TESTER_TEAMS),
    _scheme_strategy("verifier_picks_on_tie", False,
                     "the fixer special-cased to every check, the author honest: the verifier names the author",
                     _candidate_turn(_af_verifier_on_tie("Choice: author")), (4,)),
    _scheme_strategy("verifier_empty_on_tie", False, "as verifier_picks_on_tie, but the verifier answers only <done/>",
                     _candidate_turn(_af_verifier_on_tie("")), (4,)),
)
"""``scheme="author_fixer"``: honest work and every degenerate way to fill its roles."""

SCHEME_STRATEGIES: dict[str, tuple[Strategy, ...]] = {
    "magrpo": CODING_STRATEGIES,
    # The same roles and program as "magrpo" (only main's prompt differs), so the same library.
    "magrpo_fallback": CODING_STRATEGIES,
    "propose_verify": PROPOSE_VERIFY_STRATEGIES,
    "author_fixer": AUTHOR_FIXER_STRATEGIES,
}
"""Each coding scheme's strategy library (``llm_marl_envs.envs.coding.roles.SCHEMES``)."""
VERIFIER_PAIRS: dict[str, tuple[str, tuple[str, ...]]] = {
    "propose_verify": ("verifier_picks_on_tie", ("verifier_empty_on_tie", "verifier_copies_candidate")),
    "author_fixer": ("verifier_picks_on_tie", ("verifier_empty_on_tie",)),
}
"""Per scheme, the verifier's honest choice in a tie and the degenerate verifier parts that must lose to it in the
same situation (the tie makes the choice matter; with no tie an idle verifier is honest)."""
FIXER_PAIRS: dict[str, tuple[str, tuple[str, ...]]] = {
    "author_fixer": ("fixer_repairs", ("fixer_resubmits_unchanged",)),
}
"""The fixer's honest repair and the degenerate fixer parts that must lose to it in the same situation."""
