"""The ``single_best_of_n`` condition's sampling: one agent writes n candidates a turn and sends the best by the visible
tests.

A fair one-agent control for a team of n coders: the same turns, feedback and endings as ``single`` (the env and its
schedule are ``single``'s), and n candidates a turn, as many as the team writes parts, so about the team's completion
tokens. A team that beats ``single`` only because it samples more is then not credited with coordinating.

:class:`BestOfN` wraps the runner's policy: each request of a best-of-n episode is asked n times in the same policy call
(identical prompts, so a local model prefills it once and samples n rows), every candidate's program runs against the
task's visible tests in the sandbox, and the request's reply is the candidate
:func:`~llm_marl_envs.envs.coding.selection.select_program` keeps (the most visible tests passed; ties: the first).
The env then steps with that reply as with any other: its feedback, reward and ending are the chosen candidate's.

For the log only, an ``audit`` (:func:`coding_auditor`) may also count the held-out tests each candidate passes, after
the choice and in a separate sandbox run, so the choice and what the agent sees are exactly what they are without it.
It lets a study compare one agent's candidates with a team's coders candidate by candidate: how good each is alone,
how often the best of them passes where the chosen one fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from llm_marl_envs.core.protocol import parse_action
from llm_marl_envs.envs.coding.program import assemble_program, defined_functions, prompt_preamble, syntax_error
from llm_marl_envs.envs.coding.selection import CandidateChoice, select_program, visible_test_runner
from llm_marl_envs.rollout import ChatRequest, Completion


@dataclass(frozen=True)
class BestOfNReply:
    """What a best-of-n agent sent at one turn: the chosen candidate's text, and every candidate it chose from."""

    text: str
    """The chosen candidate's text: the action the env steps with."""
    candidates: tuple[Completion, ...]
    """Every candidate as the policy returned it (strings, or records with ``completion_ids``), in sampling order."""
    chosen: int
    """The chosen candidate's position in :attr:`candidates`."""
    visible_passed: tuple[int, ...]
    """Visible tests each candidate passed."""
    held_out_passed: tuple[int, ...] | None = None
    """Held-out tests each candidate passed, when the policy audits them (:func:`coding_auditor`); for the study log
    only: neither the choice nor the agent ever sees them."""


Chooser = Callable[[ChatRequest, list[str]], CandidateChoice]
"""Picks one of a request's candidate texts (e.g. :func:`coding_chooser`)."""

Auditor = Callable[[ChatRequest, list[str]], tuple[int, ...]]
"""Counts the held-out tests each of a request's candidate texts passes (e.g. :func:`coding_auditor`)."""


class BestOfN:
    """The runner's policy with best-of-n sampling for some episodes: a request from an env in ``candidates``
    (``{env_index: n}``, n >= 2) is asked n times in the same call and answered with a :class:`BestOfNReply`; the
    other requests pass through unchanged. ``choose`` picks among a request's candidate texts; ``audit``, when given,
    counts each candidate's held-out tests for the log (after the choice, which it cannot change)."""

    def __init__(self, policy: Callable[[list[ChatRequest]], Sequence[Completion]], candidates: Mapping[int, int],
                 choose: Chooser, audit: Auditor | None = None) -> None:
        bad = {index: n for index, n in candidates.items() if isinstance(n, bool) or not isinstance(n, int) or n < 2}
        if bad:
            raise ValueError(f"candidates: expected {{env_index: n >= 2}}, got {bad}")
        self.policy, self.candidates, self.choose, self.audit = policy, dict(candidates), choose, audit

    def __call__(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        asked: list[ChatRequest] = []
        spans = []
        for request in requests:
            n = self.candidates.get(request.env_index, 1)
            spans.append((len(asked), n))
            asked += [request] * n
        completions = list(self.policy(asked))
        if len(completions) != len(asked):
            raise RuntimeError(f"policy returned {len(completions)} completions for {len(asked)} requests")
        groups = [completions[start:start + n] for start, n in spans]
        choosing = [i for i, (_, n) in enumerate(spans) if n > 1]
        texts = {i: [_text(c) for c in groups[i]] for i in choosing}
        choices: dict[int, tuple[CandidateChoice, tuple[int, ...] | None]] = {}
        if choosing:
            # Each choice waits on the sandbox: run them side by side, as the runner steps sandboxed envs.
            with ThreadPoolExecutor(max_workers=min(16, len(choosing)), thread_name_prefix="best-of-n") as pool:
                choices = dict(zip(choosing, pool.map(lambda i: self._choose(requests[i], texts[i]), choosing),
                                   strict=True))
        replies: list[Completion] = []
        for i, group in enumerate(groups):
            if i not in choices:
                replies.append(group[0])
                continue
            choice, held_out = choices[i]
            replies.append(BestOfNReply(texts[i][choice.index], tuple(group), choice.index, choice.visible_passed,
                                        held_out))
        return replies

    def _choose(self, request: ChatRequest, texts: list[str]) -> tuple[CandidateChoice, tuple[int, ...] | None]:
        choice = self.choose(request, texts)
        if self.audit is None:
            return choice, None
        held_out = tuple(self.audit(request, texts))
        if len(held_out) != len(texts):
            raise RuntimeError(f"audit returned {len(held_out)} counts for {len(texts)} candidates")
        return choice, held_out


def _text(completion: Completion) -> str:
    return completion if isinstance(completion, str) else completion.text


def candidate_program(env: Any, agent: str, text: str) -> str:
    """The program the coding env runs after ``agent`` (its one agent, role ``solo``) sends ``text``: the task's
    preamble and the agent's entry point as the env reads them (:func:`~llm_marl_envs.core.protocol.parse_action`, then
    ``env.normalize_draft``; a reply with no usable code keeps the agent's previous draft), or ``""`` when it is not
    runnable (its code does not parse or defines no entry point: the env then runs no test). Mirrors
    ``CodingEnv.assess`` for one agent; a test checks the chosen candidate's count against the env's own."""
    action = parse_action(text, agent, list(env.agents))
    draft = (env.normalize_draft(agent, action.draft) if action.draft else "") or env.drafts[agent]
    code = draft if syntax_error(draft) is None else ""
    entry_point = env.task["entry_point"]
    program = assemble_program(prompt_preamble(env.task["prompt"], entry_point), "", code).program
    runnable = syntax_error(program) is None and entry_point in defined_functions(program)
    return program if runnable else ""


def coding_chooser(envs: Sequence[Any]) -> Chooser:
    """Chooses among a request's candidates by the visible tests of its env's current task, run in that env's
    sandbox executor (``envs[request.env_index]``: coding envs of one agent)."""

    def choose(request: ChatRequest, texts: list[str]) -> CandidateChoice:
        env = envs[request.env_index]
        programs = [candidate_program(env, request.agent, text) for text in texts]
        return select_program(programs, visible_test_runner(env.executor, env.task["visible_tests"]))

    return choose


def coding_auditor(envs: Sequence[Any]) -> Auditor:
    """Counts the held-out tests each of a request's candidates passes, in its env's sandbox executor, as the coding
    env counts them for a team's candidates (the same program: :func:`candidate_program`; a candidate with no
    runnable code passes none and is not run). For the study log only: the held-out tests decide the reward, so
    nothing an agent sees or the choice reads may come from them."""

    def audit(request: ChatRequest, texts: list[str]) -> tuple[int, ...]:
        env = envs[request.env_index]
        programs = [candidate_program(env, request.agent, text) for text in texts]
        # The visible tests' runner runs any asserts: here the held-out ones, in a batch of their own.
        return tuple(visible_test_runner(env.executor, env.task["held_out_tests"])(programs))

    return audit
