"""An env built only to be read: its agents, tasks, roles' token budgets and reply ends, ending, turn-1 prompts.

The study's planning (:meth:`llm_marl_benchmarks.study.design.StudyDesign.probe_env`) and ``llm-marl demo`` read
these before any episode. Reading runs no code and loads no model, so the probe uses TF-IDF similarity and, in the
coding env, the executor that needs no sandbox: a machine without Docker or bwrap (a GPU box, say) can plan a run
that will play with ``--executor local``. Light to import: the demo plays on an envs-only install.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from llm_marl_envs.registry import canonical_name, make_env


@contextlib.contextmanager
def read_only_env(env: str, options: Mapping[str, Any]) -> Iterator[Any]:
    """``env`` built with ``options`` but TF-IDF similarity and (coding) the local executor, closed on leaving."""
    local = {"executor": "local"} if canonical_name(env) == "coding" else {}
    instance = make_env(env, **{**options, "similarity": "tfidf", **local})
    try:
        yield instance
    finally:
        instance.close()
