"""Trained per-agent LoRA adapters over one shared base model, loaded from a *team directory*.

Team directory format (version 1), written by :func:`save_team` (the MAGRPO trainer's output) and read by
:func:`load_team_manifest` / :class:`AdapterTeamPolicy`::

    team_dir/
      team.json                 # the manifest, below
      adapters/<role>/          # one peft adapter folder per role: adapter_config.json + adapter_model.safetensors

``team.json``::

    {
      "format_version": 1,
      "base_model": "SmolLM2-135M-Instruct",   # DEFAULT_MODEL (offline default), a local folder or a hub id
      "env": "writing_v0",                      # an env's versioned module (TEAM_ENVS, from the env registry)
      "env_kwargs": {"style": "tldr"},          # optional: extra env arguments the team was trained with
      "num_agents": 2,
      "roles": {"concise": "adapters/concise", "detailed": "adapters/detailed"},   # role -> folder, relative
      "generation": {"temperature": 0.7, "top_p": 0.95, "max_new_tokens": 128, "seed": 0}
    }

Loading reads the base model once and attaches every role's adapter to that one copy (peft's
``PeftModel.from_pretrained`` for the first role, ``load_adapter(path, adapter_name=role)`` for the others); a batch
is split by agent and each sub-batch runs with ``set_adapter(role)``. Several adapters therefore never mean several
copies of the base weights.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_marl_baselines.models import DEFAULT_MODEL, LoadedModel, load_model
from llm_marl_baselines.policies.base import ActionRequest, Generation, GenerationSettings, Policy
from llm_marl_baselines.policies.local import (
    DEFAULT_BATCH_SIZE,
    check_reply_ends,
    check_role_budgets,
    generate_records,
)
from llm_marl_envs.registry import ENVS

FORMAT_VERSION = 1
MANIFEST_NAME = "team.json"
TEAM_ENVS: dict[str, str] = {spec.module.rpartition(".")[2]: name for name, spec in ENVS.items()}
"""``team.json``'s ``env`` (the env's versioned module, ``"writing_v0"``) → its registry name (``"writing"``);
derived from :data:`llm_marl_envs.registry.ENVS`, the one list of envs."""


@dataclass(frozen=True)
class TeamManifest:
    """The parsed ``team.json`` of a team directory (see module docstring)."""

    base_model: str
    env: str
    num_agents: int
    roles: Mapping[str, str]
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    @property
    def env_name(self) -> str:
        """The registry name of the team's env (``"writing"`` for ``"writing_v0"``), as ``make_env`` takes it."""
        return TEAM_ENVS[self.env]

    def to_dict(self) -> dict[str, Any]:
        """The manifest as written to ``team.json``."""
        return {
            "format_version": self.format_version,
            "base_model": self.base_model,
            "env": self.env,
            "env_kwargs": dict(self.env_kwargs),
            "num_agents": self.num_agents,
            "roles": dict(self.roles),
            "generation": self.generation.to_dict(),
        }


def load_team_manifest(team_dir: str | os.PathLike[str]) -> TeamManifest:
    """Read and validate ``team_dir/team.json``; every role's adapter folder must exist inside ``team_dir``."""
    team_dir = Path(team_dir)
    path = team_dir / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"team directory {team_dir}: expected a {MANIFEST_NAME} manifest, found none")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: expected a JSON manifest, got unreadable text ({error})") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    required = ("format_version", "base_model", "env", "num_agents", "roles")
    missing = [key for key in required if key not in data]
    if missing:
        raise ValueError(f"{path}: missing keys {missing}; expected {list(required)} (+ generation, env_kwargs)")
    if data["format_version"] != FORMAT_VERSION:
        raise ValueError(f"{path}: expected format_version {FORMAT_VERSION}, got {data['format_version']!r}")
    if data["env"] not in TEAM_ENVS:
        raise ValueError(f"{path}: env: expected one of {tuple(TEAM_ENVS)}, got {data['env']!r}")
    roles = data["roles"]
    if not isinstance(roles, dict) or not roles or not all(isinstance(v, str) for v in roles.values()):
        raise ValueError(f"{path}: roles: expected a non-empty {{role: adapter folder}} object, got {roles!r}")
    if data["num_agents"] != len(roles):
        raise ValueError(f"{path}: num_agents is {data['num_agents']!r} but {len(roles)} roles are listed")
    root = team_dir.resolve()
    for role, folder in roles.items():
        adapter = (team_dir / folder).resolve()
        if root not in adapter.parents:
            raise ValueError(f"{path}: adapter folder of role {role!r} must lie inside the team directory, "
                             f"got {folder!r}")
        if not (adapter / "adapter_config.json").is_file():
            raise FileNotFoundError(f"{path}: role {role!r}: expected a peft adapter in {adapter} "
                                    "(adapter_config.json missing)")
    return TeamManifest(
        base_model=str(data["base_model"]),
        env=data["env"],
        num_agents=int(data["num_agents"]),
        roles=dict(roles),
        generation=GenerationSettings.from_dict(data.get("generation", {})),
        env_kwargs=dict(data.get("env_kwargs", {})),
    )


def adapters_digest(team_dir: str | os.PathLike[str]) -> str:
    """The first 16 hex digits of a SHA-256 over ``team_dir/adapters/`` (every file's relative path and bytes, in
    path order): two team directories with the same digest hold the same weights. Studies record it for each team
    they play, and a warm-started run for the team it started from."""
    import hashlib

    team_dir = Path(team_dir)
    digest = hashlib.sha256()
    for path in sorted((team_dir / "adapters").rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(team_dir).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def save_team(
    team_dir: str | os.PathLike[str],
    peft_model: Any,
    *,
    env: str,
    roles: Sequence[str],
    base_model: str = DEFAULT_MODEL,
    generation: GenerationSettings | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    adapter_names: Mapping[str, str] | None = None,
) -> TeamManifest:
    """Write a team directory from a peft model holding one adapter per role (named by role unless ``adapter_names``
    maps role → adapter name). The folder is assembled in a temporary sibling and renamed into place, so readers
    never see half a team; an existing ``team_dir`` is replaced."""
    adapter_names = dict(adapter_names or {role: role for role in roles})
    available = set(getattr(peft_model, "peft_config", {}) or {})
    missing = [role for role in roles if adapter_names.get(role) not in available]
    if missing:
        raise ValueError(f"save_team: no adapter for roles {missing}; the model has adapters {sorted(available)}")
    manifest = TeamManifest(
        base_model=base_model,
        env=env,
        num_agents=len(roles),
        roles={role: f"adapters/{role}" for role in roles},
        generation=generation or GenerationSettings(),
        env_kwargs=dict(env_kwargs or {}),
    )
    if env not in TEAM_ENVS:
        raise ValueError(f"save_team: env: expected one of {tuple(TEAM_ENVS)}, got {env!r}")
    target = Path(team_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        for role in roles:
            scratch = staging / ".scratch"
            name = adapter_names[role]
            peft_model.save_pretrained(str(scratch), selected_adapters=[name])
            # peft writes the adapter named "default" at the top level and any other into a subfolder of its name.
            written = scratch if name == "default" else scratch / name
            (staging / "adapters").mkdir(exist_ok=True)
            shutil.move(str(written), str(staging / "adapters" / role))
            shutil.rmtree(scratch, ignore_errors=True)
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest.to_dict(), indent=2) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


class AdapterTeamPolicy(Policy):
    """Per-agent LoRA adapters on one shared base model, from a team directory (see module docstring).

    ``settings`` holds the manifest's generation settings, for callers that want the trained defaults.
    ``reply_ends``: per agent, a regular expression whose first match in the reply (its given start included) ends
    that agent's replies, e.g. ``{agent: env.suggested_reply_end(agent)}`` (a coder stops where its code block
    closes instead of writing on to the budget; :func:`~llm_marl_baselines.policies.local.generate_records`); None
    (default): every reply runs to a stop token or the budget. ``role_max_new_tokens``: per agent, a budget (below
    the settings' ``max_new_tokens``) at which its replies stop, e.g. ``env.suggested_max_new_tokens([agent])`` (a
    coding verifier's 48 beside coders' 160). Both are checked here, before loading.
    """

    name = "adapters"

    def __init__(
        self,
        team_dir: str | os.PathLike[str],
        *,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        loaded: LoadedModel | None = None,
        reply_ends: Mapping[str, str | None] | None = None,
        role_max_new_tokens: Mapping[str, int] | None = None,
    ) -> None:
        check_reply_ends(reply_ends)
        check_role_budgets(role_max_new_tokens, 1)
        try:
            from peft import PeftModel
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise ImportError(f"adapter teams need peft; pip install 'llm-marl-envs[train]' ({error})") from error
        self.team_dir = Path(team_dir)
        self.manifest = load_team_manifest(self.team_dir)
        self.settings = self.manifest.generation
        self.batch_size = batch_size
        self.reply_ends = dict(reply_ends) if reply_ends is not None else None
        self.role_max_new_tokens = dict(role_max_new_tokens) if role_max_new_tokens is not None else None
        base = loaded if loaded is not None else load_model(self.manifest.base_model, dtype=dtype, device=device)
        roles = list(self.manifest.roles.items())
        first_role, first_folder = roles[0]
        model = PeftModel.from_pretrained(base.model, str(self.team_dir / first_folder), adapter_name=first_role)
        for role, folder in roles[1:]:
            model.load_adapter(str(self.team_dir / folder), adapter_name=role)
        model.eval()
        self.model = model
        self.loaded = base

    @property
    def roles(self) -> list[str]:
        """The roles this team has adapters for."""
        return list(self.manifest.roles)

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        # Texts only: skips keeping the raw logits that log-probabilities need.
        return [record.text for record in self._per_role(requests, settings, logprobs=False)]

    def _generate(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        # Each record's log-probabilities are under its own role's adapter, the policy that sampled it.
        return self._per_role(requests, settings, logprobs=True)

    def _per_role(self, requests: list[ActionRequest], settings: GenerationSettings, *,
                  logprobs: bool) -> list[Generation]:
        unknown = sorted({r.agent for r in requests} - set(self.manifest.roles))
        if unknown:
            trained_in = f" (it was trained in an env made with {dict(self.manifest.env_kwargs)})" \
                if self.manifest.env_kwargs else ""
            raise ValueError(f"no adapter for agents {unknown}; this team has adapters for {self.roles}{trained_in}")
        records: list[Generation | None] = [None] * len(requests)
        for role in self.roles:
            rows = [i for i, r in enumerate(requests) if r.agent == role]
            if not rows:
                continue
            self.model.set_adapter(role)
            role_records = generate_records(self.loaded, [requests[i] for i in rows], settings,
                                            batch_size=self.batch_size, model=self.model, logprobs=logprobs,
                                            reply_ends=self.reply_ends,
                                            role_max_new_tokens=self.role_max_new_tokens)
            for row, record in zip(rows, role_records, strict=True):
                records[row] = record
        return [record for record in records if record is not None]
