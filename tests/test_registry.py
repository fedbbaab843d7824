"""The registry is the one list of env names: every consumer reads it, no module keeps its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import llm_marl_envs
from llm_marl_envs.registry import ENV_NAMES, ENVS, env_spec, make_env

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("llm_marl_envs", "baselines", "benchmarks", "trainers")  # the repository folders of the packages
# Two env names side by side in one literal: a tuple, list, set or dict of env names kept outside the registry.
_NAME_LIST = re.compile(r"""["'](writing|coding)["']\s*[,:][^\n]*["'](writing|coding)["']""")


def test_no_module_but_the_registry_lists_the_envs() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "registry.py" and path.parent.name == "llm_marl_envs":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if _NAME_LIST.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_grep_would_catch_a_second_list() -> None:
    assert _NAME_LIST.search('ENVS = ("writing", "coding")')
    assert _NAME_LIST.search('{"writing": "writing_v0", "coding": "coding_v0"}')
    assert not _NAME_LIST.search('make_env("writing", num_agents=2)')


def test_registry_builds_every_env_and_registers_it_with_pettingzoo() -> None:
    import pettingzoo

    assert ENV_NAMES == tuple(ENVS) == ("writing", "coding")
    for name in ENV_NAMES:
        spec = env_spec(name)
        env = make_env(name, num_agents=2, similarity="tfidf", **({"executor": "local"} if name == "coding" else {}))
        assert env.metadata["name"] == f"{name}_v0"
        assert llm_marl_envs.ENV_IDS[spec.env_id] == spec.entry_point
        assert isinstance(pettingzoo.make("parallel", spec.env_id, num_agents=1, similarity="tfidf"), type(env))
    with pytest.raises(ValueError, match=r"env: expected one of \('writing', 'coding'\), got 'poetry'"):
        make_env("poetry")
