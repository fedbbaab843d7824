"""``benchmarks/sampling.py`` runs both draws side by side and writes its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from llm_marl_benchmarks import sampling


def test_the_bench_times_both_draws_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sampling.json"
    assert sampling.main(["--rows", "1", "4", "--vocab", "600", "--repeats", "3", "--json", str(out)]) == 0
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert payload["benchmark"] == "sampling" and payload["top_k"] == 50
    assert [row["rows"] for row in payload["results"]] == [1, 4]
    for row in payload["results"]:
        assert row["full_vocabulary_ms"] > 0 and row["top_k_ms"] > 0
        assert row["speedup"] == pytest.approx(row["full_vocabulary_ms"] / row["top_k_ms"], rel=0.02)
    assert "4 rows: full vocabulary" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        sampling.main(["--rows", "0"])


def test_the_full_vocabulary_draw_is_generates_distribution() -> None:
    """The bench's reference path only draws tokens the warpers keep (top-k 50 then top-p)."""
    torch.manual_seed(0)
    logits = torch.randn(2000, 300) * 3
    drawn = sampling.full_vocabulary_sampler(0.7, 0.95)(logits.clone())
    allowed = torch.topk(logits, 50, dim=-1).indices
    assert bool((allowed == drawn[:, None]).any(dim=1).all())


def test_the_decode_comparison_runs_both_samplers_on_the_default_model(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    assert sampling.main(["--rows", "2", "--vocab", "100", "--repeats", "1", "--decode", "4", "--prompt-tokens", "8",
                          "--new-tokens", "3", "--decode-repeats", "1", "--json", str(out)]) == 0
    decode = json.loads(out.read_text(encoding="utf-8"))["decode"]
    assert decode["rows"] == 4 and decode["prompts"] == 1 and decode["new_tokens"] == 3
    assert len(decode["seconds"]["full_vocabulary"]) == len(decode["seconds"]["top_k"]) == 1
    assert decode["full_vocabulary_s"] > 0 and decode["top_k_s"] > 0


def test_the_linears_comparison_times_both_orders_on_the_default_model(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "linears.json"
    assert sampling.main(["--rows", "2", "--vocab", "100", "--repeats", "1", "--linears", "1", "3",
                          "--prompt-tokens", "8", "--new-tokens", "3", "--decode-repeats", "1",
                          "--json", str(out)]) == 0
    linears = json.loads(out.read_text(encoding="utf-8"))["linears"]
    assert [row["rows"] for row in linears] == [1, 3]
    for row in linears:
        assert row["linear_ms"] > 0 and row["weight_first_ms"] > 0 and row["steps"] == 3
        assert 0 <= row["max_logit_difference"] < 1e-3  # the same product, in another order
    assert linears[0]["max_logit_difference"] == 0  # one row keeps F.linear
    assert "3 rows: F.linear" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        sampling.main(["--linears", "0"])


def test_the_compaction_comparison_decodes_both_ways_on_the_default_model(tmp_path: Path) -> None:
    out = tmp_path / "compaction.json"
    assert sampling.main(["--rows", "2", "--vocab", "100", "--repeats", "1", "--compaction", "8", "--new-tokens", "24",
                          "--decode-repeats", "1", "--json", str(out)]) == 0
    compaction = json.loads(out.read_text(encoding="utf-8"))["compaction"]
    assert compaction["rows"] == 8 and compaction["kept_s"] > 0 and compaction["compacted_s"] > 0
    assert 0 < compaction["busy_share"] <= 1 and compaction["steps"] <= 24
    assert compaction["same_samples"] is True
