"""The one writer of every benchmark's ``--json PATH``: the figures as indented JSON, UTF-8, one trailing newline.

Each benchmark builds its own payload and hands it here, so every figures file has the same shape on disk (2-space
indent, ending in exactly one newline) and lands in a folder that need not exist yet. The file is written to a sibling
``PATH.tmp`` first and moved into place, so a run stopped mid-write (``trainer_step`` rewrites its figures after every
case) leaves the previous figures whole rather than half a file.

This module has no ``main``: ``llm-marl bench`` lists every ``benchmarks/*.py`` with one as a benchmark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_figures_json(path: str | os.PathLike[str], payload: Any, *, ensure_ascii: bool = True,
                       default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``payload`` as indented JSON (2 spaces, one trailing newline, UTF-8) to ``path``, making its folder;
    returns the path.

    ``ensure_ascii=False`` keeps non-ASCII characters literally (the demo's episode texts); ``default`` is
    :func:`json.dumps`'s, for payloads holding values JSON has no type for.
    """
    path = Path(path)
    # Serialised before anything touches the disk, so a payload JSON cannot hold leaves no staging file behind.
    text = json.dumps(payload, indent=2, ensure_ascii=ensure_ascii, default=default) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(text, encoding="utf-8")
    staging.replace(path)
    return path
