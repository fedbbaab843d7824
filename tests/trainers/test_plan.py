"""What ``llm-marl train`` says a step will do before it runs: the tree arithmetic by hand, and an estimate that is
measured on the team without changing anything of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.plan import estimate_step, generation_estimate, step_plan

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_step_plan_counts_nodes_completions_and_tokens_by_hand() -> None:
    # Writing recipe: 2 agents, G = 4 aligned, 2 turns, 1 tree: 1 root + 4 children expanded, 4 + 16 leaves.
    config = TrainerConfig(env="writing", num_agents=2, num_generations=4, max_completion_length=128)
    plan = step_plan(config, max_turns=2)
    assert plan.expanded_per_depth == (1, 4) and plan.rows_per_depth == (8, 32)
    assert (plan.nodes, plan.completions, plan.tokens) == (1 + 4 + 16, 40, 40 * 128)
    assert plan.trained == plan.completions
    # Cross joint actions: G^N = 9 children per node; 2 trees of 2 turns with 2 agents and G = 3.
    cross = TrainerConfig(env="coding", num_agents=2, num_generations=3, joint_mode="cross", envs_per_step=2,
                          max_completion_length=10)
    plan = step_plan(cross, max_turns=2)
    assert plan.branching == 9 and plan.expanded_per_depth == (2, 18) and plan.rows_per_depth == (12, 108)
    assert (plan.nodes, plan.completions, plan.tokens) == (2 * (1 + 9 + 81), 120, 1200)
    # One agent (GRPO), one turn: G completions.
    solo = step_plan(TrainerConfig(env="writing", num_agents=1, num_generations=8), max_turns=1)
    assert (solo.nodes, solo.completions, solo.rows_per_depth) == (9, 8, (8,))
    assert "40 completions (generate calls of 8/32 rows)" in step_plan(config, 2).describe()
    with pytest.raises(ValueError, match="max_turns: expected an int >= 1, got 0"):
        step_plan(config, max_turns=0)


def test_one_turn_branching_plans_one_rollout_to_the_branch_and_one_per_branch_after() -> None:
    # 4 trees of 4 turns, 2 agents, G = 4; tree i branches at turn 1 + i: rows per turn by hand (agents x samples).
    config = TrainerConfig(env="writing", num_agents=2, num_generations=4, envs_per_step=4, branching="one_turn",
                           max_completion_length=100)
    plan = step_plan(config, max_turns=4)
    # turn 1: tree 0 branches (8 rows), trees 1-3 one joint action each (2 rows each)
    # turn 2: tree 0's 4 branches (8), tree 1 branches (8), trees 2-3 (2 each) ... and so on
    assert plan.rows_per_depth == (8 + 3 * 2, 8 + 8 + 2 * 2, 8 + 8 + 8 + 2, 8 + 8 + 8 + 8)
    assert plan.expanded_per_depth == (4, 4 + 3, 4 + 4 + 2, 4 + 4 + 4 + 1)
    assert plan.completions == 92 and plan.tokens == 134 * 100  # the most, re-branches included
    assert plan.trained == 4 * 2 * 4 and "re-branch), 32 trained on" in plan.describe()
    assert plan.nodes == sum(k + 4 * (4 - k + 1) for k in (1, 2, 3, 4))
    # Worst case: trees 1-3 end at turn 1 and re-branch there: 1 set-aside joint action, G samples, 4 x 3 singles.
    assert plan.most_completions == 2 * (4 + 4 * 3) + 3 * 2 * (1 + 4 + 4 * 3)
    assert "92 completions (up to 134 when trees end before they branch and re-branch)" in plan.describe()
    full = step_plan(config.replace(branching="full"), max_turns=4)
    assert full.completions == full.most_completions == 4 * 2 * 4 * (1 + 4 + 16 + 64)
    assert "up to" not in full.describe()


def test_the_estimate_line_adds_the_time_at_the_most_completions_where_trees_re_branch() -> None:
    from llm_marl_benchmarks.progress import duration
    from llm_marl_benchmarks.train import estimate_line
    from llm_marl_trainers.plan import StepEstimate

    config = TrainerConfig(env="writing", num_agents=2, num_generations=4, envs_per_step=4, branching="one_turn")
    guess = StepEstimate(generation_s=60.0, update_s=20.0, calibration_s=5.0)
    line = estimate_line(guess, step_plan(config, max_turns=4), left=10)  # 92 completions, up to 134
    most = 80.0 + 60.0 * (134 / 92 - 1)  # generation scales with the completions; the update trains on the same
    assert line.startswith(f"[train] estimated {duration(80.0)} a step, up to {duration(most)} with re-branches")
    assert line.endswith(f"10 step(s) take about {duration(800.0)}")
    full = estimate_line(guess, step_plan(config.replace(branching="full"), max_turns=2), left=1)
    assert "re-branch" not in full and full.startswith(f"[train] estimated {duration(80.0)} a step (generation")


def test_generation_time_is_prefill_plus_tokens_times_the_per_token_cost_between_measured_row_counts() -> None:
    measured = {8: (1.0, 0.1), 32: (3.0, 0.4)}  # (prefill s, s per token) at 8 and 32 rows
    assert generation_estimate((8, 32), measured, tokens=10) == pytest.approx((1.0 + 1.0) + (3.0 + 4.0))
    assert generation_estimate((20,), measured, tokens=10) == pytest.approx(2.0 + 2.5)  # halfway in rows
    assert generation_estimate((16,), {8: (1.0, 0.1)}, tokens=10) == pytest.approx(2 * (1.0 + 1.0))  # scaled
    with pytest.raises(ValueError, match="measured: expected timings"):
        generation_estimate((8,), {}, tokens=1)


def test_the_estimate_is_measured_and_leaves_the_run_untouched(tmp_path: Path, model_dir: Path) -> None:
    from llm_marl_trainers.magrpo import MAGRPOTrainer

    config = TrainerConfig(env="writing", num_agents=2, env_kwargs={"similarity": "tfidf", "max_turns": 2},
                           model=str(model_dir), num_generations=2, max_completion_length=6, steps=1,
                           output_dir=str(tmp_path / "run"), report_to="none", lora_dropout=0.1)
    trainer = MAGRPOTrainer(config)
    before = {a: [p.detach().clone() for p in trainer.team.adapter_parameters(a)] for a in trainer.agents}
    rng = torch.get_rng_state()
    guess = estimate_step(trainer, step_plan(config, trainer.envs[0].max_turns))
    assert guess.generation_s > 0 and guess.update_s > 0 and guess.calibration_s > 0
    assert torch.equal(torch.get_rng_state(), rng)  # the run's sampling stream is where it was
    for agent in trainer.agents:
        after = trainer.team.adapter_parameters(agent)
        assert all(p.grad is None for p in after)
        assert all(torch.equal(a, b) for a, b in zip(after, before[agent], strict=True))


@pytest.mark.parametrize(("dtype", "expected"), [("auto", None), ("bfloat16", "bfloat16")])
def test_the_printed_plan_names_the_dtype_and_device_that_run(dtype: str, expected: str | None) -> None:
    """``dtype: auto`` is resolved before it is printed (the GPU check's log read "auto base"): bfloat16 on a GPU,
    float32 on a CPU; a named dtype is printed as named."""
    import io
    from types import SimpleNamespace

    from llm_marl_benchmarks.train import print_plan

    config = TrainerConfig(env="writing", num_agents=2, num_generations=4, dtype=dtype)
    trainer = SimpleNamespace(config=config, agents=["concise", "detailed"], step=0, output=Path("run"),
                              envs=[SimpleNamespace(max_turns=2)], warm_started={}, warm_start_record=None,
                              parallel=SimpleNamespace(enabled=False, world_size=1, device="auto"))
    stream = io.StringIO()
    print_plan(trainer, estimate=False, stream=stream)
    gpu = torch.cuda.is_available()
    if expected is None:
        expected = "bfloat16" if gpu and torch.cuda.is_bf16_supported() else "float32"
    assert f"new tokens at most, {expected} base on {'cuda' if gpu else 'cpu'}\n" in stream.getvalue()
    assert "warm start" not in stream.getvalue()
    # A warm-started run says which agents start from the team and which fresh.
    trainer.config = config.replace(init_team="builtin:writing-2")
    trainer.warm_started = {"concise": Path("team/adapters/concise")}
    trainer.warm_start_record = {"adapters_sha256": "0f1e2d3c4b5a6978"}
    stream = io.StringIO()
    print_plan(trainer, estimate=False, stream=stream)
    assert ("[train] warm start from builtin:writing-2 (adapters 0f1e2d3c4b5a6978): concise; fresh: detailed\n"
            in stream.getvalue())
