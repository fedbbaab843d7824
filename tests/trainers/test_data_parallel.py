"""Data-parallel training (``llm_marl_trainers.distributed``) with two real ``torchrun`` CPU processes over gloo: the
ranks' step is the step one process computes over the union of their trees (advantages with the whole step's std,
gradients, loss, reward metrics), the ranks stay identical, rank 0 alone writes, a resumed run repeats the
uninterrupted one, the ranks train one critic, and a mismatched resume or a step that does not split is refused;
the documented ``torchrun ... llm-marl train`` command trains and resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_parallel_worker import config as worker_config
from letter_env import LetterEnv

from llm_marl_trainers.advantages import batch_samples, reward_metrics
from llm_marl_trainers.distributed import DataParallel
from llm_marl_trainers.magrpo import MAGRPOTrainer

WORKER = Path(__file__).resolve().parent / "data_parallel_worker.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def two_ranks(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the two ranks of ``data_parallel_worker.py`` wrote (one ``torchrun`` launch for the module)."""
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(WORKER),
         str(model_dir), str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return out


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def test_two_ranks_take_the_step_one_process_takes_over_their_trees(two_ranks: Path, model_dir: Path,
                                                                    tmp_path: Path) -> None:
    config = worker_config(str(model_dir), tmp_path / "reference", steps=1)
    roots = [torch.load(two_ranks / f"roots-rank{r}.pt", weights_only=False) for r in (0, 1)]
    samples = [torch.load(two_ranks / f"samples-rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert len(roots[0]) == len(roots[1]) == 2  # envs_per_step 4 over 2 ranks
    # The ranks sample from their own streams (LetterEnv's prompt is the same for every seed).
    completions = [[tuple(s.generation.completion_ids) for s in part] for part in samples]
    assert completions[0] != completions[1]

    # Advantages: scale_rewards="batch" divides by the std over both ranks' returns, as one process over all trees.
    expected, groups = batch_samples(roots[0] + roots[1], ("writer_0", "writer_1"), config)
    got = samples[0] + samples[1]
    assert [s.agent for s in got] == [s.agent for s in expected]
    assert [s.advantage for s in got] == pytest.approx([s.advantage for s in expected], rel=1e-12, abs=1e-12)
    alone, _ = batch_samples(roots[0], ("writer_0", "writer_1"), config)  # one rank's own std would differ
    assert [s.advantage for s in alone] != pytest.approx([s.advantage for s in samples[0]], rel=1e-6)

    # The row of step 1 is the whole step's.
    row = _rows(two_ranks / "straight")[0]
    assert row["completions"] == len(expected) == 4 * 2 * 4  # 4 envs × 2 agents × G = 4
    assert row["reward"] == pytest.approx(reward_metrics(groups)["reward"], rel=1e-12)
    assert row["reward_std"] == pytest.approx(reward_metrics(groups)["reward_std"], rel=1e-12)

    # Gradients: the ranks stepped with the same summed gradients, those of one process's update over all samples.
    grads = [torch.load(two_ranks / f"grads-rank{r}.pt") for r in (0, 1)]
    reference = MAGRPOTrainer(config, env_factory=LetterEnv, parallel=DataParallel())
    recorded: dict[str, list[torch.Tensor | None]] = {}
    check = reference._gradients_finite

    def record() -> bool:
        for agent in reference.agents:
            recorded[agent] = [None if p.grad is None else p.grad.clone()
                               for p in reference.team.adapter_parameters(agent)]
        return check()

    reference._gradients_finite = record
    loss, _, tokens, applied = reference._update(expected)
    assert applied
    assert row["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-7)
    assert row["completion_tokens"] == tokens
    moved = 0
    for agent in reference.agents:
        for mine, theirs, one in zip(grads[0][agent], grads[1][agent], recorded[agent], strict=True):
            assert (mine is None) == (theirs is None) == (one is None)
            if one is None:
                continue
            assert torch.equal(mine, theirs)
            torch.testing.assert_close(mine, one, rtol=1e-4, atol=1e-7)
            moved += int(one.abs().sum() > 0)
    assert moved > 0  # not a vacuous comparison of zeros

    # After the step the ranks hold the same adapters, the ones one process gets from the same update. (Compared
    # where the gradient is not next to zero: there AdamW's first step, lr·g/(|g|+ε), turns rounding into ±lr.)
    adapters = [torch.load(two_ranks / f"adapters-rank{r}.pt") for r in (0, 1)]
    for agent in reference.agents:
        for mine, theirs, one, grad in zip(adapters[0][agent], adapters[1][agent],
                                           reference.team.adapter_parameters(agent), recorded[agent], strict=True):
            assert torch.equal(mine, theirs)
            clear = grad.abs() > 1e-3 * grad.abs().max() if grad is not None else torch.ones_like(mine, dtype=bool)
            torch.testing.assert_close(mine[clear], one.detach()[clear], rtol=1e-5, atol=1e-6)


def test_rank_zero_writes_one_record_and_a_resumed_run_repeats_the_uninterrupted_one(two_ranks: Path) -> None:
    straight, interrupted = _rows(two_ranks / "straight"), _rows(two_ranks / "interrupted")
    assert [r["step"] for r in straight] == [1, 2, 3]  # one row per step: only rank 0 wrote
    assert [(r["step"], r["loss"], r["reward"]) for r in interrupted] == [
        (r["step"], r["loss"], r["reward"]) for r in straight]
    assert any(r["loss"] != 0 for r in straight)
    rng = torch.load(two_ranks / "straight" / "checkpoint-000003" / "rng.pt", weights_only=False)
    assert len(rng["ranks"]) == 2 and not torch.equal(rng["ranks"][0]["torch"], rng["ranks"][1]["torch"])
    assert sorted(p.name for p in (two_ranks / "straight" / "adapters").iterdir()) == ["writer_0", "writer_1"]


def test_the_ranks_train_one_critic(two_ranks: Path) -> None:
    heads = [torch.load(two_ranks / f"critic-rank{r}.pt") for r in (0, 1)]
    assert all(torch.equal(a, b) for a, b in zip(*heads, strict=True))
    rows = _rows(two_ranks / "critic")
    assert [r["step"] for r in rows] == [1, 2] and all(r["critic/loss"] > 0 for r in rows)


def test_a_run_resumes_only_with_the_processes_it_was_saved_with(two_ranks: Path) -> None:
    with pytest.raises(ValueError, match="saved by 2 process"):
        MAGRPOTrainer.resume(two_ranks / "interrupted", env_factory=LetterEnv)


def test_a_step_that_does_not_split_over_the_ranks_is_refused_before_loading(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-model"  # never loaded: the error comes first
    empty.mkdir()
    config = worker_config(str(empty), tmp_path / "run", steps=1).replace(envs_per_step=3)
    with pytest.raises(ValueError, match="envs_per_step=3 does not split over 2 processes"):
        MAGRPOTrainer(config, env_factory=LetterEnv, parallel=DataParallel(rank=1, world_size=2))


def test_one_process_is_the_identity() -> None:
    one = DataParallel()
    assert not one.enabled and one.is_main and one.device == "auto"
    assert one.shard([1, 2, 3]) == [1, 2, 3] and one.gather("x") == ["x"] and one.sum(2.5) == 2.5
    assert DataParallel(rank=1, world_size=2).shard([0, 1, 2, 3]) == [2, 3]
    with pytest.raises(ValueError, match="do not split"):
        DataParallel(rank=0, world_size=2).shard([0, 1, 2])
    with pytest.raises(ValueError, match="rank 2"):
        DataParallel(rank=2, world_size=2)


def test_the_documented_torchrun_command_trains_and_resumes(model_dir: Path, tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2 --no-python llm-marl train`` on the writing env: one rank speaks, the run is a
    team directory, it resumes under torchrun, and a one-process resume of it is one clear error."""
    script = Path(sys.executable).parent / "llm-marl"
    (tmp_path / "cfg.yaml").write_text("env_kwargs: {similarity: tfidf, max_turns: 1}\nreport_to: none\n",
                                       encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    run = tmp_path / "run"

    def torchrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               "--no-python", str(script), "train", *args], capture_output=True, text=True,
                              timeout=600, env=env, cwd=tmp_path)

    started = torchrun("--config", str(tmp_path / "cfg.yaml"), "--env", "writing", "--num-agents", "2", "--model",
                       str(model_dir), "--steps", "1", "--seed", "0", "--num-generations", "2",
                       "--max-completion-length", "6", "--envs-per-step", "2", "--output", str(run))
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-4000:]
    lines = started.stdout.splitlines()
    assert sum("in 2 processes" in line for line in lines) == 1
    assert sum(line.startswith("[train] step 1: reward") for line in lines) == 1
    assert (run / "team.json").is_file() and [r["step"] for r in _rows(run)] == [1]
    assert _rows(run)[0]["completions"] == 2 * 2 * 2  # 2 envs (one per rank) × 2 agents × G = 2

    resumed = torchrun("--resume", str(run), "--steps", "2")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-4000:]
    assert [r["step"] for r in _rows(run)] == [1, 2]

    alone = subprocess.run([str(script), "train", "--resume", str(run), "--steps", "3"], capture_output=True,
                           text=True, timeout=600, env=env, cwd=tmp_path)
    assert alone.returncode == 1 and "saved by 2 process(es) and this run has 1" in alone.stderr
    assert "Traceback" not in alone.stderr and [r["step"] for r in _rows(run)] == [1, 2]
