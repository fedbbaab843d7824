"""``benchmarks/figures_json.py``: every benchmark's ``--json PATH`` is 2-space JSON, UTF-8, one trailing newline, in a
folder made if missing, and never half written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_marl_benchmarks import bench
from llm_marl_benchmarks.figures_json import write_figures_json

PAYLOAD = {"benchmark": "demo", "rows": [1, 2.5, None, True], "nested": {"a": [], "b": {}}, "text": "plain"}


def test_it_makes_the_missing_folder_and_returns_the_path(tmp_path: Path) -> None:
    target = tmp_path / "not" / "yet" / "there" / "figures.json"
    assert not target.parent.exists()
    returned = write_figures_json(target, PAYLOAD)
    assert isinstance(returned, Path) and returned == target
    assert target.is_file()
    # A string path (what an argparse option without type=Path gives) comes back as a Path too.
    as_text = tmp_path / "from-str" / "figures.json"
    returned = write_figures_json(str(as_text), PAYLOAD)
    assert isinstance(returned, Path) and returned == as_text and as_text.is_file()


def test_the_file_is_indented_json_ending_in_exactly_one_newline(tmp_path: Path) -> None:
    target = write_figures_json(tmp_path / "figures.json", PAYLOAD)
    raw = target.read_bytes()
    assert raw.endswith(b"}\n") and not raw.endswith(b"\n\n")
    text = raw.decode("utf-8")
    assert json.loads(text) == PAYLOAD
    assert text == json.dumps(PAYLOAD, indent=2) + "\n"  # the shape every benchmark wrote by hand before
    assert '\n  "benchmark": "demo",\n' in text  # two spaces


def test_a_top_level_list_round_trips(tmp_path: Path) -> None:
    rows = [{"env": "writing", "return": -0.25}, {"env": "coding", "return": 1.0}]  # reward_integrity's shape
    target = write_figures_json(tmp_path / "rows.json", rows)
    assert json.loads(target.read_text(encoding="utf-8")) == rows
    assert target.read_text(encoding="utf-8").endswith("]\n")


def test_ensure_ascii_false_keeps_non_ascii_literally_and_the_default_escapes_it(tmp_path: Path) -> None:
    payload = {"text": "naïve café · 多"}
    escaped = write_figures_json(tmp_path / "escaped.json", payload).read_text(encoding="utf-8")
    literal = write_figures_json(tmp_path / "literal.json", payload, ensure_ascii=False).read_text(encoding="utf-8")
    assert "\\u00ef" in escaped and "ï" not in escaped and escaped.isascii()
    assert "naïve café · 多" in literal and "\\u" not in literal
    assert json.loads(escaped) == json.loads(literal) == payload


def test_default_converts_what_json_has_no_type_for(tmp_path: Path) -> None:
    payload = {"where": Path("a/b")}
    with pytest.raises(TypeError):
        write_figures_json(tmp_path / "refused.json", payload)
    target = write_figures_json(tmp_path / "converted.json", payload, default=str)
    assert json.loads(target.read_text(encoding="utf-8")) == {"where": "a/b"}


def test_a_rewrite_replaces_the_file_and_a_failed_one_leaves_it_whole(tmp_path: Path) -> None:
    target = tmp_path / "figures.json"
    write_figures_json(target, {"case": 1})
    write_figures_json(target, {"case": 2})
    assert json.loads(target.read_text(encoding="utf-8")) == {"case": 2}
    with pytest.raises(TypeError):
        write_figures_json(target, {"case": object()})
    assert json.loads(target.read_text(encoding="utf-8")) == {"case": 2}  # the previous figures, not half a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json"]  # no staging file left behind


def test_it_is_not_listed_as_a_benchmark() -> None:
    assert "figures_json" not in bench.benchmarks()
