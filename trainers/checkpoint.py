"""Checkpoints: everything a run needs to continue exactly — adapters, optimizers, RNG states, step, config.

A checkpoint is the folder ``DIR/checkpoint-<step>``: ``adapters/<agent>/`` (peft format), ``optimizers.pt``,
``critic.pt`` (``baseline: critic``: the value head and its optimizer), ``rng.pt`` and ``state.json`` (step,
config), plus ``team.json`` when the run's env and base model are known, so a checkpoint is also a team directory
(``llm_marl_baselines.policies.adapters``; ``llm-marl demo --adapters``; the critic is not part of the team). It is
written into a temporary folder and renamed into place, so a run killed while saving leaves the previous checkpoints
intact; only the last ``keep`` are kept.

In a data-parallel run (:mod:`llm_marl_trainers.distributed`) every rank takes part in :func:`save` (its RNG states are
gathered; ``rng.pt`` holds rank 0's as in a one-process run plus ``ranks``, each rank's) and rank 0 alone writes; the
adapters and optimizers are the same on every rank. :func:`restore` gives each rank its own RNG states back, so the
run must be resumed with the number of processes it was saved with. Building the trainer to resume into is
:meth:`MAGRPOTrainer.resume <llm_marl_trainers.magrpo.MAGRPOTrainer.resume>`'s job (this module never imports the
trainer).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from llm_marl_trainers.config import TrainerConfig

if TYPE_CHECKING:
    from llm_marl_trainers.magrpo import MAGRPOTrainer

_NAME = re.compile(r"checkpoint-(\d+)$")


def write_config(directory: Path, config: TrainerConfig) -> None:
    """``DIR/config.json``: the run's config (what ``--resume`` reads back)."""
    _atomic_text(directory / "config.json", json.dumps(config.to_dict(), indent=2))


WARM_START_FILE = "warm_start.json"
"""A warm-started run's record of the team it began from (:func:`llm_marl_trainers.magrpo.warm_start_record`)."""


def write_warm_start(directory: Path, record: Mapping[str, Any]) -> None:
    """``DIR/warm_start.json``: the team a warm-started run began from, with its adapters' digest."""
    _atomic_text(directory / WARM_START_FILE, json.dumps(dict(record), indent=2))


def read_config(directory: str | Path) -> TrainerConfig:
    """The config a run directory was started with."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no config.json; is it a training run's output folder?")
    return TrainerConfig.from_mapping(json.loads(path.read_text(encoding="utf-8")))


def write_team_manifest(directory: str | Path, trainer: MAGRPOTrainer) -> Path | None:
    """``directory/team.json`` for the team whose adapters are in ``directory/adapters/<agent>/``; returns its path,
    or None when no manifest can be honest: the envs did not come from the registry (a custom ``env_factory``), the
    base model is unknown (a caller's team without ``base_model``) or the agents have different bases.

    The manifest (``llm_marl_baselines.policies.adapters``, format 1) names the env by its versioned module
    (``writing_v0``, from the registry through ``TEAM_ENVS``), the base model, ``env_kwargs``, the agents as roles and
    the sampling settings of training (temperature, top-p, ``max_completion_length`` new tokens, seed).
    """
    if not trainer.registry_env or trainer.base_model is None or trainer.team.heterogeneous:
        return None
    from llm_marl_baselines.policies.adapters import MANIFEST_NAME, TEAM_ENVS, TeamManifest
    from llm_marl_baselines.policies.base import GenerationSettings

    config = trainer.config
    module = {name: module for module, name in TEAM_ENVS.items()}[config.env]
    manifest = TeamManifest(
        base_model=trainer.base_model,
        env=module,
        num_agents=len(trainer.agents),
        roles={agent: f"adapters/{agent}" for agent in trainer.agents},
        generation=GenerationSettings(temperature=config.temperature, top_p=config.top_p,
                                      max_new_tokens=config.max_completion_length, seed=config.seed),
        env_kwargs=dict(config.env_kwargs),
    )
    path = Path(directory) / MANIFEST_NAME
    _atomic_text(path, json.dumps(manifest.to_dict(), indent=2) + "\n")
    return path


def checkpoints(directory: str | Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    found = [p for p in Path(directory).glob("checkpoint-*") if p.is_dir() and _NAME.search(p.name)]
    return sorted(found, key=lambda p: int(_NAME.search(p.name).group(1)))


def save(trainer: MAGRPOTrainer, directory: Path, keep: int) -> Path:
    """Write ``DIR/checkpoint-<step>`` atomically and keep the last ``keep`` checkpoints (every rank of a
    data-parallel run calls it; rank 0 writes)."""
    final = directory / f"checkpoint-{trainer.step:06d}"
    parallel = trainer.parallel
    rng_states = parallel.gather(_rng_state())
    if not parallel.is_main:
        parallel.barrier()  # returns once rank 0 has written the checkpoint
        return final
    try:
        _write(trainer, directory, final, rng_states)
        for old in checkpoints(directory)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        parallel.barrier()
    return final


def _write(trainer: MAGRPOTrainer, directory: Path, final: Path, rng_states: list[dict[str, Any]]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".checkpoint-", dir=directory))
    try:
        trainer.team.save_adapters(staging / "adapters")
        write_team_manifest(staging, trainer)
        torch.save({agent: opt.state_dict() for agent, opt in trainer.optimizers.items()}, staging / "optimizers.pt")
        if trainer.critic is not None:
            torch.save(trainer.critic.state_dict(), staging / "critic.pt")
        rng = dict(rng_states[0])
        if len(rng_states) > 1:
            rng["ranks"] = rng_states
        torch.save(rng, staging / "rng.pt")
        state = {"step": trainer.step, "bad_steps": trainer.bad_steps, "config": trainer.config.to_dict()}
        (staging / "state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _rng_state() -> dict[str, Any]:
    """This process's RNG states (CUDA's too when there is a GPU: sampling there draws from it)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


@dataclass
class SavedState:
    """What the last checkpoint of a run holds, read back (:func:`load_last`); :meth:`MAGRPOTrainer.resume
    <llm_marl_trainers.magrpo.MAGRPOTrainer.resume>` builds the trainer from it and :func:`restore` puts the rest in
    place."""

    path: Path
    config: TrainerConfig
    step: int
    bad_steps: int
    adapters: dict[str, Path]
    """Each agent's saved adapter folder."""
    rng: dict[str, Any]
    """The RNG states (``ranks``: one per process of a data-parallel run)."""

    @property
    def saved_ranks(self) -> int:
        """How many processes wrote the checkpoint."""
        return len(self.rng.get("ranks", [self.rng]))

    def check_world_size(self, world_size: int) -> None:
        """A ``ValueError`` unless the run resumes with the number of processes that saved it (each rank continues
        its own random stream)."""
        if self.saved_ranks != world_size:
            raise ValueError(f"{self.path} was saved by {self.saved_ranks} process(es) and this run has {world_size}: "
                             f"resume with the same number of processes (each continues its own random stream)")


def load_last(directory: str | Path, **overrides: Any) -> SavedState:
    """The last checkpoint of the run in ``directory`` (``overrides``: config fields that may change on resume, e.g.
    ``steps``); ``FileNotFoundError`` when there is none."""
    directory = Path(directory)
    found = checkpoints(directory)
    if not found:
        raise FileNotFoundError(f"{directory}: no checkpoint to resume from")
    last = found[-1]
    state = json.loads((last / "state.json").read_text(encoding="utf-8"))
    agents = sorted(p.name for p in (last / "adapters").iterdir() if p.is_dir())
    return SavedState(path=last, config=TrainerConfig.from_mapping(state["config"]).replace(**overrides),
                      step=int(state["step"]), bad_steps=int(state["bad_steps"]),
                      adapters={agent: last / "adapters" / agent for agent in agents},
                      rng=torch.load(last / "rng.pt", weights_only=False))


def restore(trainer: MAGRPOTrainer, saved: SavedState) -> None:
    """Put a checkpoint's optimizer, critic, RNG and step state into ``trainer`` (built on its adapters), and forget
    the run's metric rows of steps after it (they will be run again). Every rank of a data-parallel run calls it."""
    parallel = trainer.parallel
    saved.check_world_size(parallel.world_size)
    optimizers = torch.load(saved.path / "optimizers.pt", weights_only=False)
    for agent, optimizer in trainer.optimizers.items():
        optimizer.load_state_dict(optimizers[agent])
    if trainer.critic is not None:
        trainer.critic.load_state_dict(torch.load(saved.path / "critic.pt", weights_only=False))
    _set_rng_state(saved.rng["ranks"][parallel.rank] if "ranks" in saved.rng else saved.rng)
    trainer.step, trainer.bad_steps = saved.step, saved.bad_steps
    if parallel.is_main:
        _drop_rows_after(saved.path.parent / "metrics.jsonl", trainer.step)  # the run folder holds its checkpoints
    parallel.barrier()


def _drop_rows_after(path: Path, step: int) -> None:
    """Forget metric rows of steps the checkpoint does not include (they will be run again)."""
    if not path.is_file():
        return
    rows = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = [line for line in rows if json.loads(line)["step"] <= step]
    _atomic_text(path, "".join(f"{line}\n" for line in kept))


def _atomic_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)
