"""The README's Python snippets and those of docs/interop.md ("Use with other libraries") run as shown: each block is
executed verbatim (in a temporary working folder) and what it computed is checked."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INTEROP = ROOT / "docs" / "interop.md"
MAX_LINES = 15


def readme_snippets() -> list[str]:
    """Every ```python block of the README, in order."""
    return [block[len("```python\n"):-3] for block in re.findall(r"```python\n.*?```", README.read_text(), flags=re.S)]


def snippets() -> dict[str, str]:
    """docs/interop.md's ```python blocks, keyed by the bold label of the paragraph before each (``PettingZoo loop``,
    ``TRL``, ``CoMLRL``, ``TorchRL``)."""
    section = INTEROP.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    label = None
    for part in re.split(r"(```python\n.*?```)", section, flags=re.S):
        if part.startswith("```python\n"):
            assert label is not None, "a snippet with no bold label before it"
            found[label] = part[len("```python\n"):-3]
        else:
            labels = re.findall(r"\*\*([^*]+)\*\* —", part)
            label = labels[-1] if labels else label
    return found


def _check_pettingzoo(namespace: dict[str, Any]) -> None:
    state = namespace["env"].state()
    assert not namespace["env"].agents and state["end_reason"] in ("converged", "max_turns", "all_done")
    assert math.isfinite(state["team_return"]) and namespace["rewards"]


def _check_trl(namespace: dict[str, Any]) -> None:
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1
    assert [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]


def _check_comlrl(namespace: dict[str, Any]) -> None:
    step = namespace["step"]
    assert step.step == 1 and len(step.rewards) == 2 + 2 * 2  # one row's tree: 2 joint actions, then 2 x 2
    assert step.env_reward == pytest.approx(step.peer_reward)


def _check_torchrl(namespace: dict[str, Any]) -> None:
    step = namespace["step"]
    assert step.step == 1 and step.env_reward == pytest.approx(step.torchrl_reward, abs=1e-5)


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "PettingZoo loop": _check_pettingzoo, "TRL": _check_trl, "CoMLRL": _check_comlrl, "TorchRL": _check_torchrl,
}
MODEL = (pytest.mark.model, pytest.mark.slow)


def test_the_section_has_one_short_snippet_per_library() -> None:
    found = snippets()
    assert list(found) == list(CHECKS)
    for label, code in found.items():
        assert len(code.strip().splitlines()) <= MAX_LINES, f"{label}: more than {MAX_LINES} lines"


@pytest.mark.parametrize("label", [
    "PettingZoo loop",
    pytest.param("TRL", marks=MODEL),
    pytest.param("CoMLRL", marks=MODEL),
    pytest.param("TorchRL", marks=MODEL),
])
@pytest.mark.usefixtures("one_thread")
def test_a_snippet_runs_as_shown(label: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the snippets write their runs (runs/trl) under the working folder
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(snippets()[label], f"README.md[{label}]", "exec"), namespace)  # the README's own code, verbatim
    CHECKS[label](namespace)


def test_the_readme_api_sample_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"The API in ten lines": a PettingZoo step, a batch of episodes and a MAGRPO tree with the tiny policy the sample
    defines itself (no model, no NameError)."""
    api = readme_snippets()[0]
    assert "def policy(" in api and len(api.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(api, "README.md[API]", "exec"), namespace)
    assert set(namespace["rewards"]) == {"concise", "detailed"}
    episodes, trees = namespace["episodes"], namespace["trees"]
    assert len(episodes) == 4 and all(math.isfinite(e.team_return) and e.turns >= 1 for e in episodes)
    assert len(trees) == 2


@pytest.mark.model
@pytest.mark.slow
def test_the_readme_teams_snippet_loads_every_shipped_team_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    (teams,) = (code for code in readme_snippets() if "load_team" in code)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(teams, "README.md[teams]", "exec"), namespace)
    from llm_marl_baselines.policies.adapters import AdapterTeamPolicy

    assert isinstance(namespace["policy"], AdapterTeamPolicy)
    assert ("writing", 2) in namespace["builtin_teams"]() and "('writing', 2)" in capsys.readouterr().out


@pytest.fixture
def one_thread() -> Any:
    """torch on one intra-op thread while a snippet runs (on 2 shared cores the second thread mostly waits)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
