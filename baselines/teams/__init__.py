"""The teams that ship with the package: MAGRPO-trained LoRA adapters on the default model, one per env × team size.

Each lives in a subfolder named ``<env>-<size>`` (``writing-2``, ``coding-2``): a team directory
(:mod:`llm_marl_baselines.policies.adapters`: ``team.json`` + ``adapters/<role>/``, float16 weights), plus the run's
``metrics.jsonl``, ``untrained.jsonl`` (the untrained team on the same training tasks), ``curve.png`` and
``recipe.yaml`` (the committed recipe it was trained with, ``recipes/<env>-<size>.yaml`` in the repository).

    from llm_marl_baselines.teams import builtin_teams, load_team
    builtin_teams()                       # {(env, team size): team directory} of every shipped team
    policy = load_team("coding_v0", 2)    # the shipped 2-agent coding team as an AdapterTeamPolicy

``llm-marl bench study --adapters builtin`` and ``llm-marl demo --adapters builtin`` pick the same teams;
``llm-marl teams ship RUN_DIR`` puts a trained run here.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from llm_marl_baselines.policies.adapters import MANIFEST_NAME, load_team_manifest
from llm_marl_envs.registry import ENV_NAMES, canonical_name

BUILTIN = "builtin"
"""The name ``--adapters`` takes for the shipped teams."""

RUN_FILES: tuple[str, ...] = ("metrics.jsonl", "untrained.jsonl", "curve.png", "warm_start.json")
"""What a shipped team carries of its training run besides the team itself (``warm_start.json``: the team a
warm-started run began from, with its adapters' digest)."""

_DROPPED_ENV_KWARGS: tuple[str, ...] = ("split", "max_turns")
"""Env arguments of training that say nothing about how the team plays: it trained on the train split, and a turn-1
recipe (``max_turns: 1``, e.g. ``recipes/coding-2.yaml``) trains only the first reply of a team that plays the env's
turns; where and how many turns it plays is the caller's choice (the env's default: 4)."""


def teams_root() -> Path:
    """The folder holding the shipped teams (inside the installed package)."""
    return Path(str(importlib.resources.files("llm_marl_baselines.teams")))


def team_name(env: str, num_agents: int) -> str:
    """``<env>-<size>``, the subfolder of a shipped team (``writing_v0`` is ``writing``)."""
    return f"{canonical_name(env)}-{num_agents}"


def builtin_team_named(name: str) -> Path:
    """The team directory of the shipped team called ``name``, as :func:`team_name` writes it (``coding-2``)."""
    env, _, size = name.rpartition("-")
    if not env or not size.isdigit():
        raise ValueError(f"expected a shipped team's name, '<env>-<size>' (e.g. 'coding-2'), got {name!r}")
    return builtin_team_dir(env, int(size))


def builtin_teams() -> dict[tuple[str, int], Path]:
    """Every shipped team: ``{(env, team size): team directory}``."""
    found = {}
    for folder in sorted(teams_root().iterdir()):
        if (folder / MANIFEST_NAME).is_file():
            manifest = load_team_manifest(folder)
            found[(manifest.env_name, manifest.num_agents)] = folder
    return found


def builtin_team_dir(env: str, num_agents: int) -> Path:
    """The team directory of the shipped team for ``env`` (``"coding"`` or ``"coding_v0"``) and ``num_agents``; a
    ``ValueError`` lists the shipped ones when there is none."""
    name = canonical_name(env)
    if name not in ENV_NAMES:
        raise ValueError(f"env: expected one of {ENV_NAMES}, got {env!r}")
    teams = builtin_teams()
    if (name, num_agents) not in teams:
        shipped = ", ".join(f"{e} with {n} agents" for e, n in sorted(teams)) or "none"
        raise ValueError(f"no shipped team for {name} with {num_agents} agents; shipped: {shipped} (train one: "
                         f"llm-marl train --config recipes/{team_name(name, num_agents)}.yaml)")
    return teams[(name, num_agents)]


def load_team(env: str, num_agents: int, **policy_kwargs: Any) -> Any:
    """The shipped team for ``env`` and ``num_agents`` as a ready policy
    (:class:`~llm_marl_baselines.policies.adapters.AdapterTeamPolicy`; ``policy_kwargs``: ``dtype``, ``device``,
    ``reply_ends``, ``role_max_new_tokens``...). Its ``team_dir`` is :func:`builtin_team_dir`'s."""
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy

    return AdapterTeamPolicy(builtin_team_dir(env, num_agents), **policy_kwargs)


def ship_team(run_dir: str | Path, destination: str | Path | None = None, recipe: str | Path | None = None) -> Path:
    """Copy the team of a finished training run (a team directory written by ``llm-marl train``) into
    ``destination`` (default: this package, as ``<env>-<size>``): the manifest without training-only env arguments,
    each adapter with float16 weights (half the size; peft casts them back to float32 on load), the run's
    :data:`RUN_FILES` that exist and the ``recipe`` YAML. Written to a temporary sibling and renamed into place."""
    from safetensors.numpy import load_file, save_file

    run_dir = Path(run_dir)
    manifest = load_team_manifest(run_dir)  # a clear error when run_dir is not a team directory
    target = Path(destination) if destination is not None else teams_root() / team_name(manifest.env_name,
                                                                                     manifest.num_agents)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the team is package data that every user reads
    try:
        data = manifest.to_dict()
        data["env_kwargs"] = {k: v for k, v in data["env_kwargs"].items() if k not in _DROPPED_ENV_KWARGS}
        (staging / MANIFEST_NAME).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        for role, folder in manifest.roles.items():
            source, copy = run_dir / folder, staging / folder
            copy.mkdir(parents=True)
            shutil.copy2(source / "adapter_config.json", copy / "adapter_config.json")
            tensors = load_file(str(source / "adapter_model.safetensors"))
            save_file({k: v.astype("float16") for k, v in tensors.items()}, str(copy / "adapter_model.safetensors"),
                      metadata={"format": "pt", "shipped_from": f"{run_dir.name}/{folder}", "role": role})
        for name in RUN_FILES:
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, staging / name)
        if recipe is not None:
            shutil.copy2(recipe, staging / "recipe.yaml")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    load_team_manifest(target)
    return target
