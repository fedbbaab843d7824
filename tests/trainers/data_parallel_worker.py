"""One rank of the data-parallel test (``test_data_parallel.py``), started by ``torchrun``; not collected by pytest.

    python -m torch.distributed.run --standalone --nproc-per-node 2 data_parallel_worker.py MODEL_DIR OUT

On the tiny model and :class:`LetterEnv`, every rank:

1. trains run ``OUT/straight`` for 3 steps, recording for step 1 its trees (``roots-rank<r>.pt``), its samples with
   their advantages (``samples-rank<r>.pt``), the summed gradients the optimizers stepped with
   (``grads-rank<r>.pt``) and, after the step, its adapters (``adapters-rank<r>.pt``);
2. trains run ``OUT/interrupted`` for 2 steps, then resumes it from its checkpoint to 3 steps;
3. trains run ``OUT/critic`` (``baseline: critic``) for 2 steps and records its value head (``critic-rank<r>.pt``).

The test compares these with one process doing the same step over the union of the ranks' trees.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from letter_env import LetterEnv

from llm_marl_trainers import magrpo
from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.magrpo import MAGRPOTrainer


def config(model_dir: str, output: Path, steps: int) -> TrainerConfig:
    """The run both the ranks and the test's one-process reference use (the test imports it)."""
    return TrainerConfig(env="writing", num_agents=2, model=model_dir, num_generations=4, max_completion_length=10,
                         steps=steps, seed=0, output_dir=str(output), save_steps=1, learning_rate=2e-2, envs_per_step=4,
                         micro_batch_size=3, scale_rewards="batch", report_to=("none",))


def main(model_dir: str, out: Path) -> None:
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    straight = MAGRPOTrainer(config(model_dir, out / "straight", steps=3),
                             env_factory=LetterEnv)
    rank = straight.parallel.rank
    assert straight.parallel.world_size == 2, straight.parallel

    original_rollout = magrpo.rollout_tree

    def recorded_rollout(*args, **kwargs):
        roots = original_rollout(*args, **kwargs)
        if straight.step == 0:
            torch.save(roots, out / f"roots-rank{rank}.pt")
        return roots

    original_update = straight._update

    def recorded_update(samples, step_samples=None):
        if straight.step == 0:
            torch.save(samples, out / f"samples-rank{rank}.pt")
        return original_update(samples, step_samples)

    original_check = straight._gradients_finite

    def recorded_check() -> bool:
        if straight.step == 0:
            grads = {agent: [None if p.grad is None else p.grad.clone()
                             for p in straight.team.adapter_parameters(agent)] for agent in straight.agents}
            torch.save(grads, out / f"grads-rank{rank}.pt")
        return original_check()

    magrpo.rollout_tree = recorded_rollout
    straight._update = recorded_update
    straight._gradients_finite = recorded_check
    straight.train(steps=1)
    magrpo.rollout_tree = original_rollout
    torch.save({agent: [p.detach().clone() for p in straight.team.adapter_parameters(agent)]
                for agent in straight.agents}, out / f"adapters-rank{rank}.pt")
    straight.train()

    interrupted = MAGRPOTrainer(config(model_dir, out / "interrupted", steps=2),
                                env_factory=LetterEnv)
    interrupted.train()
    resumed = MAGRPOTrainer.resume(out / "interrupted", env_factory=LetterEnv, steps=3)
    assert resumed.step == 2, resumed.step
    resumed.train()

    critic = MAGRPOTrainer(config(model_dir, out / "critic", steps=2).replace(baseline="critic", scale_rewards="none"),
                           env_factory=LetterEnv)
    critic.train()
    torch.save([p.detach().clone() for p in critic.critic.head.parameters()], out / f"critic-rank{rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
