"""
# Coding

| Import             | `from llm_marl_envs import coding_v0`                      |
|--------------------|------------------------------------------------------------|
| Actions            | Text (one string per agent)                                |
| Parallel API       | Yes                                                        |
| Agents             | 1–4: `solo`; `aux`, `main`, `tester`, `reviewer`           |
| Action space       | `UnicodeText(max_action_chars)`                            |
| Observation space  | `UnicodeText(max_observation_chars)`                       |
| Reward             | one joint value shared by the team                         |

A team writes one Python function. As in MAGRPO, `aux` writes a helper `aux(...)` and `main` writes the entry-point
function that may call it; a third agent writes extra tests, a fourth reviews. The team's program (prompt preamble,
then `aux`'s code, then `main`'s) runs against the task's unit tests in the sandboxed executor
(:mod:`llm_marl_envs.sandbox`); nothing model-written runs in the env's own process.

## Arguments
`coding_v0.parallel_env(num_agents=2, dataset="humaneval", split="train", max_turns=3, observability="local",
reward_mode="joint", reward_weights=None, similarity="auto", executor="auto", timeout_s=3.0, memory_mb=256,
cache_verdicts=True, max_action_chars=8192, max_observation_chars=32768, render_mode=None)`

* `num_agents` — 1 (single agent / GRPO) to 4.
* `dataset` — `"humaneval"` (164, offline), `"decomposable"` (60+ problems written for this project, offline),
  `"mbpp"`/`"coophumaneval"` (hub), or a `.jsonl` path in HumanEval's schema.
* `executor` — `"auto"` (Docker when an engine and the sandbox image answer, else local), `"docker"`, `"local"`,
  or an :class:`~llm_marl_envs.sandbox.Executor` instance; `timeout_s`/`memory_mb` are its per-run limits.
  Executors made from a name are shared by every env of the process. `cache_verdicts` memoises reports of identical
  programs (frequent among the G samples of a group).
* the rest as in the writing env.

## Observation Space
A string: role and instruction, action protocol, the role's view of the problem (signature and docstring; `aux` also
gets the dataset's helper hint), the agent's own current code, feedback (syntax errors in its own code, results of the
visible tests on the team's program; the tester sees how many of its asserts the team's program passes) and messages
to it. `observability="team"` adds teammates' current drafts.

## Action Space
A string. Code may be wrapped in a ```python fence (the env extracts it). `<message>`/`<done/>` as in every env.

## Rewards
Joint mode: `r_t = ΔS_t − w_t − w_m·message_tokens_t − w_inv·invalid_actions_t`, `S = w_q·quality + w_c·consistency`.
Quality: weighted unit-test pass rate, syntax, role structure, helper usage and tester validity
(:mod:`llm_marl_envs.envs.coding.quality`). Consistency: mean pairwise similarity of the agents' contributions.
MAGRPO mode (2 agents): each step pays MAGRPO's aux/main code reward of that turn's program.

## Version History
* v0: initial release.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from llm_marl_envs.core.base_env import Assessment, CollaborativeTextEnv
from llm_marl_envs.core.rewards import RewardWeights
from llm_marl_envs.core.similarity import make_similarity, mean_pairwise_similarity
from llm_marl_envs.core.spaces import DEFAULT_ACTION_CHARS, DEFAULT_OBSERVATION_CHARS
from llm_marl_envs.envs.coding.program import (
    assemble_program,
    calls_function,
    defined_functions,
    extract_asserts,
    extract_code,
    prompt_preamble,
    syntax_error,
)
from llm_marl_envs.envs.coding.quality import code_metrics, describe_tests, weighted_quality
from llm_marl_envs.envs.coding.roles import CODE_ROLES, HELPER_NAME, coding_team
from llm_marl_envs.envs.coding.tasks import load_coding_tasks
from llm_marl_envs.sandbox import (
    CachingExecutor,
    Executor,
    SandboxLimits,
    TestJob,
    TestReport,
    make_executor,
)

_SHARED_EXECUTORS: dict[tuple[str, float, int], Executor] = {}
_SHARED_LOCK = threading.Lock()


def shared_executor(backend: str, timeout_s: float, memory_mb: int) -> Executor:
    """One executor per (backend, limits) for the whole process, so many envs share one warm pool."""
    key = (backend, float(timeout_s), int(memory_mb))
    with _SHARED_LOCK:
        if key not in _SHARED_EXECUTORS:
            limits = SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb)
            _SHARED_EXECUTORS[key] = make_executor(backend=backend, limits=limits)
        return _SHARED_EXECUTORS[key]


class CodingEnv(CollaborativeTextEnv):
    """Collaborative coding as a PettingZoo ParallelEnv (see the module docstring for the full card)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "coding_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        num_agents: int = 2,
        *,
        dataset: str = "humaneval",
        split: str = "train",
        max_turns: int = 3,
        observability: str = "local",
        reward_mode: str = "joint",
        reward_weights: RewardWeights | dict | None = None,
        similarity: str = "auto",
        executor: str | Executor = "auto",
        timeout_s: float = 3.0,
        memory_mb: int = 256,
        cache_verdicts: bool = True,
        max_action_chars: int = DEFAULT_ACTION_CHARS,
        max_observation_chars: int = DEFAULT_OBSERVATION_CHARS,
        render_mode: str | None = None,
    ) -> None:
        roles = coding_team(num_agents)
        if reward_mode == "magrpo" and num_agents != 2:
            raise ValueError(
                f"reward_mode='magrpo' scores MAGRPO's aux/main pair: expected num_agents=2, got {num_agents}"
            )
        super().__init__(
            roles,
            load_coding_tasks(dataset),
            max_turns=max_turns,
            observability=observability,
            reward_mode=reward_mode,
            reward_weights=reward_weights,
            split=split,
            max_action_chars=max_action_chars,
            max_observation_chars=max_observation_chars,
            render_mode=render_mode,
        )
        if isinstance(executor, str):
            executor = shared_executor(executor, timeout_s, memory_mb)
        elif not isinstance(executor, Executor):
            raise TypeError(f"executor: expected a backend name or an Executor, got {type(executor).__name__}")
        self.executor: Executor = CachingExecutor(executor) if cache_verdicts else executor
        self.similarity = make_similarity(similarity)
        self._preambles: dict[str, str] = {}

    def normalize_draft(self, agent: str, draft: str) -> str:
        """Code roles keep only the code (fenced blocks, or the whole text); the reviewer keeps its prose."""
        return extract_code(draft) if agent in CODE_ROLES else draft

    def assess(self, drafts: Mapping[str, str]) -> Assessment:
        """Run the team's program against the tests (one executor batch) and score it."""
        task = self.task
        entry_point = task["entry_point"]
        solo = "solo" in drafts
        helper_code = "" if solo else drafts[HELPER_NAME]
        main_code = drafts["solo"] if solo else drafts["main"]
        parts = assemble_program(self._preamble(), helper_code, main_code)
        program_error = syntax_error(parts.program)
        runnable = program_error is None and entry_point in defined_functions(parts.program)

        tester_asserts = extract_asserts(drafts["tester"]) if "tester" in drafts else []
        jobs = []
        if runnable:
            jobs.append(TestJob(parts.program, task["tests"]))
            if tester_asserts:
                jobs.append(TestJob(parts.program, tester_asserts))
        if tester_asserts and task["reference_solution"]:
            jobs.append(TestJob(task["reference_solution"], tester_asserts))
        reports = list(self.executor.run_many(jobs)) if jobs else []
        team_report = reports.pop(0) if runnable else None
        tester_on_team = reports.pop(0) if runnable and tester_asserts else None
        tester_on_reference = reports.pop(0) if reports else None

        terms = {
            "pass_rate": team_report.pass_rate if team_report else 0.0,
            "syntax": float(program_error is None),
            "structure": self._structure(drafts, main_code),
        }
        if not solo:
            terms["aux_usage"] = float(calls_function(main_code, entry_point, HELPER_NAME))
        if "tester" in drafts and task["reference_solution"]:
            terms["tester_validity"] = tester_on_reference.pass_rate if tester_on_reference else 0.0

        feedback = self._feedback(drafts, team_report, program_error, tester_asserts, tester_on_team)
        details = {
            "tests": _report_summary(team_report),
            "program_syntax_error": program_error,
            "code_metrics": code_metrics(parts.program),
            "tester_asserts": len(tester_asserts),
        }
        return Assessment(
            quality=weighted_quality(terms),
            consistency=mean_pairwise_similarity(list(drafts.values()), self.similarity),
            quality_terms=terms,
            feedback=feedback,
            magrpo_reward=self._magrpo(helper_code, main_code, team_report),
            details=details,
        )

    def close(self) -> None:
        """Shared executors stay open for other envs; an executor passed in is the caller's to close."""

    # ---------------------------------------------------------------------------------------------- internals
    def _preamble(self) -> str:
        task = self.task
        if task.task_id not in self._preambles:
            self._preambles[task.task_id] = prompt_preamble(task["prompt"], task["entry_point"])
        return self._preambles[task.task_id]

    def _structure(self, drafts: Mapping[str, str], main_code: str) -> float:
        contracts = [self.task["entry_point"] in defined_functions(main_code)]
        if HELPER_NAME in drafts:
            contracts.append(HELPER_NAME in defined_functions(drafts[HELPER_NAME]))
        return sum(contracts) / len(contracts)

    def _feedback(
        self,
        drafts: Mapping[str, str],
        team_report: TestReport | None,
        program_error: str | None,
        tester_asserts: list[str],
        tester_on_team: TestReport | None,
    ) -> dict[str, str]:
        entry_point = self.task["entry_point"]
        visible = self.task["visible_tests"]
        if team_report is not None:
            statuses = [(o.status, o.message) for o in team_report.outcomes[: len(visible)]]
            tests_text = "Visible tests on the team's program:\n" + describe_tests(visible, statuses)
        elif program_error:
            tests_text = f"The team's program does not parse ({program_error}); no test ran."
        else:
            tests_text = f"The team's program does not define `{entry_point}` yet; no test ran."

        feedback = {}
        for role, draft in drafts.items():
            lines = []
            if role in CODE_ROLES and draft.strip() and (error := syntax_error(draft)):
                lines.append(f"Syntax error in your code: {error}.")
            if role in ("main", "solo") and entry_point not in defined_functions(draft):
                lines.append(f"Your code must define `{entry_point}`.")
            if role == HELPER_NAME and HELPER_NAME not in defined_functions(draft):
                lines.append(f"Your code must define `{HELPER_NAME}`.")
            if role == "tester":
                passing = tester_on_team.passed if tester_on_team else 0
                lines.append(f"{len(tester_asserts)} asserts found; {passing} pass on the team's program.")
            else:
                lines.append(tests_text)
            feedback[role] = "\n".join(lines)
        return feedback

    def _magrpo(self, helper_code: str, main_code: str, team_report: TestReport | None) -> float | None:
        if self.reward_mode != "magrpo":
            return None
        from llm_marl_envs.envs.coding.magrpo_reward import magrpo_code_reward

        pass_fraction = team_report.pass_rate if team_report else None
        return magrpo_code_reward(helper_code, main_code, self.task["entry_point"], pass_fraction).total


def _report_summary(report: TestReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "passed": report.passed,
        "total": report.total,
        "timed_out": report.timed_out,
        "error": report.error,
        "backend": report.backend,
    }
