"""
# Writing

| Import             | `from llm_marl_envs import writing_v0`              |
|--------------------|-----------------------------------------------------|
| Actions            | Text (one string per agent)                         |
| Parallel API       | Yes                                                 |
| Agents (tldr)      | 1–4: `solo`; `concise`, `detailed`, `key_points`, `headline`    |
| Agents (arxiv)     | 1–4: `solo`; `background`, `method`, `limitations`, `title`     |
| Action space       | `UnicodeText(max_action_chars)`                     |
| Observation space  | `UnicodeText(max_observation_chars)`                |
| Reward             | one joint value shared by the team                  |

A team writes a piece about a source text; each agent writes one part. The TLDR style follows MAGRPO's TLDR pair
(a concise and a detailed summary), the arXiv style its arXiv pair (background/motivation and method/implications
paragraphs written from an abstract). Every agent reads the whole source but, under `observability="local"`, never a
teammate's draft: coordination happens through `<message>` text and the shared reward.

## Arguments
`writing_v0.parallel_env(num_agents=2, style="tldr", dataset="news", split="train", max_turns=3,
observability="local", reward_mode="joint", reward_weights=None, similarity="auto", max_action_chars=8192,
max_observation_chars=32768, render_mode=None)`

* `num_agents` — 1 (the single-agent/GRPO case) to 4; roles by style as in the table.
* `style` — `"tldr"` or `"arxiv"`.
* `dataset` — `"news"` (300 offline news articles from gensim's wheel), `"tldr"`/`"arxiv"` (hub, via `datasets`), or
  a `.jsonl` path (`source`, optional `task_id`, `title`, `split`).
* `split` — default split for `reset()`; `options={"split": ..., "task_id": ...}` overrides per episode.
* `max_turns`, `observability` (`"local"` | `"team"`), `reward_mode` (`"joint"` | `"magrpo"`),
  `reward_weights` (:class:`~llm_marl_envs.core.rewards.RewardWeights` or a dict), `similarity`
  (`"auto"` | `"minilm"` | `"tfidf"`).

## Observation Space
A string: the role and its instruction, the action protocol, the source, the agent's own current draft, feedback on
it (length against target, repetition, structure) and the messages teammates sent it; with `observability="team"`
also the teammates' current drafts. `env.state()` holds everything (task, all drafts, all messages) for centralized
training.

## Action Space
A string. Free text is the agent's draft (it replaces the previous one; an empty draft part keeps it).
`<message>...</message>` goes to all teammates, `<message to="ROLE">...</message>` to one, `<done/>` finishes.

## Rewards
Joint mode: `r_t = ΔS_t − w_t − w_m·message_tokens_t − w_inv·invalid_actions_t` with
`S = w_q·quality + w_c·consistency`, so the return is the episode objective on the final drafts.
Quality: mean of reference-free terms (length fit, length ratio, source coverage by similarity, unique-word ratio,
structure) — see :mod:`llm_marl_envs.envs.writing.quality`. Consistency: mean pairwise similarity of the parts.
MAGRPO mode (2 agents): each step pays MAGRPO's level-gated TLDR/arXiv reward of that turn's two parts.

## Version History
* v0: initial release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from llm_marl_envs.core.base_env import Assessment, CollaborativeTextEnv
from llm_marl_envs.core.rewards import RewardWeights
from llm_marl_envs.core.similarity import make_similarity, mean_off_diagonal
from llm_marl_envs.core.spaces import DEFAULT_ACTION_CHARS, DEFAULT_OBSERVATION_CHARS
from llm_marl_envs.envs.writing.quality import combined_text, part_feedback, quality, quality_terms
from llm_marl_envs.envs.writing.roles import PART_SPECS, writing_team
from llm_marl_envs.envs.writing.tasks import load_writing_tasks


class WritingEnv(CollaborativeTextEnv):
    """Collaborative writing as a PettingZoo ParallelEnv (see the module docstring for the full card)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "writing_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        num_agents: int = 2,
        *,
        style: str = "tldr",
        dataset: str = "news",
        split: str = "train",
        max_turns: int = 3,
        observability: str = "local",
        reward_mode: str = "joint",
        reward_weights: RewardWeights | dict | None = None,
        similarity: str = "auto",
        max_action_chars: int = DEFAULT_ACTION_CHARS,
        max_observation_chars: int = DEFAULT_OBSERVATION_CHARS,
        render_mode: str | None = None,
    ) -> None:
        roles = writing_team(style, num_agents)
        if reward_mode == "magrpo" and num_agents != 2:
            raise ValueError(
                f"reward_mode='magrpo' scores MAGRPO's two-agent pair: expected num_agents=2, got {num_agents}"
            )
        super().__init__(
            roles,
            load_writing_tasks(dataset),
            max_turns=max_turns,
            observability=observability,
            reward_mode=reward_mode,
            reward_weights=reward_weights,
            split=split,
            max_action_chars=max_action_chars,
            max_observation_chars=max_observation_chars,
            render_mode=render_mode,
        )
        self.style = style
        self.similarity = make_similarity(similarity)

    def assess(self, drafts: Mapping[str, str]) -> Assessment:
        """Score the parts: reference-free quality, pairwise consistency, per-role feedback."""
        # One similarity call for coverage and consistency: [source, whole piece, part 1, ..., part n].
        combined = combined_text(drafts)
        sims = self.similarity.matrix([self.task["source"], combined, *drafts.values()])
        terms = quality_terms(self.style, drafts, coverage=float(sims[0, 1]) if combined else 0.0)
        specs = PART_SPECS[self.style]
        return Assessment(
            quality=quality(terms),
            consistency=mean_off_diagonal(sims[2:, 2:]),
            quality_terms=terms,
            feedback={role: part_feedback(text, specs[role]) for role, text in drafts.items()},
            magrpo_reward=self._magrpo(drafts),
            details={"similarity_backend": self.similarity.name},
        )

    def _magrpo(self, drafts: Mapping[str, str]) -> float | None:
        if self.reward_mode != "magrpo":
            return None
        from llm_marl_envs.envs.writing import magrpo_reward

        first, second = self.possible_agents
        scorer = magrpo_reward.magrpo_tldr_reward if self.style == "tldr" else magrpo_reward.magrpo_arxiv_reward
        return scorer(drafts[first], drafts[second]).total
