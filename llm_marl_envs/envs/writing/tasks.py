"""Source documents for the writing env.

* ``"news"`` (default, offline): the 300 Lee news articles (Lee, Pincombe & Welsh, 2005) that ship inside gensim's
  wheel as ``gensim/test/test_data/lee_background.cor``, read from the installed package (gensim is not imported).
* ``"tldr"``: Reddit posts of ``trl-lib/tldr`` (MAGRPO's TLDR task) through ``datasets``; needs network once.
* ``"arxiv"``: abstracts of ``OpenMLRL/arXiv_abstract`` (MAGRPO's arXiv task) through ``datasets``.
* any path to a ``.jsonl`` file with one object per line: ``source`` (required; ``text``/``abstract``/``prompt``
  are accepted too), optional ``task_id``, ``title`` and ``split``.

Splits: records without a split go to ``eval`` by a stable hash of their id (about 20%); hub datasets keep theirs.

The passage a team writes about is the text's *lead*: its whole sentences up to :data:`SOURCE_WORDS` words (at least
the first sentence), as a news desk writes a brief from an article's opening paragraph. Each task's ``source`` field
is that passage, and every quality, salience, copying and grounding term is computed against it; the whole text stays
in the ``article`` field (``state()`` only). A lead of about 90 words keeps each prompt short (a policy reads it once
per sample, a trainer once more per sample in its update) while leaving every role something to summarise;
``source_words=None`` writes about the whole text.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llm_marl_envs.core.tasks import (
    Task,
    TaskSource,
    check_record_split,
    check_record_text,
    hub_rows,
    read_jsonl_located,
    record_split,
)

SOURCE_FIELDS: tuple[str, ...] = ("source", "text", "abstract", "prompt")
SOURCE_WORDS = 100
"""The default word cap of a task's passage (its lead; see the module docstring)."""
# A sentence ends at . ! or ? (and a closing quote) before whitespace and a capital, a digit or an opening quote: "1.75"
# and "$5" stay whole (the news corpus writes "Mr", "Dr" without a full stop).
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”']))\s+(?=[\"“']?[A-Z0-9])")


def lead(text: str, max_words: int | None) -> str:
    """The whole sentences of ``text`` from its start up to ``max_words`` words (at least the first sentence, however
    long), spaces normalised; the whole text when ``max_words`` is ``None``."""
    if max_words is None:
        return text.strip()
    kept: list[str] = []
    count = 0
    for sentence in _SENTENCE_END.split(" ".join(text.split())):
        words = len(sentence.split())
        if kept and count + words > max_words:
            break
        kept.append(sentence)
        count += words
    return " ".join(kept)
NEWS_FILE = ("test", "test_data", "lee_background.cor")
HUB_DATASETS: dict[str, str] = {"tldr": "trl-lib/tldr", "arxiv": "OpenMLRL/arXiv_abstract"}
HUB_SPLITS: tuple[tuple[str, str], ...] = (
    ("train", "train"), ("validation", "eval"), ("val", "eval"), ("test", "eval"))
"""The hub splits read (arXiv's validation split is named ``val``), and the env split each is."""


def news_corpus_path() -> Path:
    """Path of the Lee news corpus inside the installed gensim package."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the 'news' dataset reads gensim's packaged corpus: pip install gensim")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*NEWS_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"gensim is installed but its news corpus is missing: {path}")
    return path


def load_news(source_words: int | None = SOURCE_WORDS) -> TaskSource:
    """The 300 Lee news articles, one task each (``news/000`` ...); ``source`` is each article's lead."""
    lines = news_corpus_path().read_text(encoding="utf-8", errors="replace").splitlines()
    articles = [line.strip() for line in lines if line.strip()]
    return TaskSource("news", (_task(f"news/{i:03d}", _passage(text, source_words)) for i, text in enumerate(articles)))


def _passage(text: str, source_words: int | None) -> dict[str, str]:
    """A task's text fields: ``source`` (the passage the team writes about) and ``article`` (the whole text)."""
    return {"source": lead(text, source_words), "article": text.strip()}


def tasks_from_records(
    name: str, records: Iterable[Mapping[str, Any]], source_words: int | None = SOURCE_WORDS
) -> TaskSource:
    """Build a source from records carrying one of ``SOURCE_FIELDS`` (and optional task_id/title/split); each task's
    ``source`` is the record text's lead of up to ``source_words`` words."""
    tasks = []
    for index, record in enumerate(records):
        text = next((record[f] for f in SOURCE_FIELDS if isinstance(record.get(f), str) and record[f].strip()), None)
        if text is None:
            raise KeyError(f"{name} record {index}: expected a non-empty text field among {SOURCE_FIELDS}")
        task_id = str(record.get("task_id", f"{name}/{index}"))
        fields = _passage(text, source_words)
        if record.get("title"):
            fields["title"] = str(record["title"])
        tasks.append(Task(task_id, record_split(record, task_id), fields))
    return TaskSource(name, tasks)


def load_hub(name: str, split_scheme: str = "hash", source_words: int | None = SOURCE_WORDS) -> TaskSource:
    """A MAGRPO writing dataset from the hub (``"tldr"`` or ``"arxiv"``); train and validation/val/test splits
    (arXiv's is named ``val``); ``split_scheme="official"``: MAGRPO's slices (train ``train[:1100]``, eval
    ``test[:1100]`` / ``val[:1100]``)."""
    records = []
    for hub_split, index, row, split in hub_rows(name, HUB_DATASETS[name], HUB_SPLITS, split_scheme):
        text = str(row.get("prompt") or row.get("abstract") or row.get("text") or "")
        text = text.rsplit("TL;DR:", 1)[0] if name == "tldr" else text
        records.append({"task_id": f"{name}/{hub_split}/{index}", "source": text, "split": split})
    return tasks_from_records(name, records, source_words)


SPLIT_SCHEMES: tuple[str, ...] = ("hash", "official")
"""``hash``: the datasets' own splits, else a stable hash of the id; ``official``: MAGRPO's train/eval slices."""


@functools.lru_cache(maxsize=8)
def load_writing_tasks(
    dataset: str, split_scheme: str = "hash", source_words: int | None = SOURCE_WORDS
) -> TaskSource:
    """Load (once per process) the writing dataset named ``dataset``, each task's passage its lead of up to
    ``source_words`` words (see module docstring)."""
    if not isinstance(dataset, str):
        raise TypeError(f"dataset: expected str, got {type(dataset).__name__}")
    if split_scheme not in SPLIT_SCHEMES:
        raise ValueError(f"split_scheme: expected one of {SPLIT_SCHEMES}, got {split_scheme!r}")
    if split_scheme == "official" and dataset not in HUB_DATASETS:
        raise ValueError(f"split_scheme='official': MAGRPO's official code has no split of dataset {dataset!r}")
    if dataset == "news":
        return load_news(source_words)
    if dataset in HUB_DATASETS:
        return load_hub(dataset, split_scheme, source_words)
    if dataset.endswith(".jsonl") or Path(dataset).is_file():
        return tasks_from_file(dataset, source_words)
    raise ValueError(f"dataset: expected 'news', 'tldr', 'arxiv' or a .jsonl path, got {dataset!r}")


def tasks_from_file(path: str | Path, source_words: int | None = SOURCE_WORDS) -> TaskSource:
    """The tasks of a user's ``.jsonl`` file, each line checked: a ``source`` text (or one of :data:`SOURCE_FIELDS`),
    and optional ``task_id``, ``title`` and ``split``; a bad line is one error naming the file, line and field."""
    located = read_jsonl_located(path)
    seen: dict[str, str] = {}
    for index, (where, record) in enumerate(located):
        task_id = str(record.get("task_id", f"{Path(path).stem}/{index}"))
        if task_id in seen:
            raise ValueError(f"{where}: field 'task_id': {task_id!r} is already the task of {seen[task_id]}")
        seen[task_id] = where
        if not any(isinstance(record.get(f), str) and record[f].strip() for f in SOURCE_FIELDS):
            present = [f for f in SOURCE_FIELDS if f in record]
            if present:
                check_record_text(record, present[0], where)
            raise ValueError(f"{where}: missing field 'source' (a non-empty text to write about; also accepted: "
                             f"{list(SOURCE_FIELDS[1:])}); the record has {sorted(record)}")
        check_record_text(record, "title", where, required=False)
        if "task_id" in record and not isinstance(record["task_id"], (str, int)):
            raise ValueError(f"{where}: field 'task_id': expected a string, got {type(record['task_id']).__name__}")
        check_record_split(record, where)
    return tasks_from_records(Path(path).stem, [record for _, record in located], source_words)


def _task(task_id: str, fields: Mapping[str, Any]) -> Task:
    return Task(task_id, record_split({}, task_id), fields)
