"""
# Coding

| Import             | `from llm_marl_envs import coding_v0`                      |
|--------------------|------------------------------------------------------------|
| Actions            | Text (one string per agent)                                |
| Parallel API       | Yes                                                        |
| Agents             | 1–4: `solo`; `coder_1`, `coder_2`, `tester`, `verifier` (by `scheme`) |
| Action space       | `UnicodeText(max_action_chars)`                            |
| Observation space  | `UnicodeText(max_observation_chars)`                       |
| Reward             | one joint value shared by the team                         |

A team writes one Python function. Under the default scheme (`scheme="propose_verify"`) two coders each write the
whole function, a third agent writes extra tests and a fourth names the candidate it trusts; the visible tests (then
the tester's asserts, then the verifier) pick the team's program among the candidates. Under `scheme="magrpo"`, as in
MAGRPO, `aux` writes a helper `aux(...)` and `main` the entry point that may call it, and the team's program is the
prompt's preamble, then `aux`'s code, then `main`'s. The program runs against the task's unit tests in the sandboxed
executor (:mod:`llm_marl_envs.sandbox`); nothing model-written runs in the env's own process. The sections below
describe the `"magrpo"` roles first, where the schemes share them (tests, feedback, endings, rewards).

## Schemes
`scheme=` names how a team of 2–4 splits the work (:mod:`llm_marl_envs.envs.coding.roles`); one agent is `solo`
under every scheme.

| scheme | 2 agents | 3 | 4 | the team's program |
|---|---|---|---|---|
| `"magrpo"` | `aux` + `main` (started with `result = aux(`) | `tester` | `reviewer` | aux's, main's code |
| `"magrpo_fallback"` | `aux` + `main` (its first line free, a fallback kept) | `tester` | `reviewer` | as `"magrpo"` |
| `"propose_verify"` (default) | `coder_1` + `coder_2` (each the whole function) | `tester` | `verifier` | a candidate |
| `"author_fixer"` | `author` + `fixer` (repairs the author's code) | `tester` | `verifier` | a candidate |

`"propose_verify"` is the default because at the default model's scale the `aux`/`main` split loses to one agent and
independent candidates do not (train split, untrained team of 2 against one agent, 10 pairs: 0.108 vs 0.075; `magrpo`
0.050; the held-out figures are in docs/results.md, "Coding: the `propose_verify` scheme"). `"magrpo"` keeps MAGRPO's
split exactly (the official setting, for larger models and faithful comparisons), and is what `reward_mode="magrpo"`
plays when no scheme is named.
In `"magrpo_fallback"` a wrong helper need not sink the program (MAGRPO names "aux errors break main if fallback
logic is absent"); rewards and program are those of `"magrpo"`, and a helper that the fallback makes unnecessary is
not load-bearing (counterfactual credit 0).

In the candidate schemes (`"propose_verify"`, `"author_fixer"`) every code author writes the whole entry point (a
*candidate*); every test runs on every candidate, and the team's program is the one
`program.select_candidate` picks, a deterministic rule: (1) the most visible tests passed; (2) then the most of the
tester's asserts passed; (3) then the verifier's choice, if it names a candidate still tied (its reply is started
with `Choice: `, and the first candidate name it writes counts); (4) then the fixed order — `coder_1` before
`coder_2`; `fixer` before `author` (a repair that passes as much is the later version) — or, under
`tie_order="shuffled"`, that order permuted once per episode by the env's seeded RNG, so no coder is always the one
sent at a tie. The held-out tests never decide. A coder sees its own code and verdicts and each teammate's
*results* (`coder_2's candidate: 2 of 3 visible tests pass; first failing: assert ...`), never another coder's
code (under `observability="team"` too); the fixer
reads the author's code and its verdicts; the verifier reads every candidate's code and verdicts; the tester sees how
many of its asserts pass on each candidate. Credit is counterfactual over candidates
(:mod:`llm_marl_envs.envs.coding.contribution`): a coder earns its candidate's own held-out pass rate (the team outcome
with it alone), 0 for a candidate identical to an earlier coder's (layout, comments and docstrings aside); the author
its candidate's, the fixer what its part adds over the author's candidate (a resubmitted copy: 0); the verifier what its
choice adds over a random pick among the tied candidates (`None` when the tests left no tie to break); the tester as
under `"magrpo"`. `reward_mode="magrpo"` needs `"magrpo"` (its default) or `"magrpo_fallback"`. `llm-marl train`
takes it in a recipe's `env_kwargs: {scheme: ...}`, the study as `--env-option coding.scheme=NAME`.

## Arguments
`coding_v0.parallel_env(config=None, **keywords)`: a :class:`~llm_marl_envs.envs.coding.config.CodingConfig`, and/or
its groups as objects or dicts (`team=`, `reward=`, `observation=`, `limits=`, `task=`, `sandbox=`), and/or their
fields as flat keywords, validated with errors that name the field:

* team: `num_agents` (1 = single agent / GRPO, to 4); `scheme` (above: `"propose_verify"`, the default, `"magrpo"`
  — the default under `reward_mode="magrpo"` —, `"magrpo_fallback"`, `"author_fixer"`; another name is a `ValueError`
  that lists them); `coder_briefs` (`propose_verify` only: `"same"`, the default, one instruction for both coders, or
  `"distinct"`, which asks `coder_1` for plain loops and `coder_2` for built-ins, so that their candidates need not
  fail together); `tie_order` (the candidate schemes only: `"fixed"`, the default, or `"shuffled"`, the last
  tie-break's order permuted once per episode by the env's seeded RNG);
* task: `dataset` — `"humaneval"` (164, offline), `"decomposable"` (66 problems written for this project, offline),
  `"mbpp"`/`"coophumaneval"` (hub), or a `.jsonl` path in HumanEval's schema; `split` (`"train"`/`"eval"`);
  `split_scheme` (`"hash"`, or `"official"`: MAGRPO's slices); `magrpo_harness` (`"strict"`, or `"official"`: the
  official code's program and test assembly for MAGRPO mode's reward);
* sandbox: `executor` — `"auto"` (Docker when an engine and the sandbox image answer, else the `bwrap` sandbox,
  else an error that says how to get isolation: never the unisolated `"local"` silently), `"docker"`, `"bwrap"`,
  `"local"` (no isolation: by name only), or an :class:`~llm_marl_envs.sandbox.Executor` instance;
  `timeout_s`/`memory_mb` are the per-run limits of named backends; `cache_verdicts`: one verdict cache per executor
  shared by every env of the process (identical programs, frequent among the G samples of a group, run once);
* reward, observation, limits: as in the writing env (`reward_mode`, `reward_weights`, `similarity`,
  `magrpo_episode`; `observability`, `max_observation_chars`, `reply_prefixes` — start code replies for the model,
  below —, `done_offer`; `max_turns` — 4, or MAGRPO's 2 in MAGRPO mode —, `max_action_chars`, `end_quorum` —
  `"all"`, `"half"` or `"any"` finished agents end the episode; by default `"half"` under `propose_verify`, `"all"`
  under the other schemes, below), and `render_mode`.

## Observation Space
A string, short and plain (`core/observation.py`): the problem once (the entry point's docstring as prose, then its
code: imports, given helpers, the signature line), and where the dataset describes a useful helper
(`Helper: aux(word) returns ...`) that line for every team role — `main` learns the helper's signature from the task
and from messages, never from `aux`'s draft; then the agent's own current code, feedback and messages to it; then
one line of who the agent is, the turn and the protocol, and last the role's instruction followed by the offer to end
("When your part is final, end your reply with:" and `<done/>` on the last line). `observability="team"` adds
teammates' current drafts. Median prompt length with the default model's chat template: 323 tokens a turn (388 before;
`python -m llm_marl_benchmarks.prompt_tokens`); the problem text itself is most of it and is shown whole.
Feedback holds only task-owned text and the agent's own errors: syntax errors in its own code, and for each *visible*
test its assert and verdict (`passed`, `failed`, `timeout`, or `error` with the exception's type when it is a builtin
one). The first three visible tests that do not pass, when they end in an assert on one call of the program
(`assert CALL == EXPECTED`, `EXPECTED == CALL`, `CALL is EXPECTED`, `assert CALL`, `assert not CALL`), show instead a
line each: the call and its verdict, `expected: ...`, and what the call gave — `got:` a `repr` of the returned value
or `raised: Type: message`, recorded by the sandbox's judge where the test made the call (`TestOutcome.got`/`raised`,
at most 200 characters) and cut to 160 here. A value or message is free text the team's program makes, and a
teammate's code can make it anything: a team member sees it only when each of its words is in the task, the visible
tests or its own draft, or is one of Python's message words or builtin names (and no number of 4 digits or more from a
teammate's draft); else `got: (hidden: ...)` (`raised:` keeps a builtin exception's type). `solo` sees its own
program's values and exceptions whole. Printed output never appears, nor does a teammate's syntax-error text; a team
program that does not parse is reported by whose section the error is in.
The tester sees how many of its asserts the team's program passes. Held-out tests appear in no observation or info.
In the candidate schemes each candidate's verdicts, with what its failing calls gave, go to its author (`Visible
tests of your candidate:`; the candidate is the author's own code, so nothing is hidden), its
teammates get counts and the first failing visible call, and only the fixer (the author's) and the verifier (every
candidate's) read another agent's code (see "Schemes").

## Action Space
A string. Code may be wrapped in a ```python fence (the env extracts it). `<message>`/`<done/>` as in every env.
An author's part is its function and what that function uses (`program.role_function`): `aux`'s author keeps the
first `aux` it wrote with the imports, constants and helpers `aux` calls; `main` and `solo` likewise their entry
point. Redefinitions, functions nothing kept uses and top-level statements (calls, prints, ad-hoc tests) are no part
of it, and an author never supplies a teammate's function (`main`'s own `aux` is left out). This is how HumanEval
reads a completion (it ends at the first top-level statement after the function) and how MAGRPO's official code reads
each agent's (it extracts the agent's function). Why: started on `def aux(`, SmolLM2-135M writes its function and
then keeps going to the end of its token budget — the entry point redefined, `def main()`, calls at top level — and
Python runs the last definition of a name, so what came after overwrote the part it was asked for. Read this way,
a function resubmitted with a different tail is unchanged, and the author is done.

Started replies: every turn, `env.chat_messages(agent)` ends with an assistant message that starts the code roles'
replies — `aux`: a code fence and `def aux(` (MAGRPO's format line); `main`: the entry point's signature and a first
line `result = aux(`; `solo`: the signature; the tester: `assert ENTRY(`. A policy renders it with
`apply_chat_template(..., continue_final_message=True)` and returns the start plus the continuation as the action
(the HF backends here do); a reply that does not begin with it is read the same way. The observation string never
holds it; `reply_prefixes=False` turns it off. Why: untrained, SmolLM2-135M's `aux` copied the entry point's
signature instead of writing `aux` (0 of 16 held-out episodes defined it) and its `main` never called `aux`; started
on the first turn only, a free second reply undid it. A started reply ends the agent's work by ending with `<done/>`
or by resubmitting its code unchanged.

Where a reply ends: `env.suggested_reply_end(agent)` is a regular expression whose first match in a code role's reply
(its started part included) is the first code block closed, the end of what becomes the draft; the reviewer and the
verifier have none (`None`). SmolLM2-135M closes the block and writes on to its budget (prose, test calls, second
blocks: the env discards them), so a policy may stop decoding there (`reply_ends` of the local policy and the team
model; the study's `--stop-at-reply-end`). The env does not stop it: a `<message>` or `<done/>` after the block
would still count, and stopping loses it.

## Rewards
Joint mode: `r_t = ΔS_t − w_t − w_m·message_tokens_t − w_inv·invalid_actions_t − w_r·longest_reply_t
− w_d·discarded_tokens_t` (`w_r` and `w_d` are 0 unless a recipe prices a turn's longest reply or the text the env
discards), `S = w_q·quality + w_c·consistency`
(one agent: `S = (w_q + w_c)·quality`, consistency `None`).
Quality (:mod:`llm_marl_envs.envs.coding.quality`): 0.8 · held-out pass rate + 0.1 · syntax (the program parses and
defines the entry point) + 0.1 · structure (each role defines its function). Consistency
(:mod:`llm_marl_envs.envs.coding.contribution`): the mean of per-agent counterfactual contributions — `aux` and
`main` earn the held-out pass rate when some held-out test that passes fails once their part is swapped for neutral
stubs (`aux`: `return None` / identity with its signature; `main`: absent / pass-through to `aux`); the tester for
asserts that are valid on the reference, fail on a null program and copy no visible test; the reviewer for gains
after its messages. All runs of a turn go to the executor as one batch, and identical runs come from the cache.
MAGRPO mode (2 agents): each step pays MAGRPO's aux/main code reward of that turn's program.
`infos[agent]` carries counts (visible and held-out passed/total), the contributions and code metrics;
`state()["assessment"]` the full reports, counterfactual runs and the program.

## State
`env.state()` (centralized training only; no agent observes it): `task` (every field, held-out tests included),
`turn`, `max_turns`, live `agents`, every agent's `drafts` and `done` flag, every `message` (sender, recipients,
text, turn), each agent's `feedback`, the team `score` and `team_return`, `end_reason`, and `assessment`: the
assembled `program`, its syntax error, the full team report (every test's status and message), each counterfactual
run's report and the tester's report; `tie_order`: the order that breaks this episode's last tie under
`tie_order="shuffled"` (`None` under `"fixed"`).

## Infos
`infos[agent]` after `step`: `task_id`, `role`, `turn`, `score`, `team_return`, `reward`, `reward_mode`,
`magrpo_reward`, `reward_components` (`quality`, `consistency` — `None` for one agent —, `contributions` per agent,
`turns`, `message_tokens`, `invalid_actions`, `longest_reply_tokens`, `discarded_tokens` and their per-step values),
`quality_terms` (the terms above, plus the `similarity` and `duplication` diagnostics), `details` (`tests` (visible
and held-out passed/total, `timed_out`, `backend`), `code_metrics` (radon), `tester_asserts`, `dependent_tests` per
agent), `action` (`problems`, `done`, `messages_sent`, `truncated`, `original_length`, `invalid_unicode_replaced`)
and `end_reason`. Numbers and task-owned text only: the same for every agent, and nothing a teammate wrote. After
`reset`: `task_id`, `split`, `role`, `turn`.

## Episode end
The episode ends for everyone when the team's program (in the candidate schemes: the candidate the rule picked)
passes every *visible* test (`end_reason="solved"`; joint
mode only, MAGRPO mode keeps the official episode); the held-out tests still decide quality, so special-casing the
visible asserts ends early and earns little. An agent that writes `<done/>` is terminated and leaves `env.agents`
(its draft stays in the team's output; a reply that is only `<done/>` keeps it); so is an agent that resubmits its
code unchanged (from its second draft on). Everyone terminates when all said `<done/>` (`"all_done"`), when a
quorum has finished under `end_quorum="half"` (half the team, rounded up) or `"any"` (`"quorum_done"`, from turn 2
on), or when a whole turn from the second on changed no draft (`"converged"`);
the agents still live at `max_turns` are truncated (`"max_turns"`). Every turn costs `w_t`, so ending early pays.
Left unset, `end_quorum` is `"half"` under the default scheme, `propose_verify` (since 2026-12-06): on 132 held-out
pairs the shipped team of 2 played 86 fewer critical-path tokens under it than under `"all"` (p < 0.001) at the same
pass rate (+0.002 [−0.007, +0.010]), by a rule written before the runs
(docs/results/coding-propose-verify/RULE-quorum.md, quorum-heldout/); the shipped team of 4 kept its pass rate
under it too on 48 train-split pairs (−0.008 [−0.024, +0.008]; quorum-train-4/), and held out under it (48 pairs,
float32) it stays above its untrained team (p = 0.003), not shown above one agent (p = 0.097; heldout-4-half/; nor
on 99 fresh pairs, p = 0.117: heldout-4-half-fresh/).
The other schemes keep `"all"`:
under `"half"` the aux/main team's return lead over its untrained team vanished (docs/results/end-quorum/), and
`author_fixer` was not measured under it. MAGRPO mode keeps `"all"`.

## Sample observation and chat
`render_chat(env.chat_messages("main"))` after `reset(options={"task_id": "LME/0"})` with `dataset="decomposable"` and
`scheme="magrpo"` (a coder of the default scheme reads the same problem without the `Helper:` line, and is asked for
its own candidate; :func:`~llm_marl_envs.core.observation.render_chat` prints each message's content verbatim under
a `--- ROLE ---` line); the user message is the agent's observation exactly as `reset`/`step` return it, the
assistant message the reply's start (`tests/test_env_api.py` checks this sample against the env):

````
--- system ---
You write Python in a team. Answer with one ```python code block.
--- user ---
Count the words of `sentence` (separated by whitespace) that start and end with a vowel
(a, e, i, o, u; case-insensitive). Punctuation at the ends of a word is ignored.
>>> count_vowel_words("Anna ate one apple")
4
>>> count_vowel_words("the sky is blue")
0
```python
def count_vowel_words(sentence: str) -> int:
```
Helper: aux(word) returns True when the word (punctuation stripped) starts and ends with a vowel.

You are main, with aux. Turn 1 of 4. Notes to teammates go in <message>...</message>.
Write the function count_vowel_words whole. Call aux(...), your teammate's helper; do not define aux.
When your part is final, end your reply with:
<done/>
--- assistant ---
```python
def count_vowel_words(sentence: str) -> int:
    result = aux(
````
After a step the draft (`Your draft:`) and its feedback come before the cue, e.g. for `main` when `aux` forgot to
ignore case (`tests/test_env_coding.py` checks this sample against the env):

```
Visible tests of the team's program:
- count_vowel_words('Anna ate one apple'): failed
  expected: 4
  got: 3
- assert count_vowel_words('the sky is blue') == 0: passed
- assert count_vowel_words('') == 0: passed
```

## Reward integrity
Mean joint return of the scripted strategy library (`benchmarks/integrity/`) over 8 decomposable problems with honest
aux/main splits, `scheme="magrpo"` and otherwise default settings, by team size; from `python -m
llm_marl_benchmarks.reward_integrity --env coding --scheme magrpo --backends minilm --tasks 8 --pivot`. Every degenerate
strategy loses to honest work by more than 0.025 at every size, under TF-IDF too (`tests/test_reward_integrity.py`).
`reviewer_silent` ties honest work by design (with the team right at once there is nothing to review). Known limits:
a helper padded with code that does nothing (to inflate its share of the code), a main that inspects aux's code
object instead of calling it, and a reviewer credited for a gain its content-free message did not cause. Since an
author's part is its function and what it uses, a `main` that defines its own `aux` (`main_own_aux`) or an `aux`
that writes the entry point (`aux_writes_everything`) contributes nothing of that to the program.

| strategy | honest | n=1 | n=2 | n=3 | n=4 |
|---|---|---:|---:|---:|---:|
| honest | yes | 1.45 | 1.43 | 1.44 | 1.44 |
| reviewer_silent | yes |  |  |  | 1.44 |
| honest_with_message | yes |  | 1.41 | 1.42 | 1.42 |
| honest_revision | yes | 1.40 | 1.38 | 1.39 | 1.27 |
| reviewer_takes_credit |  |  |  |  | 1.39 |
| aux_boxed_result |  |  | 1.34 | 1.37 | 1.37 |
| handshake_helper |  |  | 1.30 | 1.35 | 1.35 |
| boxing_helper |  |  | 1.25 | 1.32 | 1.32 |
| solo_hog |  |  | 1.20 | 1.28 | 1.28 |
| dead_code_call |  |  | 1.20 | 1.28 | 1.28 |
| discarded_call |  |  | 1.20 | 1.28 | 1.28 |
| identity_helper |  |  | 1.20 | 1.28 | 1.28 |
| aux_does_all |  |  | 1.20 | 1.28 | 1.28 |
| main_inspects_aux |  |  | 1.20 | 1.28 | 1.28 |
| tester_trivial |  |  |  | 1.27 | 1.27 |
| tester_copies_visible |  |  |  | 1.27 | 1.27 |
| tester_rephrased_visible |  |  |  | 1.27 | 1.27 |
| tester_type_checks |  |  |  | 1.27 | 1.27 |
| tester_wrong |  |  |  | 1.27 | 1.27 |
| reviewer_spam |  |  |  |  | 1.27 |
| message_spam |  |  | 1.10 | 0.93 | 0.77 |
| same_full_program |  |  | 0.90 | 1.07 | 1.07 |
| hardcode_visible |  | 0.25 | 0.15 | 0.15 | 0.15 |
| rigged_eq |  | 0.25 | 0.15 | 0.15 | 0.15 |
| special_case_visible |  | 0.25 | 0.15 | 0.15 | 0.15 |
| weak_part_done |  | 0.25 | 0.15 | 0.15 | 0.15 |
| copy_task_done |  | 0.25 | 0.10 | 0.10 | 0.10 |
| syntax_stubs |  | 0.25 | 0.15 | 0.15 | 0.15 |
| main_own_aux |  |  | 0.18 | 0.19 | 0.19 |
| empty_part_done |  | -0.05 | 0.10 | 0.10 | 0.10 |
| aux_writes_everything |  |  | 0.00 | 0.00 | 0.00 |
| empty |  | -0.05 | -0.05 | -0.05 | -0.05 |
| prose |  | -0.10 | -0.15 | -0.20 | -0.20 |

Each scheme plays its own library (`--scheme NAME`, the default scheme's without it; `"magrpo_fallback"` plays the
table above: its rewards and program are `"magrpo"`'s). `python -m llm_marl_benchmarks.reward_integrity --env coding
--sizes 2 3 4 --backends minilm --tasks 8 --executor local --scheme propose_verify --pivot` (and `author_fixer`),
mean joint return (`propose_verify`'s table is the same under its default ending `"half"` as under `"all"`, checked
with `--end-quorum all` on 2026-12-06, every cell equal):

| `propose_verify` strategy | honest | n=2 | n=3 | n=4 |
|---|---|---:|---:|---:|
| honest (two different correct candidates) | yes | 1.45 | 1.45 | 1.45 |
| identical_candidates | | 1.20 | 1.28 | 1.28 |
| identical_reformatted | | 1.20 | 1.28 | 1.28 |
| coder_idles | | 1.20 | 1.28 | 1.28 |
| coder_returns_none | | 1.20 | 1.28 | 1.28 |
| special_case_one | | 0.40 | 1.28 | 1.28 |
| tester_empty | | | 1.28 | 1.28 |
| tester_copies_visible | | | 1.28 | 1.28 |
| verifier_picks_on_tie (coder_1 special-cased to every check) | | | | 1.26 |
| verifier_empty_on_tie | | | | 0.28 |
| verifier_copies_candidate | | | | 0.28 |
| special_case_visible | | 0.15 | 0.15 | 0.15 |

| `author_fixer` strategy | honest | n=2 | n=3 | n=4 |
|---|---|---:|---:|---:|
| honest (the author right at once) | yes | 1.45 | 1.45 | 1.45 |
| fixer_repairs (turn 2) | yes | 1.14 | 1.23 | 1.23 |
| identical_candidates | | 1.20 | 1.28 | 1.28 |
| fixer_solves_alone | | 1.20 | 1.28 | 1.28 |
| verifier_picks_on_tie (the fixer special-cased to every check) | | | | 1.26 |
| tester_empty | | | 1.20 | 1.20 |
| tester_copies_visible | | | 1.20 | 1.20 |
| verifier_empty_on_tie | | | | 0.28 |
| special_case_visible | | 0.15 | 0.15 | 0.15 |
| fixer_resubmits_unchanged | | 0.09 | 0.09 | 0.09 |

Every degenerate strategy loses to honest work by more than 0.025 at 2–4 agents under both backends, and where the
verifier's or the fixer's part decides (a tie; a failing author) its honest part beats the empty, copied or unchanged
one by as much (`tests/test_reward_integrity.py`). Known limits: a candidate copied with renamed variables is not an
*identical* candidate (the duplicate check compares code structure, names included); a verifier reads the
candidates' code, so a coder can address it in a comment; a fixer's own version written before the author's code
arrives is paid as a repair.

## Version History
* v0: initial release; rewards hardened against the integrity suite, held-out tests, counterfactual consistency,
  MAGRPO's official episode (before the first tagged release).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from llm_marl_envs.core.base_env import Assessment, CollaborativeTextEnv
from llm_marl_envs.core.similarity import duplication_rate, make_similarity, mean_off_diagonal
from llm_marl_envs.envs.coding import prompts
from llm_marl_envs.envs.coding.config import CodingConfig
from llm_marl_envs.envs.coding.contribution import (
    checks_a_value,
    coder_contributions,
    counterfactual_programs,
    dependent_tests,
    fixer_contribution,
    load_bearing,
    normalized_assert,
    null_program,
    share_factor,
    tester_contribution,
    verifier_contribution,
)
from llm_marl_envs.envs.coding.magrpo_tests import official_pass_fraction, official_program
from llm_marl_envs.envs.coding.program import (
    CandidateResult,
    ProgramParts,
    assemble_program,
    defined_functions,
    extract_asserts,
    extract_code,
    normalized_code,
    prompt_preamble,
    role_function,
    select_candidate,
    syntax_error,
    tied_candidates,
    verifier_choice,
)
from llm_marl_envs.envs.coding.quality import code_metrics, describe_tests, weighted_quality
from llm_marl_envs.envs.coding.roles import (
    CANDIDATE_ORDER,
    CODE_ROLES,
    ENTRY_POINT_ROLES,
    HELPER_NAME,
    VERIFIER,
    coding_team,
    reply_prefix,
)
from llm_marl_envs.envs.coding.tasks import load_coding_tasks
from llm_marl_envs.sandbox import (
    Executor,
    SandboxLimits,
    TestJob,
    TestOutcome,
    TestReport,
    shared_executor,
)

VISIBLE_TESTS_LABEL = "Visible tests of the team's program:"
"""The feedback line before the visible tests' verdicts (one line per test follows)."""
CANDIDATE_TESTS_LABEL = "Visible tests of your candidate:"
"""The same, in the candidate schemes, for a candidate's own verdicts."""


class CodingEnv(CollaborativeTextEnv):
    """Collaborative coding as a PettingZoo ParallelEnv (see the module docstring for the full card)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "coding_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": True,
    }
    MAGRPO_APP: ClassVar[str] = "coding"
    DEFAULT_END_QUORUM_BY_SCHEME: ClassVar[Mapping[str, str]] = {"propose_verify": "half"}
    """The joint mode's ``end_quorum`` per scheme when the config leaves it ``None`` (the other schemes:
    :attr:`DEFAULT_END_QUORUM`, ``"all"``). ``propose_verify`` ends on half the team from turn 2 since the held-out
    look of docs/results/coding-propose-verify/RULE-quorum.md: the shipped team of 2 played fewer critical-path tokens
    and no lower a pass rate than under ``"all"``. Under ``"magrpo"`` the shipped aux/main team's return lead over
    its untrained team vanished under ``"half"`` (docs/results/end-quorum/), and ``author_fixer`` was never measured."""
    SYSTEM_PROMPT: ClassVar[str] = prompts.SYSTEM_PROMPT
    ROLE_HINTS: ClassVar[Mapping[str, str]] = prompts.ROLE_HINTS
    ROLE_NEW_TOKENS: ClassVar[Mapping[str, int]] = prompts.ROLE_NEW_TOKENS
    ROLE_REPLY_ENDS: ClassVar[Mapping[str, str]] = prompts.ROLE_REPLY_ENDS
    concurrent_steps: ClassVar[bool] = True
    EPISODE_ATTRIBUTES: ClassVar[tuple[str, ...]] = (
        *CollaborativeTextEnv.EPISODE_ATTRIBUTES,
        "_held_out_history",
        "_reviewer_credit",
        "_reviewer_had_work",
        "_tie_order",
    )

    def __init__(self, config: CodingConfig | None = None, **kwargs: Any) -> None:
        config = CodingConfig.from_arguments(config, **kwargs)
        tasks = load_coding_tasks(config.task.dataset, config.task.split_scheme)
        super().__init__(coding_team(config.team.num_agents, config.team_scheme, config.coder_briefs), tasks, config,
                         config.task.split)
        self.scheme = config.team_scheme
        sandbox = config.sandbox
        if isinstance(sandbox.executor, str):
            limits = SandboxLimits(timeout_s=sandbox.timeout_s, memory_mb=sandbox.memory_mb)
        else:
            limits = None
            # An executor object may hold engine connections and threads: such an env cannot go to a worker process.
            self.metadata = {**type(self).metadata, "is_parallelizable": False}
        # One executor and one verdict cache per backend + limits (or per executor object) for the whole process:
        # the G envs of a group stepping the same joint action cost one sandbox run, not G.
        self.executor: Executor = shared_executor(sandbox.executor, limits, cache=sandbox.cache_verdicts)
        self.similarity = make_similarity(config.reward.similarity)
        self.magrpo_harness = config.task.magrpo_harness
        self._preambles: dict[str, str] = {}

    def default_end_quorum(self) -> str:
        """The joint mode's ending for this env's scheme (:attr:`DEFAULT_END_QUORUM_BY_SCHEME`)."""
        return self.DEFAULT_END_QUORUM_BY_SCHEME.get(self.config.team_scheme, self.DEFAULT_END_QUORUM)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """Start an episode (see the base env); also clears the reviewer's credit history."""
        observations, infos = super().reset(seed=seed, options=options)
        self._held_out_history: list[float] = []
        self._reviewer_credit = 0.0
        self._reviewer_had_work = False
        # The last tie-break's order for this episode: drawn after the task, from the generator the seed set, so the
        # same seed and options give the same task and the same order. Nothing an agent writes moves it.
        self._tie_order: tuple[str, ...] | None = None
        if self.config.tie_order == "shuffled" and self.scheme in CANDIDATE_ORDER:
            names = CANDIDATE_ORDER[self.scheme]
            self._tie_order = tuple(names[i] for i in self._rng.permutation(len(names)))
        return observations, infos

    def state(self) -> dict[str, Any]:
        """The base env's global state (see there), plus ``tie_order``: the order that breaks this episode's last
        tie under ``tie_order="shuffled"`` (``None`` under ``"fixed"`` or a scheme without candidates). Privileged:
        no observation carries it."""
        state = super().state()
        state["tie_order"] = None if self._tie_order is None else list(self._tie_order)
        return state

    def reply_prefix(self, agent: str) -> str:
        """The code fence and first words of ``agent``'s reply (:func:`~llm_marl_envs.envs.coding.roles.reply_prefix`):
        ``def aux(`` for the helper, the entry point's signature (and, for ``main``, a first line calling ``aux``) for
        ``main`` and ``solo``, ``assert ENTRY(`` for the tester; the reviewer's reply is free."""
        self._require_reset()
        return reply_prefix(self._known(agent), self.task, self.scheme)

    def drafts_shown_to(self, agent: str) -> list[str]:
        """Under ``observability="team"``, every teammate's draft but, in ``"propose_verify"``, another coder's
        candidate: the scheme's coders propose independently and learn each other's results, never code (else they
        copy: with the candidates in view, the untrained coders of 4 of 10 train-split episodes ended on one
        identical program)."""
        shown = super().drafts_shown_to(agent)
        if self.scheme == "propose_verify" and agent in CANDIDATE_ORDER["propose_verify"]:
            return [a for a in shown if a not in CANDIDATE_ORDER["propose_verify"]]
        return shown

    def drafts_read_by_role(self, agent: str) -> list[str]:
        """The verifier reads every candidate's code, the fixer the author's (the candidate schemes' feedback)."""
        agent = self._known(agent)
        if self.scheme not in CANDIDATE_ORDER:
            return []
        if agent == VERIFIER:
            return [a for a in CANDIDATE_ORDER[self.scheme] if a in self.possible_agents]
        return ["author"] if agent == "fixer" else []

    def normalize_draft(self, agent: str, draft: str) -> str:
        """Code roles keep only the code (:func:`~llm_marl_envs.envs.coding.program.extract_code`; ``""``, prose with
        no code, keeps the previous draft), and the authors of functions only their function with what it uses
        (:func:`~llm_marl_envs.envs.coding.program.role_function`: ``aux`` for the helper's author, the entry point
        for ``main`` and ``solo``; what follows it — redefinitions, top-level calls — is no part of it); the reviewer
        keeps its prose."""
        if agent not in CODE_ROLES:
            return draft
        code = extract_code(draft)
        if not code or agent == "tester":
            return code
        entry_point = self.task["entry_point"]
        if agent == HELPER_NAME:
            return role_function(code, HELPER_NAME, others=(entry_point,))
        assert agent in ENTRY_POINT_ROLES
        return role_function(code, entry_point, others=(HELPER_NAME,) if agent == "main" else ())

    def assess(self, drafts: Mapping[str, str]) -> Assessment:
        """Run the team's program and its counterfactuals against the tests (one executor batch) and score them."""
        task = self.task
        entry_point = task["entry_point"]
        visible, held_out = task["visible_tests"], task["held_out_tests"]
        solo = "solo" in drafts
        if not solo and self.scheme in CANDIDATE_ORDER:
            return self._assess_candidates(drafts)
        written_helper = "" if solo else drafts[HELPER_NAME]
        written_main = drafts["solo"] if solo else drafts["main"]
        # A part that does not parse on its own is left out of the team's program, so one author's syntax error does
        # not silence the other's working function (MAGRPO's official code, likewise, runs the functions it can
        # extract from each agent's completion). The author's feedback says so; its contribution is then 0.
        helper_code, main_code = (code if syntax_error(code) is None else "" for code in (written_helper, written_main))
        preamble = self._preamble()
        parts = assemble_program(preamble, helper_code, main_code)
        program_error = syntax_error(parts.program)
        runnable = program_error is None and entry_point in defined_functions(parts.program)
        tester_asserts = extract_asserts(drafts["tester"]) if "tester" in drafts else []

        # The runs of this turn go to the executor in one batch: the team's program on all tests, the tester's
        # asserts on the team, the reference and a null program. The counterfactual programs follow in a second
        # batch, and only when the team's program passes a test (else no part can be load-bearing). Identical jobs
        # (unchanged drafts, the G samples of a group) come from the verdict cache.
        batch = _JobBatch()
        all_tests = [*visible, *held_out]
        team_key = batch.add(parts.program, all_tests) if runnable else None
        if tester_asserts:
            if runnable:
                batch.add(parts.program, tester_asserts)
            if task["reference_solution"]:
                batch.add(task["reference_solution"], tester_asserts)
            batch.add(assemble_program(preamble, "", null_program(entry_point)).program, tester_asserts)
        official_key = None
        if self.reward_mode == "magrpo" and self.magrpo_harness == "official":
            # The official code's own program and tests, only for MAGRPO's reward (see config.CodingTaskConfig).
            program = official_program(written_helper, written_main, task["prompt"], entry_point)
            official_key = batch.add(program, task["official_tests"])
        reports = batch.run(self.executor)
        counterfactuals = []
        if team_key is not None and not solo and any(o.passed for o in reports[team_key].outcomes):
            counterfactuals = counterfactual_programs(preamble, helper_code, main_code, entry_point, HELPER_NAME)
            second = _JobBatch()
            for cf in counterfactuals:
                if cf.program is not None:
                    # All tests decide who is load-bearing (more tests tell a real helper from a stub more often);
                    # only the held-out ones are paid.
                    second.add(cf.program, all_tests)
            reports.update(second.run(self.executor))

        team_report = reports.get(team_key)
        visible_statuses = [_outcome_status(o) for o in team_report.outcomes[: len(visible)]] if team_report else []
        held_out_passed = [o.passed for o in team_report.outcomes[len(visible) :]] if team_report else []
        pass_rate = sum(held_out_passed) / len(held_out) if held_out_passed else 0.0
        terms = {
            "pass_rate": pass_rate,
            "syntax": float(runnable),
            "structure": self._structure(drafts, written_main),
        }
        contributions: dict[str, float | None] = {}
        dependent: dict[str, int] = {}
        if not solo:
            team_passed = [o.passed for o in team_report.outcomes] if team_report else []
            for agent in (HELPER_NAME, "main"):
                runs_passed = [
                    [False] * len(all_tests)
                    if cf.program is None
                    else [o.passed for o in reports[(cf.program, tuple(all_tests))].outcomes]
                    for cf in counterfactuals
                    if cf.agent == agent
                ]
                dependent[agent] = dependent_tests(team_passed, runs_passed) if runs_passed else 0
                if runs_passed and load_bearing(team_passed, runs_passed):
                    own, other = (helper_code, main_code) if agent == HELPER_NAME else (main_code, helper_code)
                    contributions[agent] = pass_rate * share_factor(own, other)
                else:
                    contributions[agent] = 0.0
        tester_report = None
        if "tester" in drafts:
            tester_report = reports.get((parts.program, tuple(tester_asserts))) if runnable else None
            contributions["tester"], terms["tester_validity"] = self._tester_credit(
                tester_asserts, preamble, reports, pass_rate
            )
        if "reviewer" in drafts:
            contributions["reviewer"] = self._reviewer_contribution(pass_rate, visible_statuses)
        self._held_out_history.append(pass_rate)
        consistency = None if solo else _mean_contribution(contributions)
        terms.update(self._similarity_terms(drafts))
        visible_outcomes = team_report.outcomes[: len(visible)] if team_report else ()
        feedback = self._feedback(
            drafts, parts, program_error, visible_statuses, runnable, tester_asserts, tester_report, visible_outcomes
        )
        details = {
            "tests": {
                "visible_passed": sum(status == "passed" for status in visible_statuses),
                "visible_total": len(visible),
                "held_out_passed": sum(held_out_passed),
                "held_out_total": len(held_out),
                "timed_out": bool(team_report and team_report.timed_out),
                "backend": self.executor.backend,
            },
            "code_metrics": code_metrics(parts.program),
            "tester_asserts": len(tester_asserts),
            "dependent_tests": dependent,
        }
        private = {
            "program": parts.program,
            "program_syntax_error": program_error,
            "team_report": _report_dict(team_report),
            "counterfactuals": [
                {
                    "agent": cf.agent,
                    "kind": cf.kind,
                    "report": None if cf.program is None else _report_dict(reports[(cf.program, tuple(all_tests))]),
                }
                for cf in counterfactuals
            ],
            "tester_on_team": _report_dict(tester_report),
        }
        return Assessment(
            quality=weighted_quality(terms),
            consistency=consistency,
            quality_terms=terms,
            feedback=feedback,
            magrpo_reward=self._magrpo(written_helper, written_main, team_report, reports.get(official_key)),
            contributions=contributions,
            details=details,
            private=private,
            # Every visible test passes: the team's program does what the agents can check, so the episode ends.
            # Held-out tests still decide quality: special-casing the visible asserts ends early and earns little.
            solved=bool(visible) and visible_statuses.count("passed") == len(visible),
        )

    def _assess_candidates(self, drafts: Mapping[str, str]) -> Assessment:
        """The candidate schemes (``propose_verify``, ``author_fixer``): every code author's whole entry point runs on
        every test, the selection rule picks the team's program, and credit is counterfactual over candidates (see
        :mod:`~llm_marl_envs.envs.coding.contribution`). One executor batch, as in the MAGRPO split."""
        task = self.task
        entry_point = task["entry_point"]
        visible, held_out = task["visible_tests"], task["held_out_tests"]
        all_tests = [*visible, *held_out]
        order = [agent for agent in CANDIDATE_ORDER[self.scheme] if agent in drafts]
        preamble = self._preamble()
        # As in the MAGRPO split, a candidate that does not parse is left out (its author's feedback says so).
        codes = {a: drafts[a] if syntax_error(drafts[a]) is None else "" for a in order}
        programs = {a: assemble_program(preamble, "", codes[a]) for a in order}
        runnable = {
            a: bool(codes[a].strip()) and syntax_error(programs[a].program) is None
            and entry_point in defined_functions(programs[a].program)
            for a in order
        }
        tester_asserts = extract_asserts(drafts["tester"]) if "tester" in drafts else []
        batch = _JobBatch()
        keys = {a: batch.add(programs[a].program, all_tests) for a in order if runnable[a]}
        tester_keys = {}
        if tester_asserts:
            tester_keys = {a: batch.add(programs[a].program, tester_asserts) for a in order if runnable[a]}
            if task["reference_solution"]:
                batch.add(task["reference_solution"], tester_asserts)
            batch.add(assemble_program(preamble, "", null_program(entry_point)).program, tester_asserts)
        reports = batch.run(self.executor)

        statuses: dict[str, list[str]] = {}
        visible_outcomes: dict[str, list[TestOutcome]] = {}
        held_out_rate: dict[str, float] = {}
        held_out_passed: dict[str, int] = {}
        for agent in order:
            report = reports.get(keys[agent]) if agent in keys else None
            outcomes = report.outcomes if report else []
            statuses[agent] = [_outcome_status(o) for o in outcomes[: len(visible)]]
            visible_outcomes[agent] = list(outcomes[: len(visible)])
            held_out_passed[agent] = sum(o.passed for o in outcomes[len(visible) :])
            held_out_rate[agent] = held_out_passed[agent] / len(held_out) if held_out and report else 0.0
        tester_passed = {a: reports[k].passed for a, k in tester_keys.items() if k in reports}
        choice = verifier_choice(drafts[VERIFIER], order) if VERIFIER in drafts else None
        results = [
            CandidateResult(a, runnable[a], statuses[a].count("passed"), tester_passed.get(a, 0)) for a in order
        ]
        tie_order = [a for a in self._tie_order if a in drafts] if self._tie_order else order
        selected = select_candidate(results, tie_order, choice)
        parts = programs[selected] if selected else assemble_program(preamble, "", "")
        pass_rate = held_out_rate[selected] if selected else 0.0
        visible_statuses = statuses[selected] if selected else []
        terms = {
            "pass_rate": pass_rate,
            "syntax": float(selected is not None),
            # The contract of each candidate author that wrote one (an idle fixer owes none; an idle coder earns
            # nothing as consistency instead).
            "structure": _share([entry_point in defined_functions(drafts[a]) for a in order if drafts[a].strip()]),
        }

        contributions: dict[str, float | None] = {}
        if self.scheme == "propose_verify":
            contributions.update(coder_contributions(
                held_out_rate, {a: normalized_code(codes[a]) if runnable[a] else "" for a in order}, order
            ))
        else:
            author_clean = runnable["author"] and bool(visible) and statuses["author"].count("passed") == len(visible)
            contributions["author"] = held_out_rate["author"]
            contributions["fixer"] = fixer_contribution(pass_rate, held_out_rate["author"], author_clean,
                                                        bool(drafts["fixer"].strip()))
        tester_report = None
        if "tester" in drafts:
            tester_report = reports.get(tester_keys[selected]) if selected in tester_keys else None
            contributions["tester"], terms["tester_validity"] = self._tester_credit(
                tester_asserts, preamble, reports, pass_rate
            )
        if VERIFIER in drafts:
            tied = {r.agent: held_out_rate[r.agent] for r in tied_candidates(results)}
            contributions[VERIFIER] = verifier_contribution(choice, tied)
        self._held_out_history.append(pass_rate)
        consistency = _mean_contribution(contributions)
        terms.update(self._similarity_terms(drafts))
        feedback = self._candidate_feedback(drafts, order, codes, runnable, statuses, selected, choice,
                                            tester_asserts, tester_passed, visible_outcomes)
        team_report = reports.get(keys[selected]) if selected else None
        details = {
            "tests": {
                "visible_passed": visible_statuses.count("passed"),
                "visible_total": len(visible),
                "held_out_passed": held_out_passed[selected] if selected else 0,
                "held_out_total": len(held_out),
                "timed_out": any(reports[k].timed_out for k in keys.values() if k in reports),
                "backend": self.executor.backend,
            },
            "code_metrics": code_metrics(parts.program),
            "tester_asserts": len(tester_asserts),
            "dependent_tests": {},
            "scheme": self.scheme,
            "selected": selected,
            "verifier_choice": choice,
            "candidates": {
                a: {"runnable": runnable[a], "visible_passed": statuses[a].count("passed"),
                    "held_out_passed": held_out_passed[a], "tester_passed": tester_passed.get(a, 0)}
                for a in order
            },
        }
        private = {
            "program": parts.program,
            "program_syntax_error": None if selected else syntax_error(parts.program),
            "team_report": _report_dict(team_report),
            "candidates": {a: _report_dict(reports.get(keys[a])) if a in keys else None for a in order},
            "counterfactuals": [],
            "tester_on_team": _report_dict(tester_report),
        }
        return Assessment(
            quality=weighted_quality(terms),
            consistency=consistency,
            quality_terms=terms,
            feedback=feedback,
            magrpo_reward=None,
            contributions=contributions,
            details=details,
            private=private,
            solved=bool(visible) and visible_statuses.count("passed") == len(visible),
        )

    def _similarity_terms(self, drafts: Mapping[str, str]) -> dict[str, float]:
        """The drafts' ``similarity`` (mean off-diagonal) and ``duplication`` terms; none for a single draft."""
        texts = list(drafts.values())
        if len(texts) < 2:
            return {}
        sims = self.similarity.matrix(texts)
        return {"similarity": mean_off_diagonal(sims), "duplication": duplication_rate(texts, sims)}

    def _candidate_feedback(
        self,
        drafts: Mapping[str, str],
        order: list[str],
        codes: Mapping[str, str],
        runnable: Mapping[str, bool],
        statuses: Mapping[str, list[str]],
        selected: str | None,
        choice: str | None,
        tester_asserts: list[str],
        tester_passed: Mapping[str, int],
        visible_outcomes: Mapping[str, list[TestOutcome]],
    ) -> dict[str, str]:
        """Per-agent feedback in the candidate schemes: task-owned text, counts and the agent's own errors; a
        teammate's *code* only where the scheme shows it (the fixer reads the author's, the verifier every
        candidate). Run-time text (exception messages, values) only of the agent's own candidate, whose program is
        its own code on the task's preamble (as ``solo`` sees its own); printed output never."""
        entry_point = self.task["entry_point"]
        visible = self.task["visible_tests"]
        team_line = (f"The team's program is {selected}'s candidate." if selected
                     else "No candidate defines the entry point yet; no test ran.")

        def result_line(agent: str) -> str:
            if not runnable[agent]:
                return f"{agent}'s candidate: none that runs yet."
            passed = statuses[agent].count("passed")
            failing = next((t for t, st in zip(visible, statuses[agent], strict=False) if st != "passed"), None)
            tail = f"; first failing: {failing.strip().splitlines()[-1][:160]}" if failing else ""
            return f"{agent}'s candidate: {passed} of {len(visible)} visible tests pass{tail}."

        def code_block(agent: str) -> str:
            return f"{agent}'s code:\n```python\n{drafts[agent].strip()}\n```\n{result_line(agent)}"

        feedback = {}
        for role, draft in drafts.items():
            lines = []
            if role in order:
                own_error = syntax_error(draft) if draft.strip() else None
                if own_error:
                    lines.append(f"Syntax error in your code: {own_error}. It was left out of the team's program.")
                elif entry_point not in defined_functions(draft):
                    lines.append(f"Your code must define `{entry_point}`.")
                if runnable[role] and visible:
                    lines.append(f"{CANDIDATE_TESTS_LABEL}\n" + describe_tests(
                        visible, statuses[role], visible_outcomes.get(role), entry_point=entry_point, known=None))
                if role in tester_passed:
                    lines.append(f"The tester's asserts: {tester_passed[role]} of {len(tester_asserts)} pass on "
                                 f"your candidate.")
                # The scheme's reading (drafts_read_by_role): the fixer repairs the author's code.
                shown = [a for a in self.drafts_read_by_role(role) if drafts.get(a, "").strip()]
                lines += [code_block(a) for a in shown]
                lines += [result_line(other) for other in order if other != role and other not in shown]
            elif role == "tester":
                on = ", ".join(f"{a} {tester_passed.get(a, 0)}" for a in order if runnable[a])
                lines.append(f"{len(tester_asserts)} asserts found" + (f"; they pass on: {on}." if on else "."))
            elif role == VERIFIER:
                lines += [code_block(a) if drafts[a].strip() else result_line(a) for a in order]
                lines.append(f"Your choice: {choice}." if choice else "You named no candidate.")
            lines.append(team_line)
            feedback[role] = "\n".join(lines)
        return feedback

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

    def _tester_credit(
        self, asserts: list[str], preamble: str, reports: Mapping[tuple, TestReport], pass_rate: float
    ) -> tuple[float, float]:
        """(tester contribution, validity term): see :mod:`~llm_marl_envs.envs.coding.contribution`."""
        if not asserts:
            return 0.0, 0.0
        key = tuple(asserts)
        reference = self.task["reference_solution"]
        null = assemble_program(preamble, "", null_program(self.task["entry_point"])).program
        # Without a reference solution validity cannot be checked; the asserts are then taken as valid.
        valid = [o.passed for o in reports[(reference, key)].outcomes] if reference else [True] * len(asserts)
        discriminating = [not o.passed for o in reports[(null, key)].outcomes]
        seen = {normalized_assert(test) for test in self.task["visible_tests"]}
        entry_point = self.task["entry_point"]
        # "New" information: not a visible test however rephrased, and a check of the answer's value.
        new = [normalized_assert(a) not in seen and checks_a_value(a, entry_point) for a in asserts]
        validity = sum(valid) / len(asserts)
        return tester_contribution(valid, discriminating, new, pass_rate), validity

    def _reviewer_contribution(self, pass_rate: float, visible_statuses: list[str]) -> float | None:
        """Credit the held-out gain of a turn that follows the reviewer's message to a code author."""
        if self._held_out_history and any(
            m.sender == "reviewer" and set(m.recipients) & {HELPER_NAME, "main"}
            for m in self.channel.sent_at(self.turn - 1)
        ):
            self._reviewer_credit += max(0.0, pass_rate - self._held_out_history[-1])
        had_work_before = self._reviewer_had_work
        # The reviewer reads this turn's verdicts next turn: from then on there is something to review.
        self._reviewer_had_work = had_work_before or any(status != "passed" for status in visible_statuses)
        if not had_work_before and self._reviewer_credit == 0.0:
            return None
        return min(1.0, self._reviewer_credit)

    def _feedback(
        self,
        drafts: Mapping[str, str],
        parts: ProgramParts,
        program_error: str | None,
        visible_statuses: list[str],
        runnable: bool,
        tester_asserts: list[str],
        tester_report: TestReport | None,
        visible_outcomes: Sequence[TestOutcome] = (),
    ) -> dict[str, str]:
        """Per-agent feedback: task-owned text only, plus full details of the agent's own code (see the card).

        A failing visible test shows its call, the expected value and what the call gave; for a team, what it gave is
        shown only when made of words the agent already sees (:func:`~llm_marl_envs.envs.coding.quality.shown_result`:
        a teammate's code can make the program return any text), and whole to an agent working alone.
        """
        entry_point = self.task["entry_point"]
        visible = self.task["visible_tests"]
        task_text = "\n".join([self.task["prompt"], *visible])
        feedback = {}
        for role, draft in drafts.items():
            lines = []
            own_error = syntax_error(draft) if role in CODE_ROLES and draft.strip() else None
            if own_error:
                left_out = " It was left out of the team's program." if role in (HELPER_NAME, "main", "solo") else ""
                lines.append(f"Syntax error in your code: {own_error}.{left_out}")
            if role in ("main", "solo") and entry_point not in defined_functions(draft):
                lines.append(f"Your code must define `{entry_point}`.")
            if role == HELPER_NAME and HELPER_NAME not in defined_functions(draft):
                lines.append(f"Your code must define `{HELPER_NAME}`.")
            if role == "tester":
                passing = tester_report.passed if tester_report else 0
                lines.append(f"{len(tester_asserts)} asserts found; {passing} pass on the team's program.")
            elif runnable:
                if visible:
                    teammates = "\n".join(text for other, text in drafts.items() if other != role)
                    described = describe_tests(
                        visible,
                        visible_statuses,
                        visible_outcomes,
                        entry_point=entry_point,
                        known=None if role == "solo" else f"{task_text}\n{draft}",
                        teammates=teammates,
                    )
                    lines.append(f"{VISIBLE_TESTS_LABEL}\n{described}")
                else:
                    lines.append("No visible tests; hidden tests decide the reward.")
            elif program_error:
                # Where the error is, never what it says: the text could be a teammate's (see the card).
                lines.append(f"The team's program does not parse ({_error_place(parts, program_error, role)}).")
            else:
                lines.append(f"The team's program does not define `{entry_point}` yet; no test ran.")
            feedback[role] = "\n".join(lines)
        return feedback

    def _magrpo(
        self, helper_code: str, main_code: str, team_report: TestReport | None, official: TestReport | None
    ) -> float | None:
        if self.reward_mode != "magrpo":
            return None
        from llm_marl_envs.envs.coding.magrpo_reward import magrpo_code_reward

        if self.magrpo_harness == "official":
            # No tests (HumanEval/32 under the official assembly) means no test result, as in the original.
            fraction = official_pass_fraction([o.status for o in official.outcomes]) if official else None
        else:
            fraction = team_report.pass_rate if team_report else None
        return magrpo_code_reward(helper_code, main_code, self.task["entry_point"], fraction).total


class _JobBatch:
    """The distinct (program, tests) runs of one turn, sent to the executor as one batch."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, tuple[str, ...]], TestJob] = {}

    def add(self, program: str, tests: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        key = (program, tuple(tests))
        if key not in self._jobs and key[1]:
            self._jobs[key] = TestJob(program, list(tests))
        return key

    def run(self, executor: Executor) -> dict[tuple[str, tuple[str, ...]], TestReport]:
        keys = list(self._jobs)
        reports = executor.run_many([self._jobs[k] for k in keys]) if keys else []
        return dict(zip(keys, reports, strict=True))


_BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
_EXCEPTION_NAME = re.compile(r"(?:the program raised(?: while loading:)? )?([A-Za-z_]\w*)(?::|\b)")


def _mean_contribution(contributions: Mapping[str, float | None]) -> float:
    """The team's consistency: the mean of the agents' scored contributions (0 when none is scored)."""
    scored = [value for value in contributions.values() if value is not None]
    return sum(scored) / len(scored) if scored else 0.0


def _outcome_status(outcome: TestOutcome) -> str:
    """A test's verdict as an agent may see it: the status, plus the exception's type when it is a builtin.

    The message itself is never shown: it is free text a teammate's program can choose (an exception message, the
    name in a ``NameError``, a custom exception class's name).
    """
    if outcome.status != "error":
        return outcome.status
    match = _EXCEPTION_NAME.match(outcome.message)
    if match and match.group(1) in _BUILTIN_EXCEPTIONS:
        return f"error ({match.group(1)})"
    return "error"


def _error_place(parts: ProgramParts, error: str, role: str) -> str:
    """Which section of the program a syntax error is in, as a role name (the error text is only for its author)."""
    match = re.match(r"line (\d+)", error)
    if not match:
        return "the program cannot be parsed"
    line = int(match.group(1))
    sections = [("the task's preamble", parts.preamble), (HELPER_NAME, parts.helper_code), ("main", parts.main_code)]
    first = 1
    for owner, text in sections:
        if not text.strip():
            continue
        last = first + text.count("\n")
        if first <= line <= last:
            return "in your code: see above" if owner == role else f"in {owner}'s code"
        first = last + 2  # pieces are joined by one blank line
    return f"line {line}"


def _share(flags: Sequence[bool]) -> float:
    """The fraction of ``flags`` that are true; 0 for none."""
    return sum(flags) / len(flags) if flags else 0.0


def _report_dict(report: TestReport | None) -> dict[str, Any] | None:
    """A report for ``state()``: everything but its wall-clock duration, so the state is reproducible."""
    if report is None:
        return None
    data = report.to_dict()
    data.pop("duration_s")
    return data
