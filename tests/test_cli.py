"""The ``llm-marl`` front door: the top-level help says what exists, ``bench`` lists and runs the benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench, cli

ROOT = Path(__file__).resolve().parents[1]


def test_top_level_help_names_only_commands_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    commands = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) == {"demo", "sandbox", "bench", "train"}
    for command in commands:
        assert f"`{command}`" in text  # the description says what each one does
    assert "`bench study`" in text and "`bench report DIR`" in text


def test_bench_lists_every_benchmark_module(capsys: pytest.CaptureFixture[str]) -> None:
    found = bench.benchmarks()
    expected = {"env_overhead", "policy_throughput", "sandbox_throughput", "sandbox_hostile", "study", "report"}
    assert expected <= set(found) and not {"cli", "bench", "demo", "progress"} & set(found)
    assert all(summary for summary in found.values())
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    text = capsys.readouterr().out
    for name in found:
        assert f"  {name} " in text


def test_bench_runs_a_benchmarks_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "env_overhead", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: llm-marl bench env_overhead") and "--episodes" in text and "--json" in text
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "no_such_benchmark"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no_such_benchmark'" in capsys.readouterr().err


def test_bench_runs_a_benchmark_with_its_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "hostile.json"
    status = cli.main(["bench", "sandbox_hostile", "--backends", "local", "--only", "syntax_error", "infinite_loop",
                       "--timeout-s", "0.5", "--json", str(report)])
    assert status == 0
    rows = {row["program"]: row for row in json.loads(report.read_text())["rows"]}
    assert {name: row["status"] for name, row in rows.items()} == {"infinite_loop": "timeout", "syntax_error": "error"}
    assert all(row["acceptable"] and row["seconds"] > 0 for row in rows.values())
    assert "local    infinite_loop" in capsys.readouterr().out


def test_building_the_cli_imports_no_benchmark_and_no_torch() -> None:
    probe = (
        "import sys\n"
        "from benchmarks import cli\n"
        "cli.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m in ('torch', 'transformers') or m.startswith('benchmarks.')\n"
        "                and m.split('.')[1] in ('env_overhead', 'policy_throughput', 'sandbox_throughput'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
