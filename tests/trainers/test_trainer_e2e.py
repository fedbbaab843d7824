"""Two MAGRPO steps on each env of the suite with the default model (SmolLM2-135M-Instruct), at settings cheap enough
for CI: one turn, G = 2, one episode per step, 24 new tokens. Each run must leave metric rows, checkpoints and a team
directory, and its adapters must have been trained: the policy-gradient part of the update (LoRA's B, zero at the
start) moves exactly when some group's rewards differ, as they do on the writing env's continuous rewards (at these
settings the default model's 24-token programs rarely parse, so coding's rewards usually tie and B stays 0)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))

from sandbox_fixtures import need_docker

from llm_marl_baselines.models import DEFAULT_MODEL
from llm_marl_baselines.policies.adapters import load_team_manifest
from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.magrpo import MAGRPOTrainer


def _lora(trainer: MAGRPOTrainer, kind: str) -> dict[str, torch.Tensor]:
    """Every ``lora_A`` or ``lora_B`` matrix of the team, by parameter name (copies)."""
    found = {}
    for agent in trainer.agents:
        for name, parameter in trainer.team.model_of(agent).named_parameters():
            if f"lora_{kind}.{agent}." in name:
                found[name] = parameter.detach().clone()
    return found


def _two_steps(tmp_path: Path, env: str, **env_kwargs: object) -> tuple[MAGRPOTrainer, list[dict], dict, dict]:
    config = TrainerConfig(env=env, num_agents=2, env_kwargs={"similarity": "tfidf", "max_turns": 1, **env_kwargs},
                           num_generations=2, envs_per_step=1, max_completion_length=24, steps=2, save_steps=1,
                           save_total_limit=2, learning_rate=1e-3, seed=0, output_dir=str(tmp_path / "run"))
    trainer = MAGRPOTrainer(config)
    start_a, start_b = _lora(trainer, "A"), _lora(trainer, "B")
    assert start_b and all(not b.any() for b in start_b.values())  # peft's init: B = 0, every agent is the base
    rows = trainer.train()
    return trainer, rows, start_a, start_b


def _check_run(trainer: MAGRPOTrainer, rows: list[dict], start_a: dict, start_b: dict, module: str) -> None:
    run = trainer.output
    assert [r["step"] for r in rows] == [1, 2] and not any(r["skipped"] for r in rows)
    assert all(math.isfinite(r["loss"]) and r["completions"] == 4 and r["completion_tokens"] > 0 for r in rows)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [1, 2]
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-000001", "checkpoint-000002"]
    assert any((run / "tensorboard").glob("events.out.tfevents.*"))
    manifest = load_team_manifest(run)
    assert (manifest.env, manifest.base_model, manifest.num_agents) == (module, DEFAULT_MODEL, 2)
    assert sorted(manifest.roles) == sorted(trainer.agents)
    # Trained: A always moves (AdamW steps it), B moves exactly when some group had a reward spread (non-zero
    # advantages); with every advantage 0 the gradient of B is exactly 0 and so is its update.
    end_a, end_b = _lora(trainer, "A"), _lora(trainer, "B")
    assert any(not torch.equal(start_a[name], end_a[name]) for name in start_a)
    spread = any(r["frac_reward_zero_std"] < 1 for r in rows)
    assert any(b.any() for b in end_b.values()) == spread


@pytest.mark.model
@pytest.mark.slow
def test_two_steps_on_writing(tmp_path: Path) -> None:
    trainer, rows, start_a, start_b = _two_steps(tmp_path, "writing")
    _check_run(trainer, rows, start_a, start_b, "writing_v0")
    assert rows[0]["frac_reward_zero_std"] < 1  # continuous rewards: two samples practically never tie
    assert all(0 <= r["episode/quality"] <= 1 and r["episode/turns"] == 1 for r in rows)
    # What w_r and w_d price is reported even where they are 0; a writing reply is its draft, so nothing is discarded.
    assert all(r["episode/longest_reply_tokens"] > 0 and r["episode/discarded_tokens"] == 0 for r in rows)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.docker
def test_two_steps_on_coding_in_the_docker_sandbox(tmp_path: Path) -> None:
    need_docker()
    trainer, rows, start_a, start_b = _two_steps(tmp_path, "coding", executor="docker")
    _check_run(trainer, rows, start_a, start_b, "coding_v0")
    # The held-out tests ran in the sandbox for every leaf: the pass rate is an episode metric.
    assert all(0 <= r["episode/pass_rate"] <= 1 for r in rows)
    assert load_team_manifest(trainer.output).env_kwargs["executor"] == "docker"
