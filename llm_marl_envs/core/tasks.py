"""Tasks and seeded, split-aware task sources.

A task is one problem instance (an article to summarise, a function to implement). A :class:`TaskSource` holds the
tasks of one dataset, split into ``train`` and ``eval``, and picks one reproducibly from a seeded generator, so
``reset(seed=s, options=...)`` always yields the same task for the same seed and options.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from llm_marl_envs.core.magrpo_episode import official_split

SPLITS: tuple[str, ...] = ("train", "eval")

EVAL_FRACTION_DENOMINATOR = 5
"""Tasks without an explicit split go to ``eval`` when a stable hash of their id is divisible by this (~20%)."""


@dataclass(frozen=True)
class Task:
    """One problem instance: a stable id, its split, and task-specific fields (read-only)."""

    task_id: str
    split: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"task {self.task_id!r}: expected split in {SPLITS}, got {self.split!r}")
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    def __getitem__(self, key: str) -> Any:
        try:
            return self.fields[key]
        except KeyError:
            raise KeyError(f"task {self.task_id!r} has no field {key!r}; fields: {sorted(self.fields)}") from None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-friendly copy: ``{"task_id", "split", **fields}``."""
        return {"task_id": self.task_id, "split": self.split, **self.fields}

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only view of the fields cannot be pickled; rebuild it from a plain dict.
        return (Task, (self.task_id, self.split, dict(self.fields)))

    def __deepcopy__(self, memo: dict[int, Any]) -> Task:
        return self  # immutable


def stable_split(task_id: str) -> str:
    """Assign ``task_id`` to a split by a hash that is the same on every machine and Python version."""
    digest = hashlib.blake2b(task_id.encode("utf-8"), digest_size=8).digest()
    return "eval" if int.from_bytes(digest, "big") % EVAL_FRACTION_DENOMINATOR == 0 else "train"


class TaskSource:
    """The tasks of one dataset, indexed by id and by split, with seeded selection."""

    def __init__(self, name: str, tasks: Iterable[Task]) -> None:
        self.name = name
        self._by_id: dict[str, Task] = {}
        for task in tasks:
            if task.task_id in self._by_id:
                raise ValueError(f"dataset {name!r}: duplicate task id {task.task_id!r}")
            self._by_id[task.task_id] = task
        if not self._by_id:
            raise ValueError(f"dataset {name!r} has no tasks")
        self._by_split: dict[str, list[Task]] = {split: [] for split in SPLITS}
        for task in self._by_id.values():
            self._by_split[task.split].append(task)

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self, split: str | None = None) -> list[str]:
        """Return the task ids of one split (or of all tasks), in dataset order."""
        tasks = self._by_id.values() if split is None else self._split(split)
        return [task.task_id for task in tasks]

    def get(self, task_id: str) -> Task:
        """Return the task with this id; ``KeyError`` names the dataset when it is unknown."""
        if not isinstance(task_id, str):
            raise TypeError(f"task_id: expected str, got {type(task_id).__name__}")
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"dataset {self.name!r} has no task {task_id!r}") from None

    def sample(self, rng: np.random.Generator, split: str) -> Task:
        """Draw one task of ``split`` uniformly with ``rng``."""
        tasks = self._split(split)
        return tasks[int(rng.integers(len(tasks)))]

    def _split(self, split: str) -> list[Task]:
        if split not in SPLITS:
            raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
        tasks = self._by_split[split]
        if not tasks:
            raise ValueError(f"dataset {self.name!r} has no tasks in split {split!r}")
        return tasks


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON-lines file into dicts; errors name the file and line."""
    return [record for _, record in read_jsonl_located(path)]


def read_jsonl_located(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """``(where, record)`` for each record of a JSON-lines file, ``where`` being ``"PATH:LINE"`` (blank lines are
    skipped), so that errors about a record can name the line it came from."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: invalid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
            records.append((f"{path}:{number}", record))
    if not records:
        raise ValueError(f"{path}: no records (expected one JSON object per line)")
    return records


RECORD_SPLITS: dict[str, str] = {"train": "train", "eval": "eval", "validation": "eval", "test": "eval"}
"""The ``split`` values a record may carry, and the split each means."""


def check_record_text(record: Mapping[str, Any], name: str, where: str, *, required: bool = True) -> str | None:
    """``record[name]`` when it is a non-empty string; ``None`` when it is absent and not ``required``; otherwise a
    ``ValueError`` naming ``where`` (the file and line) and the field."""
    if name not in record or record[name] is None:
        if required:
            raise ValueError(f"{where}: missing field {name!r} (the record has {sorted(record)})")
        return None
    value = record[name]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field {name!r}: expected a non-empty string, got {_shown(value)}")
    return value


def check_record_split(record: Mapping[str, Any], where: str) -> None:
    """A ``split`` field, when present, must be one of :data:`RECORD_SPLITS`."""
    split = record.get("split")
    if split is not None and split not in RECORD_SPLITS:
        raise ValueError(f"{where}: field 'split': expected one of {sorted(RECORD_SPLITS)}, got {_shown(split)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def require_fields(record: Mapping[str, Any], fields: Iterable[str], where: str) -> None:
    """Raise ``KeyError`` naming ``where`` when ``record`` lacks any of ``fields``."""
    missing = [name for name in fields if name not in record]
    if missing:
        raise KeyError(f"{where}: missing fields {missing}; record has {sorted(record)}")


def load_hub_dataset(name: str, split: str, **kwargs: Any) -> Any:
    """Load a split of a Hugging Face hub dataset through ``datasets`` (the ``[hub]`` extra; needs network once)."""
    try:
        import datasets
    except ImportError as error:
        raise ImportError(f"dataset {name!r} needs the [hub] extra: pip install 'llm-marl-envs[hub]'") from error
    return datasets.load_dataset(name, split=split, **kwargs)


def hub_rows(
    name: str, dataset_id: str, hub_splits: Sequence[tuple[str, str]], split_scheme: str = "hash"
) -> Iterator[tuple[str, int, Any, str]]:
    """Every row of the hub dataset ``dataset_id`` (the env's dataset ``name``) as ``(hub_split, index, row,
    split)``, over the ``hub_splits`` it has (pairs ``(hub split name, "train" or "eval")``; a split the dataset
    lacks is skipped). ``split_scheme="official"``: ``split`` is MAGRPO's slice of ``name`` instead
    (:func:`~llm_marl_envs.core.magrpo_episode.official_split`), and rows outside both slices are skipped."""
    for hub_split, named_split in hub_splits:
        try:
            rows = load_hub_dataset(dataset_id, hub_split)
        except ValueError:  # the dataset has no such split
            continue
        for index, row in enumerate(rows):
            split = official_split(name, hub_split, index) if split_scheme == "official" else named_split
            if split is not None:
                yield hub_split, index, row, split


def record_split(record: Mapping[str, Any], task_id: str) -> str:
    """The split a record asks for (``"split"`` field; ``validation``/``test`` mean eval), else a stable hash."""
    split = record.get("split")
    if split is None:
        return stable_split(task_id)
    return RECORD_SPLITS.get(str(split), "train")
