"""The README's "Use with other libraries" snippets run as shown: each Python block of the section is executed
verbatim (in a temporary working folder) and what it computed is checked."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Use with other libraries"
MAX_LINES = 15


def snippets() -> dict[str, str]:
    """The section's ```python blocks, keyed by the bold label of the paragraph before each (``PettingZoo loop``,
    ``TRL``, ``CoMLRL``, ``TorchRL``)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
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


@pytest.fixture
def one_thread() -> Any:
    """torch on one intra-op thread while a snippet runs (on 2 shared cores the second thread mostly waits)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
