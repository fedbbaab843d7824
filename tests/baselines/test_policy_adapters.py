"""Team directories of per-role LoRA adapters: written with save_team, loaded onto one shared base model.

Every test using the ``team_dir`` fixture loads the default model (and takes 10-30 s on 2 CPU cores): those carry the
``model`` and ``slow`` markers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baseline_helpers import default_model

from llm_marl_baselines.models import DEFAULT_MODEL, load_model
from llm_marl_baselines.policies import ActionRequest, GenerationSettings, make_policy
from llm_marl_baselines.policies.adapters import MANIFEST_NAME, AdapterTeamPolicy, load_team_manifest, save_team

ROLES = ("concise", "detailed")


@pytest.fixture(scope="module")
def team_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real team: random-init LoRA adapters (B != 0, so roles differ) on the default model, saved with save_team."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = load_model(None, dtype="float32", device="cpu").model
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, config, adapter_name=ROLES[0])
    peft_model.add_adapter(ROLES[1], config)
    target = tmp_path_factory.mktemp("teams") / "tldr-pair"
    manifest = save_team(
        target,
        peft_model,
        env="writing_v0",
        roles=ROLES,
        base_model=DEFAULT_MODEL,
        generation=GenerationSettings(temperature=0.0, max_new_tokens=6, seed=1),
        env_kwargs={"style": "tldr"},
    )
    assert manifest.num_agents == 2
    return target


@pytest.mark.model
@pytest.mark.slow
def test_team_directory_layout_and_manifest(team_dir: Path) -> None:
    data = json.loads((team_dir / MANIFEST_NAME).read_text())
    assert data["format_version"] == 1 and data["env"] == "writing_v0" and data["base_model"] == DEFAULT_MODEL
    assert data["roles"] == {role: f"adapters/{role}" for role in ROLES}
    assert data["generation"]["max_new_tokens"] == 6 and data["env_kwargs"] == {"style": "tldr"}
    for role in ROLES:
        assert (team_dir / "adapters" / role / "adapter_config.json").is_file()
        assert (team_dir / "adapters" / role / "adapter_model.safetensors").is_file()
    assert not [p for p in team_dir.parent.iterdir() if p.name.startswith(".")]  # no staging folder left
    manifest = load_team_manifest(team_dir)
    assert manifest.generation == GenerationSettings(temperature=0.0, max_new_tokens=6, seed=1)


@pytest.mark.model
@pytest.mark.slow
def test_one_base_copy_and_roles_give_different_logits(team_dir: Path) -> None:
    import torch

    policy = make_policy("adapters", team_dir=team_dir, dtype="float32", device="cpu")
    assert isinstance(policy, AdapterTeamPolicy) and policy.roles == list(ROLES)
    model = policy.model
    base_params = {name: p for name, p in model.named_parameters() if "lora_" not in name}
    expected = sum(p.numel() for p in default_model("float32").model.parameters())
    assert sum(p.numel() for p in base_params.values()) == expected  # the base weights exist once
    lora_a = [name for name, _ in model.named_parameters() if "lora_A" in name]
    assert {name.split(".")[-2] for name in lora_a} == set(ROLES)  # both adapters sit on the same modules

    ids = policy.loaded.tokenizer("The cat sat on the mat", return_tensors="pt")["input_ids"]
    logits = {}
    with torch.inference_mode():
        for role in ROLES:
            model.set_adapter(role)
            logits[role] = model(input_ids=ids).logits
        with model.disable_adapter():
            plain = model(input_ids=ids).logits
    assert not torch.allclose(logits["concise"], logits["detailed"], atol=1e-3)
    assert not torch.allclose(logits["concise"], plain, atol=1e-3)

    requests = [
        ActionRequest("detailed", "Say hi."),
        ActionRequest("concise", "Say hi."),
        ActionRequest("detailed", "Name a colour."),
    ]
    actions = policy.act(requests, policy.settings)
    assert len(actions) == 3 and all(isinstance(a, str) for a in actions)
    model.set_adapter("detailed")  # grouping by role must give what each role alone gives
    assert policy.act(requests[:1], policy.settings) == actions[:1]
    with pytest.raises(ValueError, match=r"no adapter for agents \['solo'\]; this team has adapters for"):
        policy.act([ActionRequest("solo", "x")], policy.settings)


def _write_manifest(team_dir: Path, **changes: object) -> None:
    data = json.loads((team_dir / MANIFEST_NAME).read_text())
    data.update(changes)
    (team_dir / MANIFEST_NAME).write_text(json.dumps(data))


@pytest.mark.model
@pytest.mark.slow
def test_broken_team_directories_fail_clearly(team_dir: Path, tmp_path: Path) -> None:
    import shutil

    with pytest.raises(FileNotFoundError, match=r"expected a team\.json manifest"):
        load_team_manifest(tmp_path)
    cases = [
        ({"format_version": 2}, ValueError, "expected format_version 1, got 2"),
        ({"env": "chess_v0"}, ValueError, "env: expected one of"),
        ({"num_agents": 3}, ValueError, "num_agents is 3 but 2 roles"),
        ({"roles": {"concise": "../../etc"}, "num_agents": 1}, ValueError, "must lie inside the team directory"),
        ({"roles": {"concise": "adapters/missing"}, "num_agents": 1}, FileNotFoundError, "adapter_config.json"),
        ({"generation": {"temp": 1}}, ValueError, "unknown keys"),
    ]
    for changes, error, fragment in cases:
        copy = tmp_path / "copy"
        shutil.copytree(team_dir, copy)
        _write_manifest(copy, **changes)
        with pytest.raises(error, match=fragment):
            load_team_manifest(copy)
        shutil.rmtree(copy)
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(ValueError, match="expected a JSON manifest"):
        load_team_manifest(tmp_path)


def test_save_team_rejects_missing_adapters(tmp_path: Path) -> None:
    class NoAdapters:
        def __init__(self) -> None:
            self.peft_config: dict = {}

    with pytest.raises(ValueError, match=r"no adapter for roles \['concise'\]"):
        save_team(tmp_path / "team", NoAdapters(), env="writing_v0", roles=["concise"])


@pytest.mark.model
@pytest.mark.slow
def test_demo_plays_a_team_on_its_own_env(team_dir: Path, tmp_path: Path) -> None:
    import argparse

    from llm_marl_benchmarks import demo

    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers(dest="command", required=True))
    report = tmp_path / "team.json"
    args = parser.parse_args(
        [
            "demo",
            "--policy",
            "adapters",
            "--team-dir",
            str(team_dir),
            "--env",
            "coding",
            "--episodes",
            "1",
            "--max-new-tokens",
            "4",
            "--dtype",
            "float32",
            "--json",
            str(report),
        ]
    )
    assert args.func(args) == 0
    (episode,) = json.loads(report.read_text())["episodes"]
    assert episode["env"] == "writing" and episode["agents"] == list(ROLES)  # the manifest's env wins over --env
