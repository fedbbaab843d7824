"""What the held-out pass rate would have been had each episode stopped after turn 1, from the study logs'
``turn_tests`` column (held-out tests the team's program passed, per turn), beside the pass rate at the end.

``python turn1.py FOLDER [FOLDER ...]`` pools the folders' episodes by condition. A held-out total comes from the task
itself (the coding env's split of the task's asserts: HumanEval's, or the file the study's ``--dataset`` named), so an
episode whose program never passed anything counts 0.
"""

import collections
import json
import sys
from pathlib import Path

from llm_marl_benchmarks.study.report import read_episodes
from llm_marl_envs.envs.coding.tasks import load_humaneval, tasks_from_file

ROOT = Path(__file__).resolve().parent


def task_source(folder: Path):
    """The tasks a study folder played: its design's coding dataset file, else HumanEval."""
    design = json.loads((folder / "study.json").read_text())["design"]
    dataset = design.get("env_kwargs", {}).get("coding", {}).get("dataset")
    if not dataset or not dataset.endswith(".jsonl"):
        return load_humaneval()
    path = Path(dataset)  # recorded as given; on another checkout, the file of that name in docs/tasks
    return tasks_from_file(path if path.is_file() else ROOT.parents[1] / "tasks" / path.name)


def main(folders: list[str]) -> None:
    by_condition: dict[str, list[tuple[dict, int]]] = collections.defaultdict(list)
    for folder in folders:
        tasks = task_source(ROOT / folder)
        for row in read_episodes(ROOT / folder / "episodes.jsonl").rows:
            if row.get("turn_tests"):
                held_out = len(tasks.get(row["task"]).fields["held_out_tests"])
                by_condition[row["condition"]].append((row, held_out))
    print("| condition | episodes | pass rate at the end | had it stopped after turn 1 | critical-path tokens a turn |")
    print("|---|---|---|---|---|")
    for condition, pairs in by_condition.items():
        rows = [row for row, _ in pairs]
        first = [row["turn_tests"][0]["held_out"] / held_out for row, held_out in pairs]
        end = sum(float(row["pass_rate"]) for row in rows) / len(rows)
        per_turn = sum(row["critical_path_tokens"] / row["turns"] for row in rows) / len(rows)
        print(f"| {condition} | {len(rows)} | {end:.3f} | {sum(first) / len(rows):.3f} | {per_turn:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
