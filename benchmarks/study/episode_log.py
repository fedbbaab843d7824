"""``DIR/episodes.jsonl``: the study's one record of what ran, appended as each episode ends.

Every row is written with one ``write`` of a whole line, then flushed and ``fsync``-ed, so a row that was reported
done survives a SIGKILL or a power cut. Only the process that owns the log writes it (Ray workers return rows to
the driver). Reading tolerates what a kill can leave: a torn last line (no newline) is cut off before the next
append, so it can never glue onto a new row; rows whose key was already seen are ignored, so a log is a set of
planned episodes, each at most once. Rows of another study (a different config hash) are refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

LOG_NAME = "episodes.jsonl"


class EpisodeLog:
    """The append-only, fsync-ed log of one study directory."""

    def __init__(self, directory: str | os.PathLike[str], config_hash: str) -> None:
        self.path = Path(directory) / LOG_NAME
        self.config_hash = config_hash
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, dict[str, Any]] = {}
        self.torn_lines = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            # A kill mid-write leaves a line without its newline: drop it now (its episode runs again).
            self.torn_lines += 1
            with self.path.open("r+b") as handle:
                handle.truncate(complete)
                handle.flush()
                os.fsync(handle.fileno())
        for number, line in enumerate(data[:complete].decode("utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                self.torn_lines += 1
                continue
            if not isinstance(row, dict) or "key" not in row:
                self.torn_lines += 1
                continue
            if row.get("config_hash") != self.config_hash:
                raise ValueError(
                    f"{self.path}:{number}: written by another study (config {row.get('config_hash')!r}, this one "
                    f"{self.config_hash!r}); give this study its own --out folder"
                )
            self.rows.setdefault(row["key"], row)

    def done(self) -> set[str]:
        """Keys of the episodes already logged."""
        return set(self.rows)

    def append(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Log rows whose keys are new (each with this study's config hash), durably; returns how many were new."""
        fresh = []
        for row in rows:
            if row["key"] in self.rows:
                continue
            row = {**row, "config_hash": self.config_hash}
            self.rows[row["key"]] = row
            fresh.append(row)
        if not fresh:
            return 0
        text = "".join(json.dumps(row, ensure_ascii=False, allow_nan=True) + "\n" for row in fresh)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return len(fresh)

