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

A team writes a piece about a source passage; each agent writes one part. The TLDR style follows MAGRPO's TLDR pair
(a concise and a detailed summary), the arXiv style its arXiv pair (background/motivation and method/implications
paragraphs written from an abstract). The passage is the text's *lead*: its whole sentences up to `source_words`
(100) words, about 90 words of a news article, as a news desk writes a brief from an opening paragraph; every
quality, salience, copying and grounding term is computed against it, and the parts are sized for it (TL;DR 10-30
words, detailed summary 30-70). A short passage keeps every prompt short (a policy and a trainer's update read it
once per sample). Every agent reads the whole passage but, under `observability="local"`, never a teammate's draft:
coordination happens through `<message>` text and the shared reward.

## Arguments
`writing_v0.parallel_env(config=None, **keywords)`: a :class:`~llm_marl_envs.envs.writing.config.WritingConfig`,
and/or its groups as objects or dicts (`team=`, `reward=`, `observation=`, `limits=`, `task=`; see
:mod:`llm_marl_envs.core.config`), and/or their fields as flat keywords, validated with errors that name the field
(a flat keyword and its group given in the same call must agree; NumPy numbers count as numbers):

* team: `num_agents` — 1 (the single-agent/GRPO case) to 4; roles by style as in the table.
* task: `style` — `"tldr"` or `"arxiv"`; `dataset` — `"news"` (300 offline news articles from gensim's wheel),
  `"tldr"`/`"arxiv"` (hub, via `datasets`), or a `.jsonl` path (`source`, optional `task_id`, `title`, `split`);
  `split` — default split for `reset()` (`options={"split": ..., "task_id": ...}` overrides per episode; other keys
  are rejected); `split_scheme` — `"hash"` or `"official"` (MAGRPO's slices of the hub datasets); `source_words` —
  the passage's word cap (`None`: the whole text).
* reward: `reward_mode` (`"joint"` | `"magrpo"`), `reward_weights` (:class:`~llm_marl_envs.core.rewards.RewardWeights`
  or a dict), `similarity` (`"auto"` | `"minilm"` | `"tfidf"`), `magrpo_episode` (MAGRPO mode's episode knobs;
  default: the official app's).
* observation: `observability` (`"local"` | `"team"`), `max_observation_chars`, `reply_prefixes` (no effect here:
  prose replies are never started), `done_offer` (the offer to end, the last lines; worded for the default model,
  another model may want other words; `""`: none); limits: `max_turns` (default 4; 1 in MAGRPO mode, as the
  official writing app), `max_action_chars`, `end_quorum` (`"half"`, the default | `"all"` | `"any"`: how many
  finished agents end the episode, below); and `render_mode`.

## Observation Space
A string, short and plain (`core/observation.py`): the passage once, the agent's own current draft once, feedback on
it (length against target, repetition, structure, copying) and the messages teammates sent it; with
`observability="team"` also the teammates' current drafts; then one line of who the agent is, the turn and the
protocol, and last the role's instruction followed by the offer to end ("When your part is final, end your reply
with:" and `<done/>` on the last line). `env.state()` holds everything (task with the whole `article`, all drafts,
all messages) for centralized training.

## Action Space
A string. Free text is the agent's draft (it replaces the previous one; an empty draft part keeps it).
`<message>...</message>` goes to all teammates, `<message to="ROLE">...</message>` to one, `<done/>` finishes.

## Rewards
Joint mode: `r_t = ΔS_t − w_t − w_m·message_tokens_t − w_inv·invalid_actions_t − w_r·longest_reply_t
− w_d·discarded_tokens_t` (`w_r` and `w_d` are 0 unless a recipe prices a turn's longest reply or the text the env
discards), with
`S = w_q·quality + w_c·consistency` (one agent: `S = (w_q + w_c)·quality`, consistency `None`), so the return is the
episode objective on the final drafts.

* Quality (:mod:`llm_marl_envs.envs.writing.quality`): `(0.5·form + 0.5·coverage) · originality · fluency` — form is
  per-role length fit, length ratio and structure; coverage the weighted share of the source's salient content
  (tf-idf stems over the dataset, and its numbers) the parts mention; originality 1 − the share of tokens copied from
  the source in runs of 8+ tokens; fluency function-word presence times distinct-2.
* Consistency (:mod:`llm_marl_envs.envs.writing.contribution`): coverage × the mean per-agent contribution, each the
  product of its Shapley share of the covered salient content against its role's size, its validity (fluency,
  originality), the grounding of its numbers in the source, and 1 − its redundancy with any teammate (similarity
  above the backend's cap, or shared 4-grams). Resemblance (`similarity`) and `duplication` are reported in
  `quality_terms`, never paid.
* MAGRPO mode (2 agents): each step pays MAGRPO's level-gated TLDR/arXiv reward of that turn's two parts.

Every degenerate strategy of the integrity suite (keyword stuffing, copied lead or sentences, duplicated or swapped
parts, one agent writing for all, repetition, off-topic text, invented numbers, padded turns, message spam) scores
strictly below honest writing at every team size under both similarity backends: see the table below and
`python -m llm_marl_benchmarks.reward_integrity`.

## State
`env.state()` (centralized training only; no agent observes it): `task` (every field, held-out tests included),
`turn`, `max_turns`, live `agents`, every agent's `drafts` and `done` flag, every `message` (sender, recipients,
text, turn), each agent's `feedback`, the team `score` and `team_return`, `end_reason`, and `assessment`: nothing
more (writing keeps no private diagnostics).

## Infos
`infos[agent]` after `step`: `task_id`, `role`, `turn`, `score`, `team_return`, `reward`, `reward_mode`,
`magrpo_reward`, `reward_components` (`quality`, `consistency` — `None` for one agent —, `contributions` per agent,
`turns`, `message_tokens`, `invalid_actions`, `longest_reply_tokens`, `discarded_tokens` and their per-step values),
`quality_terms` (the terms above, plus the `similarity` and `duplication` diagnostics), `details`
(`similarity_backend`, `salient_coverage`), `action` (`problems`, `done`, `messages_sent`, `truncated`, `original_length`,
`invalid_unicode_replaced`) and `end_reason`. Numbers and task-owned text only: the same for every agent, and
nothing a teammate wrote. After `reset`: `task_id`, `split`, `role`, `turn`.

## Episode end
An agent that writes `<done/>` is terminated and leaves `env.agents` (its draft stays in the team's output; a reply
that is only `<done/>` keeps the draft it had); so is an agent that resubmits its draft unchanged. A line of the reply
that repeats an observation label (`Feedback:`...) ends it: the echo is no part of the draft (and is flagged
`echoed_observation`, an invalid action). Everyone terminates when all said `<done/>` (`end_reason="all_done"`),
when a quorum of the team has finished (`"quorum_done"`): half the team, rounded up, under the default
`end_quorum="half"` (one agent of 2, two of 3 or 4), one agent under `"any"`, everyone under `"all"` (MAGRPO mode's
default); a quorum counts from turn 2, so a teammate of a turn-1 finisher revises once, with feedback on its first
draft and any message sent it; or when a whole turn from the second on changed no draft (`"converged"`); the
agents still live at `max_turns` are truncated (`"max_turns"`). Every turn costs `w_t`, so at equal final drafts
ending at turn `k` earns `w_t·(max_turns − k)` more than playing the budget out. Why `"half"`: under `"all"` the
untrained team of 2 rarely ended before its budget, so a training group hardly varied on turns; under `"half"` it
does in 42-58 % of held-out tasks, and the shipped team still beats it on return, quality and turns.

## Sample observation and chat
`render_chat(env.chat_messages("concise"))` after `reset(seed=0, options={"task_id": "news/000"})` with the default
settings (:func:`~llm_marl_envs.core.observation.render_chat` prints each message's content verbatim under a
`--- ROLE ---` line; the user message is the agent's observation exactly as `reset`/`step` return it, and
`tests/test_env_api.py` checks this sample against the env):

````
--- system ---
Write only your own part of the team's text, in plain prose, with no preamble.
--- user ---
Source text:
Hundreds of people have been forced to vacate their homes in the Southern Highlands of New South Wales as strong winds today pushed a huge bushfire towards the town of Hill Top. A new blaze near Goulburn, south-west of Sydney, has forced the closure of the Hume Highway. At about 4:00pm AEDT, a marked deterioration in the weather as a storm cell moved east across the Blue Mountains forced authorities to make a decision to evacuate people from homes in outlying streets at Hill Top in the New South Wales southern highlands.

You are concise, with detailed. Turn 1 of 4. Notes to teammates go in <message>...</message>.
Write a TL;DR of the text above in your own words: one sentence of 10-30 words.
When your part is final, end your reply with:
<done/>
````
After a step the agent's draft (`Your draft:`), its feedback (`Feedback:`) and the messages sent to it
(`Messages:`) come between the passage and the cue; the offer to end closes every observation, from the first turn
on. Median prompt length with the default model's chat template: 242 tokens a turn (493 before the passage was the
lead; `python -m llm_marl_benchmarks.prompt_tokens`).

## Reward integrity
Mean joint return of the scripted strategy library (`benchmarks/integrity/`) over 8 news articles with hand-written
honest parts, default settings (MiniLM similarity), by team size; from
`python -m llm_marl_benchmarks.reward_integrity --env writing --backends minilm --tasks 8 --pivot`. Every degenerate
strategy loses to honest work by more than 0.025 at every size, under TF-IDF too (`tests/test_reward_integrity.py`).
Known limits: in the arXiv style with 2 agents, background and method share a word range, so swapping the two parts is
not detected (the reward cannot tell what a paragraph is about); a part that quotes every number of the source gains
nothing but loses little; the headline and limitations roles are underpaid when their content is shared.

| strategy | honest | n=1 | n=2 | n=3 | n=4 |
|---|---|---:|---:|---:|---:|
| honest | yes | 1.41 | 1.45 | 1.44 | 1.43 |
| honest_with_message | yes |  | 1.42 | 1.40 | 1.38 |
| honest_two_drafts | yes | 1.36 | 1.40 | 1.39 | 1.38 |
| padding_turns |  | 1.36 | 1.40 | 1.39 | 1.38 |
| trickle |  | 1.31 | 1.35 | 1.34 | 1.33 |
| number_dump |  |  | 1.14 | 1.22 | 1.24 |
| first_sentence_only |  | 0.67 | 1.18 | 1.07 | 1.14 |
| swap_roles |  |  | 0.96 | 1.02 | 1.03 |
| message_spam |  |  | 0.80 | 0.50 | 0.19 |
| generic_filler |  | 0.71 | 0.46 | 0.45 | 0.45 |
| duplicate_parts |  |  | 0.70 | 0.62 | 0.69 |
| solo_hog |  |  | 0.68 | 0.60 | 0.56 |
| solo_hog_token |  |  | 0.68 | 0.60 | 0.65 |
| glued_keywords |  | -0.05 | -0.05 | 0.46 | 0.59 |
| sentence_repetition |  | 0.24 | 0.57 | 0.52 | 0.55 |
| repetition |  | 0.28 | 0.47 | 0.52 | 0.51 |
| shuffled_words |  | -0.01 | 0.02 | 0.40 | 0.51 |
| headline_everywhere |  | 0.27 | 0.26 | 0.27 | 0.37 |
| hallucinated_numbers |  | -0.05 | 0.19 | 0.23 | 0.30 |
| off_topic |  | 0.16 | 0.10 | 0.09 | 0.11 |
| keyword_split |  | -0.05 | -0.05 | -0.02 | 0.05 |
| keyword_stuffing |  | -0.05 | -0.05 | -0.05 | -0.04 |
| copy_evasion |  | -0.05 | -0.05 | -0.05 | -0.05 |
| copy_lead |  | -0.05 | -0.05 | -0.05 | -0.05 |
| copy_source |  | -0.05 | -0.05 | -0.05 | -0.05 |
| copy_sentences |  | -0.05 | -0.05 | -0.05 | -0.05 |
| empty |  | -0.05 | -0.05 | -0.05 | -0.05 |

## Version History
* v0: initial release; rewards hardened against the integrity suite, held-out tests, counterfactual consistency,
  MAGRPO's official episode (before the first tagged release).
"""  # noqa: E501 (the sample observation's passage is one line, shown exactly)

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from llm_marl_envs.core.base_env import Assessment, CollaborativeTextEnv
from llm_marl_envs.core.similarity import duplication_rate, make_similarity, mean_off_diagonal
from llm_marl_envs.core.tasks import TaskSource
from llm_marl_envs.envs.writing import prompts
from llm_marl_envs.envs.writing.config import WritingConfig
from llm_marl_envs.envs.writing.contribution import (
    REDUNDANCY_CAPS,
    ROLE_SHARE_SLACK,
    grounding,
    redundancy,
    role_shares,
    shapley_credit,
)
from llm_marl_envs.envs.writing.quality import COVERAGE_TARGET, form_terms, part_feedback, quality
from llm_marl_envs.envs.writing.roles import PART_SPECS, writing_team
from llm_marl_envs.envs.writing.tasks import load_writing_tasks
from llm_marl_envs.envs.writing.text_stats import (
    CORPUS_MAX_DOCUMENTS,
    CorpusStats,
    SalientContent,
    SourceGrams,
    content_stems,
    copied_fraction,
    fluency,
    numbers,
    salient_units,
    sentence_content,
    tokens,
)

# Corpus statistics of each dataset, computed once per process (a dataset's sources do not change).
_CORPORA: weakref.WeakKeyDictionary[TaskSource, CorpusStats] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _SourceStats:
    salient: SalientContent
    numbers: set[str]
    grams: SourceGrams


def _weighted(values: Mapping[str, float], sizes: Mapping[str, int], total: int, empty: float) -> float:
    """Token-weighted mean of per-part ``values`` (``empty`` when no part has a token)."""
    return sum(values[role] * sizes[role] for role in values) / total if total else empty


class WritingEnv(CollaborativeTextEnv):
    """Collaborative writing as a PettingZoo ParallelEnv (see the module docstring for the full card)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "writing_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": True,
    }
    MAGRPO_APP: ClassVar[str] = "writing"
    SYSTEM_PROMPT: ClassVar[str] = prompts.SYSTEM_PROMPT
    ROLE_HINTS: ClassVar[Mapping[str, str]] = prompts.ROLE_HINTS
    ROLE_NEW_TOKENS: ClassVar[Mapping[str, int]] = prompts.ROLE_NEW_TOKENS
    DEFAULT_END_QUORUM: ClassVar[str] = "half"
    """Half the team (one of 2, two of 3 or 4), counted from turn 2. Under ``"all"`` the untrained team of 2 ended
    before its 4-turn budget in too few held-out tasks for a group to vary on turns; under ``"half"`` it ended early in
    17-23 of 40, and the shipped team still beat it on return, quality and turns
    (docs/results/end-quorum/retrain-half-from-turn2). Coding keeps ``"all"``: there its trained team's gain shrank."""

    def __init__(self, config: WritingConfig | None = None, **kwargs: Any) -> None:
        config = WritingConfig.from_arguments(config, **kwargs)
        roles = writing_team(config.task.style, config.team.num_agents)
        tasks = load_writing_tasks(config.task.dataset, config.task.split_scheme, config.task.source_words)
        super().__init__(roles, tasks, config, config.task.split)
        if self.reward_mode == "magrpo" and self.max_turns != 1 and self.magrpo_episode.reward_shift >= 0:
            # The official writing app plays one turn; with its shift of 0 every extra turn would add reward.
            raise ValueError(
                f"reward_mode='magrpo': the writing app plays 1 turn (got max_turns={self.max_turns}); more turns "
                "need an explicit magrpo_episode with a negative reward_shift (not the official setting)"
            )
        self.style = config.task.style
        self.similarity = make_similarity(config.reward.similarity)
        self._sources: dict[str, _SourceStats] = {}

    def assess(self, drafts: Mapping[str, str]) -> Assessment:
        """Score the parts: reference-free quality, counterfactual contributions, per-role feedback."""
        source = self._source_stats()
        specs = PART_SPECS[self.style]
        corpus = self._corpus()
        copied = {role: copied_fraction(text, source.grams) for role, text in drafts.items()}
        fluent = {role: fluency(text, specs[role].structure is not None, corpus) for role, text in drafts.items()}
        sizes = {role: len(tokens(text)) for role, text in drafts.items()}
        total_tokens = sum(sizes.values())

        terms = form_terms(self.style, drafts)
        # Content counts only where it is said in sentences (see text_stats.sentence_content).
        said = {role: sentence_content(text, specs[role].structure is not None) for role, text in drafts.items()}
        team_units = set().union(*(content_stems(text) for text in said.values()))
        salient_coverage = source.salient.coverage(team_units)
        terms["coverage"] = min(1.0, salient_coverage / COVERAGE_TARGET)
        terms["originality"] = 1.0 - _weighted(copied, sizes, total_tokens, empty=0.0)
        terms["fluency"] = _weighted(fluent, sizes, total_tokens, empty=0.0)
        grounded = {role: grounding(text, source.numbers) for role, text in drafts.items()}
        terms["grounding"] = _weighted(grounded, sizes, total_tokens, empty=1.0)

        contributions: dict[str, float | None] = {}
        consistency = None
        texts = list(drafts.values())
        if len(drafts) > 1:
            sims = self.similarity.matrix(texts)
            validity = {role: fluent[role] * (1.0 - copied[role]) for role in drafts}
            credit = shapley_credit(source.salient, said, validity)
            middle = {role: (specs[role].min_words + specs[role].max_words) / 2 for role in drafts}
            targets = {role: ROLE_SHARE_SLACK * middle[role] / sum(middle.values()) for role in drafts}
            shares = role_shares(credit, targets)
            redundant = redundancy(drafts, sims, REDUNDANCY_CAPS[self.similarity.name])
            for role in drafts:
                contributions[role] = shares[role] * validity[role] * grounded[role] * (1.0 - redundant[role])
            consistency = terms["coverage"] * sum(contributions.values()) / len(contributions)
            terms["similarity"] = mean_off_diagonal(sims)
            terms["duplication"] = duplication_rate(texts, sims)
        return Assessment(
            quality=quality(terms),
            consistency=consistency,
            quality_terms=terms,
            feedback={
                role: part_feedback(text, specs[role], copied[role], fluent[role]) for role, text in drafts.items()
            },
            magrpo_reward=self._magrpo(drafts),
            contributions=contributions,
            details={"similarity_backend": self.similarity.name, "salient_coverage": salient_coverage},
        )

    def _corpus(self) -> CorpusStats:
        """Language statistics of the env's whole dataset (computed once per process and dataset): document
        frequencies and known word pairs of the whole texts, not only their passages (more text, the same language);
        what a task's parts are scored against is its passage (``_source_stats``)."""
        corpus = _CORPORA.get(self.task_source)
        if corpus is None:
            tasks = [self.task_source.get(i) for i in self.task_source.ids()[:CORPUS_MAX_DOCUMENTS]]
            corpus = _CORPORA[self.task_source] = CorpusStats(t.fields.get("article", t["source"]) for t in tasks)
        return corpus

    def _source_stats(self) -> _SourceStats:
        """Salient content, numbers and n-grams of the current task's source (computed once per task)."""
        task = self.task
        if task.task_id not in self._sources:
            text = task["source"]
            self._sources[task.task_id] = _SourceStats(
                salient_units(text, self._corpus()), numbers(text), SourceGrams.of(text)
            )
        return self._sources[task.task_id]

    def _magrpo(self, drafts: Mapping[str, str]) -> float | None:
        if self.reward_mode != "magrpo":
            return None
        from llm_marl_envs.envs.writing import magrpo_reward

        first, second = self.possible_agents
        scorer = magrpo_reward.magrpo_tldr_reward if self.style == "tldr" else magrpo_reward.magrpo_arxiv_reward
        return scorer(drafts[first], drafts[second]).total
