"""Rebuild a study's report (report.md, CSV, PNG plots) from its episodes.jsonl: `llm-marl bench report DIR`."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llm_marl_benchmarks.report DIR`` (the study's report builder, by its benchmark name)."""
    from llm_marl_benchmarks.study.render import main as report_main

    return int(report_main(argv) or 0)


if __name__ == "__main__":
    import sys

    sys.exit(main())
