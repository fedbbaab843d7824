"""Fixtures shared by the trainer tests: one intra-op thread, and the tiny random-weight model as a model folder."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))

from baseline_helpers import tiny_model


@pytest.fixture
def one_thread() -> Iterator[None]:
    """The tiny model's matrices (hidden size 32) gain nothing from intra-op threads, and on a shared 2-core machine
    waiting for the second thread made the learning run 4x slower (99 s vs 25 s for 60 steps). Modules that run the
    tiny model use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight model (``tiny_model(seed=0)``) saved as a model folder, for runs that load or resume
    from ``config.model`` (read only: every run loads its own copy)."""
    folder = tmp_path_factory.mktemp("tiny")
    loaded = tiny_model(seed=0)
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


# Short sources keep prompts near 200 tokens, so real training steps of the default model fit the 2-core budget.
SHORT_TASKS = [
    {"task_id": "bridge", "split": "train", "title": "Bridge repairs",
     "source": "The city council voted on Monday to close the old river bridge for six months of repairs. Engineers "
               "found cracks in two of its steel supports. A free ferry will carry walkers and cyclists meanwhile."},
    {"task_id": "library", "split": "train", "title": "Sunday library",
     "source": "The town library will open on Sundays from next month after 1,200 residents signed a petition. The "
               "extra hours cost 40,000 dollars a year, paid by a local bakery's foundation."},
]


@pytest.fixture
def short_tasks(tmp_path: Path) -> str:
    """A two-task writing dataset (the env's ``.jsonl`` format), both in the train split: the peer-trainer tests
    (TRL, CoMLRL, TorchRL) run real steps of the default model on it."""
    path = tmp_path / "short.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in SHORT_TASKS), encoding="utf-8")
    return str(path)
