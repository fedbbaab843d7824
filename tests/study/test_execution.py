"""The study's scheduling and per-episode figures: which episodes share a lockstep batch, critical-path tokens on
hand-made trajectories, and one progress line per turn of a running batch (with an ETA from measured turns)."""

from __future__ import annotations

import io
import itertools
import re
from collections import Counter

import pytest

from llm_marl_baselines.policies import Generation
from llm_marl_benchmarks.progress import LockstepTurn, StudyProgress
from llm_marl_benchmarks.study.design import StudyDesign
from llm_marl_benchmarks.study.execution import PolicySpec, make_batches, run_batch, token_counts
from llm_marl_envs.rollout import AgentStep


def design(**changes) -> StudyDesign:
    values = {"team_sizes": (2,), "conditions": ("trained", "untrained", "single", "base"), "episodes": 16,
              "tasks": 2, "similarity": "tfidf", "env_kwargs": {"coding": {"executor": "local"}}}
    return StudyDesign(**{**values, **changes})


# ------------------------------------------------------------------------------------------------------ batching
def test_conditions_the_base_model_plays_with_one_token_budget_share_a_batch():
    plan = design().plan()
    teams = {("writing", 2): "teams/writing-2", ("coding", 2): "teams/coding-2"}
    batches = make_batches(plan, 32, teams, design())
    by_conditions = {(b.env, b.conditions): b for b in batches}
    # Coding: every role has the same token budget, so the untrained team, its adapters-off twin and the single agent
    # share one batch; writing's single agent (a larger budget: its whole text) keeps its own.
    assert set(by_conditions) == {
        ("coding", ("trained",)), ("coding", ("untrained", "single", "base")),
        ("writing", ("trained",)), ("writing", ("untrained", "base")), ("writing", ("single",)),
    }
    assert by_conditions[("coding", ("trained",))].team_dir == "teams/coding-2"
    assert by_conditions[("coding", ("untrained", "single", "base"))].team_dir is None
    assert Counter(e.key for b in batches for e in b.episodes) == Counter(e.key for e in plan)  # each once
    # The old schedule, kept for side-by-side timing: one condition per batch.
    old = make_batches(plan, 32, teams, design(), batching="condition")
    assert sorted((b.env, b.conditions) for b in old) == sorted(
        (env, (c,)) for env in ("writing", "coding") for c in ("trained", "untrained", "single", "base"))
    # batch_size caps a batch; plan order is kept within a group.
    small = make_batches(plan, 3, teams, design())
    assert max(len(b.episodes) for b in small) == 3
    coding = [e for b in small if b.conditions != ("trained",) and b.env == "coding" for e in b.episodes]
    assert coding == [e for e in plan if e.env == "coding" and e.condition != "trained"]
    with pytest.raises(ValueError, match="batching: expected one of"):
        make_batches(plan, 3, teams, design(), batching="random")


def test_a_batch_holds_at_most_max_rows_agents_so_a_turn_fills_one_generate_call():
    study = design(team_sizes=(2, 4), conditions=("untrained", "single"), cell_episodes={2: 10, 4: 10},
                   max_new_tokens=48)
    batches = make_batches(study.plan(), 64, {}, study, max_rows=16)
    rows = [sum(e.num_agents for e in b.episodes) for b in batches]
    assert max(rows) <= 16 and all(len(b.episodes) <= 64 for b in batches)
    # Packed in plan order: a batch closes only when the next episode would not fit.
    for batch, following in itertools.pairwise(batches):
        if batch.env == following.env:
            assert sum(e.num_agents for e in batch.episodes) + following.episodes[0].num_agents > 16
    assert sum(len(b.episodes) for b in batches) == len(study.plan())
    # Plan order per env: 10 pairs (20 rows), 10 single agents, 10 teams of four (40 rows), 10 single agents again:
    # 8 pairs | 2 pairs + 10 singles | 4 fours | 4 fours | 2 fours + 8 singles | 2 singles.
    writing = [b for b in batches if b.env == "writing"]
    assert [len(b.episodes) for b in writing] == [8, 12, 4, 4, 10, 2]
    assert [sum(e.num_agents for e in b.episodes) for b in writing] == [16, 14, 16, 16, 16, 2]


def test_one_override_budget_puts_every_base_model_condition_of_an_env_in_one_batch():
    batches = make_batches(design(max_new_tokens=48).plan(), 32, {}, design(max_new_tokens=48))
    assert sorted((b.env, b.conditions) for b in batches) == [
        ("coding", ("trained",)), ("coding", ("untrained", "single", "base")),
        ("writing", ("trained",)), ("writing", ("untrained", "single", "base"))]


def test_a_mixed_batch_plays_each_episode_under_its_own_condition_and_reports_every_turn():
    """Scripted policy, real envs: the single agent and the untrained team share the batch, each with its own
    roles, prompts and turn budget; one report per turn once every playing episode has stepped."""
    study = design(conditions=("untrained", "single", "single_oneshot"), max_new_tokens=32, cell_episodes={2: 2})
    batch = next(b for b in make_batches(study.plan(), 32, {}, study) if b.env == "coding")
    assert batch.conditions == ("untrained", "single", "single_oneshot") and len(batch.episodes) == 6
    turns: list[LockstepTurn] = []
    rows = run_batch(batch, study, PolicySpec(kind="scripted"), on_turn=turns.append)
    by_condition = {row["condition"]: row for row in rows}
    assert by_condition["single"]["num_agents"] == by_condition["single_oneshot"]["num_agents"] == 1
    assert by_condition["untrained"]["num_agents"] == 2
    assert by_condition["single_oneshot"]["turns"] == 1 and by_condition["single_oneshot"]["turn_budget"] == 1
    assert by_condition["single"]["turn_budget"] == by_condition["untrained"]["turn_budget"] == 4
    # One report per turn of the batch, each counting what the rows say: who played it, who ended with it, the turns
    # their budgets had left.
    expected, done = [], 0
    for turn in range(1, max(row["turns"] for row in rows) + 1):
        ended = [row for row in rows if row["turns"] == turn]
        done += len(ended)
        expected.append((turn, sum(row["turns"] >= turn for row in rows), len(ended),
                         sum(row["turn_budget"] - turn for row in ended), done))
    assert [(t.turn, t.played, t.ended, t.unused_turns, t.batch_done) for t in turns] == expected
    assert expected[0][2] >= 2  # the one-shot agents end at turn 1
    assert all(t.label == "coding: untrained + single + single_oneshot" and t.batch_size == 6 for t in turns)
    # A scripted policy gives no token ids: no latency in tokens, rather than a made-up one.
    assert all(row["critical_path_tokens"] is None and row["completion_tokens"] is None for row in rows)
    # Each row names the sandbox that ran its tests: the design's executor for coding, none for writing.
    assert {row["sandbox_backend"] for row in rows} == {"local"}
    writing = next(b for b in make_batches(study.plan(), 32, {}, study) if b.env == "writing")
    assert {row["sandbox_backend"] for row in run_batch(writing, study, PolicySpec(kind="scripted"))} == {None}


# ------------------------------------------------------------------------------------------------------- precision
def _tiny_model():
    """The tiny random-weight Llama of the baseline tests (a real transformers model, no hub)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))
    from baseline_helpers import tiny_model

    return tiny_model(seed=0)


def test_rows_record_the_dtype_and_device_the_local_model_ran_in(tmp_path):
    """A real local model (the tiny Llama saved as a folder) played in bfloat16, then in float32: each batch's rows
    say which, read from the loaded weights; a scripted policy has no weights, so its rows record none."""
    loaded = _tiny_model()
    loaded.model.save_pretrained(tmp_path / "tiny")
    loaded.tokenizer.save_pretrained(tmp_path / "tiny")
    study = design(envs=("coding",), conditions=("single",), cell_episodes={2: 1}, tasks=1, max_turns=1,
                   max_new_tokens=4)
    (batch,) = make_batches(study.plan(), 8, {}, study)
    for dtype in ("bfloat16", "float32"):
        rows = run_batch(batch, study, PolicySpec(kind="local", model=str(tmp_path / "tiny"), dtype=dtype))
        assert [(row["dtype"], row["device"]) for row in rows] == [(dtype, "cpu")]
    rows = run_batch(batch, study, PolicySpec(kind="scripted"))
    assert [(row["dtype"], row["device"]) for row in rows] == [(None, None)]


def test_a_teams_precision_is_its_base_models_not_its_adapters():
    """LoRA adapters stay float32 on a bfloat16 base: the team runs in bfloat16, and that is what rows record."""
    import torch

    from llm_marl_benchmarks.study.execution import model_precision
    from llm_marl_trainers.generation import TeamModel

    loaded = _tiny_model()
    loaded.model.to(torch.bfloat16)
    team = TeamModel(loaded, ["aux", "main"])
    adapter_dtypes = {p.dtype for agent in team.agents for p in team.adapter_parameters(agent)}
    assert adapter_dtypes == {torch.float32}
    assert model_precision(team.model_of(agent) for agent in team.agents) == {"dtype": "bfloat16", "device": "cpu"}


# -------------------------------------------------------------------------------------------- critical-path tokens
def step(agent: str, turn: int, tokens: int | None) -> AgentStep:
    generation = None if tokens is None else Generation(text="x", completion_ids=tuple(range(tokens)))
    return AgentStep(agent=agent, turn=turn, messages=(), action="x", reward=0.0, reward_components={},
                     terminated=False, truncated=False, generation=generation)


def test_critical_path_tokens_sum_the_longest_reply_of_each_turn():
    # Turn 1: both write (30, 50) -> 50; turn 2: only aux acts (main is done) -> 20; turn 3: 10 and 70 -> 70.
    steps = [step("aux", 1, 30), step("main", 1, 50), step("aux", 2, 20), step("aux", 3, 10), step("main", 3, 70)]
    assert token_counts(steps) == (50 + 20 + 70, 30 + 50 + 20 + 10 + 70)
    # One agent: its replies are the critical path.
    assert token_counts([step("solo", 1, 40), step("solo", 2, 25)]) == (65, 65)
    # Parallel writers: a team of four 40-token replies costs one 40-token turn of latency, four of compute.
    assert token_counts([step(a, 1, 40) for a in ("a", "b", "c", "d")]) == (40, 160)
    # A reply without token ids makes the figure unknown, not smaller.
    assert token_counts([step("aux", 1, 30), step("main", 1, None)]) == (None, None)
    assert token_counts([]) == (0, 0)


# -------------------------------------------------------------------------------------------------------- progress
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_study_progress_prints_a_line_per_turn_with_counts_rate_and_an_eta_from_measured_turns():
    stream, clock = io.StringIO(), Clock()
    # 5 episodes budgeted 4 turns each, 2 already logged by an earlier run (a resume): 20 turn units, 8 done.
    progress = StudyProgress([4] * 5, done=[4, 4], stream=stream, live=False, clock=clock)
    clock.now = 30.0  # model loading and the first turn
    progress.on_turn(LockstepTurn("coding: untrained + single", 1, played=2, ended=0, unused_turns=0, batch_done=0,
                                  batch_size=2))
    clock.now = 40.0  # second turn: one episode ends early, crediting its 2 unused turns
    progress.on_turn(LockstepTurn("coding: untrained + single", 2, played=2, ended=1, unused_turns=2, batch_done=1,
                                  batch_size=2))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all(line.startswith("[study] coding: untrained + single turn ") for line in lines)
    assert "3/5 episodes" in lines[1] and "4 turns played" in lines[1] and "1 ended" in lines[1]
    assert "(1/2 of the batch done)" in lines[1]
    # Rates over this run: 1 episode and 4 turns in 40 s -> 1.5 episodes/min, 6.0 turns/min.
    assert "1.5 episodes/min, 6.0 turns/min" in lines[1]
    # Pace from the first update: 4 units in 10 s; 6 units left -> 15 s.
    assert progress.done == 14 and progress.eta_s() == pytest.approx(15.0)
    assert re.search(r"ETA 15\.0 s$", lines[1])
    # Rows from elsewhere (Ray workers report no turns) count their whole budget.
    progress.episodes_logged([4], "coding: trained", turns=[3])
    assert progress.done == 18 and progress.episodes_done == 4 and progress.turns_played == 7
    assert "4/5 episodes" in stream.getvalue().splitlines()[-1]


def test_each_batch_of_the_local_model_gets_its_own_prompt_store_unless_reuse_is_off(monkeypatch):
    """A store per batch: a batch's turns reuse its own earlier prompts, never another batch's, so what it samples
    does not depend on which batches ran before it in the process. The local model samples records with token ids
    (the critical-path metric counts them) and no log-probabilities, through the batch's store."""
    from types import SimpleNamespace

    from llm_marl_baselines.policies import GenerationSettings
    from llm_marl_baselines.policies.base import RolloutPolicy
    from llm_marl_benchmarks.study import execution
    from llm_marl_benchmarks.study.cli import _policy_spec, build_parser

    settings = GenerationSettings(max_new_tokens=8)
    tiny = _tiny_model()  # its weights say the policy's precision
    for reuse in (True, False):
        spec = PolicySpec(kind="local", reuse_prompts=reuse)
        first, second = execution.batch_prompt_store(spec), execution.batch_prompt_store(spec)
        if reuse:
            assert first is not None and second is not None and first is not second
            assert first.max_bytes == execution.PROMPT_STORE_BYTES
        else:
            assert first is None and second is None
        # An already-built local policy stands in for the model load (the slow main-preset test loads the real one).
        monkeypatch.setitem(execution._POLICIES, ("base", spec),
                            SimpleNamespace(share_prefix=True, loaded=tiny, batch_size=3))
        policy_fn, precision = execution._rollout_policy(spec, None, settings, first)
        assert isinstance(policy_fn, RolloutPolicy) and policy_fn.records
        assert policy_fn.policy.prompt_store is first and policy_fn.policy.logprobs is False
        assert policy_fn.policy.loaded is tiny and policy_fn.policy.batch_size == 3
        assert precision == execution.model_precision([tiny.model])
    assert _policy_spec(build_parser().parse_args([])).reuse_prompts
    assert not _policy_spec(build_parser().parse_args(["--no-reuse-prompts"])).reuse_prompts
    # The local model the study builds keeps no store of its own: it would only hold memory, never be read.
    import llm_marl_baselines.policies as policies

    built: list[dict] = []
    monkeypatch.setattr(policies, "make_policy", lambda kind, **kwargs: built.append(kwargs) or SimpleNamespace(
        share_prefix=True, loaded=tiny, batch_size=spec.generate_rows))
    spec = PolicySpec(kind="local", model="elsewhere")
    monkeypatch.setattr(execution, "_POLICIES", {})
    store = execution.batch_prompt_store(spec)
    assert execution._rollout_policy(spec, None, settings, store)[0].policy.prompt_store is store
    assert built == [{"model": "elsewhere", "dtype": spec.dtype, "batch_size": spec.generate_rows,
                      "reuse_prompts": False}]


def test_a_batch_run_elsewhere_sends_its_prompt_counts_back_once(monkeypatch):
    """A Ray task returns its batch's prompt counts with its rows and leaves its process's counter as it found it, so
    the study's process counts them once, whether the task ran in a worker or in the study's own process."""
    from llm_marl_benchmarks.study import execution

    def played(batch, design, policy):
        execution.PROMPT_TOKENS.update(prompt=120, prefilled=45)
        return [{"key": batch}]

    monkeypatch.setattr(execution, "run_batch", played)
    monkeypatch.setattr(execution, "PROMPT_TOKENS", execution.Counter(prompt=7, prefilled=7))
    rows, counts = execution.run_batch_counted("b1", None, None)
    assert rows == [{"key": "b1"}] and counts == {"prompt": 120, "prefilled": 45}
    assert execution.PROMPT_TOKENS["prompt"] == 7 and execution.PROMPT_TOKENS["prefilled"] == 7


# ------------------------------------------------------------------------------------------------------ role budgets
def _save_coding_team_of_4(tmp_path) -> None:
    """The tiny Llama saved as ``tmp_path/tiny`` and a propose_verify coding team of 4 on it (random LoRA adapters,
    so the adapters change the replies) as ``tmp_path/team``, loadable as the study's trained team."""
    import json

    from llm_marl_baselines.policies.adapters import MANIFEST_NAME, TeamManifest
    from llm_marl_trainers.generation import LoraSettings, TeamModel

    loaded = _tiny_model()
    loaded.model.save_pretrained(tmp_path / "tiny")
    loaded.tokenizer.save_pretrained(tmp_path / "tiny")
    agents = ["coder_1", "coder_2", "tester", "verifier"]
    team = TeamModel(loaded, agents, lora=LoraSettings(r=4, alpha=8, init_lora_weights=False))
    team.save_adapters(tmp_path / "team" / "adapters")
    manifest = TeamManifest(base_model=str(tmp_path / "tiny"), env="coding_v0", num_agents=4,
                            roles={a: f"adapters/{a}" for a in agents}, env_kwargs={"scheme": "propose_verify"})
    (tmp_path / "team" / MANIFEST_NAME).write_text(json.dumps(manifest.to_dict()))


def test_role_budgets_stop_each_role_of_every_local_team_at_its_own_budget(tmp_path, monkeypatch):
    """``--role-budgets``: the trained team's call and the base model's (here the untrained team's) both get each
    role's budget from the env (a coding team of 4: coders 160, tester 128, verifier 48; the call caps them at its
    own, here 64), and their replies get no longer; without it, none. A scripted policy, which decodes nothing, is
    refused with the reason. The design records it only when on, so the config hash of every run from before it
    existed stays the same."""
    from llm_marl_baselines.policies import local
    from llm_marl_trainers.generation import TeamModel

    _save_coding_team_of_4(tmp_path)
    asked: list = []
    generate, records = TeamModel.generate, local.generate_records

    def team_spy(self, requests, settings, *args, **kwargs):
        asked.append(("team", settings.max_new_tokens, kwargs.get("role_max_new_tokens")))
        return generate(self, requests, settings, *args, **kwargs)

    def base_spy(loaded, requests, settings, *args, **kwargs):
        asked.append(("base", settings.max_new_tokens, kwargs.get("role_max_new_tokens")))
        return records(loaded, requests, settings, *args, **kwargs)

    monkeypatch.setattr(TeamModel, "generate", team_spy)
    monkeypatch.setattr(local, "generate_records", base_spy)
    spec = PolicySpec(kind="local", model=str(tmp_path / "tiny"), dtype="float32")
    tokens = {}
    for on in (False, True):
        study = design(envs=("coding",), team_sizes=(4,), conditions=("trained", "untrained"), cell_episodes={4: 1},
                       tasks=1, max_turns=1, max_new_tokens=64, role_budgets=on,
                       env_kwargs={"coding": {"executor": "local", "scheme": "propose_verify"}})
        assert ("role_budgets" in study.to_dict()) is on
        batches = make_batches(study.plan(), 8, {("coding", 4): str(tmp_path / "team")}, study)
        asked.clear()
        rows = [row for batch in batches for row in run_batch(batch, study, spec)]
        budgets = {"coder_1": 160, "coder_2": 160, "tester": 128, "verifier": 48} if on else None
        assert sorted(asked) == [("base", 64, budgets), ("team", 64, budgets)]
        tokens[on] = {row["condition"]: row["completion_tokens"] for row in rows}
    assert set(tokens[True]) == {"trained", "untrained"}
    assert all(tokens[True][condition] <= tokens[False][condition] for condition in tokens[True])
    with pytest.raises(ValueError, match="role_budgets: needs local weights"):
        run_batch(batches[0], study, PolicySpec(kind="scripted"))


# ------------------------------------------------------------------------------------------------ reply ends
def test_stop_at_reply_end_gives_every_local_policy_its_envs_reply_ends(tmp_path, monkeypatch):
    """By default, and with ``--stop-at-reply-end``, the trained team's call and the base model's (here one agent's)
    both get the env's reply ends (every code role's "the code block has closed"; none for the verifier); with
    ``--no-stop-at-reply-end``, none. Each row records which. A scripted policy, which decodes nothing, plays as it
    is by default and is refused with the reason when the stop is asked for. The design records the switch unless
    it is off, as every run from before the default did."""
    from llm_marl_baselines.policies import local
    from llm_marl_envs.envs.coding.prompts import CODE_BLOCK_CLOSED
    from llm_marl_trainers.generation import TeamModel

    _save_coding_team_of_4(tmp_path)
    asked: list = []
    generate, records = TeamModel.generate, local.generate_records

    def team_spy(self, requests, settings, *args, **kwargs):
        asked.append(("team", kwargs.get("role_reply_ends")))
        return generate(self, requests, settings, *args, **kwargs)

    def base_spy(*args, **kwargs):
        asked.append(("base", kwargs.get("reply_ends")))
        return records(*args, **kwargs)

    monkeypatch.setattr(TeamModel, "generate", team_spy)
    monkeypatch.setattr(local, "generate_records", base_spy)
    spec = PolicySpec(kind="local", model=str(tmp_path / "tiny"), dtype="float32")
    coders = {"coder_1": CODE_BLOCK_CLOSED, "coder_2": CODE_BLOCK_CLOSED, "tester": CODE_BLOCK_CLOSED}
    for switch in (False, None, True):
        study = design(envs=("coding",), team_sizes=(4,), conditions=("trained", "single"), cell_episodes={4: 1},
                       tasks=1, max_turns=1, max_new_tokens=16, stop_at_reply_end=switch,
                       env_kwargs={"coding": {"executor": "local", "scheme": "propose_verify"}})
        on = switch is not False
        assert ("stop_at_reply_end" in study.to_dict()) is on
        batches = make_batches(study.plan(), 8, {("coding", 4): str(tmp_path / "team")}, study)
        asked.clear()
        rows = [row for batch in batches for row in run_batch(batch, study, spec)]
        assert sorted(asked, key=lambda a: a[0]) == ([("base", {"solo": CODE_BLOCK_CLOSED}), ("team", coders)] if on
                                                     else [("base", None), ("team", None)])
        assert sorted((r["condition"], r["stop_at_reply_end"], r["role_budgets"]) for r in rows) == [
            ("single", on, False), ("trained", on, False)]
    scripted = design(envs=("coding",), team_sizes=(2,), conditions=("single",), cell_episodes={2: 1}, tasks=1,
                      max_turns=1, env_kwargs={"coding": {"executor": "local"}})
    (row,) = run_batch(make_batches(scripted.plan(), 8, {}, scripted)[0], scripted, PolicySpec(kind="scripted"))
    assert (row["stop_at_reply_end"], row["role_budgets"]) == (None, None)
    with pytest.raises(ValueError, match="stop_at_reply_end: needs local weights"):
        run_batch(batches[0], study, PolicySpec(kind="scripted"))
    with pytest.raises(TypeError, match="stop_at_reply_end: expected True, False or None"):
        design(stop_at_reply_end="yes")
