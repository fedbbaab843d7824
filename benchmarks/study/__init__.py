"""Reproduce the seeds' 6,000-episode study: trained team vs single agent vs untrained team, resumable, with
statistics, a report and Ray scale-out.

``python -m benchmarks.study`` / ``llm-marl bench study``; the modules: :mod:`~benchmarks.study.design` (conditions,
presets, the plan), :mod:`~benchmarks.study.episode_log` (the fsync-ed log), :mod:`~benchmarks.study.execution`
(batches on the rollout runner, locally or on Ray), :mod:`~benchmarks.study.stats` and
:mod:`~benchmarks.study.report` (the report), :mod:`~benchmarks.study.cli` (the command).
"""

from benchmarks.study.cli import main

__all__ = ["main"]
