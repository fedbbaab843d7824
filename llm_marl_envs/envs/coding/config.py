"""The coding env's config: the common groups plus its task and sandbox groups (see
:mod:`llm_marl_envs.core.config`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_marl_envs.core.config import EnvConfig, check_choice, check_positive
from llm_marl_envs.core.tasks import SPLITS
from llm_marl_envs.envs.coding.roles import (
    DEFAULT_SCHEME,
    MAGRPO_DEFAULT_SCHEME,
    MAGRPO_SCHEMES,
    check_coder_briefs,
    check_scheme,
    check_tie_order,
)
from llm_marl_envs.sandbox import BACKENDS, Executor

MAGRPO_HARNESSES: tuple[str, ...] = ("strict", "official")


@dataclass(frozen=True)
class CodingTaskConfig:
    """Which problems, and how MAGRPO mode assembles their tests."""

    dataset: str = "humaneval"
    """``"humaneval"`` (164, offline), ``"decomposable"`` (66, offline), ``"mbpp"``/``"coophumaneval"`` (hub), or a
    ``.jsonl`` path in HumanEval's schema."""
    split: str = "train"
    """The split ``reset()`` draws from unless ``options={"split": ...}`` says otherwise."""
    split_scheme: str = "hash"
    """``"hash"`` (the dataset's own splits, else a stable hash of the task id) or ``"official"`` (MAGRPO's train/eval
    slices, for datasets its official code uses)."""
    magrpo_harness: str = "strict"
    """MAGRPO mode's test run: ``"strict"`` (the env's program and held-out + visible asserts) or ``"official"``
    (the official code's program extraction and HumanEval test assembly, for comparison with published figures:
    the canonical solutions' mean pass rate is 0.899 there, 1.000 under ``"strict"``)."""

    def __post_init__(self) -> None:
        check_choice("split", self.split, SPLITS)
        check_choice("split_scheme", self.split_scheme, ("hash", "official"))
        check_choice("magrpo_harness", self.magrpo_harness, MAGRPO_HARNESSES)
        if not isinstance(self.dataset, str):
            raise TypeError(f"dataset: expected str, got {type(self.dataset).__name__}")


@dataclass(frozen=True)
class SandboxConfig:
    """Where and how the team's programs run."""

    executor: str | Executor = "auto"
    """``"auto"`` (Docker when an engine has the sandbox image, else bwrap, else a ``NoIsolationError`` saying how to
    get isolation: never local unless named), ``"docker"``, ``"bwrap"``, ``"local"`` (no isolation), or an
    :class:`~llm_marl_envs.sandbox.Executor` instance (then the limits below are the executor's own). See
    ``docs/sandbox.md``."""
    timeout_s: float = 3.0
    """Wall-clock limit of each test."""
    memory_mb: int = 256
    """Memory limit of the program."""
    cache_verdicts: bool = True
    """Share one verdict cache per executor across the process (identical runs cost one sandbox run)."""

    def __post_init__(self) -> None:
        if isinstance(self.executor, str):
            check_choice("executor", self.executor, BACKENDS)
        elif not isinstance(self.executor, Executor):
            raise TypeError(f"executor: expected a backend name or an Executor, got {type(self.executor).__name__}")
        check_positive("timeout_s", self.timeout_s)
        check_positive("memory_mb", self.memory_mb)
        if not isinstance(self.cache_verdicts, bool):
            raise TypeError(f"cache_verdicts: expected bool, got {type(self.cache_verdicts).__name__}")


@dataclass(frozen=True)
class CodingConfig(EnvConfig):
    """Everything a coding env is built from."""

    task: CodingTaskConfig = field(default_factory=CodingTaskConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    scheme: str | None = None
    """How a team splits the work (:data:`~llm_marl_envs.envs.coding.roles.SCHEMES`): ``"propose_verify"`` (each
    coder writes a whole candidate, the visible tests pick), ``"magrpo"`` (MAGRPO's helper/main split),
    ``"magrpo_fallback"`` or ``"author_fixer"``; see :mod:`llm_marl_envs.envs.coding.roles`. ``None`` (the default):
    ``"propose_verify"``, or ``"magrpo"`` under ``reward_mode="magrpo"``. One agent is ``solo`` under every scheme."""
    coder_briefs: str = "same"
    """``propose_verify``'s coder instructions (:data:`~llm_marl_envs.envs.coding.roles.CODER_BRIEFS`): ``"same"``
    (both coders get one instruction) or ``"distinct"`` (each is asked for its own way of writing the function)."""
    tie_order: str = "fixed"
    """The candidate schemes' last tie-break (:data:`~llm_marl_envs.envs.coding.roles.TIE_ORDERS`): ``"fixed"``
    (``coder_1`` before ``coder_2``; ``fixer`` before ``author``) or ``"shuffled"`` (that order permuted once per
    episode by the env's seeded RNG)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scheme is not None:
            check_scheme(self.scheme)
        check_coder_briefs(self.coder_briefs, self.team_scheme)
        check_tie_order(self.tie_order, self.team_scheme)
        if self.reward.reward_mode == "magrpo" and self.team.num_agents != 2:
            raise ValueError(
                f"reward_mode='magrpo' scores MAGRPO's aux/main pair: expected num_agents=2, got {self.team.num_agents}"
            )
        if self.reward.reward_mode == "magrpo" and self.team_scheme not in MAGRPO_SCHEMES:
            raise ValueError(
                f"reward_mode='magrpo' scores MAGRPO's aux/main pair: expected scheme in {sorted(MAGRPO_SCHEMES)}, "
                f"got {self.scheme!r}"
            )

    @property
    def team_scheme(self) -> str:
        """The scheme the team plays: ``scheme``, or when it is ``None`` the default for the reward mode. (The field
        keeps ``None``, so ``dataclasses.replace`` with another ``reward_mode`` resolves it afresh.)"""
        if self.scheme is not None:
            return self.scheme
        return MAGRPO_DEFAULT_SCHEME if self.reward.reward_mode == "magrpo" else DEFAULT_SCHEME
