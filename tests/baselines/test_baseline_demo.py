"""``llm-marl demo`` through its own ``register`` hook: flags and their help, progress, the summary table and the JSON
report."""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path

import pytest

from llm_marl_baselines.collaboration import EpisodeResult
from llm_marl_benchmarks import demo
from llm_marl_benchmarks.progress import EpisodeProgress


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
    # Progress while it runs (stdout is not a terminal here: plain lines): one per episode-turn, one per episode.
    progress = [line for line in printed.splitlines() if line.startswith("[progress] ")]
    assert len([line for line in progress if " turn " in line.split(" · ")[0]]) == 4 * 2
    assert len([line for line in progress if " done: " in line]) == 4
    assert progress[0].startswith("[progress] writing episode 1/4 turn 1 · 0/4 episodes · 1 turns")
    assert re.search(r"4/4 episodes · 8 turns, [\d.]+ s elapsed, ETA 0.0 s$", progress[-1])
    data = json.loads(report.read_text())
    assert data["baseline"] == "one_round_discussion"
    from llm_marl_envs.registry import make_env

    budgets = {
        name: make_env(name, num_agents=3, similarity="tfidf").suggested_max_new_tokens()
        for name in ("writing", "coding")
    }
    assert data["settings"]["max_new_tokens"] == budgets  # each env's budget for its roles
    episodes = data["episodes"]
    assert [e["env"] for e in episodes] == ["writing", "writing", "coding", "coding"]
    assert all(len(e["agents"]) == 3 and e["turns"] == 2 for e in episodes)


def demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-marl")
    subparsers = parser.add_subparsers(dest="command", required=True)
    demo.register(subparsers)
    return subparsers.choices["demo"]


def test_every_demo_option_has_help_and_defaults_appear_once() -> None:
    parser = demo_parser()
    for action in parser._actions:
        assert action.help and action.help.strip(), f"{action.option_strings} has no help text"
    text = " ".join(parser.format_help().split("options:")[1].split())  # the option list, unwrapped
    assert "(default: None)" not in text
    model_help = text[text.index("--model MODEL") : text.index("--dtype")]
    assert " ".join(model_help.split()).count("(default:") == 1
    assert "(default: 2)" in text and "(default: local)" in text  # real defaults are still shown


def test_progress_eta_is_the_pace_since_the_first_turn() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = EpisodeProgress(2, 2, stream=out, live=False, clock=lambda: now[0])
    assert progress.eta_s() is None
    now[0] = 10.0  # set-up (building envs) before the first turn
    progress.begin("writing")
    progress.on_turn(0, 1)
    assert progress.eta_s() == pytest.approx(10.0 / 1 * 3)  # one data point: the pace from the start
    now[0] = 12.0
    progress.on_turn(1, 1)
    assert progress.eta_s() == pytest.approx(2.0 / 1 * 2)  # 2 s per turn since the first one, 2 turns left
    short = EpisodeResult("plain", "writing", "t", 0, ("a",), 0.0, 1, "all_done", 0.0, None, {}, {}, {}, 0.0)
    progress.on_episode(short)  # ended after 1 of its 2 turns: the unused turn is credited
    assert progress.turn_units == 3 and progress.eta_s() == pytest.approx(2.0 / 2 * 1)
    assert out.getvalue().splitlines()[-1] == (
        "[progress] writing seed 0 done: return +0.000 in 1 turn(s), all_done · 1/2 episodes · 2 turns, "
        "12.0 s elapsed, ETA 1.0 s"
    )


def test_progress_draws_a_live_bar_with_rich() -> None:
    out = io.StringIO()
    with EpisodeProgress(1, 2, stream=out, live=True) as progress:
        progress.begin("coding")
        progress.on_turn(0, 1)
    assert "0/1 episodes · 1 turns" in out.getvalue() and "[progress]" not in out.getvalue()


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


def test_the_demo_stops_replies_at_each_envs_reply_ends_and_role_budgets(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--stop-at-reply-end`` and ``--role-budgets`` give the local policy each env's own reply ends and role
    budgets while that env plays (a coder's code block, none for a writer; writing's 48 and 96). The reply ends are
    the default, as in the study; ``--no-stop-at-reply-end`` gives none. A policy that decodes nothing here plays
    without them by default and is refused with the reason when they are asked for."""
    from baseline_helpers import tiny_model

    from llm_marl_baselines.policies import local
    from llm_marl_envs.envs.coding.prompts import CODE_BLOCK_CLOSED

    loaded = tiny_model()
    loaded.model.save_pretrained(tmp_path / "tiny")
    loaded.tokenizer.save_pretrained(tmp_path / "tiny")
    asked: list = []
    records = local.generate_records

    def spy(*args, **kwargs):
        asked.append((kwargs.get("reply_ends"), kwargs.get("role_max_new_tokens")))
        return records(*args, **kwargs)

    monkeypatch.setattr(local, "generate_records", spy)
    common = ["--model", str(tmp_path / "tiny"), "--dtype", "float32", "--episodes", "1", "--max-turns", "1",
              "--max-new-tokens", "8", "--executor", "local"]
    assert run_demo([*common, "--stop-at-reply-end", "--role-budgets"]) == 0
    coders = ("coder_1", "coder_2")
    assert sorted(asked, key=str) == sorted([
        ({}, {"concise": 48, "detailed": 96}),  # a writer has no reply end
        (dict.fromkeys(coders, CODE_BLOCK_CLOSED), dict.fromkeys(coders, 160)),
    ], key=str)
    asked.clear()
    assert run_demo([*common, "--env", "coding"]) == 0
    assert asked == [(dict.fromkeys(coders, CODE_BLOCK_CLOSED), None)]
    asked.clear()
    assert run_demo([*common, "--env", "coding", "--no-stop-at-reply-end"]) == 0
    assert asked == [(None, None)]
    with pytest.raises(SystemExit, match="need a local or adapters policy; the scripted policy"):
        run_demo(["--policy", "scripted", "--stop-at-reply-end"])
