"""The writing env's config: the common groups plus its task group (see :mod:`llm_marl_envs.core.config`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_marl_envs.core.config import EnvConfig, check_choice, check_int
from llm_marl_envs.core.tasks import SPLITS
from llm_marl_envs.envs.writing.roles import STYLES
from llm_marl_envs.envs.writing.tasks import SOURCE_WORDS


@dataclass(frozen=True)
class WritingTaskConfig:
    """What the team writes about."""

    style: str = "tldr"
    """``"tldr"`` (concise/detailed summaries, key points, headline) or ``"arxiv"`` (introduction paragraphs)."""
    dataset: str = "news"
    """``"news"`` (offline), ``"tldr"``/``"arxiv"`` (hub), or a ``.jsonl`` path."""
    split: str = "train"
    """The split ``reset()`` draws from unless ``options={"split": ...}`` says otherwise."""
    split_scheme: str = "hash"
    """``"hash"`` (the dataset's own splits, else a stable hash of the task id) or ``"official"`` (MAGRPO's train/eval
    slices, for datasets its official code uses)."""
    source_words: int | None = SOURCE_WORDS
    """The passage the team writes about: each text's lead, its whole sentences up to this many words (at least the
    first); ``None``: the whole text. Every quality term is computed against the passage (see ``tasks.py``)."""

    def __post_init__(self) -> None:
        check_choice("style", self.style, STYLES)
        if self.source_words is not None:
            check_int("source_words", self.source_words, 10)
        check_choice("split", self.split, SPLITS)
        check_choice("split_scheme", self.split_scheme, ("hash", "official"))
        if not isinstance(self.dataset, str):
            raise TypeError(f"dataset: expected str, got {type(self.dataset).__name__}")


@dataclass(frozen=True)
class WritingConfig(EnvConfig):
    """Everything a writing env is built from."""

    task: WritingTaskConfig = field(default_factory=WritingTaskConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reward.reward_mode == "magrpo" and self.team.num_agents != 2:
            raise ValueError(
                "reward_mode='magrpo' scores MAGRPO's two-agent pair: expected num_agents=2, "
                f"got {self.team.num_agents}"
            )
