"""Do two plays of one study design replay each other? Per shared episode: the same or not, and where they split.

``llm-marl bench replay_check FIRST_DIR SECOND_DIR [--json PATH]`` reads both folders' ``episodes.jsonl`` (two runs
of one ``llm-marl bench study`` command, e.g. a figure and its replay) and compares every episode they share, by key.
Sampling is seeded per lockstep batch, so the same command on the same machine should write the same texts; when it
does not, this says which turn first differs and what changed first there:

* ``env``: an agent's *prompt* differs while every earlier reply matched, so the env answered the same replies
  differently: a test outcome, most often a test run that hit the sandbox's time limit in one play only (the turn
  before is reported with ``timed_out``, which a machine's load can change);
* ``sampler``: every prompt of the turn matched but a *reply* differs: the model drew different tokens from the same
  prompts (floating-point differences in batched generation, a different batch composition or row count);
* ``outcome``: logs written before the ``turn_digests`` column, compared by their ``turn_tests`` (the first turn whose
  test counts differ) or, failing that, by final texts and endings; the cause cannot be told from these.

It prints a summary line per cause and a line per split episode, and ``--json PATH`` writes all of it.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.episode_log import LOG_NAME
from llm_marl_benchmarks.study.report import read_episodes

CAUSES = ("env", "sampler", "outcome")
"""What first differs in a split episode (the module docstring says what each means)."""


def compare_episode(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where two log rows of one planned episode split: ``None`` when they replay each other, else a dict with
    ``cause`` (one of :data:`CAUSES`), ``turn`` (the first differing turn, ``None`` when only the final texts or the
    ending differ), ``agents`` (whose prompt or reply differs there) and ``timed_out_before`` (whether either play's
    test run timed out on the turn before, read from ``turn_tests``)."""
    def split_at(turn: int, cause: str, agents: list[str]) -> dict[str, Any]:
        return {"cause": cause, "turn": turn, "agents": agents,
                "timed_out_before": _timed_out(first, turn - 1) or _timed_out(second, turn - 1)}

    digests = first.get("turn_digests"), second.get("turn_digests")
    if all(isinstance(d, list) for d in digests):
        split = _first_digest_split(digests[0], digests[1])
        return None if split is None else split_at(*split)
    tests = first.get("turn_tests") or [], second.get("turn_tests") or []
    for a, b in zip(tests[0], tests[1], strict=False):
        if _counts(a) != _counts(b):
            return split_at(int(a["turn"]), "outcome", [])
    fields = ("texts", "turns", "end_reason")
    if all(first.get(f) == second.get(f) for f in fields) and len(tests[0]) == len(tests[1]):
        return None
    return {"cause": "outcome", "turn": None, "agents": [], "timed_out_before": False}


def _first_digest_split(first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]
                        ) -> tuple[int, str, list[str]] | None:
    for a, b in zip(first, second, strict=False):
        prompts = sorted(k for k in {*a["prompts"], *b["prompts"]} if a["prompts"].get(k) != b["prompts"].get(k))
        if prompts:
            return int(a["turn"]), "env", prompts
        replies = sorted(k for k in {*a["replies"], *b["replies"]} if a["replies"].get(k) != b["replies"].get(k))
        if replies:
            return int(a["turn"]), "sampler", replies
    if len(first) != len(second):
        # One play went on after a turn both played alike: the env ended one and not the other.
        turn = min(len(first), len(second)) + 1
        return turn, "env", []
    return None


def _counts(turn: Mapping[str, Any]) -> tuple[Any, ...]:
    return turn.get("visible"), turn.get("held_out"), turn.get("candidates")


def _timed_out(row: Mapping[str, Any], turn: int) -> bool:
    return any(t.get("turn") == turn and t.get("timed_out") for t in row.get("turn_tests") or [])


def compare_logs(first_dir: Path, second_dir: Path) -> dict[str, Any]:
    """Compare every episode the two study folders share (:func:`compare_episode`); the figures ``main`` prints."""
    first = {r["key"]: r for r in read_episodes(Path(first_dir) / LOG_NAME).rows}
    second = {r["key"]: r for r in read_episodes(Path(second_dir) / LOG_NAME).rows}
    shared = [k for k in first if k in second]
    if not shared:
        raise ValueError(f"{first_dir} and {second_dir} share no episode: they are not plays of one design")
    splits = {key: split for key in shared if (split := compare_episode(first[key], second[key])) is not None}
    causes = Counter(s["cause"] for s in splits.values())
    return {
        "first": str(first_dir), "second": str(second_dir), "shared": len(shared),
        "only_first": len(first) - len(shared), "only_second": len(second) - len(shared),
        "replayed": len(shared) - len(splits), "split": len(splits),
        "causes": {c: causes.get(c, 0) for c in CAUSES},
        "split_after_timeout": sum(1 for s in splits.values() if s["timed_out_before"]),
        "pass_rate_changed": sum(1 for k in splits if first[k].get("pass_rate") != second[k].get("pass_rate")),
        "episodes": {k: {**s, "pass_rate": [first[k].get("pass_rate"), second[k].get("pass_rate")],
                         "turns": [first[k].get("turns"), second[k].get("turns")]} for k, s in splits.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="a study folder (with episodes.jsonl)")
    parser.add_argument("second", type=Path, help="another play of the same design")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the comparison as JSON")
    args = parser.parse_args(argv)
    try:
        result = compare_logs(args.first, args.second)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    print(f"[replay_check] {result['shared']} shared episode(s): {result['replayed']} replayed exactly, "
          f"{result['split']} split (" + ", ".join(f"{c} {n}" for c, n in result["causes"].items()) + f"); "
          f"{result['split_after_timeout']} right after a timed-out test run; "
          f"pass rate changed in {result['pass_rate_changed']}")
    for key, split in result["episodes"].items():
        where = f"turn {split['turn']}" if split["turn"] is not None else "final texts or ending"
        agents = f" ({', '.join(split['agents'])})" if split["agents"] else ""
        timeout = ", after a timeout" if split["timed_out_before"] else ""
        print(f"  {key}: {split['cause']} at {where}{agents}{timeout}; pass rate {split['pass_rate'][0]} -> "
              f"{split['pass_rate'][1]}, turns {split['turns'][0]} -> {split['turns'][1]}")
    if args.json:
        write_figures_json(args.json, result)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
