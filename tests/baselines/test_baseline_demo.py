"""``llm-marl demo`` through its own ``register`` hook: flags, the summary table and the JSON report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import demo


def run_demo(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="llm-marl")
    demo.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["demo", *argv])
    return args.func(args)


def test_scripted_demo_on_both_envs_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "out" / "demo.json"
    status = run_demo(
        [
            "--policy",
            "scripted",
            "--baseline",
            "one_round_discussion",
            "--num-agents",
            "3",
            "--episodes",
            "2",
            "--executor",
            "local",
            "--json",
            str(report),
        ]
    )
    assert status == 0
    printed = capsys.readouterr().out
    assert "one_round_discussion · scripted policy" in printed
    assert "writing" in printed and "coding" in printed and "consist." in printed
    data = json.loads(report.read_text())
    assert data["baseline"] == "one_round_discussion" and data["settings"]["max_new_tokens"] == 96
    episodes = data["episodes"]
    assert [e["env"] for e in episodes] == ["writing", "writing", "coding", "coding"]
    assert all(len(e["agents"]) == 3 and e["turns"] == 2 for e in episodes)


def test_demo_flag_errors() -> None:
    with pytest.raises(SystemExit):
        run_demo(["--baseline", "telepathy"])
    with pytest.raises(SystemExit):
        run_demo(["--episodes", "0"])
    with pytest.raises(SystemExit, match="--policy adapters needs --team-dir"):
        run_demo(["--policy", "adapters"])
    with pytest.raises(SystemExit, match="--policy endpoint needs --base-url"):
        run_demo(["--policy", "endpoint"])


@pytest.mark.model
def test_default_model_demo_short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "demo.json"
    status = run_demo(["--env", "writing", "--episodes", "1", "--max-new-tokens", "8", "--json", str(report)])
    assert status == 0
    assert "plain · local policy" in capsys.readouterr().out
    (episode,) = json.loads(report.read_text())["episodes"]
    assert episode["agents"] == ["concise", "detailed"] and 1 <= episode["turns"] <= 2
    assert any(draft.strip() for draft in episode["drafts"].values())
