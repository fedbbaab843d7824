"""Reproduce the seeds' 6,000-episode study: trained team vs single agent vs untrained team, resumable, with
statistics, a report and Ray scale-out.

``python -m llm_marl_benchmarks.study`` / ``llm-marl bench study``; the modules:
:mod:`~llm_marl_benchmarks.study.design` (conditions, presets, the plan), :mod:`~llm_marl_benchmarks.study.episode_log`
(the fsync-ed log), :mod:`~llm_marl_benchmarks.study.execution` (batches on the rollout runner, locally or on Ray),
:mod:`~llm_marl_benchmarks.study.best_of_n` (the ``single_best_of_n`` control's sampling and choice),
:mod:`~llm_marl_benchmarks.study.stats` and :mod:`~llm_marl_benchmarks.study.report` (the report's reading and
statistics), :mod:`~llm_marl_benchmarks.study.render` (its Markdown, CSV and plots),
:mod:`~llm_marl_benchmarks.study.cli` (the command).
"""

from llm_marl_benchmarks.study.cli import main

__all__ = ["main"]
