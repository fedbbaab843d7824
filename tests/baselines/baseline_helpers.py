"""Shared pieces of the policy and baseline tests: one default-model load per test process, fast env settings."""

from __future__ import annotations

import functools
from typing import Any

# TF-IDF similarity keeps scripted episodes fast; the coding env runs tests on the local executor.
ENV_KWARGS: dict[str, dict[str, Any]] = {
    "writing": {"similarity": "tfidf"},
    "coding": {"similarity": "tfidf", "executor": "local"},
}


@functools.cache
def default_model(dtype: str = "bfloat16") -> Any:
    """The offline default model (SmolLM2-135M-Instruct), loaded once per process and dtype."""
    from baselines.models import load_model

    return load_model(None, dtype=dtype, device="cpu")
