"""Reading agents' code: extracting it from model text, assembling the team's program, checking its structure.

Everything here is static analysis (``ast``); nothing is executed. Running code is the sandbox's job.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.python_source import parse_python, try_parse_module

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
MAX_TESTER_ASSERTS = 10
"""Only the first asserts a tester writes are run, so a tester cannot flood the executor."""


_CODE_LINE = re.compile(r"^\s*(?:def|class|import|from|return|assert|if|for|while)\b", re.MULTILINE)
_FENCE_MARK = re.compile(r"```")
"""Any fence mark, opening or closing, wherever it stands (``_FENCE`` finds blocks that start mid-line too)."""


def extract_code(text: str) -> str:
    """The code in a reply ``text`` (``""`` when it holds none), read the way a reviewer would read a chat answer.

    * Fenced blocks (```` ```python ````, ```` ``` ````) are the code. When their joined text does not parse, the
      blocks that parse on their own are kept (a reply often holds a good block next to a broken sketch), and a last
      block the token budget cut off (no closing fence) keeps its complete statements: lines are dropped from its end
      until it parses. When no block can be read, the joined text stays as it is (its syntax error is the feedback).
    * Code before the first fence counts when it parses (a reply that forgot its opening fence).
    * A reply with no fence is code when it parses or has a line that starts like code (``def``, ``return``,
      ``assert``...); prose alone is no code (``""``).
    """
    blocks = [block.strip("\n") for block in _FENCE.findall(text)]
    blocks = [block for block in blocks if block.strip()]
    if not blocks:
        if not _FENCE_MARK.search(text):
            bare = text.strip()
            return bare if syntax_error(bare) is None or _CODE_LINE.search(bare) else ""
        return ""  # fences around nothing but prose
    joined = "\n\n".join(blocks)
    if syntax_error(joined) is None:
        return joined
    readable = []
    first_fence = _FENCE_MARK.search(text)
    before = text[: first_fence.start()].strip() if first_fence else ""
    if before and _CODE_LINE.search(before) and syntax_error(before) is None:
        readable.append(before)
    closed = _closed_fences(text)
    for index, block in enumerate(blocks):
        if syntax_error(block) is None:
            readable.append(block)
        elif index == len(blocks) - 1 and not closed:
            cut = _complete_statements(block)
            if cut:
                readable.append(cut)
    return "\n\n".join(readable) if readable else joined


def _closed_fences(text: str) -> bool:
    """Whether every opened fence of ``text`` is closed (an even number of fence marks)."""
    return len(_FENCE_MARK.findall(text)) % 2 == 0


def _complete_statements(code: str) -> str:
    """The longest run of ``code``'s leading lines that parses and defines or does something (``""`` if none)."""
    lines = code.splitlines()
    for end in range(len(lines) - 1, 0, -1):
        head = "\n".join(lines[:end]).rstrip()
        if head and syntax_error(head) is None and _CODE_LINE.search(head):
            return head
    return ""


def syntax_error(code: str) -> str | None:
    """``None`` when ``code`` parses, else a one-line description of the syntax error."""
    try:
        parse_python(code)
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return f"unparsable: {type(error).__name__}"
    return None


def defined_functions(code: str) -> set[str]:
    """Names of the top-level functions ``code`` defines (empty when it does not parse)."""
    tree = try_parse_module(code)
    if tree is None:
        return set()
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


_DEFINITION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds (functions, classes, assignments); imports are kept whole elsewhere."""
    if isinstance(node, _DEFINITION):
        return [node.name]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return [sub.id for target in targets for sub in ast.walk(target) if isinstance(sub, ast.Name)]


def _source_lines(code: str, node: ast.stmt) -> str:
    """The source of a top-level statement, decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return "\n".join(code.splitlines()[first - 1: node.end_lineno])


def role_function(code: str, name: str, others: Collection[str] = ()) -> str:
    """An author's part of the team's program: its function ``name`` and what that function needs, read from
    ``code`` (an author's extracted code); ``code`` unchanged when it does not parse or defines no ``name``.

    Kept: every top-level import, the *first* top-level definition of ``name``, and, transitively, the first
    top-level definition (function, class or assignment) of each name the kept code uses — except ``name`` itself
    again and ``others``, the functions teammates own (the helper's author cannot supply the entry point, ``main``
    cannot supply ``aux``). Left out: redefinitions, other functions nothing kept uses, and top-level statements
    (calls, prints, ad-hoc tests). This is how a completion is read for HumanEval (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code", §2.3: a completion ends at the first top-level ``def``, ``class``, ``if``,
    ``print`` or comment after the function) — here with the author's own helpers and constants kept — and how
    MAGRPO's official code reads each agent's completion (it extracts the agent's function). Why: SmolLM2-135M,
    started on ``def aux(``, writes the helper and then keeps going until its token budget ends — the entry point
    redefined, ``def main()``, calls and prints at top level — and the last definition of a name is the one Python
    runs, so the part it was asked for was overwritten by what came after it.
    """
    tree = try_parse_module(code)
    if tree is None:
        return code
    target = next((node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and node.name == name), None)
    if target is None:
        return code
    first_binding: dict[str, ast.stmt] = {}
    for node in tree.body:
        for bound in _bound_names(node):
            first_binding.setdefault(bound, node)
    excluded = {name, *others}
    kept, queue = {id(target)}, [target]
    while queue:
        for sub in ast.walk(queue.pop()):
            if isinstance(sub, ast.Name) and sub.id not in excluded:
                dependency = first_binding.get(sub.id)
                if dependency is not None and id(dependency) not in kept:
                    kept.add(id(dependency))
                    queue.append(dependency)
    parts = [_source_lines(code, node) for node in tree.body
             if isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in kept]
    return "\n\n".join(parts)


def calls_function(code: str, caller: str, callee: str) -> bool:
    """Whether the top-level function ``caller`` in ``code`` calls ``callee`` by name."""
    tree = try_parse_module(code)
    if tree is None:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == caller:
            return any(
                isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == callee
                for sub in ast.walk(node)
            )
    return False


def prompt_preamble(prompt: str, entry_point: str) -> str:
    """What a problem's prompt defines besides the entry point (imports, given helpers), to prepend to programs.

    HumanEval prompts import ``typing`` names and sometimes define functions the entry point must use.
    """
    tree = try_parse_module(prompt + "\n    pass\n") or try_parse_module(prompt)
    if tree is None:
        return ""
    source = prompt + "\n    pass\n"
    kept = [
        ast.get_source_segment(source, node) or ""
        for node in tree.body
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point)
    ]
    return "\n".join(segment for segment in kept if segment.strip())


def split_prompt(prompt: str, entry_point: str) -> tuple[str, str]:
    """A HumanEval-style prompt as ``(description, code)``: the entry point's docstring as plain text, and the prompt's
    code without it (imports, given helpers, the entry point's signature line). ``("", prompt)`` when the entry point
    has no docstring or the prompt does not parse.

    Small models given the whole prompt copy its long docstring into their answer and run out of tokens inside it;
    shown as prose above the code, the docstring informs the answer without being copied.
    """
    source = prompt.rstrip() + "\n    pass\n"
    tree = try_parse_module(source)
    functions = [node for node in (tree.body if tree else ()) if isinstance(node, ast.FunctionDef)
                 and node.name == entry_point]
    if not functions:
        return "", prompt
    body = functions[0].body
    docstring = ast.get_docstring(functions[0])
    if not docstring or not (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
        return "", prompt
    lines = source.splitlines()
    first, last = body[0].lineno - 1, (body[0].end_lineno or body[0].lineno) - 1
    code = "\n".join(lines[:first] + lines[last + 1:-1]).strip("\n")  # [-1]: the added ``pass``
    return docstring.strip(), code


def extract_asserts(code: str, limit: int = MAX_TESTER_ASSERTS) -> list[str]:
    """The top-level ``assert`` statements of ``code`` (at most ``limit``), each as standalone source."""
    tree = try_parse_module(code)
    if tree is None:
        return []
    asserts = [ast.get_source_segment(code, node) for node in tree.body if isinstance(node, ast.Assert)]
    return [a for a in asserts if a][:limit]


@dataclass(frozen=True)
class ProgramParts:
    """The team's program and where it came from."""

    program: str
    preamble: str
    helper_code: str
    main_code: str


def assemble_program(preamble: str, helper_code: str, main_code: str) -> ProgramParts:
    """The program the tests run: prompt preamble, then the helper author's code, then the main author's."""
    pieces = [piece for piece in (preamble, helper_code, main_code) if piece.strip()]
    return ProgramParts("\n\n".join(pieces) + "\n", preamble, helper_code, main_code)


@dataclass(frozen=True)
class CandidateResult:
    """What the team may know of one candidate entry point (propose-and-verify, author-and-fixer schemes)."""

    agent: str
    runnable: bool
    """The candidate parses and defines the entry point (with the task's preamble)."""
    visible_passed: int
    tester_passed: int = 0
    """How many of the tester's asserts it passes (0 without a tester)."""


def select_candidate(results: Sequence[CandidateResult], order: Sequence[str], choice: str | None = None) -> str | None:
    """The candidate that becomes the team's program; ``None`` when none is runnable. The documented rule, in order:

    1. the most visible tests passed;
    2. then the most of the tester's asserts passed (3+ agents);
    3. then the verifier's choice, if it names one of the candidates still tied (4 agents);
    4. then ``order`` (the scheme's :data:`~llm_marl_envs.envs.coding.roles.CANDIDATE_ORDER`, or under
       ``tie_order="shuffled"`` the env's permutation of it for the episode).

    Deterministic: the same results and choice always give the same program. Only what the agents can check decides
    (the held-out tests never do)."""
    rank = {agent: index for index, agent in enumerate(order)}
    tied = tied_candidates(results)
    if not tied:
        return None
    return max(tied, key=lambda r: (r.agent == choice, -rank.get(r.agent, len(rank)))).agent


def tied_candidates(results: Sequence[CandidateResult]) -> list[CandidateResult]:
    """The runnable candidates the checks leave tied at the top (steps 1 and 2 of :func:`select_candidate`: the most
    visible tests, then the most tester asserts): those the verifier's choice and the order decide between."""
    runnable = [r for r in results if r.runnable]
    top = max(((r.visible_passed, r.tester_passed) for r in runnable), default=None)
    return [r for r in runnable if (r.visible_passed, r.tester_passed) == top]


_CHOICE = re.compile(r"[A-Za-z_]\w*")


def verifier_choice(text: str, candidates: Collection[str]) -> str | None:
    """The first candidate's name ``text`` (the verifier's draft, ``Choice: coder_2 ...``) names, else ``None``."""
    for word in _CHOICE.findall(text):
        if word in candidates:
            return word
    return None


def normalized_code(code: str) -> str:
    """``code``'s structure without formatting, comments or docstrings (``ast.dump``), to recognise an identical
    candidate however it is laid out; the stripped text when it does not parse."""
    tree = try_parse_module(code)
    if tree is None:
        return code.strip()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)
